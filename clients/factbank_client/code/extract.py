"""What one file says about other code: its calls, references, imports (and, from `symbols`, its
definitions and what they inherit), from one parse.

The matching runs in tree-sitter's C query engine (`QueryCursor.matches`), so Python touches
only the captured nodes; a full walk of every node from Python was the cost that mattered
(most nodes of a file are punctuation and literals no caller needs).

A use is one of:

* `call`: `f(x)`, `obj.f(x)`, `Type::f(x)`, `new F()`, a JSX element `<F/>`; `recv` is the
  text before the name (`obj`, `self.policy`, `Type`), empty for a plain call;
* `attr`: `obj.f` not called (a method passed as a callback, a field read);
* `ref`: a bare name (`f` passed as a value, a type in an annotation, a base class);
* `dynamic`: a name only a string holds (`getattr(obj, "f")`, `obj["f"]`): static analysis
  cannot know what it reaches, so it is kept and shown as such.

Each use records the innermost definition it sits in (`owner`, an index into the file's
symbols, or -1 for module level).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import cache

from factbank_client.code import symbols as sym

MAX_RECV = 80  # characters of a receiver expression kept
# Names that are the language's own, not the repository's: never worth a reference row.
_SKIP = frozenset({"self", "cls", "this", "super", "None", "True", "False", "nil", "true",
                   "false", "undefined", "null", "Self", "_"})

_QUERIES = {
    "python": """
(call function: (identifier) @name) @call
(call function: (attribute object: (_) @recv attribute: (identifier) @name)) @call
(attribute object: (_) @recv attribute: (identifier) @name) @attr
(identifier) @ref
(call function: (identifier) @fn arguments: (argument_list (_) . (string (string_content) @dyn))
 (#match? @fn "^(getattr|hasattr|setattr|delattr)$"))
(import_statement) @import
(import_from_statement) @import
""",
    "javascript": """
(call_expression function: (identifier) @name) @call
(call_expression function: (member_expression object: (_) @recv property: (_) @name)) @call
(new_expression constructor: (identifier) @name) @call
(new_expression constructor: (member_expression object: (_) @recv property: (_) @name)) @call
(member_expression object: (_) @recv property: (_) @name) @attr
(identifier) @ref
(shorthand_property_identifier) @ref
(subscript_expression index: (string (string_fragment) @dyn))
(import_statement) @import
(call_expression function: (identifier) @req
 arguments: (arguments (string (string_fragment) @module)) (#eq? @req "require"))
""",
    "go": """
(call_expression function: (identifier) @name) @call
(call_expression
 function: (selector_expression operand: (_) @recv field: (field_identifier) @name)) @call
(selector_expression operand: (_) @recv field: (field_identifier) @name) @attr
(identifier) @ref
(type_identifier) @ref
(import_spec) @import
""",
    "rust": """
(call_expression function: (identifier) @name) @call
(call_expression
 function: (field_expression value: (_) @recv field: (field_identifier) @name)) @call
(call_expression function: (scoped_identifier path: (_) @recv name: (identifier) @name)) @call
(call_expression function: (generic_function function: (identifier) @name)) @call
(call_expression function: (generic_function
 function: (field_expression value: (_) @recv field: (field_identifier) @name))) @call
(call_expression function: (generic_function
 function: (scoped_identifier path: (_) @recv name: (identifier) @name))) @call
(field_expression value: (_) @recv field: (field_identifier) @name) @attr
(scoped_identifier path: (_) @recv name: (identifier) @name) @attr
(identifier) @ref
(type_identifier) @ref
(use_declaration) @import
""",
}
_TS_EXTRA = """
(type_identifier) @ref
"""
# A JSX element `<RetryButton/>` renders (calls) the component; .ts has no JSX.
_JSX_EXTRA = """
(jsx_opening_element name: (identifier) @name) @call
(jsx_self_closing_element name: (identifier) @name) @call
"""


@cache
def _query(language: str):
    from tree_sitter import Query

    family = "javascript" if language in ("typescript", "tsx") else language
    text = _QUERIES[family]
    if language in ("typescript", "tsx"):
        text += _TS_EXTRA
    if language in ("javascript", "tsx"):
        text += _JSX_EXTRA
    return Query(sym.grammar_of(language), text)


@dataclass
class Use:
    kind: str  # call, attr, ref, dynamic
    name: str
    recv: str
    line: int
    owner: int  # index into FileFacts.symbols, -1 at module level


@dataclass
class Import:
    module: str  # as written: `a.b`, `./m`, `github.com/x/y`, `crate::a`
    name: str | None  # the imported name (`from m import name`), None for the module itself
    alias: str  # the name it is bound to in this file
    line: int


@dataclass
class FileFacts:
    language: str
    symbols: list[sym.Symbol]
    uses: list[Use] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)  # each symbol's container, or -1


def extract(text: str | bytes, language: str) -> FileFacts:
    tree, src = sym.parse(text, language)
    root = tree.root_node
    defs = sym.definitions_in(root, src, language)
    facts = FileFacts(language, defs)
    starts = [s.start_byte for s in defs]
    facts.parents = _parents(defs)
    name_bytes = {s.name_byte for s in defs}

    def owner(byte: int) -> int:
        i = bisect.bisect_right(starts, byte) - 1
        while i >= 0 and not (defs[i].start_byte <= byte < defs[i].end_byte):
            i = facts.parents[i]
        return i

    def text_of(node) -> str:
        return src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    from tree_sitter import QueryCursor

    seen: set[int] = set()  # start bytes of name nodes already recorded
    calls, attrs, refs = [], [], []
    import_spans: list[tuple[int, int]] = []
    for _pattern, caps in QueryCursor(_query(language)).matches(root):
        if "import" in caps:
            node = caps["import"][0]
            import_spans.append((node.start_byte, node.end_byte))
            facts.imports.extend(_imports(language, node, text_of))
        elif "module" in caps:  # require('x')
            node = caps["module"][0]
            facts.imports.append(Import(text_of(node), None, "", node.start_point[0] + 1))
        elif "dyn" in caps:
            node = caps["dyn"][0]
            value = text_of(node)
            if re.fullmatch(r"[A-Za-z_]\w*", value):
                facts.uses.append(Use("dynamic", value, "", node.start_point[0] + 1,
                                      owner(node.start_byte)))
        elif "call" in caps:
            calls.append(caps)
        elif "attr" in caps:
            attrs.append(caps)
        elif "ref" in caps:
            refs.append(caps["ref"][0])
    for kind, group in (("call", calls), ("attr", attrs)):
        for caps in group:
            node = caps["name"][0]
            if node.start_byte in seen:
                continue
            seen.add(node.start_byte)
            recv = caps.get("recv")
            recv_text = _squash(text_of(recv[0])) if recv else ""
            if recv and node.parent is not None and node.parent.type == "scoped_identifier":
                recv_text += "::"  # a Rust path (`Type::f`, `module::f`), not a value's field
            facts.uses.append(Use(kind, text_of(node), recv_text,
                                  node.start_point[0] + 1, owner(node.start_byte)))
    import_starts = [a for a, _ in import_spans]
    for node in refs:
        if node.start_byte in seen or node.start_byte in name_bytes:
            continue
        i = bisect.bisect_right(import_starts, node.start_byte) - 1
        if i >= 0 and node.start_byte < import_spans[i][1]:
            continue  # the import itself: listed as an import, not as a use
        name = text_of(node)
        if len(name) < 2 or name in _SKIP:
            continue
        seen.add(node.start_byte)
        at = owner(node.start_byte)
        line = node.start_point[0] + 1
        if at >= 0 and defs[at].name == name and line == defs[at].start_line:
            continue  # the definition's own name (a variable, a const arrow function)
        facts.uses.append(Use("ref", name, "", line, at))
    return facts


def _squash(text: str) -> str:
    text = re.sub(r"\s+", "", text)
    return text if len(text) <= MAX_RECV else text[: MAX_RECV - 1] + "…"


def _parents(defs: list[sym.Symbol]) -> list[int]:
    parents: list[int] = []
    stack: list[int] = []
    for i, s in enumerate(defs):
        while stack and not (defs[stack[-1]].start_byte <= s.start_byte
                             and s.end_byte <= defs[stack[-1]].end_byte):
            stack.pop()
        parents.append(stack[-1] if stack else -1)
        stack.append(i)
    return parents


def _imports(language: str, node, text_of) -> list[Import]:
    line = node.start_point[0] + 1
    out: list[Import] = []
    if language == "python":
        if node.type == "import_statement":
            for child in node.named_children:
                if child.type == "aliased_import":
                    module = text_of(child.child_by_field_name("name"))
                    out.append(Import(module, None, text_of(child.child_by_field_name("alias")),
                                      line))
                elif child.type == "dotted_name":
                    module = text_of(child)
                    out.append(Import(module, None, module.split(".")[0], line))
        else:
            module_node = node.child_by_field_name("module_name")
            module = text_of(module_node) if module_node is not None else ""
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    name = text_of(child.child_by_field_name("name"))
                    out.append(Import(module, name, text_of(child.child_by_field_name("alias")),
                                      line))
                else:
                    name = text_of(child)
                    out.append(Import(module, name, name.split(".")[-1], line))
            if any(c.type == "wildcard_import" for c in node.named_children):
                out.append(Import(module, "*", "*", line))
    elif language in ("javascript", "typescript", "tsx"):
        source = node.child_by_field_name("source")
        module = text_of(source).strip("'\"`") if source is not None else ""
        for clause in node.named_children:
            if clause.type != "import_clause":
                continue
            for part in clause.named_children:
                if part.type == "identifier":
                    out.append(Import(module, "default", text_of(part), line))
                elif part.type == "namespace_import":
                    ident = next((c for c in part.named_children if c.type == "identifier"), None)
                    if ident is not None:
                        out.append(Import(module, None, text_of(ident), line))
                elif part.type == "named_imports":
                    for spec in part.named_children:
                        if spec.type != "import_specifier":
                            continue
                        name = text_of(spec.child_by_field_name("name"))
                        alias = spec.child_by_field_name("alias")
                        out.append(Import(module, name, text_of(alias) if alias else name, line))
        if not out:
            out.append(Import(module, None, "", line))
    elif language == "go":
        path = node.child_by_field_name("path")
        module = text_of(path).strip('"`') if path is not None else ""
        name = node.child_by_field_name("name")
        out.append(Import(module, None, text_of(name) if name is not None
                          else module.rsplit("/", 1)[-1], line))
    elif language == "rust":
        arg = node.child_by_field_name("argument")
        if arg is not None:
            _rust_use(arg, "", out, line, text_of)
    return out


def _rust_use(node, prefix: str, out: list[Import], line: int, text_of) -> None:
    """`use a::b::{c, d as e, f::*};` -> (a::b, c, c), (a::b, d, e), (a::b::f, *, *)."""
    def join(a, b):
        return (f"{a}::{b}" if a else b)
    if node.type == "scoped_identifier":
        path = node.child_by_field_name("path")
        name = text_of(node.child_by_field_name("name"))
        module = join(prefix, text_of(path)) if path is not None else prefix
        out.append(Import(module, name, name, line))
    elif node.type == "identifier":
        name = text_of(node)
        out.append(Import(prefix, name, name, line))
    elif node.type == "use_as_clause":
        path = node.child_by_field_name("path")
        alias = text_of(node.child_by_field_name("alias"))
        full = join(prefix, text_of(path))
        module, _, name = full.rpartition("::")
        out.append(Import(module, name, alias, line))
    elif node.type == "scoped_use_list":
        path = node.child_by_field_name("path")
        base = join(prefix, text_of(path)) if path is not None else prefix
        lst = node.child_by_field_name("list")
        for child in (lst.named_children if lst is not None else []):
            _rust_use(child, base, out, line, text_of)
    elif node.type == "use_list":
        for child in node.named_children:
            _rust_use(child, prefix, out, line, text_of)
    elif node.type == "use_wildcard":
        inner = node.named_children[0] if node.named_children else None
        module = join(prefix, text_of(inner)) if inner is not None else prefix
        out.append(Import(module, "*", "*", line))
