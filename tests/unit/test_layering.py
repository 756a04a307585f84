"""The server's floors, written once: each import runs down, never up or sideways, and no
modules import each other in a circle.

A room is a package or a module named below; a module belongs to the room with the longest
name that holds it. An import from one room to another must land on a lower floor; inside a
room anything goes but a circle. Every module of the server must sit in a room, so a new folder
is placed here on purpose, and the server may import nothing of the client but the shared wire
contract (`factbank_common`). Read from the source with `ast` (tests/unit/imports_walk.py):
nothing is imported, and imports inside functions count as well.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from tests.unit.imports_walk import imports, module_of, modules

# Top floor first. Each floor imports only the floors below it.
FLOORS: list[list[str]] = [
    ["factbank.cli"],  # the server's commands: `factbank up`, `serve`, `migrate`, admin
    ["factbank.runtime.runner"],  # starts the services under uvicorn
    ["factbank_ingest", "factbank_recall", "factbank_worker"],  # the services' routes
    ["factbank.runtime"],  # the web layer both services share, process lifecycle, embedded pg
    ["factbank.staleness", "factbank.read"],  # verify/check/rules; search, inject
    ["factbank.write", "factbank.timeline"],  # gate, retain, lifecycle, queues; the timeline
    ["factbank.store"],  # pools, migrations, fact rows, banks, audit
    ["factbank.text", "factbank.redact"],  # tokeniser, lexicon, embedder, claims; redaction
    ["factbank.errors", "factbank.trust", "factbank.models", "factbank.observability",
     "factbank.settings"],
    ["factbank_common"],  # the wire contract the client shares
]
PACKAGES = ("factbank", "factbank_ingest", "factbank_recall", "factbank_worker",
            "factbank_common")
# The top package's own `__init__.py` (empty): a namespace, no room.
NAMESPACE = {"factbank"}


def room_of(module: str, floors: list[list[str]]) -> tuple[int, str] | None:
    """(floor index, room) of a module: the longest room name that holds it."""
    best = None
    for i, rooms in enumerate(floors):
        for room in rooms:
            if (module == room or module.startswith(room + ".")) and (
                best is None or len(room) > len(best[1])
            ):
                best = (i, room)
    return best


@functools.cache
def graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> the modules of ours it imports (of every package the project has, so an
    import of the client is seen)."""
    every = modules(["factbank", "factbank_ingest", "factbank_recall", "factbank_worker",
                     "factbank_common", "factbank_client", "factbank_evals"])
    known = set(every)
    out: dict[str, set[str]] = {}
    for name, path in every.items():
        if name.split(".")[0] not in packages:
            continue
        targets = {module_of(i.target, known) for i in imports(name, path, known)}
        out[name] = {t for t in targets if t is not None and t != name}
    return out


def arrows_up(edges: Mapping[str, set[str]], floors: list[list[str]]) -> list[str]:
    """Every import that does not run down a floor, and every module in no room (floors
    counted from the ground, 1)."""
    bad = []
    for source, targets in sorted(edges.items()):
        here = room_of(source, floors)
        if here is None:
            if source not in NAMESPACE:
                bad.append(f"{source}: in no room (place it in FLOORS)")
            continue
        for target in sorted(targets):
            there = room_of(target, floors)
            if there is None:
                bad.append(f"{source} -> {target}: the target is in no room of the server")
            elif there[1] != here[1] and there[0] <= here[0]:
                way = "sideways" if there[0] == here[0] else "up"
                up_from, up_to = len(floors) - here[0], len(floors) - there[0]
                bad.append(f"{source} -> {target}: {way}, from {here[1]} (floor {up_from}) "
                           f"to {there[1]} (floor {up_to})")
    return bad


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        top = stack.pop()
                        on.discard(top)
                        group.append(top)
                        if top == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return sorted(found)


def test_every_import_of_the_server_runs_down_a_floor():
    bad = arrows_up(graph(PACKAGES), FLOORS)
    assert bad == [], "imports against the floors:\n" + "\n".join(bad)


def test_no_modules_of_the_server_import_each_other_in_a_circle():
    found = circles(graph(PACKAGES))
    assert found == [], "circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_rules_see_a_planted_arrow_up_a_sideways_one_and_a_circle():
    """The checks themselves, on a made-up house: an import up a floor, one sideways between
    two rooms of a floor, a module in no room, an import of the client, and a circle."""
    floors = [["app"], ["read", "write"], ["store"]]
    edges = {
        "app.main": {"read.search", "store.db"},
        "read.search": {"store.db", "write.retain"},  # sideways
        "store.db": {"app.main"},  # up
        "store.rows": {"store.db", "factbank_client.cli"},  # out of the house
        "loose": set(),  # in no room
        "write.retain": {"write.gate"},
        "write.gate": {"write.retain"},  # a circle inside a room
    }
    assert arrows_up(edges, floors) == [
        "loose: in no room (place it in FLOORS)",
        "read.search -> write.retain: sideways, from read (floor 2) to write (floor 2)",
        "store.db -> app.main: up, from store (floor 1) to app (floor 3)",
        "store.rows -> factbank_client.cli: the target is in no room of the server",
    ]
    assert circles(edges) == [["app.main", "read.search", "store.db"],
                              ["write.gate", "write.retain"]]
