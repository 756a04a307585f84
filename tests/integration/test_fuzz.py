"""Property-based fuzz of both services' OpenAPI documents with schemathesis:
0 server errors and 0 responses that break the documented schema.

CI runs a bounded pass (FACTBANK_FUZZ_EXAMPLES, default 15 examples per operation); the longer
run is the same test with more examples:

    FACTBANK_FUZZ_EXAMPLES=300 .venv/bin/pytest -q -p no:cacheprovider -m fuzz \
        tests/integration/test_fuzz.py
"""

from __future__ import annotations

import asyncio
import os

import hypothesis
import pytest

from factbank.runtime.runner import serve_in_thread
from tests.integration.conftest import auth, fact_body, make_bank

schemathesis = pytest.importorskip("schemathesis")

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]
EXAMPLES = int(os.environ.get("FACTBANK_FUZZ_EXAMPLES", "15"))


def fuzz(base_url: str, doc: dict, token: str, examples: int) -> list[str]:
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import response_schema_conformance

    schema = schemathesis.openapi.from_dict(doc)
    problems: list[str] = []
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path == "/metrics":
            continue

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=examples, deadline=None, database=None, derandomize=True,
            suppress_health_check=list(hypothesis.HealthCheck),
            phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        )
        def run(case) -> None:
            nonlocal calls
            calls += 1
            response = case.call(base_url=base_url, headers=auth(token), timeout=30)
            try:
                case.validate_response(
                    response, checks=[not_a_server_error, response_schema_conformance]
                )
            except Exception as exc:
                problems.append(f"{case.method} {case.path}: "
                                f"{response.status_code} {type(exc).__name__}: "
                                f"{str(exc)[:300]}")

        run()
    assert calls > 0
    print(f"fuzz {base_url}: {calls} requests, {len(problems)} problems")
    return problems


async def test_fuzz_both_services(dsn, conn, settings, tmp_path):
    bank = await make_bank(conn, "fuzz")
    from factbank_ingest import app as ingest_app
    from factbank_recall import app as recall_app

    docs = {
        "ingest": ingest_app.create(settings, dsn=dsn).openapi_schema.to_schema(),
        "recall": recall_app.create(settings, dsn=dsn).openapi_schema.to_schema(),
    }

    def go() -> list[str]:
        import httpx

        with serve_in_thread(settings, dsn) as urls:
            r = httpx.post(urls["ingest"] + "/v1/facts", json=fact_body(),
                           headers=auth(bank.admin), timeout=30)
            assert r.status_code == 201, r.text
            problems = []
            for name in ("ingest", "recall"):
                problems += fuzz(urls[name], docs[name], bank.admin, EXAMPLES)
            return problems

    problems = await asyncio.to_thread(go)
    assert not problems, "\n".join(problems)
