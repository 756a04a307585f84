"""Numbered SQL migrations, applied in order by factbank.migrations."""
