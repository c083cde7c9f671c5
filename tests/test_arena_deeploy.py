"""The tiled flow's home arena with ckpt's allocator in Deeploy's tiler, against ckpt's prediction.

ckpt predicts, from a schedule alone, the block list Deeploy's tiler hands its allocator at the home level
(deeploy_bridge.arena.home_blocks): it must be that list, block for block, so that the arena the generated code
reserves is the one ckpt checked the budget on.
"""
from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from onnx_graphsurgeon.logger import G_LOGGER
from replay_support import FT2, needs_models

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, Allocator, Flow, WeightUpdate
from ckpt.examples import write_example
from ckpt.pipeline.deployed_solve import SolveRequest, solve_and_document, solve_model
from ckpt.pipeline.load import load_for_target
from ckpt.replay.predict import predicted_home_blocks, predicted_levels
from ckpt.replay.scheduler import ReplayScheduler
from ckpt.schedule_file import Schedule
from ckpt.solver.budget import LevelTotal, parse_budget
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

pytestmark = [needs_models, pytest.mark.deeploy]


_DEPLOYED: dict[tuple, object] = {}


def _tiled(model, doc: Schedule, allocator: Allocator = Allocator.CKPT, weights: WeightUpdate = DEFAULT_SETUP.weights):
    """The tiled deployment's figures, made once per model object, schedule, allocator and weights in this module
    (the tests read them and never change them; the model is kept with them, so its id names no other)."""
    key = (id(model), doc.seq, allocator, weights)
    if key not in _DEPLOYED:
        with G_LOGGER.suppress(G_LOGGER.ERROR):
            _DEPLOYED[key] = model, deeploy_bridge.deploy(model, ReplayScheduler.of_schedule(doc), "siracusa",
                                                          tiled=True, setup=replace(DEFAULT_SETUP, allocator=allocator,
                                                                                    weights=weights))
    return _DEPLOYED[key][1]


def _predicted_blocks(lowered, doc: Schedule, weights: WeightUpdate) -> set[tuple]:
    blocks = predicted_home_blocks(lowered, list(doc.seq), weights).blocks
    return {(b.name, b.first, b.last, b.size) for b in blocks}


@pytest.fixture(scope="module")
def ft2(lowering_cache):
    return load_for_target(FT2, "siracusa")


@pytest.fixture(scope="module")
def schedules(ft2):
    """Per weight layout: the graph order, and a schedule with recomputes (clones, views of clones) at 0.7 of
    the live peak, solved for that layout."""
    order = Schedule(tuple((op.name, 0) for op in ft2.graph.ops))
    found = {}
    for weights in WeightUpdate:
        doc, _ = solve_model(FT2, parse_budget("0.7"), "siracusa", SolveOptions(method="greedy"),
                             weights=weights)
        found[weights, "graph order"], found[weights, "0.7"] = order, doc
    return found


@pytest.mark.parametrize("weights", list(WeightUpdate))
@pytest.mark.parametrize("which", ["graph order", "0.7"])
def test_predicted_home_blocks_are_deeploys_and_the_arena_is_the_predicted_one(ft2, schedules, which, weights):
    doc = schedules[weights, which]
    figures = _tiled(ft2.lowered.model, doc, weights=weights)
    deeploy_blocks = {(b.name, b.first, b.last, b.size) for b in figures.laid_out["L3"]}
    assert deeploy_blocks == _predicted_blocks(ft2.lowered, doc, weights)
    predicted = predicted_levels(ft2.lowered, list(doc.seq), weights)["L3"]
    assert figures.arena["L3"] == predicted.arena == figures.live_max["L3"] == predicted.live_max
    assert figures.static["L3"] == predicted.static == ft2.lowered.static_bytes(weights)
    assert figures.allocator_calls == 2 * len(figures.order) + 1      # L3 once, then L2 and L1 per layer


def test_in_place_weights_take_no_arena_and_each_constant_is_kept_once(ft2, schedules):
    """CCT2_FT2 at 0.7: the 16 updated weights leave the arena (it is the live peak), and the constants Deeploy
    copies per reader are kept once but for the one bias a Gemm reads broadcast."""
    doc = schedules[WeightUpdate.IN_PLACE, "0.7"]
    inside, outside = _tiled(ft2.lowered.model, doc), _tiled(ft2.lowered.model, doc,
                                                             weights=WeightUpdate.OUT_OF_PLACE)
    live = doc.predicted.peak_bytes
    assert live <= inside.arena["L3"] <= 1.01 * live and inside.arena["L3"] < outside.arena["L3"] - 250_000
    assert inside.static["L3"] + inside.arena["L3"] <= 2 * 1024 * 1024 < outside.static["L3"]
    plan = ft2.lowered.constants
    assert list(plan.repeats) == ["classifier_attention_pool_bias_tensor_DUPLICATE_FOR_node_206_classifier_"
                                  "attention_pool_Add_Gemm"]
    assert plan.kept == () and plan.bytes_after < plan.bytes_before / 2


def test_ckpt_arena_is_smaller_than_tetris_and_never_over_a_level(ft2, schedules):
    doc = schedules[DEFAULT_SETUP.weights, "0.7"]
    ckpt, tetris = _tiled(ft2.lowered.model, doc), _tiled(ft2.lowered.model, doc, Allocator.TETRIS)
    assert ckpt.arena["L3"] < tetris.arena["L3"]
    assert all(ckpt.arena[level] <= size for level, size in DEFAULT_SETUP.levels[1:])


def test_budget_total_is_held_on_the_generated_codes_arena(ft2, tmp_path):
    """`--budget-total L3=...`: the solver works on the arena itself; the generated code then reserves exactly
    the total the schedule was checked on."""
    static, baseline = ft2.lowered.static_bytes(DEFAULT_SETUP.weights), predicted_levels(
        ft2.lowered, [(op.name, 0) for op in ft2.graph.ops])["L3"]
    total = static + baseline.arena - 64 * 1024
    quick = SolveOptions(backend=BackendOptions(time_limit=30))   # what is held, not how well: any schedule will do
    doc, result = solve_and_document(SolveRequest(str(FT2), "siracusa", None, LevelTotal(f"L3={total}", "L3", total),
                                                  quick))
    assert doc.predicted.checked == "total_L3" and doc.predicted.checked_bytes <= total
    figures = _tiled(ft2.lowered.model, doc)
    assert figures.static["L3"] + figures.arena["L3"] == doc.predicted.checked_bytes
    assert doc.predicted.levels["L3"]["arena"] == figures.arena["L3"] < baseline.arena


def test_the_tiled_home_holds_no_layer_scratch_and_the_solvers_sizes_count_none(ft2, schedules):
    """A layer's transient buffers (CCT2_FT2's two Conv im2col buffers) go to the tile level only (Deeploy's
    MemoryScheduler._calculateLifetimes): Deeploy's context puts them in L1 and the home level's blocks hold none.
    So the solver's graph of the tiled flow carries no op scratch (its floor and peak are the home level's); the
    non-tiled flow's, which mallocs each with its layer, carries every one."""
    figures = _tiled(ft2.lowered.model, schedules[DEFAULT_SETUP.weights, "graph order"])
    transients = {f"{node}_buffer" for node in ft2.lowered.transients}
    assert len(transients) == 2 and {figures.buffer_levels[name] for name in transients} == {"L1"}
    assert not transients & {b.name for b in figures.laid_out["L3"]}
    assert ft2.graph.scratch == {}
    non_tiled = load_for_target(FT2, "siracusa", weights=WeightUpdate.OUT_OF_PLACE, flow=Flow.NON_TILED)
    assert non_tiled.graph.scratch == ft2.lowered.transients


def test_a_schedule_says_its_flow_and_its_replay_counts_that_flows_scratch(ft2):
    """The replay's live trace (what it compares with the predicted peak) counts the scratch of the flow the
    schedule was solved for: none for the tiled flow's home level, every op's for the non-tiled flow."""
    from ckpt.replay.onnx_graph import view_of_model
    from ckpt.replay.plan import plan_replay
    from ckpt.replay.run import _rewire, schedule_flow

    quick = SolveOptions(method="greedy")
    tiled, _ = solve_model(FT2, parse_budget("0.7"), "siracusa", quick)
    non_tiled, _ = solve_model(FT2, parse_budget("0.7"), "siracusa", quick, flow=Flow.NON_TILED,
                               weights=WeightUpdate.OUT_OF_PLACE)
    assert (tiled.graph.flow, non_tiled.graph.flow) == (None, "non-tiled")
    view = view_of_model(ft2.lowered.model)
    for doc, scratch in ((tiled, set()), (non_tiled, set(ft2.lowered.transients.values()))):
        plan = plan_replay(view, list(doc.seq))
        found = _rewire(ft2.lowered.model, view, plan, ft2.lowered, WeightUpdate(doc.graph.weights),
                        schedule_flow(doc, "siracusa"))
        assert set(found.trace.scratch) - {0} == scratch
        assert found.trace.peak_bytes == doc.predicted.peak_bytes


@pytest.mark.slow
def test_deeploys_own_minimalloc_path_runs_ckpts_minimalloc_program(tmp_path, monkeypatch, lowering_cache):
    """Deeploy's runners call $MINIMALLOC_INSTALL_DIR/minimalloc once per layer and level: the program pip
    installs beside ckpt's script answers, and the code it generates reserves no more than the level holds."""
    folder = tmp_path / "mlp"
    write_example("mlp", folder, layers=2, width=16, batch=4)
    lowered = load_for_target(folder, "siracusa").lowered
    monkeypatch.setenv("MINIMALLOC_INSTALL_DIR", str(Path(sys.executable).parent))
    assert os.path.isfile(Path(sys.executable).parent / "minimalloc")
    doc = Schedule(tuple((n.name, 0) for n in lowered.model.graph.node))
    external = _tiled(lowered.model, doc, Allocator.MINIMALLOC)
    inside = _tiled(lowered.model, doc)
    assert 0 < inside.arena["L3"] <= external.arena["L3"] <= DEFAULT_SETUP.size("L3")   # views take no room
    assert external.arena["L1"] <= DEFAULT_SETUP.size("L1")
