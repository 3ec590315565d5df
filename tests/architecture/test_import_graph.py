"""The module import graph of ``src/odradek``, built from the source with :mod:`ast`, has no
circle and no import that points up a layer.

Every import counts: module-level ones, function-local ones (lazy imports still tie two
modules together) and ``if TYPE_CHECKING:`` ones (a type is a dependency too). The layers and
the imports that must never exist are read from ``layers.json`` next to this file (its ``never``
rules); a part is a list of path prefixes and the most specific prefix that matches a file
names its part.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = SRC / "odradek"
LAYERS = Path(__file__).with_name("layers.json")
"""The parts of the code (path prefixes), the arrows between them and the imports that must
never exist, with the reason for each."""


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (both dotted module names) at ``line`` of ``source``."""

    source: str
    target: str
    line: int


def module_name(path: Path) -> str:
    """``src/odradek/broker/api.py`` -> ``odradek.broker.api``; a package is its ``__init__``."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name. A compiled extension (a ``.c`` source built
    next to its package) is a module too, so that ``from .. import _speedups`` is an edge to it
    and not to the package that holds it."""
    found = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    for c in sorted(PACKAGE.rglob("*.c")):
        found.setdefault(module_name(c), c)
    return found


def _resolve(name: str, known: Mapping[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies inside (``a.b.C`` -> ``a.b``)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_in(
    name: str, source: str, known: Mapping[str, Path], *, is_package: bool = False
) -> Iterator[Edge]:
    """Every import of a known module in the source of module ``name``, at any depth of the
    syntax tree: module level, inside functions and classes, under ``if TYPE_CHECKING:``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, known)
                if target is not None:
                    yield Edge(name, target, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            for alias in node.names:
                # ``from pkg import sub`` is an import of the submodule when there is one
                sub = f"{mod}.{alias.name}"
                target = sub if sub in known else _resolve(mod, known)
                if target is not None:
                    yield Edge(name, target, node.lineno)


def imports_of(name: str, path: Path, known: Mapping[str, Path]) -> Iterator[Edge]:
    if path.suffix != ".py":
        return iter(())
    return imports_in(name, path.read_text(), known, is_package=path.name == "__init__.py")


def graph() -> dict[str, list[Edge]]:
    known = modules()
    out: dict[str, list[Edge]] = {}
    for name, path in known.items():
        out[name] = sorted(
            {e for e in imports_of(name, path, known) if e.target != name},
            key=lambda e: (e.target, e.line),
        )
    return out


def circles(edges: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work: list[tuple[str, Iterator[Edge]]] = [(root, iter(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            for e in it:
                t = e.target
                if t not in index:
                    index[t] = low[t] = counter
                    counter += 1
                    stack.append(t)
                    on_stack.add(t)
                    work.append((t, iter(edges.get(t, []))))
                    break
                if t in on_stack:
                    low[node] = min(low[node], index[t])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def part_of(path: Path, parts: dict[str, list[str]]) -> str | None:
    """The part whose most specific (longest) path prefix matches ``path``."""
    rel = path.relative_to(ROOT).as_posix()
    best: tuple[int, str] | None = None
    for part, prefixes in parts.items():
        for prefix in prefixes:
            if rel.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), part)
    return best[1] if best else None


def upward_imports() -> list[str]:
    spec = json.loads(LAYERS.read_text())
    parts = {name: part["is"] for name, part in spec["parts"].items()}
    never = {(a, b): why for a, b, why in spec["never"]}
    known = modules()
    bad: list[str] = []
    for name, edges in graph().items():
        src_part = part_of(known[name], parts)
        for e in edges:
            dst_part = part_of(known[e.target], parts)
            why = never.get((src_part, dst_part)) if src_part and dst_part else None
            if why is not None:
                bad.append(f"{name}:{e.line} -> {e.target} ({src_part} -> {dst_part}: {why})")
    return bad


def test_the_graph_sees_every_kind_of_import() -> None:
    """Module-level, function-local and TYPE_CHECKING imports, absolute and relative, all count
    (circles hide in the last two); a name imported from a package is an edge to its submodule
    when it is one."""
    known = modules()
    source = (
        "from typing import TYPE_CHECKING\n"
        "import odradek.clock\n"
        "from odradek.storage import log\n"
        "if TYPE_CHECKING:\n"
        "    from ..broker.partition import Partition\n"
        "def f() -> None:\n"
        "    from .records import build_batch\n"
        "class C:\n"
        "    def g(self) -> None:\n"
        "        from . import errors\n"
    )
    seen = sorted({e.target for e in imports_in("odradek.protocol._sample", source, known)})
    assert seen == [
        "odradek.broker.partition",
        "odradek.clock",
        "odradek.protocol.errors",
        "odradek.protocol.records",
        "odradek.storage.log",
    ]


def test_circles_are_found() -> None:
    e = Edge
    g = {
        "a": [e("a", "b", 1)],
        "b": [e("b", "c", 1)],
        "c": [e("c", "a", 1), e("c", "d", 1)],
        "d": [],
    }
    assert circles(g) == [["a", "b", "c"]]
    assert circles({"a": [e("a", "b", 1)], "b": []}) == []


def test_the_most_specific_prefix_names_the_part() -> None:
    spec = json.loads(LAYERS.read_text())
    parts = {name: part["is"] for name, part in spec["parts"].items()}
    broker = PACKAGE / "broker"
    assert part_of(broker / "server.py", parts) == "Server"
    assert part_of(broker / "apis" / "fetch.py", parts) == "Handlers"
    assert part_of(broker / "partition.py", parts) == "Replicas"
    assert part_of(PACKAGE / "clock.py", parts) == "Protocol"


def test_no_import_circle() -> None:
    found = circles(graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_import_points_up_a_layer() -> None:
    bad = upward_imports()
    assert not bad, "imports that point up a layer:\n" + "\n".join(bad)


def test_the_controllers_decisions_do_not_import_kazoo() -> None:
    """The pure decisions and the controller's context use the znode types only
    (``odradek.cluster.znodes``), never the kazoo client."""
    code = (
        "import sys, odradek.controller.decisions, odradek.controller.context\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'kazoo'"
        " or m == 'odradek.cluster.zk')\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
