"""The client library: every command, the MCP server and scripts talk to the services here.

One `Client` holds the configured banks (a personal bank, maybe a team bank). Reads that make
sense across banks (search, inject, categories, stats) ask every bank and label each answer
with the bank it came from; writes go to one bank, chosen by `ClientConfig.write_bank`; an
operation on a fact id goes to the bank that holds that id (ids are unique on a server, and a
bank that does not hold it answers 404). Every failure, HTTP or network, becomes one
`FactbankError` carrying the server's message and its reasons, so callers print one line.

This module talks HTTP only; it never imports the server packages.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from factbank_client import safefs, written
from factbank_client.config import ClientConfig
from factbank_client.errors import FactbankError, QuoteNotFound, UnsafePath
from factbank_client.project import repo_root
from factbank_client.settings import settings
from factbank_client.staleness import fingerprint
from factbank_client.staleness.quotes import quote_spans
from factbank_common import schema

AGENT_HEADER = "X-Factbank-Agent"
# Connect fast (a down service should fail in seconds), read patiently (the first write of a
# session may load the embedder on the server).
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
# An import embeds every fact inside one transaction: minutes for a big file.
IMPORT_TIMEOUT = httpx.Timeout(900.0, connect=5.0)
# The ingest service refuses import bodies above 32 MiB; stay under it with headroom.
MAX_IMPORT_CHUNK_BYTES = 30 * 1024 * 1024
# The server refuses an import of more than this many lines (services/ingest MAX_IMPORT_LINES).
MAX_IMPORT_CHUNK_LINES = 1000
# `factbank import` sends this many facts per request (each its own transaction), so its
# progress moves as the server commits them.
IMPORT_CHUNK_FACTS = 100
# The verify route takes at most 1000 verdicts, the check route 200 facts, per request.
VERIFY_BATCH = 1000
CHECK_BATCH = 200
NEW_FACT_FIELDS = ("content", "category", "source", "quote", "origin", "tentative", "tags",
                   "questions", "project", "agent", "fingerprint")


def _error_from(response: httpx.Response, bank: str) -> FactbankError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        message = str(body.get("detail") or response.reason_phrase)
        return FactbankError(message, status=response.status_code,
                             reasons=body.get("reasons") or [], errors=body.get("errors") or [],
                             bank=bank)
    text = response.text.strip()[:200] or response.reason_phrase
    return FactbankError(text, status=response.status_code, bank=bank)


@dataclass
class Service:
    """Which of the two services a call goes to."""

    name: str  # "ingest" | "recall"


INGEST = Service("ingest")
RECALL = Service("recall")


class Client:
    """The factbank API for the banks in a `ClientConfig`.

    `agent` names the calling agent (sent as `X-Factbank-Agent`, recorded with every write);
    it defaults to `$FACTBANK_AGENT`, else "cli". Pass `http` to share one connection pool
    between many short-lived clients (the HTTP MCP server does).
    """

    def __init__(self, config: ClientConfig, *, agent: str | None = None,
                 timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
                 http: httpx.Client | None = None, session: str | None = None) -> None:
        self.config = config
        self.agent = agent or settings.agent
        # The harness session this runs in (sessionid.py), looked up at each call: an MCP
        # server starts before the hook that marks its session. Sent so the services can
        # count repeats and what each session was shown (docs/misses.md).
        # `session=""`: never in a session (the dashboard, even when launched by an agent).
        self.session: str | None = session
        self._owns_http = http is None
        self.http = http or httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Close the connection pool, unless it was passed in (then its owner closes it)."""
        if self._owns_http:
            self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ------------------------------------------------------------------------

    @property
    def banks(self) -> list[str]:
        if not self.config.tokens:
            raise FactbankError("no bank configured: run `factbank login --url URL --token TOKEN`"
                                " or set FACTBANK_TOKEN")
        return self.config.banks

    def _base(self, service: Service) -> str:
        return self.config.url if service is INGEST else self.config.recall_url

    def _headers(self, bank: str) -> dict[str, str]:
        token = self.config.tokens.get(bank)
        if not token:
            raise FactbankError(f"no token configured for bank {bank!r}")
        headers = {"Authorization": f"Bearer {token}", AGENT_HEADER: self.agent}
        from factbank_client import sessionid

        session = self.session if self.session is not None else sessionid.current()
        if session:
            headers[sessionid.HEADER] = session
        return headers

    def request(self, method: str, service: Service, path: str, bank: str, *,
                json_body: Any = None, params: dict | None = None, content: Any = None,
                headers: dict[str, str] | None = None,
                timeout: httpx.Timeout | None = None) -> httpx.Response:
        """One call to one bank; any non-2xx answer or network failure is a FactbankError."""
        url = self._base(service) + path
        # Read-your-writes over a replica: recall is told the newest version this machine's
        # writes to the bank produced (`factbank_client.written`).
        fresh = written.headers(self.config.url, bank) if service is RECALL else {}
        kwargs: dict[str, Any] = {"headers": {**self._headers(bank), **fresh, **(headers or {})}}
        if json_body is not None:
            kwargs["json"] = json_body
        if content is not None:
            kwargs["content"] = content
        if params:
            kwargs["params"] = {k: v for k, v in params.items() if v is not None}
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            response = self.http.request(method, url, **kwargs)
        except httpx.TimeoutException as exc:
            raise FactbankError(f"{service.name} at {self._base(service)} timed out "
                                f"({type(exc).__name__}); is the server overloaded? try again, "
                                "or check it with `factbank stats`", bank=bank) from exc
        except httpx.HTTPError as exc:
            raise FactbankError(
                f"cannot reach {service.name} at {self._base(service)}: "
                f"{str(exc).rstrip('.') or type(exc).__name__}. Is `factbank up` running "
                "there (`factbank status`)? If the "
                "address is wrong: factbank login --url INGEST_URL [--recall-url RECALL_URL] "
                "--token TOKEN", bank=bank) from exc
        if response.is_error:
            error = _error_from(response, bank)
            if response.status_code == 401:
                error = FactbankError(
                    f"{error.message}. The {bank} bank's token was refused (revoked or "
                    f"mistyped): get a new one (on the server: factbank admin token issue "
                    f"BANK MEMBER) and save it with factbank login --token TOKEN --bank {bank}",
                    status=401, bank=bank)
            elif response.status_code == 403:
                error = FactbankError(
                    f"{error.message}. The {bank} bank's token lacks the scope for this "
                    "(read, write or admin): ask the bank's owner for a token that has it",
                    status=403, bank=bank)
            raise error
        if service is INGEST and method != "GET":
            written.remember(self.config.url, bank, response.headers.get("x-factbank-version"))
        return response

    def _json(self, method: str, service: Service, path: str, bank: str, **kw: Any) -> Any:
        return self.request(method, service, path, bank, **kw).json()

    def _owner(self, fact_id: int, bank: str | None, *, what: str = "fact",
               path: str = "/v1/facts/{}") -> str:
        """The bank holding `fact_id` (or, with `what`/`path`, another object of that route):
        the one named, else the first that does not 404."""
        if bank:
            return bank
        banks = self.banks
        if len(banks) == 1:
            return banks[0]
        for label in banks:
            try:
                self.request("GET", INGEST, path.format(int(fact_id)), label)
                return label
            except FactbankError as exc:
                if exc.status != 404:
                    raise
        raise FactbankError(f"{what} {fact_id} not found in any configured bank "
                            f"({', '.join(banks)})", status=404)

    # --- writes --------------------------------------------------------------------------

    def add(self, fact: dict, *, bank: str | None = None) -> dict:
        """Save one fact (NewFact shape). Returns the outcome: stored or reinforced, the fact,
        `possible_duplicate_of` (facts it may supersede), what was redacted, a note."""
        label = self._write_bank(fact.get("category"), bank)
        return self._labelled(label, self._json("POST", INGEST, "/v1/facts", label,
                                                json_body=fact))

    def add_many(self, facts: Iterable[dict], *, bank: str | None = None,
                 progress: Callable[[int], None] | None = None) -> dict:
        """Import facts (NewFact shape) in one transaction: one bad fact refuses them all, and
        the error lists every bad line. `progress(n)` is called as facts are uploaded."""
        lines = [json.dumps(f, ensure_ascii=False) for f in facts]
        return self.import_lines(lines, bank=bank, progress=progress)

    def import_lines(self, lines: Sequence[str], *, bank: str | None = None,
                     progress: Callable[[int], None] | None = None,
                     existing: str | None = None, vectors: str | None = None) -> dict:
        """POST JSONL lines as one import (one transaction). Callers split huge files first
        (`chunk_lines`); this refuses nothing itself. `existing="skip"`: facts already in the
        bank are left alone (outcome "present"), not reinforced. `vectors="queue"`: the server
        commits without waiting for the embedder and fills the vectors after (`vectors_pending`
        in `stats`; see `wait_for_vectors`)."""
        label = self._write_bank(None, bank)

        def body() -> Iterator[bytes]:
            batch: list[str] = []
            size = 0
            for line in lines:
                batch.append(line)
                size += len(line)
                if size >= 256 * 1024:
                    yield ("\n".join(batch) + "\n").encode()
                    if progress:
                        progress(len(batch))
                    batch, size = [], 0
            if batch:
                yield ("\n".join(batch) + "\n").encode()
                if progress:
                    progress(len(batch))

        result = self._json("POST", INGEST, "/v1/facts/import", label, content=body(),
                            headers={"Content-Type": "application/x-ndjson"},
                            params={k: v for k, v in (("existing", existing),
                                                      ("vectors", vectors)) if v} or None,
                            timeout=IMPORT_TIMEOUT)
        result["bank"] = label
        return result

    def import_items(self, items: Sequence[dict], *, bank: str | None = None,
                     chunk: int = IMPORT_CHUNK_FACTS, vectors: str = "queue") -> Iterator[dict]:
        """Import lines (NewFact dicts, exported ones with `restore`, see `to_import_item`) in
        chunks of `chunk` facts, each its own request and transaction; yields each chunk's
        answer as the server commits it, with `done` (facts handled so far) and `total`.

        Idempotent, so a failed import resumes by running it again: facts already in the bank
        are "present" (not stored twice, not reinforced). Successors go before the facts they
        superseded, so each restored link names an id the bank already has.

        `vectors="queue"` (default): each chunk commits without waiting for the embedder, whose
        worker fills the vectors after (an import was bound by the embedder at ~7 facts/s);
        `"now"` embeds inside each request as a single save does."""
        ids: dict[int, int] = {}
        total, done = len(items), 0
        for group in import_order(items):
            for part in (group[i : i + chunk] for i in range(0, len(group), chunk)):
                lines = [json.dumps(_linked(it, ids), ensure_ascii=False) for it in part]
                results: list[dict] = []
                totals = {"stored": 0, "reinforced": 0, "present": 0}
                for sub in chunk_lines(lines, max_lines=chunk):
                    try:
                        data = self.import_lines(sub, bank=bank, existing="skip",
                                                 vectors=vectors)
                    except FactbankError as exc:
                        exc.done = done  # type: ignore[attr-defined]
                        raise
                    results.extend(data["results"])
                    for k in totals:
                        totals[k] += int(data.get(k) or 0)
                    label, visible = data["bank"], data.get("visible_to")
                for it, res in zip(part, results, strict=True):
                    if "restore" in it:
                        ids[int(it["restore"]["id"])] = int(res["fact"]["id"])
                done += len(part)
                yield {**totals, "results": results, "bank": label, "done": done,
                       "total": total, "visible_to": visible}

    def vectors_pending(self, bank: str) -> int:
        """Facts of `bank` whose vectors the server's embedder worker has yet to fill."""
        return int(self._json("GET", RECALL, "/v1/stats", bank).get("vectors_pending") or 0)

    def wait_for_vectors(self, bank: str, *, poll: float = 1.0, stalled: float = 60.0
                         ) -> Iterator[int]:
        """Yield the bank's pending count as the server drains it, until it reaches 0, or
        raise FactbankError when it has not moved for `stalled` seconds (no worker runs)."""
        last, since = None, time.monotonic()
        while True:
            n = self.vectors_pending(bank)
            yield n
            if n == 0:
                return
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since > stalled:
                raise FactbankError(
                    f"{n} facts still wait for vectors and none were filled in {stalled:.0f} s: "
                    "is the ingest service's embedder worker running (FACTBANK_EMBEDDER, "
                    "FACTBANK_VECTOR_BATCH)? They are found by keyword search meanwhile")
            time.sleep(poll)

    def supersede(self, fact: dict, replaces: Sequence[int], reason: str, *,
                  bank: str | None = None) -> dict:
        """Store `fact` and retire `replaces` (linked to it with `reason`). Happens in the bank
        that holds the replaced facts."""
        if not replaces:
            raise FactbankError("supersede needs at least one fact id to replace")
        label = self._owner(replaces[0], bank)
        outcome = self._json("POST", INGEST, "/v1/facts/supersede", label,
                             json_body={"fact": fact, "replaces": [int(i) for i in replaces],
                                        "reason": reason})
        outcome["bank"] = label
        return outcome

    def confirm(self, fact_id: int, reason: str = "", *, bank: str | None = None,
                evidence: dict | None = None) -> dict:
        """The fact held when checked: trust rises and its age decay restarts. `evidence`:
        a fresh `quote` (with `location`, `fingerprint`) that makes a stale fact active again,
        and the `project` and `remotes` the rule gate reads from the confirm event."""
        label = self._owner(fact_id, bank)
        return self._labelled(label, self._json(
            "POST", INGEST, f"/v1/facts/{int(fact_id)}/confirm", label,
            json_body={"reason": reason, **(evidence or {})}))

    def verify(self, results: Sequence[dict], *, project: str | None = None,
               bank: str | None = None) -> dict:
        """Apply `factbank verify`'s verdicts (factbank_client/staleness/verify.py) in batches of
        VERIFY_BATCH, each one transaction on the server; the answers summed."""
        label = self._write_bank(None, bank)
        total: dict[str, Any] = {"fresh": 0, "moved": 0, "stale": 0, "still_stale": 0,
                                 "flagged": 0, "changed": [], "flagged_ids": [], "skipped": []}
        for i in range(0, len(results), VERIFY_BATCH):
            body: dict[str, Any] = {"results": list(results[i: i + VERIFY_BATCH])}
            if project:
                body["project"] = project
            data = self._json("POST", INGEST, "/v1/facts/verify", label, json_body=body)
            for key, value in data.items():
                if isinstance(value, list):
                    total.setdefault(key, []).extend(value)
                elif isinstance(value, int):
                    total[key] = int(total.get(key) or 0) + value
        total["bank"] = label
        return total

    def check(self, facts: Sequence[dict], *, bank: str | None = None) -> list[dict]:
        """What `add` would do with each fact (gate, redaction, dedupe), saving nothing: the
        server's `POST /v1/facts/check`, CHECK_BATCH facts a request."""
        label = self._write_bank(None, bank)
        out: list[dict] = []
        for i in range(0, len(facts), CHECK_BATCH):
            out.extend(self._json("POST", INGEST, "/v1/facts/check", label,
                                  json_body={"facts": list(facts[i: i + CHECK_BATCH])}
                                  )["results"])
        return out

    def rule_candidates(self, *, banks: Sequence[str] | None = None) -> list[dict]:
        """Claims that held in two unrelated projects, each labelled with its bank."""
        out: list[dict] = []
        for label in (banks or self.banks):
            data = self._json("GET", RECALL, "/v1/rules/candidates", label)
            out.extend({**c, "bank": label} for c in data.get("candidates", []))
        return out

    def dispute(self, fact_id: int, reason: str = "", *, bank: str | None = None) -> dict:
        """The fact looks wrong: trust falls. If the right claim is known, supersede instead."""
        label = self._owner(fact_id, bank)
        return self._labelled(label, self._json(
            "POST", INGEST, f"/v1/facts/{int(fact_id)}/dispute", label,
            json_body={"reason": reason}))

    def edit(self, fact_id: int, *, tags: list[str] | None = None,
             category: str | None = None, questions: list[str] | None = None,
             bank: str | None = None) -> dict:
        """Change a fact's tags, category or writer questions; a list given REPLACES the
        stored one (see `add_questions` to add)."""
        label = self._owner(fact_id, bank)
        body = {k: v for k, v in (("tags", tags), ("category", category),
                                  ("questions", questions)) if v is not None}
        return self._labelled(label, self._json(
            "PATCH", INGEST, f"/v1/facts/{int(fact_id)}", label, json_body=body))

    def add_questions(self, fact_id: int, questions: Sequence[str], *,
                      remove: Sequence[str] = (), bank: str | None = None) -> dict:
        """Add writer questions to a stored fact (and drop `remove`): reads its current list
        and PATCHes old + new, since a PATCH replaces the list. Repeats are skipped."""
        label = self._owner(fact_id, bank)
        current = self.get(fact_id, bank=label).get("questions") or []
        merged = merge_questions(current, questions, remove)
        return self.edit(fact_id, questions=merged, bank=label)

    # --- enrichment: questions and tags for facts that have none ----------------------------

    def enrich_batch(self, *, limit: int = 20, lacking: str = "either",
                     project: str | None = None, bank: str | None = None) -> dict:
        """Facts of one bank lacking writer questions or tags (oldest first), and how many
        remain: {"facts": [...], "remaining": N, "bank": label}."""
        label = self._write_bank(None, bank)
        data = self._json("GET", RECALL, "/v1/enrich", label,
                          params={"limit": limit, "lacking": lacking, "project": project})
        data["bank"] = label
        return data

    def enrich_fact(self, fact_id: int, *, tags: Sequence[str] = (),
                    questions: Sequence[str] = (), bank: str | None = None) -> dict:
        """Add tags and questions to a stored fact (kept: what it has), in ONE PATCH: the
        normal edit path (redacted, re-embedded, audited)."""
        label = self._owner(fact_id, bank)
        current = self.get(fact_id, bank=label)
        merged_tags = list(current.get("tags") or [])
        seen = {t.casefold() for t in merged_tags}
        for t in tags:
            t = " ".join(t.split())
            if t and t.casefold() not in seen:
                seen.add(t.casefold())
                merged_tags.append(t)
        merged_qs = merge_questions(current.get("questions") or [], questions)
        return self.edit(fact_id, tags=merged_tags if tags else None,
                         questions=merged_qs if questions else None, bank=label)

    # --- the review queue (services/factbank/write/queue.py) ------------------------------

    def queue_list(self, *, status: str = "pending", fact: int | None = None,
                   banks: Sequence[str] | None = None) -> list[dict]:
        """Candidates of each bank, oldest first, each labelled with its bank."""
        out: list[dict] = []
        for label in (banks or self.banks):
            after = 0
            while True:
                page = self._json("GET", INGEST, "/v1/queue", label,
                                  params={"status": status, "fact": fact, "after": after,
                                          "limit": 500})
                out.extend({**c, "bank": label} for c in page["candidates"])
                if page.get("next_cursor") is None:
                    break
                after = page["next_cursor"]
        return out

    def _candidate_owner(self, cand_id: int, bank: str | None) -> str:
        """The bank holding candidate `cand_id`: the one named, else the first that has it."""
        return self._owner(cand_id, bank, what="candidate", path="/v1/queue/{}")

    def queue_add(self, fact: dict, *, replaces: int | None = None, reason: str = "",
                  bank: str | None = None) -> dict:
        """Queue a fact for review instead of saving it (in the bank of `replaces`, if any)."""
        label = (self._owner(replaces, bank) if replaces is not None
                 else self._write_bank(fact.get("category"), bank))
        return self._labelled(label, self._json(
            "POST", INGEST, "/v1/queue", label,
            json_body={"fact": fact, "replaces": replaces, "reason": reason}))

    def queue_accept(self, cand_id: int, *, edits: dict | None = None,
                     bank: str | None = None) -> dict:
        """Accept a candidate (with `edits`: content, category, tags, questions)."""
        label = self._candidate_owner(cand_id, bank)
        return self._labelled(label, self._json(
            "POST", INGEST, f"/v1/queue/{int(cand_id)}/accept", label,
            json_body={"edits": edits or None}))

    def queue_reject(self, cand_id: int, reason: str = "", *, bank: str | None = None) -> dict:
        """Reject a queued candidate, with the reason (POST /v1/queue/{id}/reject)."""
        label = self._candidate_owner(cand_id, bank)
        return self._labelled(label, self._json(
            "POST", INGEST, f"/v1/queue/{int(cand_id)}/reject", label,
            json_body={"reason": reason}))

    def delete(self, fact_id: int, reason: str = "", *, bank: str | None = None) -> dict:
        """Soft delete: no longer recalled; the row and its audited history stay."""
        label = self._owner(fact_id, bank)
        return self._labelled(label, self._json(
            "DELETE", INGEST, f"/v1/facts/{int(fact_id)}", label, params={"reason": reason}))

    def purge(self, fact_id: int, *, bank: str | None = None) -> dict:
        """Hard delete (admin scope): the fact, its history, postings and cached embedding
        (DELETE /v1/facts/{id}/purge)."""
        label = self._owner(fact_id, bank)
        return self._labelled(label, self._json("DELETE", INGEST,
                                                f"/v1/facts/{int(fact_id)}/purge", label))

    def add_category(self, name: str, description: str = "", *, auto_inject: bool = False,
                     decays: bool = True, bank: str | None = None) -> dict:
        """Add a category to one bank's registry (POST /v1/categories)."""
        label = self._write_bank(None, bank)
        return self._labelled(label, self._json(
            "POST", INGEST, "/v1/categories", label,
            json_body={"name": name, "description": description, "auto_inject": auto_inject,
                       "decays": decays}))

    # --- reads ---------------------------------------------------------------------------

    def history(self, fact_id: int, *, bank: str | None = None) -> dict:
        """A fact with its events, the facts it superseded, its successors and the current one."""
        label = self._owner(fact_id, bank)
        return self._labelled(label, self._json("GET", INGEST, f"/v1/facts/{int(fact_id)}",
                                                label))

    def get(self, fact_id: int, *, bank: str | None = None) -> dict:
        """One fact (with `bank`); see `history` for its events and successors."""
        data = self.history(fact_id, bank=bank)
        return {**data["fact"], "bank_label": data["bank"]}

    def search(self, query: str, *, project: str | None = None, limit: int = 5,
               mode: str = "hybrid", banks: Sequence[str] | None = None) -> dict:
        """Search every configured bank; results merged best score first, each labelled with
        its bank. `degraded` maps a bank to the reason its search was degraded (or failed)."""
        body = {"query": query, "limit": limit, "mode": mode}
        if project:
            body["project"] = project
        results: list[dict] = []
        degraded: dict[str, str] = {}
        errors: list[FactbankError] = []
        chosen = list(banks or self.banks)
        for label in chosen:
            try:
                data = self._json("POST", RECALL, "/v1/search", label, json_body=body)
            except FactbankError as exc:
                if len(chosen) == 1 or exc.status in (400, 422):
                    raise
                errors.append(exc)
                degraded[label] = f"failed: {exc}"
                continue
            if data.get("degraded"):
                degraded[label] = str(data["degraded"])
            # `bank` is the configured label; the server's bank name stays in `fact.bank`.
            results.extend({**r, "bank": label} for r in data.get("results", []))
        if errors and len(errors) == len(chosen):
            raise errors[0]
        results.sort(key=lambda r: -float(r.get("score") or 0.0))
        return {"results": results[:limit], "degraded": degraded or None}

    def inject(self, kind: str, session_id: str, *, project: str | None = None,
               prompt: str | None = None, preview: bool = False) -> dict:
        """The injection block for a session start (`kind="session"`) or a prompt, merged
        across banks (personal first). A bank that fails is skipped (listed under `errors`):
        injection is optional; only when every bank fails is it an error. `preview`: the same
        block, but the server delivers nothing (handoffs stay open, facts unseen)."""
        # Each bank gets its share of the injection budget, so the merged block stays within it.
        body: dict[str, Any] = {"kind": kind, "session_id": session_id,
                                "banks": max(1, len(self.banks))}
        if project:
            body["project"] = project
        if prompt is not None:
            body["prompt"] = prompt
        if preview:
            body["preview"] = True
        blocks: list[tuple[str, dict]] = []
        errors: dict[str, str] = {}
        for label in self.banks:
            try:
                blocks.append((label, self._json("POST", RECALL, "/v1/inject", label,
                                                 json_body=body)))
            except FactbankError as exc:
                if exc.status in (400, 422):
                    raise
                errors[label] = str(exc)
        if errors and not blocks:  # every bank failed: say so rather than "nothing to inject"
            raise FactbankError("; ".join(errors.values()))
        merged = merge_injections(blocks)
        if errors:
            merged["errors"] = errors
        return merged

    def categories(self, *, banks: Sequence[str] | None = None) -> dict[str, list[dict]]:
        """Each bank's category registry: {bank label: [categories]}."""
        return {label: self._json("GET", RECALL, "/v1/categories", label).get("categories", [])
                for label in (banks or self.banks)}

    def stats(self, *, banks: Sequence[str] | None = None) -> dict[str, dict]:
        """Each bank's counts (GET /v1/stats): {bank label: stats}."""
        return {label: self._json("GET", RECALL, "/v1/stats", label)
                for label in (banks or self.banks)}

    def misses(self, *, weeks: int = 4, since: str | None = None, around: str | None = None,
               banks: Sequence[str] | None = None) -> dict[str, dict]:
        """Each bank's miss report (`/v1/stats/misses`): repeats per week, project and kind,
        by what the writing session was shown; with `around`, before against after."""
        params = {"weeks": weeks, "since": since, "around": around}
        return {label: self._json("GET", RECALL, "/v1/stats/misses", label, params=params)
                for label in (banks or self.banks)}

    def facts_page(self, bank: str, *, after: int = 0, limit: int = 100,
                   order: str = "asc", status: str | None = None,
                   statuses: Sequence[str] | None = None, category: str | None = None,
                   project: str | None = None, tag: str | None = None,
                   source_kinds: Sequence[str] | None = None) -> dict:
        """One page of one bank's facts (GET /v1/facts): `facts` after the id `after` in id
        order (`order="desc"`: newest first) and `next_cursor`, the next page's `after` (None
        on the last page). Unset filters are not sent."""
        return self._json("GET", RECALL, "/v1/facts", bank, params={
            "after": after, "limit": limit, "order": order, "status": status,
            "statuses": ",".join(statuses) if statuses else None, "category": category,
            "project": project, "tag": tag,
            "source_kind": ",".join(source_kinds) if source_kinds else None})

    def list_facts(self, *, bank: str | None = None, status: str | None = None,
                   category: str | None = None, project: str | None = None,
                   statuses: Sequence[str] | None = None,
                   source_kinds: Sequence[str] | None = None,
                   page_size: int = 500) -> Iterator[dict]:
        """Every fact of one bank matching the filters, page by page, in id order."""
        label = self._write_bank(None, bank)
        after = 0
        while True:
            page = self.facts_page(label, after=after, limit=page_size, status=status,
                                   statuses=statuses, category=category, project=project,
                                   source_kinds=source_kinds)
            yield from page["facts"]
            if page.get("next_cursor") is None:
                return
            after = page["next_cursor"]

    def duplicates(self, fact_id: int, *, bank: str | None = None) -> list[dict]:
        """The facts `fact_id` may duplicate, by the write gate's near-duplicate rule on the
        stored embeddings (GET /v1/facts/{id}/duplicates)."""
        label = self._owner(fact_id, bank)
        return self._json("GET", RECALL, f"/v1/facts/{int(fact_id)}/duplicates",
                          label)["duplicates"]

    def growth(self, bank: str, *, days: int = 30) -> list[dict]:
        """Facts written per day over the last `days` days, oldest first (GET
        /v1/stats/growth)."""
        return self._json("GET", RECALL, "/v1/stats/growth", bank, params={"days": days})["days"]

    def whoami(self, bank: str) -> dict:
        """Who the bank's token belongs to: member, bank and scopes (GET /v1/whoami)."""
        return self._json("GET", RECALL, "/v1/whoami", bank)

    def export(self, *, bank: str | None = None) -> Iterator[str]:
        """One bank's facts as JSONL lines (Fact objects), streamed."""
        label = self._write_bank(None, bank)
        for line in self._streamed(RECALL, "/v1/export", label, lines=True):
            if line.strip():
                yield line

    # --- banks and members (admin scope) -------------------------------------------------

    def members(self, bank: str) -> dict:
        """The bank's members (live tokens, last use) and every token it issued, each by id
        and prefix, never in full (GET /v1/admin/members)."""
        return self._json("GET", INGEST, "/v1/admin/members", bank)

    def issue_token(self, member: str, scopes: Sequence[str], label: str = "", *,
                    bank: str) -> dict:
        """A new token for a member of the bank; the token itself is in this answer only
        (POST /v1/admin/tokens)."""
        return self._json("POST", INGEST, "/v1/admin/tokens", bank,
                          json_body={"member": member, "scopes": list(scopes), "label": label})

    def rotate_token(self, token_id: int, *, bank: str) -> dict:
        """Revoke a token of the bank and issue its replacement (shown once), in one step
        (POST /v1/admin/tokens/{id}/rotate)."""
        return self._json("POST", INGEST, f"/v1/admin/tokens/{int(token_id)}/rotate", bank)

    def revoke_token(self, token_id: int, *, bank: str) -> dict:
        """Revoke a token of the bank (POST /v1/admin/tokens/{id}/revoke)."""
        return self._json("POST", INGEST, f"/v1/admin/tokens/{int(token_id)}/revoke", bank)

    def verify_audit(self, bank: str) -> dict:
        """Walk the bank's audit chain: `ok`, the rows verified and each row whose link or
        hash does not hold (GET /v1/admin/audit/verify)."""
        return self._json("GET", INGEST, "/v1/admin/audit/verify", bank)

    def audit_export(self, bank: str) -> Iterator[bytes]:
        """The bank's audit chain as JSONL bytes in chain order, streamed as they come; the
        last line is the chain's head kept outside the database (GET /v1/admin/audit/export).
        """
        return self._streamed(INGEST, "/v1/admin/audit/export", bank, lines=False)

    # --- helpers -------------------------------------------------------------------------

    def _streamed(self, service: Service, path: str, bank: str, *, lines: bool
                  ) -> Iterator[Any]:
        """A GET whose answer is read as it arrives: text lines, or raw bytes."""
        url = self._base(service) + path
        try:
            with self.http.stream("GET", url, headers=self._headers(bank),
                                  timeout=IMPORT_TIMEOUT) as response:
                if response.is_error:
                    response.read()
                    raise _error_from(response, bank)
                yield from response.iter_lines() if lines else response.iter_bytes()
        except httpx.HTTPError as exc:
            raise FactbankError(f"cannot reach {service.name} at {self._base(service)}: "
                                f"{exc or type(exc).__name__}", bank=bank) from exc

    def _write_bank(self, category: str | None, bank: str | None) -> str:
        self.banks  # noqa: B018 - raises the "not logged in" error first
        try:
            return self.config.write_bank(category, bank)
        except KeyError as exc:
            raise FactbankError(str(exc.args[0])) from None

    @staticmethod
    def _labelled(label: str, data: dict) -> dict:
        """Add which configured bank answered: `bank_label` on a Fact (whose own `bank` is
        the server's bank name), `bank` on an envelope (outcome, history, category)."""
        data["bank_label" if "content" in data and "id" in data else "bank"] = label
        return data

    # --- the timeline: what just happened in a project, never facts -------------

    def timeline_bank(self, bank: str | None = None) -> str:
        """Where timeline events and handoffs go: the named bank, else the team bank when one
        is configured (teammates coordinate there), else the personal bank."""
        from factbank_client.config import TEAM

        if bank:
            return self._write_bank(None, bank)
        if TEAM in self.banks:
            return TEAM
        return self._write_bank(None, None)

    def record_events(self, events: Sequence[dict], *, bank: str | None = None,
                      timeout: httpx.Timeout | float | None = None) -> dict:
        """Record timeline events (session_start/end, file, command; see the ingest route):
        answers `recorded` and the `conflicts` a file event ran into."""
        label = self.timeline_bank(bank)
        data = self._json("POST", INGEST, "/v1/timeline/events", label,
                          json_body={"events": list(events)},
                          timeout=httpx.Timeout(timeout) if isinstance(timeout, float | int)
                          else timeout)
        data["bank"] = label
        return data

    def handoff(self, text: str, *, project: str | None = None, to_agent: str | None = None,
                to_member: str | None = None, files: Sequence[str] = (),
                fact_ids: Sequence[int] = (), session_id: str | None = None,
                bank: str | None = None) -> dict:
        """Leave a note for the next session in the project (any, or one agent or member);
        it appears once, in that session's start block."""
        label = self.timeline_bank(bank)
        body: dict[str, Any] = {"text": text, "files": list(files),
                                "fact_ids": [int(i) for i in fact_ids], "agent": self.agent}
        for key, value in (("project", project), ("to_agent", to_agent),
                           ("to_member", to_member), ("session_id", session_id)):
            if value:
                body[key] = value
        return self._labelled(label, self._json("POST", INGEST, "/v1/handoffs", label,
                                                json_body=body))

    def timeline(self, *, project: str | None = None, since: str | None = None,
                 limit: int = 200, banks: Sequence[str] | None = None) -> list[dict]:
        """Timeline events of every configured bank (or `banks`), newest first, each labelled
        with its bank."""
        events: list[dict] = []
        for label in (banks or self.banks):
            data = self._json("GET", RECALL, "/v1/timeline", label,
                              params={"project": project, "since": since, "limit": limit})
            events.extend({**e, "bank": label} for e in data.get("events", []))
        events.sort(key=lambda e: str(e.get("at") or ""), reverse=True)
        return events[:limit]

    def conflicts(self, project: str, *, path: str | None = None,
                  session_id: str | None = None, branch: str | None = None,
                  bank: str | None = None) -> list[str]:
        """Conflict warnings: for `path`, the other sessions that touched it within the window;
        without, the conflicts recorded in the project's window."""
        label = self.timeline_bank(bank)
        return self._json("GET", RECALL, "/v1/timeline/conflicts", label,
                          params={"project": project, "path": path,
                                  "session_id": session_id, "branch": branch}
                          ).get("conflicts", [])

    def handoffs(self, *, project: str | None = None, open_only: bool = False,
                 bank: str | None = None) -> list[dict]:
        """The handoffs of the timeline's bank, optionally one project's or the open ones."""
        label = self.timeline_bank(bank)
        params = {"project": project, "open": "true" if open_only else None}
        return self._json("GET", RECALL, "/v1/handoffs", label, params=params
                          ).get("handoffs", [])


def merge_injections(blocks: Sequence[tuple[str, dict]]) -> dict:
    """Merge per-bank injection answers into one block: texts joined in bank order (personal
    first), fact ids concatenated, tokens summed. A pure function, so a hook that fetches the
    blocks its own way can merge them exactly like the CLI's `inject-preview` shows."""
    texts = [b.get("text", "").strip() for _, b in blocks if b.get("text", "").strip()]
    return {
        "text": "\n\n".join(texts),
        "facts": [fid for _, b in blocks for fid in b.get("facts", [])],
        "tokens": sum(int(b.get("tokens") or 0) for _, b in blocks),
        "banks": {label: b for label, b in blocks},
    }


# --- the fact an agent or a person writes ------------------------------------------------


def new_fact(content: str, category: str | None, source_kind: str, location: str, quote: str,
             *, tags: Sequence[str], questions: Sequence[str] | None = None,
             origin: str | None = None, tentative: bool | None = None,
             project: str | None = None, check_files: bool = True,
             cwd: Path | None = None) -> dict:
    """The NewFact body the CLI and the MCP tools send. With `check_files`, a file source's
    quote is checked against the file here first (QuoteNotFound if it is not there) and the
    location stored relative to the repository root. An `origin` or `tentative` of None, no
    questions and no project are left out: the server's defaults apply. A file or commit
    source read here carries its fingerprint (factbank_client/staleness/fingerprint.py) for
    `verify`."""

    fp = None
    if source_kind == "file" and check_files:
        cwd = cwd or Path.cwd()
        root = repo_root(cwd)
        check = check_file_quote(location, quote, cwd=cwd, root=root)
        location = check.location
        fp = fingerprint.for_file(check, root)
    elif source_kind == "commit" and check_files:
        fp = fingerprint.for_commit(location, quote, repo_root(cwd or Path.cwd()))
    fact: dict[str, Any] = {"content": content, "category": category,
                            "source": {"kind": source_kind, "location": location},
                            "quote": quote, "tags": list(tags)}
    if fp:
        fact["fingerprint"] = fp
    if questions:
        fact["questions"] = list(questions)
    if origin is not None:
        fact["origin"] = origin
    if tentative is not None:
        fact["tentative"] = tentative
    if project:
        fact["project"] = project
    return fact


# --- moving facts between banks ----------------------------------------------------------


def to_new_fact(obj: dict) -> dict:
    """An exported Fact (or a NewFact) as a NewFact body: what the write gate accepts.

    Trust, events and ids do not travel: an imported fact starts a new history in its bank,
    keeping its origin, source, quote, tags, writer questions, project and the agent that
    first wrote it.
    """
    new = {k: obj[k] for k in NEW_FACT_FIELDS if k in obj and obj[k] is not None}
    author = obj.get("created_by")
    if "agent" not in new and isinstance(author, dict) and author.get("agent"):
        new["agent"] = author["agent"]
    source = new.get("source")
    if isinstance(source, dict):
        new["source"] = {k: v for k, v in source.items() if k in ("kind", "location")}
    return new


def _question_key(text: str) -> str:
    return " ".join(text.split()).casefold().rstrip("?？ ")


def merge_questions(current: Sequence[str], add: Sequence[str],
                    remove: Sequence[str] = ()) -> list[str]:
    """`current` without `remove`, then each new question not already there (compared
    ignoring case, spacing and a final question mark), in order."""
    gone = {_question_key(q) for q in remove}
    out: list[str] = []
    seen: set[str] = set()
    for q in [*current, *add]:
        key = _question_key(q)
        if not key or key in gone or key in seen:
            continue
        seen.add(key)
        out.append(" ".join(q.split()))
    return out


def is_exported_fact(obj: dict) -> bool:
    return "id" in obj and "status" in obj


RESTORED = ("status", "trust", "superseded_by", "supersede_reason", "confirmed_at")


def to_import_item(obj: dict) -> dict:
    """An import line: a NewFact, and for an exported Fact its `restore` record (its id in the
    exporting bank, status, stored trust, supersede link and reason, last confirmation), so a
    fact new to the bank comes back as it was, and one already there is left alone."""
    new = to_new_fact(obj)
    if is_exported_fact(obj):
        new["restore"] = {"id": int(obj["id"]),
                          **{k: obj[k] for k in RESTORED if obj.get(k) is not None}}
    return new


def import_order(items: Sequence[dict]) -> list[list[dict]]:
    """Items grouped by their distance from the head of their supersede chain (within the
    file): the current facts first, then what they superseded, and so on. File order is kept
    inside a group."""
    by_id = {int(it["restore"]["id"]): it for it in items if "restore" in it}

    def depth(it: dict) -> int:
        n, seen = 0, set()
        nxt = it.get("restore", {}).get("superseded_by")
        while nxt is not None and nxt in by_id and nxt not in seen:
            seen.add(nxt)
            n += 1
            nxt = by_id[nxt]["restore"].get("superseded_by")
        return n

    groups: dict[int, list[dict]] = {}
    for it in items:
        groups.setdefault(depth(it), []).append(it)
    return [groups[d] for d in sorted(groups)]


def _linked(item: dict, ids: dict[int, int]) -> dict:
    """The item with its supersede link mapped to the id its successor has in this bank (the
    link is dropped when the successor was not imported)."""
    restore = item.get("restore")
    if not restore or restore.get("superseded_by") is None:
        return item
    new_id = ids.get(int(restore["superseded_by"]))
    fixed = {k: v for k, v in restore.items() if k != "superseded_by"}
    if new_id is not None:
        fixed["superseded_by"] = new_id
    else:
        fixed.pop("supersede_reason", None)
    return {**item, "restore": fixed}


def chunk_lines(
    lines: Sequence[str],
    max_bytes: int = MAX_IMPORT_CHUNK_BYTES,
    max_lines: int = MAX_IMPORT_CHUNK_LINES,
) -> list[list[str]]:
    """Split JSONL lines into imports of at most `max_bytes` and `max_lines` each (the
    server refuses an import of more than 1,000 lines)."""
    chunks: list[list[str]] = [[]]
    size = 0
    for line in lines:
        n = len(line.encode()) + 1
        if chunks[-1] and (size + n > max_bytes or len(chunks[-1]) >= max_lines):
            chunks.append([])
            size = 0
        chunks[-1].append(line)
        size += n
    return [c for c in chunks if c]


# --- the local check of a file source -----------------------------------------------------

_LOCATION = re.compile(r"^(?P<path>.+?)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?$")


@dataclass
class QuoteCheck:
    """Where a quote was found in a file: the location to store and the matching lines."""

    location: str
    lines: list[int]
    # Each matching occurrence as (first line, last line), in file order; the fingerprint
    # records the one the location names (factbank_client/staleness/fingerprint.py).
    spans: list[tuple[int, int]] = field(default_factory=list)
    path: Path | None = None  # the file that was read (its real path)
    data: bytes | None = None  # its bytes, as read (the fingerprint hashes these, not a re-read)
    # A symbol source (`path::Qualified.name`): the definition, with its digest
    # (factbank_client/code/anchor.py); the fingerprint records it.
    symbol: Any = None




def check_file_quote(location: str, quote: str, *, cwd: Path | None = None,
                     root: Path | None = None) -> QuoteCheck:
    """Check that `quote` really is in the file `location` names (`path`, `path:line` or
    `path:start-end`), whitespace normalised. With a line, the quote must cover that line.

    Returns the location to store: relative to `root` (the repository) when the file is
    inside it, so the same source reads the same on every machine.

    The file is read through `safefs.read`: only inside the repository (outside
    one, inside `cwd`), never through a link that leaves it, never `~`, `.git`, a NUL byte or
    an overlong path; `location` may come from the bank (a confirm's fact) or an agent, and
    whether a quote is in a file outside the repository is not theirs to learn.

    A symbol source, `path::Qualified.name`, is checked by `check_symbol_quote`.
    """
    if schema.split_symbol(location) is not None:
        return check_symbol_quote(location, quote, cwd=cwd, root=root)
    m = _LOCATION.match(location.strip())
    if not m or not quote.strip():
        raise QuoteNotFound(f"source {location!r}: need a file path and a quote")
    raw_path = m.group("path")
    base = cwd or Path.cwd()
    top = root or base
    refused: UnsafePath | None = None
    path: Path | None = None
    data = b""
    # "C:\x" or a path that contains ':digits' itself: the whole location is tried as a path.
    for candidate, match in ((raw_path, m), (location.strip(), None)):
        try:
            path, data = safefs.read(top, candidate, base=base)
            m = match
            break
        except UnsafePath as exc:
            refused = refused or exc
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise QuoteNotFound(f"cannot read {raw_path}: {exc.strerror or exc}") from exc
    if path is None:
        if refused is not None:
            raise QuoteNotFound(f"source file not read: {refused}")
        raise QuoteNotFound(f"source file not found: {raw_path}")
    text = data.decode("utf-8", errors="replace")
    found = quote_spans(text, quote)
    if not found:
        raise QuoteNotFound(f"the quote is not in {raw_path} (whitespace normalised); "
                            "quote the file verbatim")
    lines = sorted({a for a, _ in found})
    if m and m.group("start"):
        lo = int(m.group("start"))
        hi = int(m.group("end") or lo)
        hits = [(a, b) for a, b in found if a <= hi and b >= lo]
        if not hits:
            at = ", ".join(str(n) for n in lines[:5])
            raise QuoteNotFound(f"the quote is in {raw_path} but at line {at}, not {lo}"
                                + (f"-{hi}" if hi != lo else "")
                                + f"; use {raw_path}:{lines[0]}")
        lines = sorted({a for a, _ in hits})
        found = hits
        suffix = f":{lo}" + (f"-{hi}" if hi != lo else "")
    else:
        suffix = ""
    where = fingerprint.relative(path, root) or raw_path
    return QuoteCheck(location=where + suffix, lines=lines, spans=found, path=path, data=data)


def check_symbol_quote(location: str, quote: str, *, cwd: Path | None = None,
                       root: Path | None = None) -> QuoteCheck:
    """Check a symbol source, `path::Qualified.name` (docs/staleness.md#symbol-anchors): the
    file is one of a language with symbols, the symbol is defined in it, and the quote is
    inside the symbol's own lines (whitespace normalised). Every refusal names `source` or
    `quote`. The file is read as `check_file_quote` reads it (safefs)."""
    if problem := schema.symbol_problem(location):
        raise QuoteNotFound(f"source: {problem}")
    raw_path, name = schema.split_symbol(location) or ("", "")
    if not quote.strip():
        raise QuoteNotFound("quote: a verbatim quote from the symbol's own lines is required")
    base = cwd or Path.cwd()
    try:
        path, data = safefs.read(root or base, raw_path, base=base)
    except safefs.UnsafePath as exc:
        raise QuoteNotFound(f"source file not read: {exc}") from None
    except FileNotFoundError:
        raise QuoteNotFound(f"source file not found: {raw_path}") from None
    except OSError as exc:
        raise QuoteNotFound(f"cannot read {raw_path}: {exc.strerror or exc}") from exc
    try:
        from factbank_client.code import anchor
    except ImportError:  # the light client without the grammars
        raise QuoteNotFound("source: symbol anchors need the tree-sitter grammars, which "
                            "come with factbank: reinstall it (or cite path:line)") from None
    try:
        sym = anchor.resolve(data, raw_path, name)
    except anchor.SymbolNotFound as exc:
        raise QuoteNotFound(f"source: {exc}") from None
    found = [(a, b) for a, b in quote_spans(data.decode("utf-8", errors="replace"), quote)
             if a >= sym.start_line and b <= sym.end_line]
    if not found:
        raise QuoteNotFound(f"quote: the quote is not in {name} ({raw_path}:{sym.start_line}-"
                            f"{sym.end_line}, whitespace normalised); quote the symbol's own "
                            "lines verbatim")
    where = fingerprint.relative(path, root) or raw_path
    return QuoteCheck(location=f"{where}{schema.SYMBOL_SEPARATOR}{name}",
                      lines=sorted({a for a, _ in found}), spans=found, path=path, data=data,
                      symbol=sym)


