"""The hooks every harness runs: `factbank_client/hooks.py` (the installed script) imports
`entry`, which answers each event from here. Kept empty: the hook's start-up time counts
(docs/harnesses.md), and a package's `__init__` runs on every hook."""
