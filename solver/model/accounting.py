"""The MILP's memory accounting, written once and evaluated two ways.

`stage_points` yields, for one stage, each point where memory can grow together with the change since the
previous point: allocations of the op computed there, minus buffers freed after earlier points. The MILP
feeds it PuLP variables; `booked_levels` feeds it 0/1 values of a solution, so tests can hold the MILP's
bookkeeping against the replay simulator without a solver in the loop.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ckpt.solver.model.problem import Problem

Term = Callable  # r(t, i), s(t, tensor), free(t, buffer, k) -> number or PuLP expression


def active_ops(problem: Problem, t: int) -> list[int]:
    """Ops that may run in stage t, in run order: recomputes of earlier ops, then op t itself."""
    return [i for i in range(t) if t in problem.recompute_stages(i)] + [t]


def frees_after(problem: Problem, t: int, k: int) -> list[str]:
    """Buffers that may be freed right after op k in stage t."""
    return [e for e in problem.frees_at[k] if t in problem.present_set[e]]


def stage_points(problem: Problem, t: int, r: Term, s: Term, free: Term) -> Iterator[tuple[int, object]]:
    """(op k, level change since the previous point, measured after k's outputs are allocated)."""
    size = problem.graph.tensor_bytes
    change = sum(size[e] * s(t, e) for e in problem.buffers if t in problem.retain_set[e])
    previous = None
    for k in active_ops(problem, t):
        if previous is not None:
            change = -sum(size[e] * free(t, e, previous) for e in frees_after(problem, t, previous))
            if problem.scratch[previous]:
                change = change - problem.scratch[previous] * r(t, previous)
        yield k, change + problem.alloc[k] * r(t, k)
        previous = k


def decision_terms(problem: Problem, recomputes: set[tuple[int, int]], retained: set[tuple[int, str]]
                   ) -> tuple[Term, Term, Term]:
    """r, s and free as 0/1 functions of known decisions: FREE follows from R and S by its definition."""
    def r(t: int, i: int) -> int:
        return int(i == t or (t, i) in recomputes)

    def s(t: int, x: str) -> int:
        return int((t, x) in retained)

    def free(t: int, e: str, k: int) -> int:
        later = [j for j in problem.free_points(e) if k < j <= t]
        return int(r(t, k) and not s(t + 1, e) and not any(r(t, j) for j in later))

    return r, s, free


def all_levels(problem: Problem, recomputes: set[tuple[int, int]], retained: set[tuple[int, str]]
               ) -> dict[tuple[int, int], int]:
    """(stage, op) -> booked level at every point of the accounting, run or not (the U values)."""
    r, s, free = decision_terms(problem, recomputes, retained)
    levels: dict[tuple[int, int], int] = {}
    for t in range(problem.n):
        level = 0
        for k, change in stage_points(problem, t, r, s, free):
            level += change
            levels[t, k] = level
    return levels


def booked_levels(problem: Problem, recomputes: set[tuple[int, int]], retained: set[tuple[int, str]]
                  ) -> dict[int, list[tuple[int, int]]]:
    """Stage -> [(op, booked level)] at every op the solution runs, for given 0/1 decisions."""
    levels: dict[int, list[tuple[int, int]]] = {}
    for (t, k), level in all_levels(problem, recomputes, retained).items():
        if k == t or (t, k) in recomputes:
            levels.setdefault(t, []).append((k, level))
    return levels
