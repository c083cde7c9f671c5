"""Deeploy's training branch: positional step data mapped as its harness maps it, the split train/optimizer
step found beside the model, and the conv nets of ../shared/models verified against their goldens."""
import json
import os
from pathlib import Path

import numpy as np
import pytest
from cli_support import ckpt_here
from onnx import TensorProto, helper

from ckpt.deeploy_bridge.input_types import infer_input_types
from ckpt.deeploy_bridge.versions import Flavour, deeploy_flavour, deeploy_version
from ckpt.hostexec.step_layout import is_positional, positional_layout
from ckpt.paths import optimizer_graph
from ckpt.replay.report import ReplayReport
from ckpt.solver.graph.onnx_loader import data_inputs, read_model

CONV_NETS = ["resnet8_train", "dscnn_train"]
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]


def _graph(reset: bool = True):
    def value(name, elem, dims):
        return helper.make_tensor_value_info(name, elem, dims)

    inputs = [value("input", TensorProto.FLOAT, [1, 2]), value("labels", TensorProto.INT64, [1]),
              value("w", TensorProto.FLOAT, [2, 2]), value("b", TensorProto.FLOAT, [2]),
              value("w_grad.accumulation.buffer", TensorProto.FLOAT, [2, 2]),
              value("b_grad.accumulation.buffer", TensorProto.FLOAT, [2])]
    if reset:
        inputs.append(value("lazy_reset_grad", TensorProto.BOOL, [1]))
    return helper.make_graph([], "g", inputs, [])


def _arrays(batches: int = 3, **meta) -> dict[str, np.ndarray]:
    arrays = {"arr_0000": np.zeros((1, 2), np.float32), "arr_0001": np.array([0]),
              "arr_0002": np.eye(2, dtype=np.float32), "arr_0003": np.ones(2, np.float32),
              "arr_0004": np.array([True])}
    for b in range(1, batches):
        arrays[f"mb{b}_arr_0000"] = np.full((1, 2), b, np.float32)
        arrays[f"mb{b}_arr_0001"] = np.array([b])
    arrays.update({f"meta_{k}": np.array([v], np.int32) for k, v in meta.items()})
    return arrays


def test_base_arrays_fill_the_inputs_that_are_not_gradient_buffers_in_order():
    layout = positional_layout(_graph(), _arrays(), "inputs.npz")
    assert np.array_equal(layout.base["w"], np.eye(2)) and np.array_equal(layout.base["b"], np.ones(2))
    assert np.array_equal(layout.base["labels"], [0])
    assert layout.buffers == ("w_grad.accumulation.buffer", "b_grad.accumulation.buffer")
    assert all(not layout.base[b].any() and layout.base[b].shape == s
               for b, s in zip(layout.buffers, [(2, 2), (2,)]))
    assert layout.reset == "lazy_reset_grad"


def test_mini_batches_cycle_through_the_data_and_reset_the_accumulators_per_update():
    layout = positional_layout(_graph(), _arrays(3, n_batches=6, n_accum=2, data_size=3), "inputs.npz")
    assert (layout.n_steps, layout.n_accum, layout.n_batches) == (3, 2, 6)
    labels = [int(layout.feeds(b)["labels"][0]) for b in range(6)]
    assert labels == [0, 1, 2, 0, 1, 2]                   # mb % data_size
    resets = [bool(layout.feeds(b)["lazy_reset_grad"][0]) for b in range(6)]
    assert resets == [True, False, True, False, True, False]   # the first mini-batch of each update overwrites
    assert set(layout.feeds(1)) == {"input", "labels", "lazy_reset_grad"}   # weights are not data


def test_a_count_that_does_not_fit_the_graph_is_refused():
    arrays = _arrays()
    del arrays["arr_0003"]
    with pytest.raises(ValueError, match="4 base arrays"):
        positional_layout(_graph(), arrays, "inputs.npz")


def test_named_step_data_is_not_positional():
    names = ["input", "labels"]
    assert not is_positional(names, names)
    assert is_positional(["arr_0000", "arr_0001"], names)


def test_the_optimizer_graph_is_found_beside_the_model(tmp_path: Path):
    train, sibling, own = tmp_path / "net_train", tmp_path / "net_optimizer", tmp_path / "plain"
    for folder in (train, sibling, own):
        folder.mkdir()
        (folder / "network.onnx").write_bytes(b"")
    assert optimizer_graph(train) == sibling / "network.onnx"
    assert optimizer_graph(train / "network.onnx") == sibling / "network.onnx"
    assert optimizer_graph(own) is None
    (own / "optimizer.onnx").write_bytes(b"")
    assert optimizer_graph(own) == own / "optimizer.onnx"
    assert optimizer_graph(own, sibling) == sibling / "network.onnx"      # --optimizer wins


@pytest.mark.parametrize("name", CONV_NETS)
def test_conv_nets_verify_against_their_goldens_with_the_optimizer_applied(shared_models: Path, name):
    if not (shared_models / name).is_dir():
        pytest.skip(f"{name} is not among the shared models")
    result = ckpt_here("verify", str(shared_models / name))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "4 mini-batch(es), 4 accumulated per update, 1 update(s) by the optimizer graph" in lines[1]
    assert lines[2].startswith("Errors: 0 out of ")
    assert "18 golden tensor(s) the step does not write" in result.stdout     # BatchNorm running statistics


@pytest.mark.parametrize("name", ["dscnn", "resnet8"])
def test_without_its_optimizer_graph_the_step_is_refused_not_compared(shared_models: Path, tmp_path: Path, name):
    """The goldens are the weights after the update: the train graph alone never computes them, so the check is
    refused before it runs (ResNet-8's update is below the tolerance: compared, its weights passed unupdated)."""
    folder = tmp_path / f"{name}_train"           # no <name>_optimizer beside it
    folder.mkdir()
    for f in ("network.onnx", "inputs.npz", "outputs.npz"):
        (folder / f).symlink_to(shared_models / f"{name}_train" / f)
    result = ckpt_here("verify", str(folder))
    assert result.returncode == 1 and "Errors:" not in result.stdout
    assert "is a split step whose optimizer graph is absent" in result.stderr
    assert f"put it at {tmp_path / f'{name}_optimizer' / 'network.onnx'} or pass --optimizer GRAPH" in result.stderr
    assert ckpt_here("verify", str(folder), "--optimizer", str(shared_models / f"{name}_optimizer")).returncode == 0


def test_a_missing_optimizer_graph_is_one_line(shared_models: Path, tmp_path: Path):
    result = ckpt_here("verify", str(shared_models / "dscnn_train"), "--optimizer", str(tmp_path / "none.onnx"))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "optimizer" in result.stderr


def test_a_replayed_schedule_is_bit_identical_and_trains_the_same(shared_models: Path, tmp_path: Path):
    seq = tmp_path / "seq.json"
    solved = ckpt_here("solve", str(shared_models / "dscnn_train"), "--budget", "0.5", "-o", str(seq))
    assert solved.returncode == 0, solved.stderr
    result = ckpt_here("verify", str(shared_models / "dscnn_train"), "--schedule", str(seq))
    assert result.returncode == 0, result.stdout
    assert "Errors: 0 out of" in result.stdout and "bit-identical" in result.stdout


@pytest.fixture(scope="module")
def inspected_on_siracusa(shared_models: Path, lowering_cache):
    """`ckpt inspect resnet8_train --target siracusa` with the installed Deeploy: refused by a release without
    the conv training ops, lowered by the training branch."""
    return ckpt_here("inspect", str(shared_models / "resnet8_train"), "--target", "siracusa")


@pytest.mark.deeploy
def test_deeploy_0_2_1_names_the_ops_it_cannot_map_in_one_line(inspected_on_siracusa):
    result = inspected_on_siracusa
    if result.returncode == 0:
        pytest.skip("the installed Deeploy maps the conv training ops (the training branch): nothing to refuse")
    assert result.returncode == 1
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "ops without mapping:" in line
    assert all(op in line for op in ("ConvGrad", "BatchNormInternal", "InPlaceAccumulatorV2"))
    assert "Shape" not in line.split("ops without mapping:")[1]      # folded by Deeploy's front end


@pytest.mark.deeploy
@pytest.mark.parametrize("name", CONV_NETS)
def test_the_training_branchs_deeploy_lowers_solves_and_generates_both_flows(inspected_on_siracusa, shared_models,
                                                                             tmp_path, name):
    """With Deeploy's training branch installed, a conv net lowers for Siracusa, solves on the lowered graph and
    its schedule generates both flows' code, the replayed peak the predicted one."""
    if inspected_on_siracusa.returncode != 0:
        pytest.skip(f"the installed Deeploy {deeploy_version()} maps no conv training op "
                    "(install Deeploy's training branch, its pull request 169, to run this)")
    schedule, out = tmp_path / "seq.json", tmp_path / "replay"
    solved = ckpt_here("solve", "--costs", "estimate", str(shared_models / name), "--target", "siracusa", "--budget",
                       "0.7",
                       "--time-limit", "20", "-o", str(schedule))
    assert solved.returncode == 0, solved.stderr
    replayed = ckpt_here("replay", str(schedule), "--model", str(shared_models / name), "--no-verify", "-o", str(out))
    assert replayed.returncode == 0, replayed.stderr
    report = ReplayReport.read(out / "report.json")
    assert report.memory.replayed_peak == json.loads(schedule.read_text())["predicted"]["peak_bytes"]
    network = "TrainingNetwork.c" if optimizer_graph(shared_models / name) else "Network.c"   # a split step
    assert (out / "code" / network).is_file() and (out / "code-non-tiled" / network).is_file()


def test_optimizer_figures_count_what_the_optimizer_graph_adds():
    from graphs import make_graph

    from ckpt.solver.graph.step_pair import optimizer_figures

    train = make_graph([("f", "Mul", ["x", "w"], ["y"]), ("g", "Grad", ["y", "x"], ["dw"]),
                        ("acc", "InPlaceAccumulatorV2", ["buf", "dw"], ["flag"])],
                       {"x": 8, "w": 16, "y": 8, "dw": 16, "buf": 16, "flag": 1}, {"x", "w", "buf", "flag"})
    adam = make_graph([("adam", "Adam", ["w", "buf", "m"], ["w_new", "m_new"])],
                      {"w": 16, "buf": 16, "m": 16, "w_new": 16, "m_new": 16}, {"w", "buf", "m", "w_new", "m_new"})
    figures = optimizer_figures(train, adam)
    assert (figures.shared_bytes, figures.output_bytes, figures.state_bytes) == (32, 32, 16)
    assert figures.activation_peak == 0 and figures.op_types == ("Adam",)


def test_inspect_and_solve_say_what_the_optimizer_graph_adds(shared_models: Path, tmp_path: Path):
    model = str(shared_models / "dscnn_train")
    inspect = ckpt_here("inspect", model)
    assert inspect.returncode == 0
    line = next(x for x in inspect.stdout.splitlines() if x.startswith("optimizer graph"))
    assert "29 nodes (SGD)" in line and "outputs add 10928 B written out of place" in line
    seq = tmp_path / "seq.json"
    solved = ckpt_here("solve", model, "--budget", "0.8", "-o", str(seq))
    assert solved.returncode == 0 and "the optimizer graph (29 nodes) runs after this one" in solved.stderr
    assert '"output_bytes": 10928' in seq.read_text()
    missing = ckpt_here("inspect", model, "--optimizer", str(tmp_path / "nothing"))
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1


def test_replay_checks_a_conv_net_schedule_through_the_whole_step(shared_models: Path, tmp_path: Path):
    model = str(shared_models / "dscnn_train")
    seq = tmp_path / "seq.json"
    assert ckpt_here("solve", model, "--budget", "0.6", "-o", str(seq)).returncode == 0
    result = ckpt_here("replay", str(seq), "--model", model, "-o", str(tmp_path / "replay"),
                       "--optimizer", str(shared_models / "dscnn_optimizer"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "golden (device harness rule): Errors: 0 out of 2736" in result.stdout
    assert "vs graph order: bit-identical" in result.stdout


@pytest.mark.parametrize("name", CONV_NETS)
def test_deeploy_types_the_gradient_buffers_of_positional_step_data_as_float(shared_models: Path, name):
    """Deeploy's types for the graph inputs come from the step data as the branch's harness maps it: the
    gradient-accumulation buffers are float zeros (typed from the mini-batch arrays by sorted key, they were
    uint8_t, and InPlaceAccumulatorV2 found no binding)."""
    folder = shared_models / name
    graph = read_model(folder / "network.onnx").graph
    with np.load(folder / "inputs.npz") as stored:
        arrays = {k: stored[k] for k in stored.files}
    types = infer_input_types(graph, arrays)
    inputs = [i.name for i in data_inputs(graph)]
    buffers = [f"input_{i}" for i, n in enumerate(inputs) if n.endswith("accumulation.buffer")]
    assert buffers and all(types[b] == "float32_t" for b in buffers)
    labels = [f"input_{i}" for i, n in enumerate(inputs) if "label" in n.lower() or "target" in n.lower()]
    assert all(types[b] != "float32_t" for b in labels)


def test_a_split_step_on_a_deeploy_target_needs_the_training_branch_said_before_any_work(shared_models: Path,
                                                                                          tmp_path: Path):
    """A step of the training branch's layout runs on its harness: with the release installed, a replay for a
    Deeploy target says in one line that the branch is needed and how to install it, before lowering anything."""
    if deeploy_flavour() is Flavour.TRAINING_BRANCH:
        pytest.skip("the training branch is installed: its split steps replay (tests/test_split_step.py)")
    schedule = tmp_path / "seq.json"
    assert ckpt_here("solve", str(shared_models / "dscnn_train"), "--target", "none", "--budget", "0.9",
                     "-o", str(schedule)).returncode == 0
    run = ckpt_here("replay", str(schedule), "--model", str(shared_models / "dscnn_train"), "--target", "siracusa",
                    "--force", "-o", str(tmp_path / "out"))
    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0 and len(lines) == 1, run.stderr
    assert "positional" in lines[0] and "0.2.1 (release)" in lines[0] and "pip install" in lines[0]
    assert "--target none" in lines[0]
    assert not (tmp_path / "out").exists()


def _pool_softmax_grad(folder: Path, n: int = 16) -> Path:
    """CCT's sequence-pool SoftmaxGrad in small: dX = SoftmaxGrad(dY, Y) along axis 1 of [1, n, 1], then + dY."""
    vi, f = helper.make_tensor_value_info, TensorProto.FLOAT
    nodes = [helper.make_node("SoftmaxGrad", ["dy", "y"], ["dz"], name="pool_softmax_grad", domain="com.microsoft",
                              axis=1), helper.make_node("Add", ["dz", "dy"], ["dx"], name="residual_add")]
    graph = helper.make_graph(nodes, "pool", [vi("dy", f, [1, n, 1]), vi("y", f, [1, n, 1])], [vi("dx", f, [1, n, 1])],
                              value_info=[vi("dz", f, [1, n, 1])])
    rng = np.random.default_rng(0)
    dy = rng.normal(size=(1, n, 1)).astype(np.float32)
    e = np.exp(rng.normal(size=(1, n, 1)))
    y = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    return _tiny_model(folder, graph, {"dy": dy, "y": y}, {"dx": y * (dy - (dy * y).sum(axis=1, keepdims=True)) + dy})


def _layer_norm_step(folder: Path, rows: int = 256, features: int = 64) -> Path:
    """A LayerNormalization and its gradient in the training branch's forms (statistics kept; dX, dscale, dbias),
    large enough that the tiler splits the gradient's rows over several tiles of L1."""
    vi, f = helper.make_tensor_value_info, TensorProto.FLOAT
    attrs = {"axis": -1, "epsilon": 1e-5, "stash_type": 1}
    nodes = [helper.make_node("LayerNormalization", ["x", "w", "b"], ["y", "mean", "isd"], name="norm", **attrs),
             helper.make_node("LayerNormalizationGrad", ["dy", "x", "w", "mean", "isd"], ["dx", "dw", "db"],
                              name="norm_grad", domain="com.microsoft", **attrs)]
    shape = [1, rows, features]
    graph = helper.make_graph(nodes, "norm", [vi("x", f, shape), vi("dy", f, shape), vi("w", f, [features]),
                                              vi("b", f, [features])],
                              [vi("y", f, shape), vi("dx", f, shape), vi("dw", f, [features]), vi("db", f, [features])],
                              value_info=[vi("mean", f, [1, rows, 1]), vi("isd", f, [1, rows, 1])])
    rng = np.random.default_rng(0)
    x, dy = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    w, b = (rng.normal(size=features).astype(np.float32) for _ in range(2))
    isd = 1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    xhat, gdy = (x - x.mean(-1, keepdims=True)) * isd, w * dy
    golden = {"y": xhat * w + b,
              "dx": isd * (gdy - gdy.mean(-1, keepdims=True) - xhat * (gdy * xhat).mean(-1, keepdims=True)),
              "dw": (dy * xhat).sum((0, 1)), "db": dy.sum((0, 1))}
    return _tiny_model(folder, graph, {"x": x, "dy": dy, "w": w, "b": b}, golden)


def _tiny_model(folder: Path, graph, feeds: dict, golden: dict) -> Path:
    import onnx

    folder.mkdir(parents=True)
    model = helper.make_model(graph, opset_imports=OPSETS)
    onnx.save(model, folder / "network.onnx")
    np.savez(folder / "inputs.npz", **feeds)
    np.savez(folder / "outputs.npz", **{k: np.asarray(v, np.float32) for k, v in golden.items()})
    return folder


def _replayed_with(folder: Path, workarounds: str, *extra: str):
    """The graph order solved and replayed for Siracusa in a process of its own with $CKPT_DEEPLOY_WORKAROUNDS."""
    from cli_support import ckpt

    env = {**os.environ, "CKPT_DEEPLOY_WORKAROUNDS": workarounds}
    out = folder.parent / f"{folder.name}-{workarounds.replace(',', '+')}"
    out.mkdir()
    solved = ckpt("solve", "--costs", "estimate", str(folder), "--target", "siracusa", "--budget", "1.0", "-o",
                  str(out / "seq.json"),
                  env=env)
    assert solved.returncode == 0, solved.stderr
    replayed = ckpt("replay", str(out / "seq.json"), "--model", str(folder), "-o", str(out / "replay"), *extra,
                    env=env)
    return replayed, ReplayReport.read(out / "replay" / "report.json")


@pytest.mark.deeploy
def test_a_softmax_grad_along_a_middle_axis_computes_its_gradient_in_the_tiled_code(lowering_cache, deeploy_checkout,
                                                                                     tmp_path: Path):
    """Deeploy's tile constraint told the kernel a softmax length of 1 ([1, 16, 1] along axis 1: the tile's last
    dimension): the tiled code dropped the cross terms (15 Errors of 16). ckpt hands it the [1, 16] view, says so
    in the report with Deeploy's file and line, and $CKPT_DEEPLOY_WORKAROUNDS=off shows Deeploy's own result."""
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip("the release has the same defect, but its tiled code of the reshaped form faults: ckpt works "
                    "around it on the training branch only")
    folder = _pool_softmax_grad(tmp_path / "pool")
    replayed, report = _replayed_with(folder, "on")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert all(run.golden.errors == 0 for run in report.code_runs.values())
    named = {w.name: w for w in report.model.deeploy_workarounds}
    assert named["softmax-grad-axis"].deeploy_file.endswith("TileConstraints/iSoftmaxTileConstraint.py")
    assert named["softmax-grad-axis"].nodes == ["pool_softmax_grad"]
    assert "worked around Deeploy's softmax-grad-axis (Deeploy/Targets/PULPOpen/TileConstraints/" in replayed.stdout
    off, report = _replayed_with(folder, "off")
    assert off.returncode == 1 and report.code_runs["tiled"].golden.errors > 0
    assert report.model.deeploy_workarounds == []


@pytest.mark.deeploy
def test_the_layer_norm_gradients_start_from_zero_at_every_step(lowering_cache, deeploy_checkout, tmp_path: Path):
    """The branch's template zeroed dscale and dbias once per process (a C static flag): two steps in a row, the
    second added its gradients to the first's. ckpt's template zeroes them at the first tile of every call, and
    only there (each tile adds its rows' share: the tiled code is told per tile which one is first)."""
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip("the release parses no LayerNormalizationGrad of the training branch's form")
    folder = _layer_norm_step(tmp_path / "norm")
    replayed, report = _replayed_with(folder, "on", "--steps", "2")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    for run in report.code_runs.values():
        assert run.golden.errors == 0 and [step.errors for step in run.steps] == [0, 0], run
    assert [w.name for w in report.model.deeploy_workarounds] == ["layernorm-grad-zeroing"]
    assert "ckpt_first_tile_ref" in (folder.parent / "norm-on" / "replay" / "code" / "Network.c").read_text()
    off, report = _replayed_with(folder, "off", "--steps", "2")
    assert off.returncode == 1 and all(run.steps[1].errors > 0 for run in report.code_runs.values())


@pytest.mark.deeploy
@pytest.mark.parametrize("kind, options", [("cct", {"blocks": 1, "embed_dim": 16, "heads": 2, "image_size": 8}),
                                           ("mlp", {"layers": 2, "width": 16, "batch": 4})])
def test_a_built_in_example_lowers_and_its_code_computes_its_goldens_under_either_deeploy(lowering_cache,
                                                                                         deeploy_checkout, tmp_path,
                                                                                         kind, options):
    """Under the training branch the examples failed to lower ("parsing failed at op SoftmaxCrossEntropyLoss": the
    branch's loss has two outputs, its LayerNormalizationGrad reads the forward's statistics); ckpt hands them to
    it in its forms, and writes them in the forms its kernels compute (exact Gelu and LayerNorm gradient)."""
    from ckpt.examples.write import write_example
    from ckpt.pipeline.deployed_solve import solve_model
    from ckpt.replay.run import ReplayOptions, replay_schedule
    from ckpt.schedule_file import write_schedule
    from ckpt.solver.budget import parse_budget
    from ckpt.solver.model.records import SolveOptions

    folder = tmp_path / kind
    write_example(kind, folder, **options)
    doc, _ = solve_model(folder, parse_budget("1.0"), "siracusa", SolveOptions())
    write_schedule(tmp_path / "seq.json", doc)
    replayed = replay_schedule(tmp_path / "seq.json", folder, tmp_path / "replay", ReplayOptions(target="siracusa"))
    report = replayed.report
    for flow in ("tiled", "non_tiled"):
        run = report.code_runs[flow]
        assert run.status == "ran" and run.golden.errors == 0 and run.graph_order == "bit-identical", (flow, run)
    assert report.ok
