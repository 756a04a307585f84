"""The local web dashboard: `factbank dashboard`. See docs/dashboard.md."""
