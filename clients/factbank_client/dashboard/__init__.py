"""The local web dashboard (issue 17): `factbank dashboard`. See docs/dashboard.md."""
