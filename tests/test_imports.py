"""The floors of the house point one way (docs/architecture.md): read from the code's own
imports, module-level and inside functions alike, so that a lazy import cannot hide a loop."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# from the ground up; a unit may import only units of a lower floor
FLOORS = [
    ["bench.errors"],
    ["bench.store", "bench.metrics"],
    ["bench.registry"],
    ["bench.data"],
    ["bench.model"],
    ["bench.api"],
    ["bench.train"],
    ["bench.plugin", "bench.spec"],
    ["bench.core", "bench.catalog"],
    ["bench.cli"],
    ["bench.__main__"],
]
RANK = {unit: i for i, floor in enumerate(FLOORS) for unit in floor}


def unit(module: str) -> str:
    """A package of bench (``bench.core``) or a top-level module (``bench.cli``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "bench" and len(parts) > 1 else parts[0]


def imports(folder: str):
    """(importing module's file, line, imported module) for every absolute import under ``folder``."""
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield path, node.lineno, node.module
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield path, node.lineno, alias.name


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_every_unit_of_bench_has_a_floor():
    units = {unit(_module(p)) for p in (ROOT / "bench").rglob("*.py")} - {"bench"}
    assert units <= set(RANK), f"give these a floor in FLOORS: {sorted(units - set(RANK))}"


def test_bench_imports_only_downwards_and_nothing_built_on_it():
    wrong = []
    for path, line, module in imports("bench"):
        src, dst = unit(_module(path)), unit(module)
        if dst in ("leaderboard", "methods", "suites"):
            wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}: bench finds it through the registry")
        elif dst.startswith("bench.") and src != dst and src in RANK and RANK[dst] >= RANK[src]:
            wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}, on the same floor or above")
    assert wrong == []


def test_plugins_and_the_leaderboard_import_no_plugin_of_another_kind():
    """A method never imports a suite or another method; a suite never imports a method; the
    leaderboard reads records and needs neither."""
    wrong = []
    for folder in ("methods", "suites", "leaderboard"):
        for path, line, module in imports(folder):
            top = module.split(".")[0]
            own = _module(path).split(".")[0]
            if top in ("methods", "suites", "leaderboard") and top != own:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
            elif folder == "methods" and top == "methods" and module not in ("methods.kit", "methods"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports another method, {module}")
    assert wrong == []


def test_no_module_of_the_leaderboard_imports_itself_round_a_circle():
    """Within leaderboard/, the modules' imports (module-level, lazy and type-only alike) make no
    circle: each module can be read knowing only the ones below it."""
    graph: dict[str, set[str]] = {}
    for path, _, module in imports("leaderboard"):
        graph.setdefault(_module(path), set())
        if module.startswith("leaderboard."):
            graph[_module(path)].add(module)
    circles, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(trail[trail.index(nxt):] + [node, nxt]) if nxt in trail else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert circles == []
