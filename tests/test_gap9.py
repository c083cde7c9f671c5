"""`--target gap9` under Deeploy's training branch: PULPOpen's training kernels lent to GAP9 by ckpt's bridge
(deeploy_bridge.lent_kernels), an op no platform maps refused by name before Deeploy parses, GAP9's memory levels
as data, and the generated code.

GAP9 exists only in the training branch (`pip install ../shared/deeploy-train`): under the release the tests that
need it skip, saying why.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ckpt.coderun.dma import MCHAN_LIMIT, code_transfers
from ckpt.deeploy_bridge.errors import BridgeError
from ckpt.deeploy_bridge.versions import deeploy_label, has_target_package

pytestmark = pytest.mark.deeploy


@pytest.fixture(scope="module")
def gap9():
    if not has_target_package("GAP9"):
        pytest.skip(f"Deeploy {deeploy_label()} has no GAP9 target: it needs the training branch "
                    "(pip install ../shared/deeploy-train)")


def _unmapped_model(folder: Path) -> Path:
    """A float graph with an op no platform maps (HardSigmoid) between two that every one does."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("HardSigmoid", ["a"], ["b"], name="odd_one"),
             helper.make_node("Relu", ["b"], ["y"], name="last")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    folder.mkdir()
    onnx.save(model, folder / "network.onnx")
    np.savez(folder / "inputs.npz", x=np.ones((1, 8), np.float32))
    np.savez(folder / "outputs.npz", y=np.ones((1, 8), np.float32))
    return folder


@pytest.mark.parametrize("target", ["siracusa", "gap9"])
def test_an_op_no_platform_maps_is_refused_by_name_before_deeploy_parses(target, tmp_path, monkeypatch):
    if target == "gap9" and not has_target_package("GAP9"):
        pytest.skip(f"Deeploy {deeploy_label()} has no GAP9 target")
    from Deeploy.DeeployTypes import NetworkContainer

    from ckpt.deeploy_bridge import lower

    def no_parsing(*_args, **_kwargs):
        raise AssertionError("Deeploy parsed the graph")

    monkeypatch.setattr(NetworkContainer, "parse", no_parsing)
    with pytest.raises(BridgeError) as info:
        lower(_unmapped_model(tmp_path / "odd"), target, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert "maps no kernel for HardSigmoid (node odd_one)" in message and "Relu" not in message
    assert ("PULPOpen kernels ckpt lends it" in message) == (target == "gap9")


def test_gap9_is_lent_pulpopens_training_kernels_and_keeps_its_own(gap9):
    from ckpt.deeploy_bridge.targets import lent_to_gap9, target_parts

    lent = dict(lent_to_gap9().ops)
    for op in ("ConvGradX", "ConvGradW", "ConvGradB", "GeluGrad", "LayerNormalizationGrad", "ReluGrad",
               "BatchNormalizationGrad", "MaxPoolGrad", "GlobalAveragePoolGrad", "InPlaceAccumulatorV2"):
        assert lent.get(op), op
    assert "SGD" not in lent and "Gemm" not in lent and "Conv" not in lent     # GAP9 maps these itself
    assert lent["ReduceSum"] and lent["SoftmaxGrad"]      # GAP9 maps them untiled: PULPOpen's tiled form is lent
    # GAP9 maps LayerNormalization in its one-output form: the training form (three outputs) is lent, tried first
    assert lent["LayerNormalization"] == ("NodeTemplate(float32_t, float32_t, float32_t) -> float32_t, float32_t, "
                                          "float32_t",)
    layer = target_parts("gap9", 8).platform.engines[0].Mapping["LayerNormalization"]
    assert [getattr(m, "outputs", None) for m in layer.maps] == [3, None]
    own = target_parts("gap9", 8, lend_kernels=False).platform.engines[0].Mapping
    assert "ConvGradX" not in own and len(own["LayerNormalization"].maps) == 1


@pytest.mark.parametrize("model, missing", [("cct_train", "GeluGrad"), ("resnet8_train", "ConvGradX"),
                                            ("dscnn_train", "BatchNormalizationGrad"),
                                            ("simplemlp_train", "InPlaceAccumulatorV2")])
def test_without_ckpts_bridge_the_branch_refuses_the_zoos_graphs_for_gap9_naming_what_it_lacks(
        gap9, shared_models, tmp_path, monkeypatch, model, missing):
    from ckpt.deeploy_bridge import deeploy_run, lower
    from ckpt.deeploy_bridge.targets import target_parts

    monkeypatch.setattr(deeploy_run, "target_parts",            # GAP9 as Deeploy ships it
                        lambda target, n: target_parts(target, n, lend_kernels=False))
    with pytest.raises(BridgeError, match=f"GAP9 platform maps no kernel for .*{missing}"):
        lower(shared_models / model, "gap9", cache_dir=tmp_path / "plain", use_cache=False)


def test_with_ckpts_bridge_dscnns_gap9_code_is_generated_with_gap9s_dma_and_builds(
        gap9, shared_models, deeploy_checkout, tmp_path):
    from ckpt.coderun.build import BuildConfig, build_step, find_toolchain, kernel_library
    from ckpt.coderun.manifest import CodeManifest
    from ckpt.deeploy_bridge import generate_code, lower
    from ckpt.deeploy_bridge.setup import setup_for

    lowered = lower(shared_models / "dscnn_train", "gap9", cache_dir=tmp_path / "lent")
    order = [n.name for n in lowered.model.graph.node]
    code_dir = tmp_path / "code"
    figures = generate_code(lowered.model, order, code_dir, "gap9", setup=setup_for("gap9"))
    code = (code_dir / "Network.c").read_text()
    assert '#include "DeeployGAP9Math.h"' in code and '#include "DeeployMchan.h"' in code
    assert "mchan_transfer_t" in code and "mchan_siracusa" not in code       # GAP9's DMA, not Siracusa's
    transfers = code_transfers(code_dir / "Network.c")
    assert transfers and max(t.size for t in transfers) < MCHAN_LIMIT       # none reaches mchan's 2^17 B
    assert figures.setup.size("L1") == 93 * 1024
    toolchain = find_toolchain()
    if toolchain is None:
        pytest.skip("no C compiler on PATH")
    sources, manifest = deeploy_checkout, CodeManifest.read(code_dir)
    config = BuildConfig(manifest.cores, manifest.l3_bytes)
    built = build_step(code_dir, sources, toolchain, config, kernel_library(sources, toolchain, config),
                       tmp_path / "step")
    assert built.is_file()


def _replay(shared_models: Path, tmp_path: Path, model: str, budget: str) -> tuple:
    from cli_support import ckpt_here

    from ckpt.replay.report import ReplayReport

    schedule, out = tmp_path / "seq.json", tmp_path / "replay"
    solved = ckpt_here("solve", str(shared_models / model), "--target", "gap9", "--budget", budget, "-o", str(schedule))
    assert solved.returncode == 0, solved.stderr
    run = ckpt_here("replay", str(schedule), "--model", str(shared_models / model), "-o", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    return ReplayReport.read(out / "report.json"), out, run.stdout


def test_simplemlps_two_gap9_networks_train_on_the_host_by_the_harness_bit_for_bit_with_the_graph_order(
        gap9, shared_models, deeploy_checkout, lowering_cache, tmp_path):
    report, out, printed = _replay(shared_models, tmp_path, "simplemlp_train", "0.9")
    for flow, folder in (("tiled", "code"), ("non_tiled", "code-non-tiled")):
        run = report.code_runs[flow]
        assert (run.harness.errors, run.harness.total) == (0, 4), flow          # the harness's count: the losses
        assert run.golden.errors == 0 and run.graph_order == "bit-identical", flow
        code = (out / folder / "TrainingNetwork.c").read_text() + (out / folder / "OptimizerNetwork.c").read_text()
        assert '#include "DeeployGAP9Math.h"' in code and "mchan_transfer_1d(" not in code, flow
        transfers = [t for name in ("TrainingNetwork.c", "OptimizerNetwork.c")
                     for t in code_transfers(out / folder / name)]
        assert bool(transfers) == (flow == "tiled")       # GAP9's DMA moves the tiles; the non-tiled code none
        assert all(t.size < MCHAN_LIMIT for t in transfers)
        simulated = report.gvsoc[flow]
        assert simulated.cycles is None and simulated.reason == "GAP9's gvsoc model ships only with GreenWaves' SDK"
    assert "not simulated (GAP9's gvsoc model ships only with GreenWaves' SDK)" in printed


def test_gap9s_lent_layernorm_grad_gets_ckpts_restarting_template_with_gap9s_transformer(gap9):
    """The branch's LayerNormalizationGrad template zeroes its weight and bias gradients once per process
    (workarounds.Defect.LAYERNORM_GRAD_ZEROING): GAP9 borrows PULPOpen's layer, so it gets ckpt's template as
    Siracusa does (else cct_train's GAP9 code differed from its graph order's), with GAP9's code transformer kept."""
    from ckpt.deeploy_bridge import workarounds
    from ckpt.deeploy_bridge.layernorm_grad import RestartingTemplate
    from ckpt.deeploy_bridge.targets import lent_to_gap9, target_parts

    if not workarounds.is_active(workarounds.Defect.LAYERNORM_GRAD_ZEROING):
        pytest.skip("the installed Deeploy's LayerNormalizationGrad has no once-per-process zeroing")
    assert dict(lent_to_gap9().ops).get("LayerNormalizationGrad")
    from ckpt.deeploy_bridge.defect_probes import layernorm_grad_binding
    from ckpt.deeploy_bridge.targets import _lent

    def passes(binding) -> list[str]:
        return [type(p).__name__ for p in binding.codeTransformer.passes]

    [binding] = target_parts("gap9", 8).platform.engines[0].Mapping["LayerNormalizationGrad"].maps[0].bindings
    assert isinstance(binding.template, RestartingTemplate)
    lent = _lent()[0]["LayerNormalizationGrad"].maps[0].bindings[0]
    assert not isinstance(lent.template, RestartingTemplate)           # the shared lent mapping stays as lent
    assert passes(binding) == passes(lent) != passes(layernorm_grad_binding())   # GAP9's transformer kept


@pytest.mark.parametrize("lent_template", ["ckpt's", "Deeploy's"])
def test_the_report_says_a_workaround_only_where_the_deployed_code_was_bound_with_it(gap9, lowering_cache, tmp_path,
                                                                                    monkeypatch, lent_template):
    """The report said "worked around layernorm-grad-zeroing at N node(s)" from the graph's node types, while GAP9's
    LayerNormalizationGrad, lent from PULPOpen, was still bound to the branch's template (cct_train's GAP9 code then
    differed from its graph order): what it says now comes from the bindings Deeploy elected in each flow."""
    from test_training_branch import _layer_norm_step

    from ckpt.deeploy_bridge import targets, workarounds
    from ckpt.pipeline.deployed_solve import solve_model
    from ckpt.replay.run import ReplayOptions, replay_schedule
    from ckpt.schedule_file import write_schedule
    from ckpt.solver.budget import parse_budget
    from ckpt.solver.model.records import SolveOptions

    if not workarounds.is_active(workarounds.Defect.LAYERNORM_GRAD_ZEROING):
        pytest.skip("the installed Deeploy's LayerNormalizationGrad has no once-per-process zeroing")
    if lent_template == "Deeploy's":         # GAP9 as it was before ckpt's template reached its lent layer
        monkeypatch.setattr(targets, "restarting_layer", lambda mapping: None)
    folder = _layer_norm_step(tmp_path / "norm", rows=16, features=8)
    doc, _ = solve_model(folder, parse_budget("1.0"), "gap9", SolveOptions())
    write_schedule(tmp_path / "seq.json", doc)
    report = replay_schedule(tmp_path / "seq.json", folder, tmp_path / "replay",
                             ReplayOptions(target="gap9", verify=False)).report
    [record] = [w for w in report.model.deeploy_workarounds if w.name == "layernorm-grad-zeroing"]
    carried = ["norm_grad"] if lent_template == "ckpt's" else []
    assert record.nodes == carried                         # before: ["norm_grad"] whatever was bound
    assert record.missed == [n for n in ["norm_grad"] if n not in carried]
    for flow in ("tiled", "non_tiled"):
        bound = report.deeploy[flow].workarounds["layernorm-grad-zeroing"]
        assert (list(bound.carried), list(bound.missed)) == (record.nodes, record.missed), flow
    if carried:
        assert record.line.startswith("worked around Deeploy's layernorm-grad-zeroing")
    else:
        assert record.line.startswith("did not work around Deeploy's layernorm-grad-zeroing")
        assert "NOT worked around at 1 node(s) (norm_grad first)" in record.line
