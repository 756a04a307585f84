"""The dashboard's review queue in a real browser: a candidate shows its quote as it was and as
it is now; edit then accept supersedes (landing on the new fact), reject keeps it rejected; the
page fits 390 px. Runs after test_dashboard.py on the same live stack, on facts of its own."""

from __future__ import annotations

from factbank_client.client import Client
from tests.browser.stack import _fact, shots_dir


def _candidates(live) -> tuple[int, int, int]:
    with Client(live.config, agent="claude-code") as c:
        fid = c.add(_fact("The staging database listens on port 5432", "db: 5432",
                          ["database", "staging", "数据库"]))["fact"]["id"]
        body = _fact("The staging database listens on port 6432", "db: 6432",
                     ["database", "staging", "数据库"])
        keep = c.queue_add(body, replaces=fid, reason="moved behind pgbouncer")["id"]
        body = _fact("The staging database listens on port 7432", "db: 7432",
                     ["database", "staging"])
        drop = c.queue_add(body, replaces=fid, reason="a guess")["id"]
    return fid, keep, drop


def test_edit_then_accept_supersedes_and_reject_is_kept(page, live, tmp_path):
    fid, keep, drop = _candidates(live)
    r = page.goto(live.url + "/queue")
    assert r.status == 200 and "Review queue" in page.inner_text("main h1"), page.content()
    assert page.locator(".flash.bad").count() == 0, page.inner_text("main")
    card = page.locator(f"#candidate-{keep}")
    assert card.count() == 1, page.inner_text("main")
    assert f"supersedes #{fid}" in card.inner_text()
    assert card.locator("code.old").inner_text() == "db: 5432"
    assert card.locator("code.new").inner_text() == "db: 6432"
    out = shots_dir(tmp_path)
    page.screenshot(path=str(out / "queue.png"))
    assert (out / "queue.png").stat().st_size > 10_000

    card.locator("summary:has-text('Edit and accept')").click()
    card.locator("textarea[name=content]").fill(
        "The staging database listens on port 6432 (pgbouncer)")
    card.locator("button:has-text('Accept')").click()
    assert "accepted candidate" in page.inner_text(".flash.ok")
    assert "The staging database listens on port 6432 (pgbouncer)" in page.inner_text("main")
    new_id = int(page.url.split("?", 1)[0].rsplit("/", 1)[1])
    with Client(live.config) as c:
        old = c.history(fid, bank="personal")["fact"]
    assert old["status"] == "superseded" and old["superseded_by"] == new_id
    assert old["supersede_reason"] == "moved behind pgbouncer"

    # The other candidate replaced the same fact: accepting it now is refused, rejecting works.
    page.goto(live.url + "/queue")
    card = page.locator(f"#candidate-{drop}")
    card.locator("input[name=reason]").fill("not what ops said")
    card.locator("button:has-text('Reject')").click()
    assert f"rejected candidate {drop}" in page.inner_text(".flash.ok")
    assert page.locator(f"#candidate-{drop}").count() == 0
    page.goto(live.url + "/queue?status=rejected")
    assert "not what ops said" in page.locator(f"#candidate-{drop}").inner_text()


def test_the_queue_page_fits_a_phone(browser, live):
    context = browser.new_context(viewport={"width": 390, "height": 900})
    p = context.new_page()
    p.goto(live.launch())
    p.goto(live.url + "/queue?status=all")
    assert p.locator("main h1").first.inner_text() == "Review queue"
    assert p.evaluate("document.documentElement.scrollWidth") <= 390
    context.close()
