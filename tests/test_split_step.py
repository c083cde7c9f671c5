"""A split step of Deeploy's training branch (its TrainingNetwork and OptimizerNetwork) replayed as that branch
deploys it, built with its harness, run on this host and on gvsoc.

The end-to-end tests need the training branch installed (`pip install ../shared/deeploy-train`: CI's second venv)
and its checkout beside the shared models; under the release they skip, saying why. The parts that need neither
(the harness's data, the pairing of the two graphs, the host runtime's view of on-chip and L3 addresses, the
probes of two networks, a step's levels) are tested here under any Deeploy.
"""
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import ckpt_here
from onnx import TensorProto, helper
from onnx_graphsurgeon.logger import G_LOGGER

from ckpt import deeploy_bridge
from ckpt.coderun.manifest import CodeManifest, Port
from ckpt.coderun.train_harness import TrainingRun, write_training_data
from ckpt.deeploy_bridge.errors import BridgeError
from ckpt.deeploy_bridge.records import FlowFigures
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, setup_for
from ckpt.deeploy_bridge.split_step import optimizer_role
from ckpt.gvsoc.probes import instrument
from ckpt.hostexec.executor import HostExecutor
from ckpt.memory_levels import LevelMemory
from ckpt.pipeline.row import step_levels
from ckpt.replay.report import ReplayReport
from ckpt.targets import SPLIT_HOME

TRAIN_IO = {"x": "input_0", "y": "input_1", "w": "input_2", "v": "input_3", "w_grad.accumulation.buffer": "input_4",
            "v_grad.accumulation.buffer": "input_5", "lazy_reset_grad": "input_6", "loss": "output_0"}


def _optimizer(inputs: list[str], updates: list[str]) -> onnx.ModelProto:
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in inputs]
    nodes = [helper.make_node("SGD", [w, g], [f"{w}_updated"], name=f"sgd_{w}", lr=0.1)
             for w, g in zip(inputs[0::2], inputs[1::2])]
    outputs = [helper.make_tensor_value_info(f"{w}_updated", TensorProto.FLOAT, [2]) for w in updates]
    return helper.make_model(helper.make_graph(nodes, "opt", info, outputs))


def test_the_optimizer_network_points_at_the_train_networks_buffers_by_name():
    role = optimizer_role(TRAIN_IO, _optimizer(["w", "w_grad.accumulation.buffer", "v", "v_grad.accumulation.buffer"],
                                                ["w", "v"]))
    assert dict(role.shared) == {"input_0": "DeeployNetwork_input_2", "input_1": "DeeployNetwork_input_4",
                                 "input_2": "DeeployNetwork_input_3", "input_3": "DeeployNetwork_input_5",
                                 "output_0": "DeeployNetwork_input_2", "output_1": "DeeployNetwork_input_3"}


@pytest.mark.parametrize("inputs, says", [
    (["w", "w_grad.accumulation.buffer", "u", "v_grad.accumulation.buffer"], "reads 'u', which the train graph"),
    (["v", "v_grad.accumulation.buffer", "w", "w_grad.accumulation.buffer"], "as the harness pairs them"),
])
def test_an_optimizer_graph_the_harness_cannot_pair_is_refused_naming_the_tensor(inputs, says):
    with pytest.raises(BridgeError, match=says):
        optimizer_role(TRAIN_IO, _optimizer(inputs, inputs[0::2]))


def _manifest() -> CodeManifest:
    ports = [Port("input_0", "float32_t", 2), Port("input_1", "uint8_t", 1, "1.hex"), Port("input_2", "float32_t", 4),
             Port("input_3", "float32_t", 4, "3.hex"), Port("input_4", "uint8_t", 1)]
    return CodeManifest("tiled", 8, 64_000_000, tuple(ports), (Port("output_0", "float32_t", 1),), "TrainingNetwork")


def _run(batches: int = 2) -> TrainingRun:
    data = tuple((np.full(2, b, np.float32), np.array([b], np.uint8)) for b in range(batches))
    return TrainingRun(1, batches, data, 3, 1, (1.5, 2.5), 1e-3)


def test_the_harness_is_compiled_with_the_run_its_data_and_its_losses(tmp_path):
    start = {"input_1": np.array([7], np.uint8), "input_2": np.arange(4, dtype=np.float32),
             "input_3": np.zeros(4, np.float32)}
    files = write_training_data(_manifest(), _run(), start, [], tmp_path, ".weightmem_sram")
    inputs = (tmp_path / "testinputs.h").read_text()
    for macro in ("N_TRAIN_STEPS 1", "N_ACCUM_STEPS 2", "TRAINING_DATA_SIZE 2", "TRAINING_NUM_DATA_INPUTS 2",
                  "TRAINING_GRAD_BUF_START_IDX 3", "TRAINING_NUM_GRAD_INPUTS 1", "TRAINING_NUM_WEIGHT_INPUTS 1"):
        assert f"#define {macro}\n" in inputs
    assert ".section .weightmem_sram.ckpt_weight0" in inputs and "testDataVector[2]" in inputs
    outputs = (tmp_path / "testoutputs.h").read_text()
    assert "#define N_LOSS_REFS 2" in outputs and "{1.5f, 2.5f}" in outputs and "TOLERANCE_ABS 0.001f" in outputs
    assert (tmp_path / "ckpt_weight0.bin").read_bytes() == start["input_2"].tobytes()
    assert (tmp_path / "ckpt_mb1_1.bin").read_bytes() == b"\x01"
    # the inputs the network keeps off chip start from files Init loads, with the values the run starts from
    assert sorted(p.name for p in files.flash_files) == ["1.hex", "3.hex"]
    assert (tmp_path / "1.hex").read_bytes() == b"\x07"


def test_the_device_runs_the_first_mini_batch_and_one_update_of_the_run(tmp_path):
    run = TrainingRun(2, 2, _run(4).batches, 3, 1, (1.5, 2.5, 3.5, 4.5), 1e-3)
    first = run.first_update()
    assert (first.n_steps, first.n_accum, first.n_batches, first.n_network_runs) == (1, 1, 1, 2)
    assert first.losses == (1.5,) and len(first.batches) == 1 and first.batches[0] is run.batches[0]
    write_training_data(_manifest(), first, {"input_2": np.zeros(4, np.float32), "input_3": np.zeros(4, np.float32),
                                             "input_1": np.zeros(1, np.uint8)}, [], tmp_path, ".data")
    inputs = (tmp_path / "testinputs.h").read_text()
    assert "#define N_TRAIN_STEPS 1\n" in inputs and "#define N_ACCUM_STEPS 1\n" in inputs
    assert "#define N_LOSS_REFS 1\n" in (tmp_path / "testoutputs.h").read_text()


def test_a_network_whose_inputs_the_harness_cannot_read_by_position_is_refused(tmp_path):
    run = _run()
    wrong = TrainingRun(run.n_steps, run.n_accum, run.batches, 2, 1, run.losses, run.tolerance)   # one input short
    with pytest.raises(ValueError, match="the network has 5 inputs"):
        write_training_data(_manifest(), wrong, {}, [], tmp_path, ".data")


def test_each_networks_layers_are_probed_in_its_own_run_entry_one_numbering_for_both():
    train = ("void RunTrainingNetwork() {\n{\n// _a_closure CLOSURE CALL\n_a_closure(&args);\n}\n{\n"
             "// _b_closure CLOSURE CALL\n_b_closure(&args);\n}\n}\nvoid InitTrainingNetwork() {\n}\n")
    probed = instrument(train, "RunTrainingNetwork")
    assert probed.layers == ("a", "b")                      # the blocks' braces do not end the entry early
    optimizer = instrument("void RunOptimizerNetwork() {\n// _s_closure CLOSURE CALL\n_s_closure(&args);\n}\n",
                           "RunOptimizerNetwork", first=len(probed.layers))
    assert "CKPT_PROBE_BEGIN(2);" in optimizer.source and optimizer.layers == ("s",)


def test_a_split_steps_levels_hold_both_networks_the_borrowed_arena_once():
    train = {"L1": LevelMemory(arena=1000, static=10), "L3": LevelMemory(arena=5000, static=100, predicted_arena=5000)}
    optimizer = FlowFigures(arena={"L1": 1500, "L2": 200, "L3": 0}, static={"L1": 4, "L2": 4, "L3": 0},
                            setup=DEFAULT_SETUP)
    levels = step_levels(train, optimizer)
    assert (levels["L1"].arena, levels["L1"].static) == (1500, 14)
    assert (levels["L2"].arena, levels["L2"].static) == (200, 4)
    assert (levels["L3"].total, levels["L3"].predicted_arena) == (5100, 5000)
    assert step_levels(train, None) == train
    split = FlowFigures(arena={"L1": 1500, "L2": 200, "L3": 0}, static={"L1": 4, "L2": 4, "L3": 0},
                        setup=setup_for("siracusa", SPLIT_HOME))
    on_chip = {**train, "L2": LevelMemory(arena=3000, static=20)}
    assert (step_levels(on_chip, split)["L2"].arena, step_levels(on_chip, split)["L2"].static) == (3000, 24)


def test_an_accumulator_whose_flag_deeploy_made_an_alias_writes_its_buffer_back():
    """Deeploy types the lowered accumulator's flag as its buffer: the one output is the new buffer, and the buffer
    (a graph input) is updated in place all the same."""
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("InPlaceAccumulatorV2", ["buf", "g", "reset"], ["out"], name="acc", domain="com.microsoft")],
        "acc",
        [value("buf", TensorProto.FLOAT, [2]), value("g", TensorProto.FLOAT, [2]),
         value("reset", TensorProto.BOOL, [1])],
        [value("out", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    executor = HostExecutor(model)
    found = executor.run({"buf": np.ones(2, np.float32), "g": np.full(2, 2, np.float32), "reset": np.array([False])})
    assert executor.updated_inputs == ["buf"]
    assert np.array_equal(found["out"], [3, 3]) and np.array_equal(found["buf"], [3, 3])


# --------------------------------------------------------------------------- with the training branch installed



def _replay(shared_models: Path, tmp_path: Path, model: str, budget: str, *extra: str) -> tuple[ReplayReport, Path]:
    schedule, out = tmp_path / "seq.json", tmp_path / "replay"
    solved = ckpt_here("solve", "--costs", "estimate", str(shared_models / model), "--target", "siracusa",
                       "--budget", budget,
                       "-o", str(schedule))
    assert solved.returncode == 0, solved.stderr
    run = ckpt_here("replay", str(schedule), "--model", str(shared_models / model), "-o", str(out), *extra)
    assert run.returncode == 0, run.stdout + run.stderr
    return ReplayReport.read(out / "report.json"), out


@pytest.mark.deeploy
@pytest.mark.gvsoc
def test_simplemlps_two_networks_train_on_the_host_and_on_gvsoc_by_the_branchs_harness(
        branch, shared_models, deeploy_checkout, lowering_cache, tmp_path):
    report, out = _replay(shared_models, tmp_path, "simplemlp_train", "0.9")
    assert report.model.deeploy_version == "0.2.1 (training branch)"
    code = out / "code"
    assert {"TrainingNetwork.c", "OptimizerNetwork.c", "io.json", "io-optimizer.json"} <= {p.name for p in
                                                                                         code.iterdir()}
    shared = "DeeployOptNetwork_input_0 = (float32_t*) DeeployNetwork_input_2"
    assert shared in (code / "OptimizerNetwork.c").read_text()
    assert "ckpt_mirror_input_0" in (code / "TrainingNetwork.c").read_text()   # home L3: the data mirrored on chip
    for flow, run in report.code_runs.items():
        assert run.harness is not None and (run.harness.errors, run.harness.total) == (0, 4), flow
        assert run.golden.errors == 0 and run.golden.compared == 596 and run.graph_order == "bit-identical", flow
    tiled = report.gvsoc["tiled"]
    if tiled.reason and "not simulated" in tiled.status.value:
        pytest.skip(f"gvsoc: {tiled.reason}")
    # the host ran all 4 mini-batches and updates; the device runs the first mini-batch and one update
    assert (tiled.errors, tiled.total, tiled.batches, tiled.updates) == (0, 1, 1, 1)
    assert tiled.cycles > 0 and tiled.optimizer_cycles > 0 and (out / tiled.log).is_file()
    assert len(tiled.state) == 7 and tiled.state["input_2"].startswith("2048:")   # the device's weights, hashed
    assert report.deeploy_optimizer and report.deeploy_optimizer["tiled"].arena["L3"] == 0   # all of it shared
    non_tiled = report.gvsoc["non_tiled"]            # simulated on request only, as for one network
    assert non_tiled.cycles is None and "--simulate-non-tiled" in non_tiled.reason


@pytest.mark.deeploy
def test_a_conv_nets_schedule_with_recomputes_computes_what_the_graph_order_computes_in_both_flows(
        branch, shared_models, deeploy_checkout, lowering_cache, tmp_path):
    report, _ = _replay(shared_models, tmp_path, "dscnn_train", "0.7", "--no-simulate")
    assert report.replay.clones_kept > 0
    assert report.memory.levels["L3"].arena == report.memory.levels["L3"].predicted_arena
    for flow, run in report.code_runs.items():
        assert run.harness.errors == 0 and run.golden.errors == 0 and run.graph_order == "bit-identical", flow


@pytest.mark.deeploy
def test_a_split_step_without_its_optimizer_graph_is_refused_before_any_work(branch, shared_models, tmp_path):
    folder = tmp_path / "simplemlp_train"
    folder.mkdir()
    for name in ("network.onnx", "inputs.npz", "outputs.npz"):
        (folder / name).symlink_to(shared_models / "simplemlp_train" / name)
    schedule = tmp_path / "seq.json"
    nodes = onnx.load(shared_models / "simplemlp_train" / "network.onnx").graph.node
    schedule.write_text(json.dumps({"seq": [[n.name, 0] for n in nodes]}))
    run = ckpt_here("replay", str(schedule), "--model", str(folder), "--target", "siracusa", "-o", str(tmp_path / "o"))
    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0 and len(lines) == 1 and "no optimizer graph" in lines[0] and "--optimizer" in lines[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.deeploy
def test_positional_step_data_that_does_not_fit_the_train_graph_is_refused_in_one_line(branch, shared_models,
                                                                                     tmp_path):
    folder = tmp_path / "simplemlp_train"
    folder.mkdir()
    for name in ("network.onnx", "outputs.npz"):
        (folder / name).symlink_to(shared_models / "simplemlp_train" / name)
    (tmp_path / "simplemlp_optimizer").symlink_to(shared_models / "simplemlp_optimizer")
    arrays = dict(np.load(shared_models / "simplemlp_train" / "inputs.npz"))
    del arrays["arr_0003"]                                   # one base array short of the train graph's inputs
    np.savez(folder / "inputs.npz", **arrays)
    schedule = tmp_path / "seq.json"
    nodes = onnx.load(folder / "network.onnx").graph.node
    schedule.write_text(json.dumps({"seq": [[n.name, 0] for n in nodes]}))
    run = ckpt_here("replay", str(schedule), "--model", str(folder), "--target", "siracusa", "-o", str(tmp_path / "o"))
    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0 and len(lines) == 1 and "base arrays" in lines[0], run.stderr
    assert not (tmp_path / "o").exists()


def test_a_kernel_is_told_the_scratch_its_tile_was_given_never_more():
    from types import SimpleNamespace

    from ckpt.deeploy_bridge.scratch_sizes import fit_scratch_sizes

    def layer(**representation):
        return SimpleNamespace(mapper=SimpleNamespace(parser=SimpleNamespace(operatorRepresentation=representation)))

    grad = layer(ctxtBuffer="im2col", ctxtBufferSize=147456, btBuffer="bt", btBufferSize=2304, data_in="x")
    plain = layer(ctxtBuffer="other", ctxtBufferSize=100)
    changed = fit_scratch_sizes(SimpleNamespace(layerBinding={"g": grad, "p": plain}),
                                {"im2col": 110592, "bt": 4096, "other": 50})
    rep = grad.mapper.parser.operatorRepresentation
    assert (rep["ctxtBufferSize"], rep["btBufferSize"]) == (110592, 2304)   # less told where less was given
    assert plain.mapper.parser.operatorRepresentation["ctxtBufferSize"] == 50 and sorted(changed) == ["im2col", "other"]


@pytest.mark.deeploy
def test_resnet8s_convgradx_dy_tile_is_laid_out_with_the_cube_its_code_moves(branch, shared_models, lowering_cache,
                                                                             tmp_path):
    """The branch's tiler counts the layer-3 ConvGradX's dY tile as 64x6x8 floats, its code moves 64x8x8 (the
    kernel is called with dY tile dims 8, 8, 64) into L1: the tile must hold them all, or they overwrite the
    weights' tile beside it."""
    layer = "node_23_layer3_layer3_0_conv2_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradX"
    moved = 64 * 8 * 8 * 4
    lowered = deeploy_bridge.lower(shared_models / "resnet8_train", "siracusa")
    with G_LOGGER.suppress(G_LOGGER.ERROR):
        figures = deeploy_bridge.deploy(lowered.model, lowered.node_order, "siracusa", tiled=True, code_dir=tmp_path)
    grown = {(g.level, g.layer): g for g in figures.grown}
    dy = grown["L1", layer]
    assert dy.moved == moved and dy.counted < moved
    code = (tmp_path / "Network.c").read_text()
    in_l1 = rf"DeeployNetwork_\w*?{layer}_(\w+?)(?:_ref)? = \([\w*]+\) ?\(\(char\*\)DeeployNetwork_MEMORYARENA_L1 " \
        r"\+ (\d+)\)"
    offsets = {name: int(at) for name, at in re.findall(in_l1, code)}
    assert {"grad_out", "weight", "grad_in"} <= set(offsets), offsets
    above = [at for at in offsets.values() if at > offsets["grad_out"]] + [figures.arena["L1"]]
    assert min(above) - offsets["grad_out"] >= moved          # nothing else of the layer inside the moved cube


def test_an_update_moves_its_weight_twice_and_its_gradient_once():
    """The optimizer network's SGD reads the weight and its gradient and writes the weight back in place: off chip
    that is three transfers, so split+ prices the weight's two (what SimpleMLP measured: the optimizer's 26,626
    cycles fell to 4,186 with both on chip; priced one transfer per tensor, 12,895 were predicted)."""
    from ckpt.replay.split_run import optimizer_layers

    sgd = helper.make_node("SGD", ["w", "g"], ["w_new"], name="sgd_w")
    graph = helper.make_graph([sgd], "opt", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in "wg"],
                              [helper.make_tensor_value_info("w_new", TensorProto.FLOAT, [4])])
    found = optimizer_layers(helper.make_model(graph), {"w": "input_2", "g": "input_4"})
    assert found == {"input_2": ("SGD", "SGD"), "input_4": ("SGD",)}


def _simplemlp_split_step_for_gvsoc(shared_models, deeploy_checkout, tmp_path):
    """SimpleMLP's split step generated under the branch with its first update's data written for the device, and
    the SDK and kernels built: (kit, code, run, step, files, sdk, kernels); skipped without gvsoc."""
    from ckpt.deeploy_bridge import lower
    from ckpt.gvsoc.kernels import device_kernels
    from ckpt.gvsoc.kit import NoKit, find_kit
    from ckpt.gvsoc.sdk import sdk_library
    from ckpt.gvsoc.train_run import DEVICE_SECTION
    from ckpt.replay.split_run import deploy_split, split_step
    from ckpt.solver.graph.onnx_loader import read_model

    kit = find_kit()
    if isinstance(kit, NoKit):
        pytest.skip(kit.reason)
    folder = shared_models / "simplemlp_train"
    lowered = lower(folder, "siracusa")
    step = split_step(folder, read_model(folder / "network.onnx"), lowered.io_names, None, lowered.model)
    code = tmp_path / "code"
    deploy_split(lowered.model, lowered.node_order, step, "siracusa", True, setup_for("siracusa", SPLIT_HOME), code)
    run = step.run.first_update()
    files = write_training_data(CodeManifest.read(code), run, step.data.feeds, sorted((code / "hex").glob("*.hex")),
                                tmp_path / "data", DEVICE_SECTION)
    sdk = sdk_library(kit, deeploy_checkout)
    kernels = device_kernels(deeploy_checkout, kit, sdk, CodeManifest.read(code).cores)
    return kit, code, run, step, files, sdk, kernels


@pytest.mark.deeploy
@pytest.mark.gvsoc
@pytest.mark.slow
def test_a_split_step_that_fits_l2_only_without_its_probes_runs_so_on_gvsoc_where_its_layers_are_not_needed(
        branch, shared_models, deeploy_checkout, lowering_cache, tmp_path):
    """SimpleMLP's split step told it holds as much L2 as leaves room for it built without probes and compact only:
    a replay's run (its layers not needed) is built so, runs with 0 errors, its record says so and has no layer's
    cycles; a calibration's (layers needed) is refused with the bytes."""
    from ckpt.gvsoc.open_files import closes_files
    from ckpt.gvsoc.run import L2_CAPACITY, NotSimulated, runtime_heap
    from ckpt.gvsoc.step import build_training_step
    from ckpt.gvsoc.train_run import simulate_training

    kit, code, run, step, files, sdk, kernels = _simplemlp_split_step_for_gvsoc(shared_models, deeploy_checkout,
                                                                                tmp_path)
    closing = bool(files.flash_files) and closes_files(deeploy_checkout)       # as the run will build it
    static = {probed: build_training_step(code, CodeManifest.read(code).cores, files.folder, bool(files.flash_files),
                                          run.n_batches + run.n_steps, deeploy_checkout, kit, sdk, kernels,
                                          tmp_path / f"probed-{probed}", compact=True, probed=probed,
                                          closes_files=closing).l2_static_bytes
              for probed in (True, False)}
    assert static[False] < static[True]                        # the probes' counters and code take L2
    # room for the step without its probes and what the runtime keeps for itself, no more
    heap = L2_CAPACITY - static[False] - runtime_heap(files.flash_files, closes_files=closing)
    refused = simulate_training(code, run, step.data.feeds, deeploy_checkout, kit, heap, timeout=600)
    assert isinstance(refused, NotSimulated) and "does not fit" in refused.reason
    ran = simulate_training(code, run, step.data.feeds, deeploy_checkout, kit, heap, timeout=600,
                            layers_needed=False)
    assert not isinstance(ran, NotSimulated), ran.reason
    assert (ran.errors, ran.total) == (0, 1) and ran.train_per_batch > 0 and ran.optimizer_per_update > 0
    assert ran.on_chip.compact and not ran.on_chip.probed and not ran.layers
    again = simulate_training(code, run, step.data.feeds, deeploy_checkout, kit, heap, timeout=600)
    assert isinstance(again, NotSimulated)                     # its cached run does not serve one needing layers


@pytest.mark.deeploy
@pytest.mark.gvsoc
@pytest.mark.slow
def test_a_split_step_with_the_files_init_loads_closed_at_each_next_open_runs_where_only_that_fits(
        branch, shared_models, deeploy_checkout, lowering_cache, tmp_path, monkeypatch):
    """Deeploy's dory_mem.c keeps each file Init loads open (264 B of L2 each): SimpleMLP's split step told it holds
    as much L2 as leaves room for it with one file open at a time runs with ckpt's workaround (each file closed at
    the next open), 0 errors, its record saying so; with $CKPT_DEEPLOY_WORKAROUNDS=off it counts every file open and
    then fits only with its code compiled for size, or not at all."""
    from ckpt.deeploy_defects import ENV
    from ckpt.gvsoc.run import L2_CAPACITY, NotSimulated, runtime_heap
    from ckpt.gvsoc.step import build_training_step
    from ckpt.gvsoc.train_run import simulate_training

    monkeypatch.delenv(ENV, raising=False)
    kit, code, run, step, files, sdk, kernels = _simplemlp_split_step_for_gvsoc(shared_models, deeploy_checkout,
                                                                                tmp_path)
    manifest = CodeManifest.read(code)
    assert len(files.flash_files) >= 2
    static = build_training_step(code, manifest.cores, files.folder, True, run.n_batches + run.n_steps,
                                 deeploy_checkout, kit, sdk, kernels, tmp_path / "built",
                                 closes_files=True).l2_static_bytes
    heap = L2_CAPACITY - static - runtime_heap(files.flash_files, closes_files=True)
    ran = simulate_training(code, run, step.data.feeds, deeploy_checkout, kit, heap, timeout=600)
    assert not isinstance(ran, NotSimulated), ran.reason
    assert (ran.errors, ran.total) == (0, 1) and ran.train_per_batch > 0 and ran.optimizer_per_update > 0
    assert ran.on_chip.closes_files and ran.on_chip.total == L2_CAPACITY and not ran.on_chip.compact
    monkeypatch.setenv(ENV, "off")          # every file kept open: only compiled for size, if at all, does it fit
    kept = simulate_training(code, run, step.data.feeds, deeploy_checkout, kit, heap, timeout=600)
    assert kept.on_chip is not None and not kept.on_chip.closes_files
    assert kept.on_chip.runtime == runtime_heap(files.flash_files) > runtime_heap(files.flash_files, True)
    assert kept.on_chip.compact or "does not fit" in kept.reason


def test_a_split_steps_code_is_held_to_the_graph_orders_on_what_it_computed_not_on_scratch_inputs():
    """SimpleMLP's split step replayed at its solved graph order (the solver's stage order, two layers swapped from
    the lowered node order): weights, accumulators, losses bit-identical to the graph order's code, yet the replay
    failed its check on the final bytes of the data, labels and reset flag (input_0, input_1, input_6), which the
    harness writes again before each mini-batch and the arena's later tenants overwrite after their last read."""
    from ckpt.hostexec.compare import bit_identical
    from ckpt.replay.split_run import computed

    persistent = frozenset({"input_2", "input_4"})        # a weight and its accumulator
    reference = {"loss": np.array([2.5, 2.4], np.float32), "batch0/output_0": np.ones(3, np.float32),
                 **{f"state/input_{i}": np.full(4, i, np.float32) for i in (0, 1, 2, 4, 6)}}
    scratch = {**reference, "state/input_0": np.full(4, 9, np.float32), "state/input_6": np.full(4, 9, np.float32)}
    assert bit_identical(scratch, reference) == ["state/input_0", "state/input_6"]
    assert bit_identical(computed(scratch, persistent), computed(reference, persistent)) == []
    wrong = {**scratch, "state/input_2": np.full(4, 2.5, np.float32)}
    assert bit_identical(computed(wrong, persistent), computed(reference, persistent)) == ["state/input_2"]
