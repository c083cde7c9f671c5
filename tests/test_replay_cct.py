"""The replay on CCT2_FT2 as Deeploy lowers it for Siracusa: exact peak, refusal, idempotence, Deeploy's figures."""
from __future__ import annotations

import json

import onnx_graphsurgeon as gs
import pytest
from replay_support import FT2, needs_models

from ckpt.ci.check import CiCase
from ckpt.deeploy_bridge.setup import WeightUpdate
from ckpt.errors import CkptError
from ckpt.pipeline.load import load_for_target
from ckpt.replay.onnx_graph import view_of_model
from ckpt.replay.plan import plan_replay
from ckpt.replay.predict import rewired
from ckpt.replay.report import ReplayReport
from ckpt.replay.run import ReplayOptions, replay_schedule
from ckpt.replay.scheduler import ReplayScheduler
from ckpt.replay.summary import summary_lines
from ckpt.schedule_file import read_schedule
from ckpt.solver.graph.simulate import memory_trace, plain_sequence

pytestmark = [needs_models, pytest.mark.deeploy]


@pytest.fixture(scope="module")
def solved(lowering_cache):
    """The committed CI schedule: CCT2_FT2 lowered for Siracusa at 0.8 of its baseline peak (ckpt solve)."""
    return load_for_target(FT2, "siracusa"), CiCase().schedule


def test_schedule_replays_with_exactly_the_predicted_peak(solved):
    loaded, path = solved
    doc, lowered = read_schedule(path), loaded.lowered
    view = view_of_model(lowered.model)
    plan = plan_replay(view, doc.seq, fingerprint=doc.graph.names_sha256)
    graph = rewired(lowered, view, plan, WeightUpdate(doc.graph.weights)).graph
    assert doc.predicted.recomputes > 0 and plan.clones_kept == doc.predicted.recomputes
    assert plan.match.rate == 1.0 and not plan.unscheduled and not plan.stale
    assert memory_trace(graph, plain_sequence(graph, plan.order)).peak_bytes == doc.predicted.peak_bytes
    assert graph.persistent_bytes == doc.predicted.persistent_bytes


def test_schedule_with_another_lowerings_names_is_refused(solved):
    loaded, path = solved
    doc = read_schedule(path)
    renamed = [(f"{name}_0" if i % 5 == 0 else name, flag) for i, (name, flag) in enumerate(doc.seq)]
    view = view_of_model(loaded.lowered.model)
    with pytest.raises(CkptError, match="schedule was solved on graph"):
        plan_replay(view, renamed, fingerprint=view.fingerprint()[::-1])
    kept = sum(1 for i in range(len(renamed)) if i % 5)
    with pytest.raises(CkptError, match=rf"matches only {100 * kept / len(renamed):.1f}% of its {len(renamed)} "
                                        r"entries .*needs 90%"):
        plan_replay(view, renamed, fingerprint=view.fingerprint()[::-1], force=True)


def test_scheduler_called_twice_on_deeploys_graph_is_idempotent(solved):
    loaded, path = solved
    graph = gs.import_onnx(loaded.lowered.model)
    scheduler = ReplayScheduler.of_schedule(read_schedule(path))
    first = [g[0].name for g in scheduler(graph)]
    nodes = len(graph.nodes)
    second = [g[0].name for g in scheduler(graph)]
    assert first == second == scheduler.plan.order and len(graph.nodes) == nodes == len(first)
    assert sum("__ck" in node.name for node in graph.nodes) == scheduler.plan.clones_kept


def test_replay_end_to_end_with_deeploy(solved, tmp_path):
    """Two Deeploy runs (non-tiled, tiled, both with code), each with the replay as its scheduler, and the code of
    both built and run on this host for three training steps in a row, each step held to the host's from the
    weights the code wrote (about a minute, the graph order's reference code included)."""
    _, path = solved
    result = replay_schedule(path, FT2, tmp_path / "out", ReplayOptions(target="siracusa", steps=3))
    report = ReplayReport.read(tmp_path / "out" / "report.json")
    assert report == result.report and report.ok
    doc = read_schedule(path)
    memory = report.memory
    assert memory.replayed_peak == memory.predicted_peak == doc.predicted.peak_bytes
    # Deeploy's own numbers for the replayed order (measured: 655,656 B non-tiled vs 1,114,368 B default order).
    assert 0 < memory.deeploy_non_tiled < 1_114_368 and set(memory.levels) == {"L1", "L2", "L3"}
    # Clones share constants: Deeploy's static bytes are those of the default order (3,722,217 B, measured);
    # a copied weight per clone would add its bytes here.
    assert memory.deeploy_non_tiled_static == 3_722_217
    assert report.deeploy["non_tiled"].layers == report.deeploy["tiled"].layers == len(result.plan.order)
    # ckpt's allocator laid out the tiled arenas: the home arena is the one ckpt predicted, at its live maximum
    home = memory.levels["L3"]
    assert home.arena == home.predicted_arena == home.live_max and report.deeploy["tiled"].allocator_calls > 0
    network_c = (tmp_path / "out" / "code" / "Network.c").read_text()
    assert any(f"{e.name}" in network_c for e in result.plan.executions if e.clone)
    assert f"sizeof(int8_t) * {home.arena})" in network_c
    verification = report.verification
    assert verification.status == "bit-identical" and verification.replay_errors == 0
    assert verification.golden.line == verification.baseline_golden.line == "Errors: 0 out of 198027"
    assert "GeluGrad" in verification.hint
    assert {flow: (run.status.value, run.reason) for flow, run in report.gvsoc.items()} == {
        flow: ("not simulated", "gvsoc switched off ($GVSOC_INSTALL=none)") for flow in ("non_tiled", "tiled")}
    for flow, run in report.code_runs.items():       # the generated code itself, as the device harness counts
        assert run.status == "ran" and run.golden.line == "Errors: 0 out of 198027", (flow, run.reason)
        assert run.graph_order == "bit-identical" and run.host.max_abs_diff < 1e-4
        assert [step.errors for step in run.steps] == [0, 0, 0] and run.trains, flow   # both flows train
    assert set(report.code_runs) == {"tiled", "non_tiled"}
    assert (tmp_path / "out" / "code-non-tiled" / "Network.c").is_file()
    lines = summary_lines(result)
    assert any(line.startswith("activation peak: predicted") and "Deeploy non-tiled" in line for line in lines)
    assert any(line.startswith("generated tiled code on this host: Errors: 0 out of 198027") for line in lines)
    assert json.loads((tmp_path / "out" / "order.json").read_text())["order"] == result.plan.order
