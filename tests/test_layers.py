"""The package's parts import one way only, and only at module level.

solver (no Deeploy) <- hostexec, coderun <- deeploy_bridge, examples, gvsoc <- replay <- pipeline (one point) <-
budgets (sweeps) <- ci <- cli_common <- cli, on a foundation everything may read: errors, paths and events
(progress records), then files and live (the displays), then schedule_file and cached (checked cache
entries). hostexec (the numpy executor) and coderun (the generated C, built and run on this host) are leaves of
the same rank; gvsoc (the generated C built for
Siracusa and run on gvsoc) builds on coderun's manifest and kernel checkout. A part imports from its own
part or from a lower rank. Imports inside functions are allowed in cli.py and cli_common.py alone: each command
loads what it runs, so `ckpt --help` and the commands without Deeploy start at once.
"""
from __future__ import annotations

import ast
import os
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RANK = {"errors": 0, "paths": 0, "events": 0, "targets": 0, "deeploy_identity": 0, "deeploy_defects": 1,
        "memory_levels": 0, "files": 1, "live": 1,
        "schedule_file": 2, "cached": 2, "solver": 3, "hostexec": 4, "coderun": 4, "examples": 5, "deeploy_bridge": 5,
        "gvsoc": 5, "replay": 6, "pipeline": 7, "budgets": 8, "ci": 9, "cli_common": 10, "cli": 11, "__main__": 12,
        "__init__": 0}
FUNCTION_IMPORTS_ALLOWED = {"cli", "cli_common"}


@cache
def _modules() -> tuple[Path, ...]:
    """ckpt's own modules: the walk never enters a hidden folder (venvs, .git) or tests, bench, build, since
    a venv inside the checkout holds tens of thousands of files."""
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in {"tests", "bench", "build",
                                                                                 "__pycache__"}
                         and not d.endswith(".egg-info"))
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".py")]
    return tuple(found)


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _part(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else path.stem


@cache
def _imports(path: Path) -> list[tuple[str, bool, int]]:
    """(ckpt part imported, inside a function, line) for every import of a ckpt module in `path`."""
    tree = _tree(path)
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names = []
            if isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module] + ([f"{child.module}.{a.name}" for a in child.names]
                                          if child.module == "ckpt" else [])
            elif isinstance(child, ast.ImportFrom) and child.level > 0:
                names = [f"ckpt.{_part(path)}"]
            elif isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            for name in names:
                pieces = name.split(".")
                if pieces[0] == "ckpt" and len(pieces) > 1:
                    found.append((pieces[1], in_function, child.lineno))
            visit(child, inner)

    visit(tree, False)
    return found


def test_every_part_has_a_rank():
    assert {_part(p) for p in _modules()} <= set(RANK)


def test_imports_go_down_only():
    wrong = [f"{p.relative_to(ROOT)}:{line} imports ckpt.{target}"
             for p in _modules() for target, _, line in _imports(p)
             if target != _part(p) and RANK.get(target, 99) >= RANK[_part(p)]]
    assert not wrong, "\n".join(wrong)


def test_no_cycle_between_parts():
    edges: dict[str, set[str]] = {}
    for p in _modules():
        for target, _, _ in _imports(p):
            if target != _part(p):
                edges.setdefault(_part(p), set()).add(target)

    def reaches(a: str, b: str, seen: frozenset = frozenset()) -> bool:
        return any(x == b or (x not in seen and reaches(x, b, seen | {x})) for x in edges.get(a, ()))

    assert not [a for a in edges if reaches(a, a)]


def test_imports_inside_functions_only_where_allowed():
    inside = [f"{p.relative_to(ROOT)}:{line}" for p in _modules() for _, in_function, line in _imports(p)
              if in_function and _part(p) not in FUNCTION_IMPORTS_ALLOWED]
    assert not inside, "\n".join(inside)
    third_party = []
    for p in _modules():
        if _part(p) in FUNCTION_IMPORTS_ALLOWED:
            continue
        for node in ast.walk(_tree(p)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                third_party += [f"{p.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(node)
                                if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not third_party, "\n".join(third_party)


def test_the_solver_knows_nothing_of_deeploy():
    for p in (p for p in _modules() if p.is_relative_to(ROOT / "solver")):
        assert "Deeploy" not in {n.module.split(".")[0] for n in ast.walk(_tree(p))
                                  if isinstance(n, ast.ImportFrom) and n.module}, p


SOLVER_ROOMS = {"graph": 0, "memory": 1, "model": 2, "realise": 3, "bounds": 4, "policies": 5}
SOLVER_TOP = {"solve", "stages", "order_search", "budget", "park_stage"}


def _solver_room(path: Path) -> str:
    """A solver module's room (its sub-package), or "top" for solve() and the modules beside it."""
    parts = path.relative_to(ROOT / "solver").parts
    return parts[0] if len(parts) > 1 else "top"


def test_the_solver_is_in_rooms_that_import_one_way():
    """graph <- memory <- model <- realise <- bounds <- policies <- solve() on top: a room reads only the ones
    before it, so a new constraint (model/) can never need the bounds that use it."""
    rank = {**SOLVER_ROOMS, "top": len(SOLVER_ROOMS)}
    loose = [p.name for p in (ROOT / "solver").glob("*.py") if p.stem not in SOLVER_TOP | {"__init__"}]
    assert not loose, f"solver modules outside a room: {loose}"
    assert {p.name for p in (ROOT / "solver").iterdir() if p.is_dir() and p.name != "__pycache__"} == set(SOLVER_ROOMS)
    wrong = []
    for p in (p for p in _modules() if p.is_relative_to(ROOT / "solver")):
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ckpt.solver"):
                pieces = node.module.split(".")
                target = pieces[2] if len(pieces) > 2 and pieces[2] in SOLVER_ROOMS else "top"
                if rank[target] > rank[_solver_room(p)]:
                    wrong.append(f"{p.relative_to(ROOT)}:{node.lineno} imports {node.module}")
    assert not wrong, "\n".join(wrong)
