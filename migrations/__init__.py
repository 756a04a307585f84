"""Numbered SQL migrations, applied in order by factbank.store.migrations."""
