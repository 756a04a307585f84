from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta

import pytest

from factbank.trust import DEFAULT, TrustPolicy

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


@pytest.mark.parametrize(
    ("origin", "expected"), [("user", 0.90), ("verified", 0.75), ("inferred", 0.50)]
)
def test_initial_by_origin(origin, expected):
    assert DEFAULT.initial(origin) == pytest.approx(expected, abs=1e-12)
    assert DEFAULT.initial(origin, tentative=False) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("origin", "expected"), [("user", 0.54), ("verified", 0.45), ("inferred", 0.30)]
)
def test_tentative_multiplies_by_0_6(origin, expected):
    assert DEFAULT.initial(origin, tentative=True) == pytest.approx(expected, abs=1e-12)


def test_unknown_origin_is_refused():
    with pytest.raises(ValueError, match="unknown origin"):
        DEFAULT.initial("rumour")


def test_worked_example_confirm_then_dispute():
    t = DEFAULT.initial("inferred")
    t = DEFAULT.confirm(t)
    assert t == pytest.approx(0.65, abs=1e-9)
    t = DEFAULT.dispute(t)
    assert t == pytest.approx(0.39, abs=1e-9)


def test_reinforce_same_source_and_other_source():
    assert DEFAULT.reinforce(0.5) == pytest.approx(0.55, abs=1e-12)
    assert DEFAULT.reinforce(0.5, by_other=False) == pytest.approx(0.55, abs=1e-12)
    assert DEFAULT.reinforce(0.5, by_other=True) == pytest.approx(0.60, abs=1e-12)


def test_updates_stay_in_unit_interval_and_diminish():
    t = 0.9
    for _ in range(100):
        t = DEFAULT.confirm(t)
    assert 0.99 < t <= 1.0
    for _ in range(100):
        t = DEFAULT.dispute(t)
    assert 0.0 <= t < 1e-9
    assert DEFAULT.reinforce(1.0, by_other=True) == 1.0
    assert DEFAULT.dispute(0.0) == 0.0


def test_supersede_multiplies_by_0_2():
    assert DEFAULT.supersede(0.75) == pytest.approx(0.15, abs=1e-12)


def test_injection_floor():
    assert DEFAULT.injection_floor == 0.40
    assert DEFAULT.injectable(0.40)
    assert not DEFAULT.injectable(0.3999)
    # an inferred tentative fact starts below the floor: it must earn injection
    assert not DEFAULT.injectable(DEFAULT.initial("inferred", tentative=True))


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (0, 0.8),
        (89, 0.8),
        (90, 0.8),
        (270, 0.4),  # one half-life after the grace period
        (450, 0.2),  # two half-lives
        (180, 0.8 * 0.5**0.5),
    ],
)
def test_decay_after_grace_period(days, expected):
    assert DEFAULT.effective(0.8, ago(days), NOW, decays=True) == pytest.approx(
        expected, abs=1e-9
    )


@pytest.mark.parametrize("days", [0, 89, 90, 270, 450, 5000])
def test_no_decay_for_categories_that_do_not_decay(days):
    assert DEFAULT.effective(0.8, ago(days), NOW, decays=False) == 0.8


def test_decay_tolerates_future_confirmation_and_naive_datetimes():
    assert DEFAULT.effective(0.8, NOW + timedelta(days=3), NOW, decays=True) == 0.8
    naive_then = (NOW - timedelta(days=270)).replace(tzinfo=None)
    assert DEFAULT.effective(0.8, naive_then, NOW, decays=True) == pytest.approx(0.4, abs=1e-9)


def test_stored_rounds_to_six_digits_and_clamps():
    assert DEFAULT.stored(0.1 + 0.2) == 0.3
    assert DEFAULT.stored(DEFAULT.dispute(DEFAULT.confirm(0.5))) == 0.39
    assert DEFAULT.stored(1.2) == 1.0


def test_policy_is_frozen_and_overridable():
    with pytest.raises(FrozenInstanceError):
        DEFAULT.confirm_gain = 0.5  # type: ignore[misc]
    strict = TrustPolicy(decay_grace_days=0, decay_half_life_days=30)
    assert strict.effective(0.8, ago(30), NOW) == pytest.approx(0.4, abs=1e-9)
