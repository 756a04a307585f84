"""The runtime: settings, the shared web layer, the service runner, observability, the
embedded Postgres."""
