"""Definitions in source files, by qualified name, parsed with tree-sitter's packaged grammars.

A symbol is named the way a person names it in a fact: `RetryPolicy.backoff` (a Python or
TypeScript method), `Retry.Backoff` (a Go method, pointer receiver or not), `Foo.len` (a Rust
method from any `impl Foo` or `impl Trait for Foo` block), `Trait.method` (a trait or
interface member), `outer.inner` (a function nested in a function), `mod.f` (a Rust module or
a TypeScript namespace). The name is what a fact's `path::qualname` source names, and what the
symbol graph indexes, so both read definitions from this one module.

Why tree-sitter: the grammars are the ones editors use, packaged as small binary wheels
(about 1.5 MB for the runtime and the five grammars together, no further dependencies), they
parse a file with syntax errors instead of refusing it (an agent's checkout is often mid-edit),
and one walk per language gives the same `Symbol` for Python, JavaScript/TypeScript, Go and
Rust. Python's own `ast` would cover one language and fail on the first syntax error.

`Symbol.text` is the definition's own source, decorators (Python, TypeScript) and attributes
(Rust) included, since they change what the definition does; `signature` is the head of the
definition up to its body, whitespace collapsed; `doc` the docstring (Python) or the doc
comment just above it (`/** */` in JS/TS, `//` in Go, `///` in Rust), cleaned of its markers.
Lines are 1-based and inclusive.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cache
from typing import ClassVar

from factbank_common.schema import SYMBOL_LANGUAGES

LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust")

# .tsx needs TypeScript's TSX grammar (`<T>(x)` is a cast in .ts and an element in .tsx);
# JavaScript's grammar parses JSX itself. The map is the wire contract's (schema.py): the
# server checks a symbol source's language (`path::Qualified.name`) by the same suffixes.
_EXTENSIONS = SYMBOL_LANGUAGES


def language_for(path: str) -> str | None:
    """The language of `path` by its extension (`python`, `javascript`, `typescript`, `tsx`,
    `go`, `rust`), or None for a file this module does not parse."""
    # os.path, not PurePosixPath: the graph asks this of every file on each update, and
    # constructing a path object made it a third of a no-change update (~40 µs a call).
    return _EXTENSIONS.get(os.path.splitext(path)[1].lower())


@dataclass(frozen=True)
class Symbol:
    qualname: str
    kind: str  # class, function, method, interface, struct, enum, trait, type, module, variable
    start_line: int
    end_line: int
    text: str
    signature: str
    doc: str
    bases: tuple[str, ...] = ()  # what a class extends/implements, as written (last segment)
    start_byte: int = field(default=0, repr=False, compare=False)
    end_byte: int = field(default=0, repr=False, compare=False)
    name_byte: int = field(default=-1, repr=False, compare=False)  # where the name is written

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


@cache
def grammar_of(language: str):
    from tree_sitter import Language

    if language == "python":
        import tree_sitter_python as grammar
        return Language(grammar.language())
    if language == "javascript":
        import tree_sitter_javascript as grammar
        return Language(grammar.language())
    if language in ("typescript", "tsx"):
        import tree_sitter_typescript as grammar
        return Language(grammar.language_typescript() if language == "typescript"
                        else grammar.language_tsx())
    if language == "go":
        import tree_sitter_go as grammar
        return Language(grammar.language())
    if language == "rust":
        import tree_sitter_rust as grammar
        return Language(grammar.language())
    raise ValueError(f"unknown language {language!r} (one of {', '.join(LANGUAGES)})")


def parse(text: str | bytes, language: str):
    """The tree-sitter tree of `text` and its bytes. A Parser is cheap to make (a few µs) and
    is not safe to share across threads, so each call makes its own."""
    from tree_sitter import Parser

    src = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return Parser(grammar_of(language)).parse(src), src


def definitions(text: str | bytes, language: str) -> list[Symbol]:
    """Every definition in `text`, in source order (a container before its members)."""
    tree, src = parse(text, language)
    return definitions_in(tree.root_node, src, language)


def definitions_in(root, src: bytes, language: str) -> list[Symbol]:
    """Definitions of an already parsed tree (the graph parses once and reads it twice)."""
    walker = _Walker(src, language)
    if language == "python":
        walker.python(root, [], in_class=False, module_level=True)
    elif language in ("javascript", "typescript", "tsx"):
        walker.js(root, [], top=True)
    elif language == "go":
        walker.go(root)
    elif language == "rust":
        walker.rust(root, [], owner=None)
        traits: dict[str, list[str]] = {}
        for typ, trait in walker.impls:
            if trait:
                traits.setdefault(typ, []).append(trait)
        walker.out = [replace(s, bases=tuple(dict.fromkeys([*s.bases, *traits[s.qualname]])))
                      if s.qualname in traits and s.kind in ("struct", "enum", "type")
                      else s for s in walker.out]
    else:
        raise ValueError(f"unknown language {language!r} (one of {', '.join(LANGUAGES)})")
    return walker.out


def find(text: str | bytes, language: str, qualname: str) -> Symbol | None:
    """The definition named `qualname`, or None. When a name is defined twice (a property's
    getter and setter, `impl Display` and `impl Debug` both defining `fmt`), the first."""
    for symbol in definitions(text, language):
        if symbol.qualname == qualname:
            return symbol
    return None


_SPACE = re.compile(r"\s+")


def _collapse(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


class _Walker:
    def __init__(self, src: bytes, language: str):
        self.src = src
        self.language = language
        self.out: list[Symbol] = []
        # `impl Trait for Type` blocks (the type's qualname, the trait): the trait becomes one
        # of the type's bases when both are in the same file.
        self.impls: list[tuple[str, str | None]] = []

    # -- helpers -----------------------------------------------------------------------------

    def t(self, node) -> str:
        return self.src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def emit(self, scope: list[str], name: str, kind: str, outer, node, *, start_byte=None,
             body=None, doc: str = "", bases: tuple[str, ...] = (), head: str = "") -> str:
        start = outer.start_byte if start_byte is None else start_byte
        end = outer.end_byte
        head_end = body.start_byte if body is not None else node.end_byte
        signature = self.src[node.start_byte:head_end].decode("utf-8", "replace")
        if body is None:
            signature = signature.split("\n", 1)[0]
        signature = head + _collapse(signature).rstrip(":;{ ").strip()
        if len(signature) > 300:
            signature = signature[:297] + "..."
        start_line = self.src.count(b"\n", 0, start) + 1
        end_line = outer.end_point[0] + 1
        if outer.end_point[1] == 0 and end_line > start_line:
            end_line -= 1
        qualname = ".".join([*scope, name])
        name_node = node.child_by_field_name("name")
        self.out.append(Symbol(qualname, kind, start_line, end_line,
                               self.src[start:end].decode("utf-8", "replace"), signature, doc,
                               bases, start, end,
                               name_node.start_byte if name_node is not None else -1))
        return qualname

    def comment_doc(self, outer, prefixes: tuple[str, ...], skip: tuple[str, ...] = ()) -> str:
        """The comment block right above `outer` (no blank line between), if it starts with
        one of `prefixes`; node types in `skip` (Rust attributes) may sit between them."""
        node = outer.prev_sibling
        while node is not None and node.type in skip:
            node = node.prev_sibling
        lines: list[str] = []
        below = outer.start_point[0]
        if node is not None and outer.prev_sibling is not None and outer.prev_sibling.type in skip:
            below = outer.prev_sibling.start_point[0]
            probe = outer.prev_sibling
            while probe.prev_sibling is not None and probe.prev_sibling.type in skip:
                probe = probe.prev_sibling
            below = probe.start_point[0]
        while node is not None and "comment" in node.type:
            if node.end_point[0] < below - 1:
                break
            text = self.t(node)
            if not text.startswith(prefixes):
                break
            lines.insert(0, text)
            below = node.start_point[0]
            node = node.prev_sibling
            if not text.startswith(("//", "#")):
                break  # one block comment is the whole doc
        return _clean_comment("\n".join(lines))

    # -- Python ------------------------------------------------------------------------------

    _PY_BLOCKS = frozenset({
        "block", "if_statement", "elif_clause", "else_clause", "try_statement",
        "except_clause", "finally_clause", "with_statement", "for_statement",
        "while_statement", "match_statement", "case_clause",
    })

    def python(self, node, scope: list[str], *, in_class: bool, module_level: bool) -> None:
        for child in node.named_children:
            outer, inner = child, child
            if child.type == "decorated_definition":
                inner = child.child_by_field_name("definition")
                if inner is None:
                    continue
            if inner.type == "function_definition":
                name = inner.child_by_field_name("name")
                body = inner.child_by_field_name("body")
                if name is None:
                    continue
                qual = self.emit(scope, self.t(name), "method" if in_class else "function",
                                 outer, inner, body=body, doc=self._py_doc(body))
                if body is not None:
                    self.python(body, qual.split("."), in_class=False, module_level=False)
            elif inner.type == "class_definition":
                name = inner.child_by_field_name("name")
                body = inner.child_by_field_name("body")
                if name is None:
                    continue
                bases: list[str] = []
                supers = inner.child_by_field_name("superclasses")
                if supers is not None:
                    for arg in supers.named_children:
                        if arg.type in ("identifier", "attribute"):
                            bases.append(self.t(arg).rsplit(".", 1)[-1])
                qual = self.emit(scope, self.t(name), "class", outer, inner, body=body,
                                 doc=self._py_doc(body), bases=tuple(bases))
                if body is not None:
                    self.python(body, qual.split("."), in_class=True, module_level=False)
            elif child.type == "expression_statement" and (module_level or in_class):
                assign = child.named_children[0] if child.named_children else None
                if assign is not None and assign.type == "assignment":
                    left = assign.child_by_field_name("left")
                    if left is not None and left.type == "identifier":
                        self.emit(scope, self.t(left), "variable", child, child)
            elif child.type in self._PY_BLOCKS:
                self.python(child, scope, in_class=in_class, module_level=module_level)

    def _py_doc(self, body) -> str:
        if body is None or not body.named_children:
            return ""
        first = body.named_children[0]
        if first.type != "expression_statement" or not first.named_children:
            return ""
        string = first.named_children[0]
        if string.type != "string":
            return ""
        raw = self.t(string)
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw.strip("rRuUbBfF").strip("'\"")
        return inspect.cleandoc(value) if isinstance(value, str) else ""

    # -- JavaScript / TypeScript -------------------------------------------------------------

    _JS_BLOCKS = frozenset({
        "statement_block", "if_statement", "else_clause", "try_statement", "catch_clause",
        "finally_clause", "for_statement", "for_in_statement", "while_statement",
        "do_statement", "switch_statement", "switch_body", "switch_case", "switch_default",
        "labeled_statement", "ambient_declaration",
    })
    _JS_FUNCTIONS = frozenset({"arrow_function", "function_expression", "function",
                               "generator_function"})
    _JS_CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "class"})

    def _js_doc(self, outer) -> str:
        return self.comment_doc(outer, ("/**",))

    def js(self, node, scope: list[str], *, top: bool) -> None:
        for child in node.named_children:
            outer, inner = child, child
            if child.type == "export_statement":
                inner = child.child_by_field_name("declaration") or child.child_by_field_name(
                    "value")
                if inner is None:
                    continue
            if inner.type == "expression_statement" and inner.named_children and \
                    inner.named_children[0].type in ("internal_module", "module"):
                inner = inner.named_children[0]
            self._js_one(outer, inner, scope, top=top)

    def _js_one(self, outer, inner, scope: list[str], *, top: bool) -> None:
        kind_of = {"function_declaration": "function",
                   "generator_function_declaration": "function",
                   "function_signature": "function",
                   "interface_declaration": "interface", "type_alias_declaration": "type",
                   "enum_declaration": "enum"}
        name_node = inner.child_by_field_name("name")
        if inner.type in kind_of and name_node is not None:
            body = inner.child_by_field_name("body")
            qual = self.emit(scope, self.t(name_node), kind_of[inner.type], outer, inner,
                             body=body if inner.type != "type_alias_declaration" else None,
                             doc=self._js_doc(outer),
                             bases=self._js_bases(inner))
            if inner.type == "interface_declaration" and body is not None:
                self._js_members(body, qual.split("."))
            elif body is not None and kind_of[inner.type] == "function":
                self.js(body, qual.split("."), top=False)
        elif inner.type in self._JS_CLASSES and name_node is not None:
            self._js_class(outer, inner, scope, self.t(name_node))
        elif inner.type in ("internal_module", "module") and name_node is not None:
            body = inner.child_by_field_name("body")
            name = self.t(name_node).strip("'\"")
            qual = self.emit(scope, name, "module", outer, inner, body=body,
                             doc=self._js_doc(outer))
            if body is not None:
                self.js(body, qual.split("."), top=True)
        elif inner.type in ("lexical_declaration", "variable_declaration"):
            declarators = [d for d in inner.named_children if d.type == "variable_declarator"]
            for declarator in declarators:
                name = declarator.child_by_field_name("name")
                value = declarator.child_by_field_name("value")
                if name is None or name.type != "identifier":
                    continue
                span = outer if len(declarators) == 1 else declarator
                if value is not None and value.type in self._JS_FUNCTIONS:
                    body = value.child_by_field_name("body")
                    qual = self.emit(scope, self.t(name), "function", span, inner,
                                     body=body, doc=self._js_doc(outer))
                    if body is not None and body.type == "statement_block":
                        self.js(body, qual.split("."), top=False)
                elif value is not None and value.type == "class":
                    self._js_class(span, value, scope, self.t(name), head=inner)
                elif top:
                    self.emit(scope, self.t(name), "variable", span, inner,
                              doc=self._js_doc(outer))
        elif inner.type in self._JS_BLOCKS:
            self.js(inner, scope, top=top and inner.type == "ambient_declaration")

    def _js_bases(self, node) -> tuple[str, ...]:
        """`extends A implements B, C<T>` (classes) or `extends A, B` (interfaces) -> names."""
        bases: list[str] = []
        for child in node.named_children:
            clauses = [child]
            if child.type == "class_heritage":
                clauses = [c for c in child.named_children
                           if c.type in ("extends_clause", "implements_clause")] or [child]
            elif child.type != "extends_type_clause":
                continue
            for clause in clauses:
                for target in clause.named_children:
                    name = _last_name(self, target)
                    if name:
                        bases.append(name)
        return tuple(dict.fromkeys(bases))

    def _js_class(self, outer, inner, scope: list[str], name: str, head=None) -> None:
        body = inner.child_by_field_name("body")
        qual = self.emit(scope, name, "class", outer, head or inner, body=body,
                         doc=self._js_doc(outer), bases=self._js_bases(inner))
        if body is not None:
            self._js_members(body, qual.split("."))

    def _js_members(self, body, scope: list[str]) -> None:
        for member in body.named_children:
            name = member.child_by_field_name("name") or member.child_by_field_name("property")
            if name is None:
                continue
            outer = member
            prev = member.prev_named_sibling
            start = None
            while prev is not None and prev.type == "decorator":
                start = prev.start_byte
                prev = prev.prev_named_sibling
            if member.type in ("method_definition", "method_signature",
                               "abstract_method_signature"):
                fbody = member.child_by_field_name("body")
                qual = self.emit(scope, self.t(name), "method", outer, member, body=fbody,
                                 start_byte=start, doc=self._js_doc(member))
                if fbody is not None:
                    self.js(fbody, qual.split("."), top=False)
            elif member.type in ("public_field_definition", "field_definition"):
                value = member.child_by_field_name("value")
                if value is not None and value.type in self._JS_FUNCTIONS:
                    fbody = value.child_by_field_name("body")
                    qual = self.emit(scope, self.t(name), "method", outer, member, body=fbody,
                                     start_byte=start, doc=self._js_doc(member))
                    if fbody is not None and fbody.type == "statement_block":
                        self.js(fbody, qual.split("."), top=False)

    # -- Go ----------------------------------------------------------------------------------

    def _go_doc(self, outer) -> str:
        return self.comment_doc(outer, ("//", "/*"))

    def go(self, root) -> None:
        for child in root.named_children:
            if child.type == "function_declaration":
                name = child.child_by_field_name("name")
                if name is not None:
                    self.emit([], self.t(name), "function", child, child,
                              body=child.child_by_field_name("body"), doc=self._go_doc(child))
            elif child.type == "method_declaration":
                name = child.child_by_field_name("name")
                receiver = child.child_by_field_name("receiver")
                owner = _go_receiver(self, receiver)
                if name is not None:
                    self.emit([owner] if owner else [], self.t(name), "method", child, child,
                              body=child.child_by_field_name("body"), doc=self._go_doc(child))
            elif child.type == "type_declaration":
                specs = [s for s in child.named_children if s.type in ("type_spec", "type_alias")]
                for spec in specs:
                    name = spec.child_by_field_name("name")
                    typ = spec.child_by_field_name("type")
                    if name is None:
                        continue
                    kind = {"struct_type": "struct", "interface_type": "interface"}.get(
                        typ.type if typ is not None else "", "type")
                    span = child if len(specs) == 1 else spec
                    bases = ()
                    if typ is not None and typ.type in ("struct_type", "interface_type"):
                        bases = _go_embedded(self, typ)
                    qual = self.emit([], self.t(name), kind, span, spec,
                                     head="type ",
                                     doc=self._go_doc(span if span is child else spec)
                                     or self._go_doc(child), bases=bases)
                    if kind == "interface":
                        for elem in typ.named_children:
                            mname = elem.child_by_field_name("name")
                            if elem.type == "method_elem" and mname is not None:
                                self.emit([qual], self.t(mname), "method", elem, elem,
                                          doc=self._go_doc(elem))
            elif child.type in ("const_declaration", "var_declaration"):
                specs = [s for s in _descendants(child) if s.type in ("const_spec", "var_spec")]
                for spec in specs:
                    for name in spec.children_by_field_name("name"):
                        span = child if len(specs) == 1 else spec
                        self.emit([], self.t(name), "variable", span, spec,
                                  head=child.children[0].type + " ",
                                  doc=self._go_doc(span) or self._go_doc(child))

    # -- Rust --------------------------------------------------------------------------------

    _RUST_KINDS: ClassVar[dict[str, str]] = {
        "struct_item": "struct", "enum_item": "enum", "union_item": "struct",
        "type_item": "type", "const_item": "variable", "static_item": "variable",
        "macro_definition": "macro"}

    def _rust_doc(self, item) -> str:
        return self.comment_doc(item, ("///", "/**", "//!"), skip=("attribute_item",))

    def rust(self, node, scope: list[str], *, owner: str | None) -> None:
        for child in node.named_children:
            start = None
            prev = child.prev_named_sibling
            while prev is not None and prev.type == "attribute_item":
                start = prev.start_byte
                prev = prev.prev_named_sibling
            name = child.child_by_field_name("name")
            body = child.child_by_field_name("body")
            if child.type in ("function_item", "function_signature_item") and name is not None:
                self.emit(scope, self.t(name), "method" if owner else "function", child, child,
                          start_byte=start, body=body, doc=self._rust_doc(child))
            elif child.type in self._RUST_KINDS and name is not None:
                kind = self._RUST_KINDS[child.type]
                self.emit(scope, self.t(name), kind, child, child, start_byte=start,
                          body=body if kind in ("struct", "enum") else None,
                          doc=self._rust_doc(child))
            elif child.type == "trait_item" and name is not None:
                bounds = child.child_by_field_name("bounds")
                bases = tuple(self.t(n) for n in _descendants(bounds)
                              if n.type == "type_identifier") if bounds is not None else ()
                qual = self.emit(scope, self.t(name), "trait", child, child, start_byte=start,
                                 body=body, doc=self._rust_doc(child), bases=bases)
                if body is not None:
                    self.rust(body, qual.split("."), owner=qual)
            elif child.type == "impl_item":
                typ = _rust_type_name(self, child.child_by_field_name("type"))
                trait = _rust_type_name(self, child.child_by_field_name("trait"))
                if body is not None and typ:
                    self.impls.append((".".join([*scope, typ]), trait))
                    self.rust(body, [*scope, typ], owner=typ)
            elif child.type == "mod_item" and name is not None and body is not None:
                qual = self.emit(scope, self.t(name), "module", child, child, start_byte=start,
                                 body=body, doc=self._rust_doc(child))
                self.rust(body, qual.split("."), owner=None)



def _descendants(node) -> Iterator:
    if node is None:
        return
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.named_children))


def _last_name(walker: _Walker, node) -> str | None:
    """The name an expression or type ends in: `a.b.C` -> C, `C<T>` -> C, `mixin(A)` -> None."""
    if node.type in ("identifier", "type_identifier", "property_identifier"):
        return walker.t(node)
    if node.type == "member_expression":
        prop = node.child_by_field_name("property")
        return walker.t(prop) if prop is not None else None
    if node.type in ("generic_type", "nested_type_identifier"):
        inner = node.child_by_field_name("name")
        if inner is None and node.named_children:
            inner = node.named_children[-1] if node.type == "nested_type_identifier" \
                else node.named_children[0]
        return _last_name(walker, inner) if inner is not None else None
    return None


def _go_receiver(walker: _Walker, receiver) -> str | None:
    """`(r *Retry)`, `(Retry)`, `(s *Stack[T])` -> the receiver's type name."""
    if receiver is None:
        return None
    for node in _descendants(receiver):
        if node.type == "type_identifier":
            return walker.t(node)
    return None


def _go_embedded(walker: _Walker, typ) -> tuple[str, ...]:
    """Embedded types of a struct or interface (Go's composition in place of inheritance)."""
    out: list[str] = []
    if typ.type == "struct_type":
        for decl in _descendants(typ):
            if decl.type == "field_declaration" and decl.child_by_field_name("name") is None:
                t = decl.child_by_field_name("type")
                if t is not None:
                    out.append(walker.t(t).lstrip("*").rsplit(".", 1)[-1])
    else:
        for elem in typ.named_children:
            if elem.type == "type_elem":
                out.append(walker.t(elem).rsplit(".", 1)[-1])
    return tuple(out)


def _rust_type_name(walker: _Walker, node) -> str | None:
    """`Foo`, `Foo<T>`, `&mut Foo`, `crate::a::Foo` -> `Foo`."""
    if node is None:
        return None
    if node.type in ("type_identifier", "primitive_type"):
        return walker.t(node)
    if node.type == "scoped_type_identifier":
        return _rust_type_name(walker, node.child_by_field_name("name"))
    if node.type == "generic_type":
        return _rust_type_name(walker, node.child_by_field_name("type"))
    if node.type == "reference_type":
        return _rust_type_name(walker, node.child_by_field_name("type"))
    for child in node.named_children:
        found = _rust_type_name(walker, child)
        if found:
            return found
    return None


_COMMENT_LINE = re.compile(r"^\s*(?:///?!?|#|\*+(?!/))\s?")


def _clean_comment(text: str) -> str:
    if not text:
        return ""
    text = text.strip()
    if text.startswith("/*"):
        text = text[2:]
        text = text.lstrip("*!")
        if text.endswith("*/"):
            text = text[:-2]
    lines = [_COMMENT_LINE.sub("", line, count=1).rstrip() for line in text.splitlines()]
    return inspect.cleandoc("\n".join(lines))
