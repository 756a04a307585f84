"""The vector worker service: drains the vector queue apart from the API.

An import queues its facts' vectors (`factbank.write.vectors`); by default the ingest service
drains that queue in its own process, where the embedder competes with searches and writes
for the same cores. Run this service instead (and FACTBANK_VECTOR_BATCH=0 on ingest), on this
machine or another one pointed at the same database, and as many copies as there are cores to
spare: the queue's claims keep copies from embedding the same fact.

It has no API of its own, only the common health routes (`/healthz`, `/readyz`, `/metrics`
with the metrics token), so compose and Kubernetes probe it like the other two.
"""

from __future__ import annotations

from litestar import Litestar

from factbank.runtime.web.app import create_app
from factbank.settings import Settings
from factbank.write import vectors


def create(settings: Settings | None = None, *, dsn: str | None = None) -> Litestar:
    return create_app(
        "factbank worker", [], settings, dsn=dsn, on_start=[vectors.start], on_stop=[vectors.stop]
    )
