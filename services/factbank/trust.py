"""Trust arithmetic (docs/principles.md#explicit-trust): every constant lives in one frozen
`TrustPolicy`.

Why one object: the numbers are a policy, not code. Tests, evals and a future per-bank override
read the same object, and a reviewer sees the whole policy in one screen.

Every update moves trust *towards* a bound by a fraction of the remaining distance
(`t + k(1 - t)` up, `t - k t` down), so scores stay inside [0, 1] without clamping tricks and
repeated events have diminishing effect. Functions return full floats; `stored()` rounds for the
database so that audit rows show the same number the arithmetic produced.

Decay is computed at read time from `confirmed_at` and never written back: the stored score stays
the audited one, and changing the policy changes every read without a migration.

Staleness is not a trust event. A fact whose source changed (status `stale`) or whose
cited fact changed (under review) keeps its trust: the source moved on, nobody judged the claim.
Both keep it out of injection by their status or flag (`inject._injectable`), not by a lower
score, so a confirm with a fresh quote or a review brings it back as it was, plus the confirm.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

ORIGINS = ("user", "verified", "inferred")


@dataclass(frozen=True, slots=True)
class TrustPolicy:
    """All trust constants. Frozen so a policy cannot drift while requests use it."""

    initial_user: float = 0.90
    initial_verified: float = 0.75
    initial_inferred: float = 0.50
    tentative_multiplier: float = 0.6
    reinforce_same: float = 0.10  # same member and agent said it again
    reinforce_other: float = 0.20  # a different member or agent arrived at the same claim
    confirm_gain: float = 0.30
    dispute_loss: float = 0.40
    supersede_factor: float = 0.2
    injection_floor: float = 0.40
    decay_grace_days: float = 90.0
    decay_half_life_days: float = 180.0
    storage_digits: int = 6

    def initial(self, origin: str, tentative: bool = False) -> float:
        """Starting trust by where the fact came from; a tentative fact starts lower."""
        by_origin = {
            "user": self.initial_user,
            "verified": self.initial_verified,
            "inferred": self.initial_inferred,
        }
        if origin not in by_origin:
            raise ValueError(f"unknown origin {origin!r}; expected one of {ORIGINS}")
        t = by_origin[origin]
        return t * self.tentative_multiplier if tentative else t

    def reinforce(self, t: float, by_other: bool = False) -> float:
        """The same claim arrived again. A second, independent source counts double."""
        k = self.reinforce_other if by_other else self.reinforce_same
        return _clamp(t + k * (1.0 - t))

    def confirm(self, t: float) -> float:
        """An agent or member checked the fact and it held."""
        return _clamp(t + self.confirm_gain * (1.0 - t))

    def dispute(self, t: float) -> float:
        """An agent or member found the fact wrong or doubtful."""
        return _clamp(t - self.dispute_loss * t)

    def supersede(self, t: float) -> float:
        """The fact was overturned by a successor; it stays, linked, but sinks."""
        return _clamp(t * self.supersede_factor)

    def effective(
        self, t: float, last_confirmed_at: datetime, now: datetime, decays: bool = True
    ) -> float:
        """Trust as read now: unchanged for the grace period, then halving every half-life.

        Categories that do not decay (preferences: "use pnpm" does not go stale by itself) return
        `t` unchanged. A confirmation in the future (clock skew) counts as age zero.
        """
        if not decays:
            return t
        age = _age_days(last_confirmed_at, now)
        if age <= self.decay_grace_days:
            return t
        return t * 0.5 ** ((age - self.decay_grace_days) / self.decay_half_life_days)

    def injectable(self, effective_trust: float) -> bool:
        """Below the floor a fact may be recalled on request but is never injected unasked."""
        return effective_trust >= self.injection_floor

    def stored(self, t: float) -> float:
        """Round for storage; 6 digits keeps every worked example exact and hides float noise."""
        return round(_clamp(t), self.storage_digits)


def _clamp(t: float) -> float:
    return min(1.0, max(0.0, t))


def _age_days(then: datetime, now: datetime) -> float:
    """Days between two datetimes; a naive datetime is taken to be UTC rather than crash."""
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return max(0.0, (now - then).total_seconds() / 86400.0)


DEFAULT = TrustPolicy()
