"""The prompt hook's correction detector (factbank_client.hook.correction) on its labelled set and
on the hard cases the set is built around; the nudge line; the hook adds it."""

from __future__ import annotations

import pytest

from factbank_client.hook import correction
from factbank_evals import corrections


def test_the_labelled_set_meets_its_targets() -> None:
    rows = corrections.load()
    assert len(rows) >= 200
    positives = sum(r["correction"] for r in rows)
    assert 0.4 <= positives / len(rows) <= 0.6  # about half are corrections
    assert {r["lang"] for r in rows} == {"en", "zh", "mixed"}
    result = corrections.score(rows)
    for name in ("all", "split:test", "split:holdout"):
        s = result["slices"][name]
        assert s["precision"] >= corrections.TARGET_PRECISION, (name, result["errors"])
        assert s["recall"] >= corrections.TARGET_RECALL, (name, result["errors"])


@pytest.mark.parametrize("prompt", [
    "no, we use pnpm", "不对，应该是 8081", "actually the staging host is stg-2.internal",
    "No. The API listens on 8081, not 8080.", "我们不用 yarn 了", "不对, we use pnpm",
    "you got the bucket wrong, it's s3://acme-eu",
])
def test_corrections_are_recognised(prompt: str) -> None:
    assert correction.is_correction(prompt)


@pytest.mark.parametrize("prompt", [
    "no, can you try a different approach?", "actually, can you also add a docstring?",
    "No module named 'factbank' when I run pytest", "if not user.is_active: return None",
    "是不是端口配错了？", "不用了，谢谢", "应该是什么端口？", "no problem, go ahead",
    "wrong number of arguments error in the CLI, fix it", "", "   ",
])
def test_hard_negatives_are_not(prompt: str) -> None:
    assert not correction.is_correction(prompt)


def test_the_nudge_names_the_fact_or_asks_for_a_save() -> None:
    line = correction.nudge(12)
    assert "#12" in line and "supersede" in line and "\n" not in line
    assert "#" not in correction.nudge(None) and "save" in correction.nudge(None)


def test_the_prompt_hook_adds_the_nudge_and_asks_the_service(monkeypatch, tmp_path) -> None:
    from factbank_client.hook import main as hookmain

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    asked = []

    def inject(kind, session_id, project, prompt, agent, deadline, root=None, correction=False):
        asked.append(correction)
        if correction:
            hookmain.SUBJECTS["personal"] = 7
        return "[factbank] facts"

    monkeypatch.setattr(hookmain, "inject", inject)
    monkeypatch.setattr(hookmain, "SUBJECTS", {})
    out = hookmain.on_user_prompt_submit(
        {"session_id": "s", "prompt": "不对，应该是 8081", "cwd": str(tmp_path)}, 1e12)
    text = out["hookSpecificOutput"]["additionalContext"]
    assert "#7" in text and text.startswith("[factbank] facts")
    out = hookmain.on_user_prompt_submit(
        {"session_id": "s", "prompt": "which port is it?", "cwd": str(tmp_path)}, 1e12)
    assert "correcting" not in out["hookSpecificOutput"]["additionalContext"]
    assert asked == [True, False]
