"""A small step with the traits of Deeploy's CCT2_LoRA2 runs on gvsoc with no error, at the graph order and at a
recomputing budget: frozen weights each read by several readers (a frozen block the backward pass goes through:
its forward op and its input gradient read the same weight, kept once), trained weights updated in place (the
block before it, and the classifier), recomputes. Its generated step's network frame, made larger than the whole
stack Deeploy's harness gives the cluster's master core, still runs (CCT2_LoRA2's RunNetwork alone was over those
8000 B, and its step read the HyperRAM out of bounds or never ended). Skipped, saying why, without gvsoc or its
compiler."""
from __future__ import annotations

import json
import re
import shutil

import pytest
from gvsoc_support import gvsoc_example

from ckpt import deeploy_bridge
from ckpt.gvsoc.run import GvsocRun, simulate_step
from ckpt.replay.verification import step_data
from ckpt.solver.graph.onnx_loader import read_model

pytestmark = [pytest.mark.deeploy, pytest.mark.gvsoc, pytest.mark.slow]

# two blocks, the first and the classifier trained, the second frozen: the backward pass reaches the first block
# through the second's frozen weights
SMALL = ["--blocks", "2", "--embed-dim", "32", "--heads", "2", "--image-size", "16", "--conv-channels", "8",
         "--train", "0,fc"]
FRAME_FLOATS = 2500          # 10,000 B more in RunNetwork's frame: more than the harness's whole 8000 B stack


@pytest.fixture(scope="module")
def frozen(tmp_path_factory, lowering_cache):
    """The step at the graph order (calibrated on gvsoc) and solved at 0.8 and replayed (its step on gvsoc)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("GVSOC_INSTALL", raising=False)
        done = gvsoc_example(tmp_path_factory.mktemp("frozen"), SMALL)
        yield done.work, done.kit, done.sources


def test_the_step_has_frozen_weights_read_twice_and_weights_updated_in_place(frozen):
    work, _, _ = frozen
    code = (work / "replay" / "code" / "Network.c").read_text()
    shared = re.findall(r"^DeeployNetwork_(blocks_1_\w+?_weight)_tensor_DUPLICATE_FOR_\w+ = "
                        r"DeeployNetwork_blocks_1_\w+_DUPLICATE_FOR_\w+;$", code, re.MULTILINE)
    assert len(set(shared)) >= 3                        # the frozen block's weights: one copy, several readers
    assert "_weight_sgd" not in "".join(shared)          # ... never updated
    updated = re.findall(r"^DeeployNetwork_output_\d+ = DeeployNetwork_(\w+?)_tensor_DUPLICATE_FOR", code,
                         re.MULTILINE)
    assert any(name.startswith("blocks_0_") for name in updated) and any(n.startswith("fc_") for n in updated)


def test_the_graph_order_and_a_recomputing_budget_run_on_gvsoc_with_no_error(frozen):
    work, _, _ = frozen
    calibration = json.loads((work / "costs.json").read_text())
    assert calibration["errors"] == 0 and calibration["step_cycles"] > 0
    report = json.loads((work / "replay" / "report.json").read_text())
    run = report["gvsoc"]["tiled"]
    assert run["status"] == "measured" and run["errors"] == 0 and run["total"] > 0, run
    assert json.loads((work / "seq.json").read_text())["predicted"]["recomputes"] > 0
    assert report["code_runs"]["tiled"]["graph_order"] == "bit-identical"


def test_a_network_frame_larger_than_the_harness_stack_runs(frozen, tmp_path):
    work, kit, sources = frozen
    code = tmp_path / "code"
    shutil.copytree(work / "replay" / "code", code)
    network = code / "Network.c"
    text = network.read_text()
    head = re.search(r"^void RunNetwork\(.*\) \{\n", text, re.MULTILINE)
    assert head is not None
    frame = (f"volatile float ckpt_test_frame[{FRAME_FLOATS}];\n"
             f"for (int i = 0; i < {FRAME_FLOATS}; i++) ckpt_test_frame[i] = (float)i;\n")
    network.write_text(text[:head.end()] + frame + text[head.end():])
    lowered = deeploy_bridge.lower(str(work / "model"), "siracusa")
    data = step_data(work / "model", read_model(str(work / "model")), lowered.io_names)
    run = simulate_step(code, data.feeds, data.golden, sources, kit, 128_000, timeout=120)
    assert isinstance(run, GvsocRun), run.reason
    assert run.errors == 0 and run.total > 0, run.log[-2000:]
