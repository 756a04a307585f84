"""The runtime: the shared web layer, the service runner, process lifecycle, embedded Postgres."""
