"""The budget is one object: parsed from what the user wrote, resolved once on the graph, never again."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckpt.examples import write_example
from ckpt.pipeline.deployed_solve import graph_order_peak, solve_model
from ckpt.pipeline.load import load_for_target
from ckpt.pipeline.point import PointSpec
from ckpt.solver.budget import parse_budget
from ckpt.solver.model.records import SolveOptions


@given(st.floats(min_value=0.01, max_value=1.0), st.integers(min_value=1, max_value=10**9))
def test_a_resolved_budget_keeps_its_fraction_and_does_not_move_again(fraction, peak):
    budget = parse_budget(repr(fraction)).resolved(peak)
    assert budget.fraction == fraction and budget.nbytes == int(fraction * peak)
    assert budget.resolved(peak + 12345) is budget


def test_a_budget_in_bytes_is_resolved_as_written():
    budget = parse_budget("700KB")
    assert budget.fraction is None and budget.resolved(1) is budget and budget.nbytes == 700 * 1024


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlp") / "mlp"
    write_example("mlp", folder)
    return folder


def test_a_sweep_points_solve_holds_the_bytes_its_spec_resolved(mlp):
    """The solve takes the point's resolved budget as is: were the fraction resolved again, the schedule would be
    held to fraction x peak instead of the bytes the spec carries."""
    peak = graph_order_peak(load_for_target(mlp, "none").graph)
    spec = PointSpec.at(0.8, peak)
    assert spec.budget_bytes == int(0.8 * peak) and spec.fraction == 0.8
    shifted = replace(spec.budget, nbytes=int(0.95 * peak))     # a budget resolved elsewhere keeps its bytes
    schedule, _ = solve_model(mlp, shifted, "none", SolveOptions(method="greedy"))
    assert schedule.budget.bytes == shifted.nbytes and schedule.budget.fraction == 0.8
    assert schedule.predicted.live_budget_bytes == shifted.nbytes


@given(live=st.integers(1000, 10**8), limit=st.integers(1, 10**8), extra=st.integers(1, 10**8))
def test_a_deployed_figure_over_the_budget_tightens_the_live_budget_by_the_root_of_the_ratio(live, limit, extra):
    """Below the live peak that went over, by at least a granule; never by more than the whole excess (the old
    step, which overshot), nor below the live peak shrunk in proportion; scaled by the root of the ratio. The
    figure (a heap, or the peak itself) is never below the live peak."""
    from ckpt.pipeline.deployed_solve import tightened
    from ckpt.solver.memory.heap import GRANULE

    figure = max(live, limit) + extra
    excess = figure - limit
    nxt = tightened(live, limit, figure)
    assert nxt <= live - GRANULE
    assert nxt >= min(live - GRANULE, live - excess)
    assert nxt >= min(live - GRANULE, live * limit // figure)
    assert nxt * nxt * figure <= live * live * limit or nxt == live - GRANULE
