"""The dashboard in a real browser (Debian's chromium under Playwright): the gate (token,
cookie, Host, CSRF), every page at 1280 and 390 px, a fact's full history, search with its
match and companion marks, filters and pagination, every action, the live timeline, health,
banks and members, evals. The `page` fixture fails a test on any console error."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from factbank_client.client import Client
from factbank_client.config import ClientConfig
from factbank_client.dashboard import security
from tests.browser.stack import PROJECT, _fact, shots_dir

PAGES = ["/facts", "/facts?q=which+package+manager", "/facts?bank=team", "/timeline?bank=team",
         "/health", "/admin", "/evals"]


def cookie_client(live) -> httpx.Client:
    """An HTTP client holding the session cookie, as a signed-in browser does."""
    return httpx.Client(base_url=live.url, cookies={security.COOKIE: live.keys.session},
                        follow_redirects=False)


# --- the gate ------------------------------------------------------------------------------


def test_launch_token_becomes_an_httponly_strict_cookie(browser, live):
    context = browser.new_context()
    p = context.new_page()
    r = p.goto(live.url + "/facts")
    assert r.status == 403 and "Not signed in" in p.content()
    r = p.goto(f"{live.url}/facts?token=not-this-launch")
    assert r.status == 403 and "Wrong token" in p.content()
    assert context.cookies() == []
    r = p.goto(live.launch("/health"))
    assert r.status == 200
    assert p.url == live.url + "/health"  # the token left the address bar
    (cookie,) = context.cookies()
    assert cookie["name"] == security.COOKIE
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert cookie["value"] != live.keys.launch  # the URL token is not the stored credential
    assert p.evaluate("document.cookie") == ""  # no script can read it
    context.close()


def test_host_header_check_stops_dns_rebinding(live):
    with cookie_client(live) as http:
        assert http.get("/facts").status_code == 200
        for host in ("evil.example", f"evil.example:{live.port}", "127.0.0.1:1",
                     f"127.0.0.1.nip.io:{live.port}"):
            r = http.get("/facts", headers={"Host": host})
            assert r.status_code == 403 and "Wrong host" in r.text, host
        r = http.get(f"/facts?token={live.keys.launch}", headers={"Host": "evil.example"})
        assert r.status_code == 403 and "set-cookie" not in r.headers


def test_every_post_needs_the_csrf_token(live):
    fact = live.ids["ci"]
    url = f"/facts/personal/{fact}/confirm"
    with cookie_client(live) as http:
        assert http.post(url, data={"reason": "x"}).status_code == 403
        assert http.post(url, data={"reason": "x", "csrf": "wrong"}).status_code == 403
        r = http.post(url, data={"reason": "x", "csrf": live.keys.csrf},
                      headers={"Origin": "http://evil.example"})
        assert r.status_code == 403
        for action in ("/admin/personal/issue", "/evals/run", f"/facts/personal/{fact}/purge"):
            assert http.post(action, data={"member": "eve"}).status_code == 403, action
    # Nothing happened to the fact: no confirm event was recorded by the refused posts.
    with Client(live.config) as c:
        events = c.history(fact, bank="personal")["events"]
    assert [e["kind"] for e in events] == ["created"]
    with httpx.Client(base_url=live.url) as http:  # no cookie: refused before CSRF
        r = http.post(url, data={"csrf": live.keys.csrf})
        assert r.status_code == 403


def test_a_script_without_the_token_cannot_post(page, live):
    status = page.evaluate("""async (url) => (await fetch(url, {method: 'POST',
        headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'reason=x'}))
        .status""", f"/facts/personal/{live.ids['ci']}/dispute")
    assert status == 403


# --- every page, both widths -----------------------------------------------------------------


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_renders_without_overflow(browser, live, width):
    context = browser.new_context(viewport={"width": width, "height": 900})
    p = context.new_page()
    errors: list[str] = []
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.goto(live.launch())
    for path in [*PAGES, f"/facts/personal/{live.ids['port']}",
                 f"/facts/personal/{live.ids['port_new']}"]:
        r = p.goto(live.url + path)
        assert r.status == 200, path
        assert p.locator("header.top .brand").is_visible()
        assert p.locator("main h1").first.is_visible(), path
        overflow = p.evaluate("document.documentElement.scrollWidth")
        assert overflow <= width, (path, overflow)
    context.close()
    assert not errors, errors


def test_unknown_fact_and_bank_are_404_pages(page, live):
    r = page.goto(live.url + "/facts/personal/999999")
    assert r.status == 404 and "no fact 999999" in page.content()
    r = page.goto(live.url + "/facts/nobank/1")
    assert r.status == 404
    page.console.errors.clear()  # the 404s asked for


# --- facts -----------------------------------------------------------------------------------


def test_list_pages_newest_first_and_filters(page, live):
    page.goto(live.url + "/facts")
    ids = [int(t.strip("#")) for t in page.locator("table.grid td a.id").all_inner_texts()]
    assert len(ids) == 25 and ids == sorted(ids, reverse=True)
    page.click("text=Older »")
    older = [int(t.strip("#")) for t in page.locator("table.grid td a.id").all_inner_texts()]
    assert older and max(older) < min(ids)
    page.click("text=« Newest")
    page.goto(live.url + "/facts?tag=workers")
    rows = page.locator("table.grid tbody tr").all_inner_texts()
    assert rows and all("Worker pool" in r for r in rows)
    page.goto(live.url + "/facts")
    page.select_option("select[name=category]", "preferences")
    page.click("button[type=submit]")
    assert page.locator("table.grid tbody tr").all_inner_texts()[0].count("pnpm") >= 1
    assert len(page.locator("table.grid tbody tr").all()) == 1
    page.goto(live.url + "/facts?status=superseded")
    rows = page.locator("table.grid tbody tr").all_inner_texts()
    assert len(rows) == 1 and "8080" in rows[0]


def test_search_shows_match_and_companion(page, live):
    page.goto(live.url + "/facts")
    page.fill("input[name=q]", "which package manager do we use")
    page.click("button[type=submit]")
    first = page.locator("li.fact-row").first
    assert "pnpm" in first.inner_text()
    assert "matched the question" in first.inner_text()
    assert first.locator(".score").inner_text().startswith("match ")
    # A companion mark is shown exactly where the service said so.
    with Client(live.config) as c:
        hits = c.search("which package manager do we use", limit=25, banks=["personal"])
    marks = page.locator("li.fact-row .chip.companion").count()
    assert marks == sum(1 for h in hits["results"] if h.get("companion"))
    # Chinese query, English fact: the hybrid search bridges it through the tags/questions.
    page.fill("input[name=q]", "我们用哪个包管理器")
    page.click("button[type=submit]")
    assert "pnpm" in page.locator("li.fact-row").first.inner_text()


def test_a_facts_full_history(page, live):
    old, new = live.ids["port"], live.ids["port_new"]
    page.goto(f"{live.url}/facts/personal/{old}")
    body = page.inner_text("main")
    assert "The API listens on port 8080 in production" in body
    assert "deploy/api.yaml:4" in body and "port: 8080" in body
    assert "Which port does the API listen on?" in body
    kinds = page.locator("table.events .chip.ev").all_inner_texts()
    assert kinds == ["created", "confirmed", "superseded"]
    assert "moved behind TLS" in body
    points = page.locator(".spark polyline").get_attribute("points").split()
    assert len(points) == 3
    ys = [float(p.split(",")[1]) for p in points]
    assert ys[1] < ys[0] < ys[2]  # confirmed raised it, the supersede dropped it
    assert page.locator(f".flash.warn a[href='/facts/personal/{new}']").count() == 1
    page.click(f"ol.chain a[href='/facts/personal/{new}']")
    assert page.url.endswith(f"/facts/personal/{new}")
    # Both directions: the new fact lists the one it superseded.
    assert page.locator(f"ol.chain a[href='/facts/personal/{old}']").count() == 1
    # A URL source is a link, a commit of a GitHub project links to the commit.
    page.goto(f"{live.url}/facts/personal/{live.ids['ci']}")
    assert page.locator("a[href='https://github.com/acme/api/issues/212']").count() == 1
    page.goto(f"{live.url}/facts/personal/{live.ids['commit']}")
    assert page.locator("a[href='https://github.com/acme/api/commit/3f9c2e1a7b']").count() == 1


def test_possible_duplicates_are_listed(page, live):
    with Client(live.config) as c:
        dup = c.add(_fact("Redis runs on cache02.internal, database 3 for sessions",
                          "REDIS_URL=redis://cache01.internal:6379/3",
                          ["redis", "cache", "sessions"], kind="file",
                          location="ops/env.staging:12"))
    fid = dup["fact"]["id"]
    page.goto(f"{live.url}/facts/personal/{fid}")
    page.locator("#duplicates ul.dupes a").first.wait_for()  # htmx loads the fragment
    listed = page.locator("ul.dupes a").all_inner_texts()
    assert dup["status"] == "stored", dup  # another claim (another host): not reinforced
    assert f"#{live.ids['redis']}" in listed, (listed, dup)


def _fresh(live, content: str) -> int:
    with Client(live.config) as c:
        return c.add(_fact(content, content[:20], ["scratch"]))["fact"]["id"]


def test_every_action_on_a_fact(page, live):
    fid = _fresh(live, "The staging database is pg-staging.internal")
    page.goto(f"{live.url}/facts/personal/{fid}")
    page.fill("input[aria-label='confirm reason']", "pinged it")
    page.click("button:has-text('Confirm')")
    assert page.inner_text(".flash.ok") == "confirmed"
    page.fill("input[aria-label='dispute reason']", "renamed last sprint?")
    page.click("button:has-text('Dispute')")
    assert page.inner_text(".flash.ok") == "disputed"
    page.fill("input[aria-label=tags]", "db, staging, 数据库")
    page.click("button:has-text('Save tags')")
    assert page.inner_text(".flash.ok") == "tags saved"
    kinds = page.locator("table.events .chip.ev").all_inner_texts()
    assert kinds[:3] == ["created", "confirmed", "disputed"]
    assert {t.strip() for t in page.locator("dd a.tag").all_inner_texts()} == {
        "db", "staging", "数据库"}
    # A dispute without a reason is refused by the form (required) and the app.
    with cookie_client(live) as http:
        r = http.post(f"/facts/personal/{fid}/dispute", data={"csrf": live.keys.csrf})
        assert r.status_code == 303 and "error=" in r.headers["location"]
    # Supersede: lands on the new fact, which links back.
    page.click("details.action summary")
    page.fill("details.action textarea[name=content]", "The staging database is pg-stg-02.internal")
    page.fill("details.action input[name=quote]", "moved to pg-stg-02")
    page.fill("details.action input[name=reason]", "the old host was retired")
    page.click("button:has-text('Supersede')")
    assert "superseded" in page.inner_text(".flash.ok")
    assert page.locator(f"ol.chain a[href='/facts/personal/{fid}']").count() == 1
    new_id = int(page.url.rsplit("/", 1)[1].split("?")[0])
    # Delete asks first; dismissing keeps the fact.
    page.once("dialog", lambda d: d.dismiss())
    page.click("button:has-text('Delete')")
    assert page.locator(".chip.s-active").count() >= 1
    page.once("dialog", lambda d: d.accept())
    page.click("button:has-text('Delete')")
    assert page.inner_text(".flash.ok") == "deleted"
    assert page.locator(".chip.s-deleted").count() >= 1
    # Purge (this bank's token is admin): gone, history and all.
    page.goto(f"{live.url}/facts/personal/{fid}")
    page.once("dialog", lambda d: d.accept())
    page.click("button:has-text('Purge')")
    assert "purged" in page.inner_text(".flash.ok")
    assert page.goto(f"{live.url}/facts/personal/{fid}").status == 404
    page.console.errors.clear()  # the 404 asked for
    assert page.goto(f"{live.url}/facts/personal/{new_id}").status == 200


def test_actions_follow_the_tokens_scopes(page, live):
    page.goto(f"{live.url}/facts/team/{live.ids['team']}")
    assert page.locator("button:has-text('Confirm')").count() == 1  # read+write
    assert page.locator("button:has-text('Purge')").count() == 0  # no admin scope
    page.goto(live.url + "/admin")
    assert "no admin scope" in page.inner_text("main")


# --- timeline ----------------------------------------------------------------------------------


def test_timeline_is_live_with_conflicts_and_handoffs(page, live):
    page.goto(live.url + "/timeline?bank=team")
    assert page.locator("tr.conflict").count() >= 1
    assert "src/retry.py was also touched" in page.inner_text(".conflicts")
    assert "Half-way through the retry refactor" in page.inner_text(".handoff")
    assert page.locator("tr.failed").count() == 1  # the failing pytest run
    page.wait_for_function("document.getElementById('live').textContent.includes('live')")
    with Client(live.config) as c:
        c.record_events([{"session_id": "pi-3", "kind": "file", "project": PROJECT,
                          "path": "src/brand_new_module.py", "tool": "write", "agent": "pi",
                          "machine": "tablet", "branch": "main"}], bank="team")
    # Streamed in without a reload, at the top.
    row = page.locator("tbody#events tr.fresh", has_text="src/brand_new_module.py")
    row.wait_for(timeout=15_000)
    assert "src/brand_new_module.py" in page.locator("tbody#events tr").first.inner_text()


# --- health, admin, evals ------------------------------------------------------------------------


def test_health_shows_services_legs_counts_and_growth(page, live):
    page.goto(live.url + "/health")
    assert page.locator(".tile h3 .chip.t-high").count() == 2  # ingest and recall ready
    assert page.locator("text=dense leg live").count() == 2  # each bank
    assert page.locator("#lexical-fallback").count() == 0
    assert page.locator("figure.growth").first.locator("rect").count() == 30
    assert "active facts" in page.inner_text("main")
    assert "Nothing installed yet" in page.inner_text("main")


def test_banks_and_members_issue_rotate_revoke_verify_export(page, live):
    page.goto(live.url + "/admin")
    assert "alice" in page.inner_text("table.grid")
    page.fill("input[name=member]", "bob")
    page.fill("input[name=label]", "bob's laptop")
    page.click("button:has-text('Issue')")
    token = page.inner_text("#new-token").strip()
    assert token.startswith("fb_")
    bob = ClientConfig(url=live.config.url, recall_url=live.config.recall_url,
                       tokens={"personal": token})
    with Client(bob) as c:
        assert c.whoami("personal")["member"] == "bob"
    page.goto(live.url + "/admin")
    assert token not in page.content()  # shown once
    row = page.locator("table.tokens tr", has_text="bob's laptop")
    row.locator("button:has-text('Rotate')").click()
    rotated = page.inner_text("#new-token").strip()
    assert rotated.startswith("fb_") and rotated != token
    assert "replaces token" in page.inner_text(".newtoken")
    row = page.locator("table.tokens tr:not(.revoked)", has_text="bob's laptop")
    page.once("dialog", lambda d: d.accept())
    row.locator("button:has-text('Revoke')").click()
    assert "revoked token" in page.inner_text(".flash.ok")
    assert page.locator("table.tokens tr.revoked", has_text="bob's laptop").count() == 2
    page.click("button:has-text('Verify')")
    assert "intact" in page.inner_text("#audit-result")
    with page.expect_download() as download:
        page.click("text=Export JSONL")
    lines = Path(download.value.path()).read_text("utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert set(rows[-1]) == {"audit_head"}  # the chain's head, kept outside the database, is last
    actions = [r["action"] for r in rows if "action" in r]
    assert "token.issue" in actions and "token.rotate" in actions and "token.revoke" in actions


def test_evals_page_shows_the_committed_reports_and_plots(page, live):
    page.goto(live.url + "/evals")
    assert page.locator("section.report").count() >= 1
    imgs = page.locator("section.report img")
    # The plots load lazily, so each is brought into view (a reader scrolling) and must
    # then load, and load as an image: a page longer than the browser's lazy-load reach left
    # the last ones unrequested for ever.
    assert imgs.count() >= 1
    for i in range(imgs.count()):
        img = imgs.nth(i)
        img.scroll_into_view_if_needed()
        img.evaluate("i => i.decode()")
        assert img.evaluate("i => i.complete && i.naturalWidth > 0"), img.get_attribute("src")
    assert page.locator("table.md").count() >= 1
    assert page.goto(live.url + "/evals/plot/..%2F..%2Fetc/passwd.png").status == 404
    for bad in ("2026-12-06%2F..%2F..%2F..%2Fetc/passwd.png", "a/b/c/d.png", "x.png",
                "2026-12-06/eval/report.md", "2026-12-06/eval/..%5Cx.png"):
        assert page.goto(f"{live.url}/evals/plot/{bad}").status == 404, bad
    page.console.errors.clear()  # the 404 asked for


@pytest.mark.slow
def test_the_run_button_streams_an_agent_memory_eval(page, live):
    """A real `factbank eval agent-memory` (one query per kind) on its own throwaway stack:
    its output streams into the page and the run ends with exit code 0."""
    page.goto(live.url + "/evals")
    page.fill("input[name=per_kind]", "1")
    page.click("button:has-text('Run')")
    log = page.locator("pre.log").first
    page.wait_for_function("document.querySelector('pre.log').textContent.length > 0",
                           timeout=300_000)
    state = page.locator("[id^=state-]").first
    page.wait_for_function("!document.querySelector('[id^=state-]').textContent"
                           ".includes('running')", timeout=600_000)
    assert state.inner_text() == "exit code 0", log.inner_text()[-2000:]
    text = log.inner_text()
    assert "agent-memory:" in text  # its progress streamed in
    assert "| agent-memory | inject |" in text  # and its result table at the end


# --- screenshots ----------------------------------------------------------------------------


def test_screenshots(browser, live, tmp_path):
    """The main pages at 1280 px (and the facts list at 390): into docs/screenshots with
    FACTBANK_SCREENSHOTS=1, else a temp dir (so the run still checks they can be taken)."""
    out = shots_dir(tmp_path)
    for width, shots in ((1280, [("facts", "/facts"),
                                  ("search", "/facts?q=which+package+manager+do+we+use"),
                                  ("fact", f"/facts/personal/{live.ids['port']}"),
                                  ("timeline", "/timeline?bank=team"), ("health", "/health"),
                                  ("admin", "/admin"), ("evals", "/evals")]),
                         (390, [("facts-mobile", "/facts"),
                                ("fact-mobile", f"/facts/personal/{live.ids['port_new']}")])):
        context = browser.new_context(viewport={"width": width, "height": 860},
                                      device_scale_factor=1)
        p = context.new_page()
        p.goto(live.launch())
        for name, path in shots:
            p.goto(live.url + path)
            if name.startswith("fact") and not name.startswith("facts"):
                p.locator("#duplicates ul, #duplicates p:not(:has-text('Looking'))").first \
                    .wait_for()  # the htmx fragment is in
            p.screenshot(path=str(out / f"{name}.png"), full_page=name in ("fact",))
            assert (out / f"{name}.png").stat().st_size > 10_000
        context.close()
