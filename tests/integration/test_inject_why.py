"""Every injected prompt line says what matched it (read/why.py): the writer question whose
vector matched, else the prompt's words the fact shares; and the block stays in its budget."""

from __future__ import annotations

from factbank.read import inject as inject_mod
from tests.integration.conftest import auth, fact_body
from tests.integration.recall_api import fill, inject

PORT_Q = "Which port does the ledgerline database listen on?"


async def test_each_prompt_line_names_the_question_or_the_words_that_matched(stack, two_banks):
    alpha, _ = two_banks
    r = await stack.ingest.post("/v1/facts", headers=auth(alpha.rw), json=fact_body(
        "Postgres for ledgerline runs on host db-2 port 5433", category="environment",
        tags=["postgres", "database"], questions=[PORT_Q, "账单服务的数据库端口是多少？"]))
    assert r.status_code == 201, r.text
    port = r.json()["fact"]["id"]
    ids = await fill(stack, alpha.rw)

    # Asked the writer's own question: the line quotes it.
    block = await inject(stack, alpha.ro, "prompt", session="a", prompt=PORT_Q)
    line = next(x for x in block["text"].splitlines() if x.startswith(f"- #{port} "))
    assert line.endswith(f'[matched: "{PORT_Q}"]')

    # Near-topic: asked for the password, the agent is shown the port fact and can read that
    # it answers the port question, not its own.
    block = await inject(stack, alpha.ro, "prompt", session="c",
                         prompt="What is the password of the ledgerline database?")
    line = next(x for x in block["text"].splitlines() if x.startswith(f"- #{port} "))
    assert line.endswith(f'[matched: "{PORT_Q}"]')

    # A fact without questions, found by its words: the shared words are named, in the
    # prompt's order, and every line of the block says something.
    block = await inject(stack, alpha.ro, "prompt", session="b", prompt="E0502 borrow error")
    assert ids[3] in block["facts"], block
    facts = [x for x in block["text"].splitlines() if x.startswith("- #")]
    assert facts and all("[matched" in x for x in facts)
    line = next(x for x in facts if x.startswith(f"- #{ids[3]} "))
    assert "[matched words: e0502, borrow" in line
    assert block["tokens"] <= inject_mod.PROMPT_BUDGET
