"""`python -m factbank_client.code.check LOCATION QUOTE`: a symbol source checked and
fingerprinted as `factbank add` does it, for the Pi extension. Apart from `anchor` so the
parsing layer never imports the HTTP client (`client.check_symbol_quote` imports `anchor`)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """`python -m factbank_client.code.check LOCATION QUOTE`, run in the repository: the
    symbol source checked as `factbank add` checks it, printed as one JSON object,
    `{"location": ..., "fingerprint": {...}}` or `{"error": "source: ..."}`. The Pi extension
    (TypeScript, no tree-sitter of its own) saves symbol-anchored facts through it, so the
    digest has one implementation."""
    import json
    import sys
    from pathlib import Path

    from factbank_client.client import check_symbol_quote
    from factbank_client.errors import QuoteNotFound
    from factbank_client.project import repo_root
    from factbank_client.staleness import fingerprint

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(json.dumps({"error": "usage: python -m factbank_client.code.check "
                                   "PATH::Qualified.name QUOTE"}))
        return 2
    cwd = Path.cwd()
    root = repo_root(cwd)
    try:
        check = check_symbol_quote(args[0], args[1], cwd=cwd, root=root)
    except QuoteNotFound as exc:
        print(json.dumps({"error": str(exc)}))
        return 0
    print(json.dumps({"location": check.location,
                      "fingerprint": fingerprint.for_file(check, root)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
