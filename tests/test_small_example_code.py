"""A small built-in example's generated code, run on this host, computes its goldens: the step the suite can afford
to run whole (one block of width 16 on an 8x8 image), tiled and non-tiled. Its short sequence makes the
LayerNormalizationGrad inputs large, where Deeploy's kernel and the gradient part (examples/ops.DEVICE_LN_GRAD):
goldens that did not follow the kernel gave hundreds of Errors here while the default example showed none."""
from __future__ import annotations

import pytest

from ckpt.coderun.sources import NoSources, find_sources
from ckpt.examples.write import write_example
from ckpt.pipeline.deployed_solve import solve_model
from ckpt.replay.run import ReplayOptions, replay_schedule
from ckpt.schedule_file import write_schedule
from ckpt.solver.budget import parse_budget
from ckpt.solver.model.records import SolveOptions

pytestmark = pytest.mark.deeploy
SMALL = {"blocks": 1, "embed_dim": 16, "heads": 2, "image_size": 8}
OUTPUT_ELEMENTS = 1723          # the updated weights of one block of width 16 and of the head


@pytest.fixture(scope="module")
def replayed(lowering_cache, tmp_path_factory):
    if isinstance(find_sources(), NoSources):
        pytest.skip(find_sources().reason)
    folder = tmp_path_factory.mktemp("small") / "cct"
    write_example("cct", folder, **SMALL)
    doc, _ = solve_model(folder, parse_budget("1.0"), "siracusa", SolveOptions())
    schedule = folder.parent / "seq.json"
    write_schedule(schedule, doc)
    return replay_schedule(schedule, folder, folder.parent / "replay", ReplayOptions(target="siracusa")).report


@pytest.mark.parametrize("flow", ["tiled", "non_tiled"])
def test_a_small_examples_code_computes_its_goldens(replayed, flow):
    """Errors: 0, and the code within float32 rounding of the host executor: goldens and kernels compute the
    same formulas, not merely numbers inside the harness's tolerance."""
    run = replayed.code_runs[flow]
    assert run.status == "ran", run.reason
    assert run.golden.line == f"Errors: 0 out of {OUTPUT_ELEMENTS}" and run.golden.errors_by_tensor == {}
    assert run.graph_order == "bit-identical"
    assert run.host.over_tolerance == 0 and run.host.max_abs_diff < 1e-6, run.host
    assert replayed.ok


def test_the_mlp_examples_code_computes_its_goldens_at_a_batch_above_one(lowering_cache, tmp_path):
    """Batch 4: Deeploy's SoftmaxCrossEntropyLossGrad scales by 1/batch twice; goldens that took the gradient of
    the mean loss gave thousands of Errors in every updated weight (batch 1 hid it)."""
    if isinstance(find_sources(), NoSources):
        pytest.skip(find_sources().reason)
    folder = tmp_path / "mlp"
    write_example("mlp", folder, layers=2, width=16, batch=4)
    doc, _ = solve_model(folder, parse_budget("1.0"), "siracusa", SolveOptions())
    write_schedule(tmp_path / "seq.json", doc)
    report = replay_schedule(tmp_path / "seq.json", folder, tmp_path / "replay",
                             ReplayOptions(target="siracusa")).report
    for flow in ("tiled", "non_tiled"):
        run = report.code_runs[flow]
        assert run.status == "ran" and run.golden.errors == 0, (flow, run.golden.line)
