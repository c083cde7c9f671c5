"""The Deeploy bridge against the real Deeploy 0.2.1 and the two CCT training graphs (no mocks).

Deeploy runs are shared through session fixtures and an on-disk cache in a session temp dir, so the
whole file costs about four Deeploy runs.
"""
from __future__ import annotations

import time
from pathlib import Path

import onnx
import pytest
from conftest import SHARED_MODELS as MODELS

from ckpt.deeploy_bridge import (
    BridgeError,
    LoweredGraph,
    deeploy_label,
    deeploy_memory,
    deeploy_version,
    generate_code,
    lower,
    make_scheduler,
    run_count,
)
from ckpt.deeploy_identity import Flavour, deeploy_flavour

FT2 = MODELS / "cct2_ft2"
LP = MODELS / "cct2_lp"

pytestmark = pytest.mark.skipif(not FT2.is_dir(), reason="shared CCT models not available")

ELEM_BYTES = {onnx.TensorProto.FLOAT: 4, onnx.TensorProto.UINT8: 1, onnx.TensorProto.INT8: 1,
              onnx.TensorProto.INT32: 4, onnx.TensorProto.INT64: 8}


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lowered_cache")


@pytest.fixture(scope="session")
def ft2(cache_dir) -> LoweredGraph:
    return lower(FT2, cache_dir=cache_dir)


@pytest.fixture(scope="session")
def lp(cache_dir) -> LoweredGraph:
    return lower(LP, cache_dir=cache_dir)


@pytest.fixture(scope="session")
def ft2_memory():
    return deeploy_memory(FT2, None, tiled=False)


def _value_infos(model: onnx.ModelProto) -> dict:
    g = model.graph
    return {v.name: v for v in list(g.value_info) + list(g.input) + list(g.output)}


@pytest.mark.deeploy
@pytest.mark.parametrize("which, nodes, n_aliases, alias_ops", [
    ("ft2", 193, 45, {"Reshape", "Squeeze", "Unsqueeze"}),
    ("lp", 76, 12, {"Reshape", "Squeeze"}),
])
def test_lowered_graph_shape(request, which, nodes, n_aliases, alias_ops):
    lg: LoweredGraph = request.getfixturevalue(which)
    g = lg.model.graph
    assert len(g.node) == nodes
    assert lg.target == "siracusa" and lg.deeploy_version == deeploy_label()
    names = [n.name for n in g.node]
    assert len(set(names)) == len(names)
    assert set(lg.node_order) == set(names)
    # Every tensor a node touches has a shape and a sized dtype (initializers carry their own).
    infos = _value_infos(lg.model)
    inits = {t.name for t in g.initializer}
    for node in g.node:
        for t in list(node.input) + list(node.output):
            if not t or t in inits:
                continue
            tt = infos[t].type.tensor_type
            assert tt.elem_type in ELEM_BYTES, t
            assert all(d.HasField("dim_value") for d in tt.shape.dim), t
    # Aliases: Deeploy's own alias marks, each an output of the node that reads the aliased input.
    assert len(lg.aliases) == n_aliases
    assert set(lg.alias_ops.values()) == alias_ops
    producer = {o: n for n in g.node for o in n.output}
    for out, inp in lg.aliases.items():
        assert inp in producer[out].input
        assert producer[out].op_type == lg.alias_ops[out]
    # Node bookkeeping: kept names are in the lowered graph; added + kept = all lowered nodes.
    assert set(lg.node_names.values()) | set(lg.added_nodes) == set(names)
    assert len(lg.added_nodes) - len(lg.removed_nodes) == nodes - {"ft2": 179, "lp": 70}[which]


@pytest.mark.deeploy
def test_io_names_and_input_types(ft2):
    assert ft2.io_names["input"] == "input_0"
    assert ft2.io_names["labels"] == "input_1"
    outputs = [o.name for o in onnx.load(FT2 / "network.onnx").graph.output]
    assert [ft2.io_names[o] for o in outputs] == [f"output_{i}" for i in range(len(outputs))]
    lowered_io = {v.name for v in list(ft2.model.graph.input) + list(ft2.model.graph.output)}
    assert set(ft2.io_names.values()) == lowered_io
    # labels = [3] -> smallest integer type, as Deeploy's test runners infer it.
    assert ft2.input_types == {"input_0": "float32_t", "input_1": "uint8_t"}


@pytest.mark.deeploy
def test_added_nodes_are_transposes(ft2):
    ops = {n.name: n.op_type for n in ft2.model.graph.node}
    assert ft2.added_nodes and all(ops[name] == "Transpose" for name in ft2.added_nodes)


@pytest.mark.deeploy
def test_cache_hit_does_not_run_deeploy(ft2, cache_dir):
    runs = run_count()
    t0 = time.perf_counter()
    again = lower(FT2, cache_dir=cache_dir)
    elapsed = time.perf_counter() - t0
    assert run_count() == runs
    assert again.from_cache and elapsed < 1.0
    assert again.model.SerializeToString() == ft2.model.SerializeToString()
    assert again.aliases == ft2.aliases and again.io_names == ft2.io_names
    assert list(Path(cache_dir).glob("*.tmp")) == []


@pytest.mark.deeploy
def test_a_second_lowering_in_one_process_reads_neither_deeploy_nor_the_disk(ft2, cache_dir, monkeypatch):
    """A sweep point's solve, replay and host check lower the same model: once per process, then from memory."""
    from ckpt.deeploy_bridge import cache

    def no_disk(*_):
        raise AssertionError("the on-disk cache was read again")

    monkeypatch.setattr(cache, "load", no_disk)
    runs = run_count()
    again = lower(FT2, cache_dir=cache_dir)
    assert run_count() == runs and again.from_cache and again.model is ft2.model
    elsewhere = Path(cache_dir) / "elsewhere"      # another cache folder is another store: a miss there runs Deeploy
    monkeypatch.undo()
    fresh = lower(FT2, cache_dir=elsewhere)
    assert run_count() == runs + 1 and not fresh.from_cache
    assert fresh.model.graph.SerializeToString() == ft2.model.graph.SerializeToString()   # timings aside


@pytest.mark.skipif(deeploy_flavour() is Flavour.TRAINING_BRANCH,
                    reason="the training branch lowers GAP9 (ckpt lends it PULPOpen's kernels): the release's refusal "
                    "is what this checks")
def test_gap9_error_is_one_line_with_version(tmp_path):
    with pytest.raises(BridgeError) as info:
        lower(FT2, "gap9", cache_dir=tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert deeploy_version() in message and "GAP9" in message


def test_none_target_is_the_onnx_as_is():
    lg = lower(FT2, "none")
    assert len(lg.model.graph.node) == 179 and lg.target == "none" and lg.aliases == {}


def test_unknown_target():
    with pytest.raises(BridgeError):
        lower(FT2, "mars")


@pytest.mark.deeploy
def test_scheduler_adapter(ft2):
    import onnx_graphsurgeon as gs

    graph = gs.import_onnx(ft2.model)
    order = list(reversed(ft2.node_order))
    with pytest.raises(BridgeError, match="before its input"):
        make_scheduler(order)(graph)
    groups = make_scheduler(ft2.node_order)(graph)
    assert [grp[0].name for grp in groups] == ft2.node_order and all(len(grp) == 1 for grp in groups)
    same = make_scheduler(lambda g: list(g.nodes))(graph)
    assert [grp[0].name for grp in same] == ft2.node_order
    with pytest.raises(BridgeError, match="not in the lowered graph"):
        make_scheduler(["nope"])(graph)


@pytest.mark.deeploy
def test_deeploy_memory_default_order(ft2_memory, ft2):
    figures = ft2_memory
    assert figures.worst_case == {"None": 1_114_368}  # Deeploy's non-tiled dynamic peak
    assert figures.dynamic_peak == figures.worst_case
    assert figures.order == ft2.node_order
    assert figures.static["None"] > 0
    assert figures.timings.front_end > 0 and figures.timings.back_end > 0


@pytest.mark.deeploy
def test_lowered_graph_goes_back_through_deeploy(ft2, ft2_memory, tmp_path):
    """A lowered (or replay-rewired) graph is accepted as is: same names, same figures, plus code."""
    figures = generate_code(ft2.model, ft2.node_order, tmp_path, tiled=False)
    assert figures.order == ft2.node_order
    assert figures.worst_case == ft2_memory.worst_case
    network_c = (tmp_path / "Network.c").read_text()
    assert "RunNetwork" in network_c and "InitNetwork" in network_c
    assert (tmp_path / "Network.h").is_file()


@pytest.mark.deeploy
def test_tiled_arenas(tmp_path):
    figures = generate_code(LP, None, tmp_path, tiled=True)
    assert set(figures.arena) == {"L1", "L2", "L3"}
    assert all(v > 0 for v in figures.arena.values())
    assert figures.arena["L1"] <= 128_000 and figures.arena["L2"] <= 1_024_000
    header = (tmp_path / "Network.h").read_text()
    for level, size in figures.arena.items():
        assert f"MEMORYARENA_{level}_len = {size}" in header
    assert figures.timings.mid_end > 0 and figures.timings.codegen > 0


def _sum_of(inputs: int) -> onnx.ModelProto:
    """out = x0 + x1 + ... (Add nodes in a chain), every x a [4] float graph input."""
    from onnx import TensorProto, helper
    xs = [helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, [4]) for k in range(inputs)]
    nodes, last = [], "x0"
    for k in range(1, inputs):
        out = "out" if k == inputs - 1 else f"s{k}"
        nodes.append(helper.make_node("Add", [last, f"x{k}"], [out], name=f"add{k}"))
        last = out
    graph = helper.make_graph(nodes, "sum", xs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4])])
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


@pytest.mark.deeploy
def test_graphs_with_more_inputs_than_an_earlier_one_deploy_in_the_same_process():
    """Deeploy's deployers share one default dict of input offsets, which the first fills: ckpt gives each run its
    own, so a later graph with more inputs deploys (it failed with KeyError 'input_<i>')."""
    for inputs in (2, 40):
        figures = deeploy_memory(_sum_of(inputs), None, "siracusa", tiled=False)
        assert figures.layers == inputs - 1


def test_the_non_tiled_arena_blocks_follow_the_codes_allocations_and_frees():
    """A layer's scratch buffers lie side by side in one block; a block lives from its allocation to its free; one
    never freed lives to the last layer, unless nobody reads it (then only through its own layer)."""
    from ckpt.deeploy_bridge.non_tiled_arena import _blocks
    from ckpt.solver.memory.layout import Block
    made = {"a": (0, 8, "a"), "s1": (1, 4, "L:scratch"), "s2": (1, 8, "L:scratch"), "u": (1, 8, "u"),
            "kept": (2, 4, "kept")}
    blocks, inside = _blocks(made, {"a": 3, "L:scratch": 1}, {"u"}, 5)
    assert set(blocks) == {Block("a", 0, 3, 8), Block("L:scratch", 1, 1, 12), Block("u", 1, 1, 8),
                           Block("kept", 2, 4, 4)}
    assert inside == {"a": 0, "s1": 0, "s2": 4, "u": 0, "kept": 0}
