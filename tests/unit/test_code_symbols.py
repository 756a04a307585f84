"""The parsing layer: definitions by qualified name in Python, JS/TS, Go and Rust, read from
realistic fixtures (tests/fixtures/code) with the packaged tree-sitter grammars."""

from __future__ import annotations

from pathlib import Path

import pytest

from factbank_client.code import symbols
from factbank_client.code.symbols import definitions, find, language_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "code"


def _defs(name: str) -> dict[str, symbols.Symbol]:
    path = FIXTURES / name
    out: dict[str, symbols.Symbol] = {}
    for symbol in definitions(path.read_bytes(), language_for(name)):
        out.setdefault(symbol.qualname, symbol)
    return out


def _lines(name: str, symbol: symbols.Symbol) -> str:
    lines = (FIXTURES / name).read_text().splitlines()
    return "\n".join(lines[symbol.start_line - 1:symbol.end_line])


@pytest.mark.parametrize(("path", "language"), [
    ("a/b.py", "python"), ("x.pyi", "python"), ("web/app.js", "javascript"),
    ("m.mjs", "javascript"), ("c.cjs", "javascript"), ("ui/Button.jsx", "javascript"),
    ("src/net.ts", "typescript"), ("ui/App.tsx", "tsx"), ("cmd/main.go", "go"),
    ("src/lib.rs", "rust"), ("README.md", None), ("Makefile", None), ("a.PY", "python"),
])
def test_language_for_by_extension(path, language):
    assert language_for(path) == language


def test_python_methods_nested_classes_decorators_and_closures():
    defs = _defs("retry.py")
    backoff = defs["RetryPolicy.backoff"]
    assert backoff.kind == "method"
    assert backoff.signature == "def backoff(self, attempt: int) -> float"
    assert backoff.doc == "Seconds to wait before `attempt` (0-based)."
    assert backoff.text.startswith("def backoff(") and "random.uniform" in backoff.text
    assert backoff.text == _lines("retry.py", backoff).lstrip()  # from the `def`, not the indent
    # A decorator belongs to its definition: it changes what the definition does.
    total = defs["RetryPolicy.total"]
    assert total.text.startswith("@property\n") and total.kind == "method"
    policy = defs["RetryPolicy"]
    assert policy.kind == "class" and policy.text.startswith("@dataclass(frozen=True)")
    assert policy.doc.startswith("How often and how long to retry.\n\nThe delay doubles")
    assert defs["RetryPolicy.Budget"].kind == "class"
    assert defs["RetryPolicy.Budget.spend"].kind == "method"
    assert defs["retrying.decorate.wrapper"].kind == "function"
    assert defs["TransientError"].bases == ("Exception",)
    assert defs["DEFAULT_ATTEMPTS"].kind == "variable"
    assert defs["RetryPolicy.cap"].kind == "variable"
    assert "fallback_delay" in defs  # under an `if` at module level
    assert defs["fetch_with_retry"].signature.startswith("async def fetch_with_retry(")
    # Locals of a function are not symbols.
    assert not any(q.endswith(".delay") or q.endswith(".attempt") for q in defs)


def test_typescript_classes_arrows_interfaces_and_namespaces():
    defs = _defs("retry.ts")
    delay = defs["RetryPolicy.delay"]
    assert delay.kind == "method" and delay.signature == "delay(attempt: number): number"
    assert delay.doc == "Milliseconds to wait before `attempt` (0-based)."
    assert delay.text == _lines("retry.ts", delay).strip()
    policy = defs["RetryPolicy"]
    assert policy.bases == ("EventEmitter", "Backoff")
    assert policy.text.startswith("@sealed") and policy.doc.startswith("How often")
    assert defs["RetryPolicy.onRetry"].kind == "method"  # an arrow function in a field
    assert defs["RetryPolicy.remaining"].kind == "method"  # a getter
    assert defs["fullJitter"].kind == "function"
    assert defs["fullJitter"].doc == "Full jitter: a uniform pick in [0, ms)."
    assert defs["noJitter"].kind == "function"
    assert defs["withRetry.run"].kind == "function"
    assert defs["Backoff"].kind == "interface" and defs["Backoff.delay"].kind == "method"
    assert defs["Jitter"].kind == "type" and defs["RetryState"].kind == "enum"
    assert defs["Transport.send"].kind == "method"  # abstract
    assert defs["Retry.once"].kind == "function"  # inside a namespace
    assert defs["DEFAULT_ATTEMPTS"].kind == "variable"
    # Exported declarations keep `export` in their text, so an edit of it is seen.
    assert defs["withRetry"].text.startswith("export async function withRetry<T>(")


def test_javascript_jsx_components():
    defs = _defs("widget.jsx")
    assert defs["RetryButton"].kind == "function"
    assert defs["RetryButton"].doc == "A button that retries its action."
    assert defs["RetryButton.onClick"].kind == "function"
    assert defs["Spinner"].kind == "function"
    assert defs["Panel"].bases == ("Component",)
    assert defs["Panel.handleClose"].kind == "method"
    assert defs["Panel.render"].kind == "method"
    assert defs["ids"].signature == "function* ids()"


def test_go_methods_on_pointer_and_value_receivers():
    defs = _defs("retry.go")
    backoff = defs["Policy.Backoff"]
    assert backoff.kind == "method"
    assert backoff.signature == "func (p *Policy) Backoff(n int) time.Duration"
    assert backoff.doc == ("Backoff returns the delay before attempt n (0-based).\n"
                           "It doubles each time, capped at MaxDelay.")
    assert backoff.text == _lines("retry.go", backoff)
    assert defs["Policy.String"].kind == "method"  # value receiver
    assert defs["Stack.Push"].kind == "method"  # generic receiver
    assert defs["Policy"].kind == "struct" and defs["Backoff"].kind == "interface"
    assert defs["Backoff.Delay"].kind == "method"
    assert defs["Do"].kind == "function"
    assert defs["BaseDelay"].doc == "BaseDelay is the first wait."
    assert defs["DefaultAttempts"].signature == "const DefaultAttempts = 5"
    assert defs["Clock"].kind == "type"


def test_rust_impl_blocks_traits_and_modules():
    defs = _defs("retry.rs")
    backoff = defs["RetryPolicy.backoff"]
    assert backoff.kind == "method"
    assert backoff.signature == "pub fn backoff(&self, attempt: u32) -> Duration"
    assert backoff.doc == "The delay before `attempt` (0-based), doubling each time."
    assert defs["RetryPolicy.new"].kind == "method"
    assert defs["RetryPolicy.fmt"].kind == "method"  # from `impl fmt::Display for`
    policy = defs["RetryPolicy"]
    assert policy.kind == "struct" and policy.text.startswith("#[derive(Debug, Clone)]")
    assert policy.doc == "How often and how long to retry."
    assert "Display" in policy.bases
    assert defs["Sleeper"].kind == "trait" and defs["Sleeper"].bases == ("Send",)
    assert defs["Sleeper.sleep"].kind == "method" and defs["Sleeper.sleep"].doc == "Block for `d`."
    assert defs["Sleeper.nap"].kind == "method"
    assert defs["clock.Real.sleep"].kind == "method"
    assert defs["clock.Real"].bases == ("Sleeper",)
    assert defs["tests.backoff_doubles"].text.startswith("#[test]")
    assert defs["Outcome"].kind == "enum" and defs["DEFAULT_ATTEMPTS"].kind == "variable"


def test_find_returns_the_symbol_or_none():
    text = (FIXTURES / "retry.py").read_text()
    found = find(text, "python", "RetryPolicy.backoff")
    assert found is not None and found.start_line == 29 and found.end_line == 32
    assert find(text, "python", "RetryPolicy.nope") is None
    assert find(text, "python", "backoff") is None  # a method is named by its class


def test_moving_a_symbol_keeps_its_text():
    """What a symbol anchor relies on: lines added above change the lines, not the text."""
    text = (FIXTURES / "retry.ts").read_text()
    before = find(text, "typescript", "RetryPolicy.delay")
    after = find("// a new header\n\n" + text, "typescript", "RetryPolicy.delay")
    assert before is not None and after is not None
    assert after.start_line == before.start_line + 2 and after.text == before.text


def test_broken_code_still_yields_the_intact_definitions():
    text = "def ok(a):\n    return a\n\ndef broken(:\n    pass\n\nclass C:\n    def m(self): ...\n"
    names = [s.qualname for s in definitions(text, "python")]
    assert "ok" in names and "C.m" in names


def test_unknown_language_is_an_error():
    with pytest.raises(ValueError, match="unknown language"):
        definitions("x", "cobol")


def test_non_utf8_bytes_do_not_raise():
    text = b"def f():\n    return '\xff'\n"
    [symbol] = definitions(text, "python")
    assert symbol.qualname == "f" and "\ufffd" in symbol.text
