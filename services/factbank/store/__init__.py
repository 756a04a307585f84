"""The store: pools, migrations, fact rows, banks and tokens, the audit chain."""
