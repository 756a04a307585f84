"""`factbank install|uninstall`: wiring factbank into the agent harnesses (`harnesses`, one
module for each harness that needs its own), the format-keeping edits of their files (`files`,
`toml_table`), Codex's hook trust (`codex_trust`) and the repository's git hook (`git`)."""
