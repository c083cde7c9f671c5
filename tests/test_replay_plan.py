"""The replay rules, each on a small hand-built graph (no Deeploy): clones, rewiring, placement, pruning, refusal."""
from __future__ import annotations

import numpy as np
import onnx
import onnx_graphsurgeon as gs
import pytest
from onnx import TensorProto, helper, numpy_helper

from ckpt.errors import CkptError
from ckpt.hostexec.executor import HostExecutor
from ckpt.replay.onnx_graph import apply_to_model, rewired_aliases, rewired_scratch, view_of_model
from ckpt.replay.plan import plan_replay
from ckpt.replay.scheduler import ReplayScheduler, view_of_gs
from ckpt.solver.graph.onnx_loader import load_graph

FWD = ["f0", "f1", "f2"]


def model(nodes, outputs=("g0",), extra_inits=()) -> onnx.ModelProto:
    """x -> f0 Relu -> a0 -> f1 Mul(w) -> a1 -> f2 Relu -> a2; backward b2, b1, b0 reads a2, a1, a0; g0 out."""
    names = {t for n in nodes for t in list(n.input) + list(n.output)} | set(outputs)
    inits = [numpy_helper.from_array(np.full([4], 0.5, np.float32), "w"), *extra_inits]
    init_names = {t.name for t in inits}
    infos = [helper.make_tensor_value_info(t, TensorProto.FLOAT, [4]) for t in sorted(names - init_names - {"x"})
             if t not in outputs]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [4]) for o in outputs],
                              inits, value_info=infos)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def chain() -> onnx.ModelProto:
    n = helper.make_node
    return model([n("Relu", ["x"], ["a0"], "f0"), n("Mul", ["a0", "w"], ["a1"], "f1"), n("Relu", ["a1"], ["a2"], "f2"),
                  n("Mul", ["a2", "a2"], ["g2"], "b2"), n("Mul", ["g2", "a1"], ["g1"], "b1"),
                  n("Mul", ["g1", "a0"], ["g0"], "b0")])


def seq(*entries) -> list[tuple[str, int]]:
    return [(e, 0) if isinstance(e, str) else e for e in entries]


def plan_of(m, s, **kw):
    return plan_replay(view_of_model(m), s, **kw)


def by_name(plan):
    return {e.name: e for e in plan.executions}


# --------------------------------------------------------------------------- clones and rewiring


def test_recompute_is_a_clone_and_later_consumers_read_it():
    plan = plan_of(chain(), seq(*FWD, "b2", ("f1", 1), "b1", "b0"))
    ex = by_name(plan)
    assert plan.order == ["f0", "f1", "f2", "b2", "f1__ck1", "b1", "b0"]
    assert ex["f1__ck1"].outputs == ("a1__ck1",) and ex["f1__ck1"].source == "f1" and ex["f1__ck1"].clone == 1
    assert ex["b1"].inputs == ("g2", "a1__ck1")   # after the clone: the clone
    assert ex["f2"].inputs == ("a1",)             # before it: the original, which now dies at f2
    assert plan.clones_kept == 1 and plan.clones_pruned == 0


def test_repeated_name_flagged_0_is_also_a_clone():
    plan = plan_of(chain(), seq(*FWD, "b2", "f1", "b1", "b0"))
    assert "f1__ck1" in plan.order and by_name(plan)["b1"].inputs[1] == "a1__ck1"


def test_second_recompute_is_clone_2_reading_the_newest_inputs():
    plan = plan_of(chain(), seq(*FWD, "b2", ("f0", 1), ("f1", 1), "b1", ("f0", 1), "b0"))
    ex = by_name(plan)
    assert ex["f1__ck1"].inputs == ("a0__ck1", "w")
    assert ex["b0"].inputs == ("g1", "a0__ck2")


def test_clone_shares_constants_it_never_copies_them():
    m = chain()
    rewired = apply_to_model(m, plan_of(m, seq(*FWD, "b2", ("f1", 1), "b1", "b0")))
    clone = next(n for n in rewired.graph.node if n.name == "f1__ck1")
    assert list(clone.input) == ["a0", "w"] and clone.op_type == "Mul"
    assert [t.name for t in rewired.graph.initializer] == ["w"]
    assert load_graph(rewired).persistent_bytes == load_graph(m).persistent_bytes


def test_clone_keeps_op_attributes_and_gets_value_info():
    n = helper.make_node
    m = model([n("Relu", ["x"], ["a0"], "f0"), n("Softmax", ["a0"], ["s"], "sm", axis=0),
               n("Mul", ["s", "s"], ["g0"], "b0")])
    rewired = apply_to_model(m, plan_of(m, seq("f0", "sm", ("sm", 1), "b0")))
    clone = next(node for node in rewired.graph.node if node.name == "sm__ck1")
    assert helper.get_attribute_value(clone.attribute[0]) == 0
    assert "s__ck1" in {v.name for v in rewired.graph.value_info}


def test_rewired_graph_computes_the_same_numbers():
    m = chain()
    plan = plan_of(m, seq(*FWD, "b2", ("f1", 1), "b1", ("f0", 1), "b0"))
    feeds = {"x": np.arange(4, dtype=np.float32) - 1.5}
    expected = HostExecutor(m).run(feeds)
    got = HostExecutor(apply_to_model(m, plan)).run(feeds, plan.order)
    assert got["g0"].tobytes() == expected["g0"].tobytes()


# --------------------------------------------------------------------------- nodes the schedule does not name


def test_unnamed_nodes_run_right_after_their_producers_never_at_the_end():
    n = helper.make_node
    k = numpy_helper.from_array(np.ones([4], np.float32), "kv")
    m = model([n("Relu", ["x"], ["a0"], "f0"), n("Constant", [], ["k"], "const", value=k),
               n("Mul", ["a0", "w"], ["a1"], "f1"), n("Relu", ["a1"], ["a2"], "f2"), n("Relu", ["a2"], ["a3"], "f3"),
               n("Mul", ["a3", "k"], ["g2"], "b2"), n("Mul", ["g2", "a1"], ["g1"], "b1"),
               n("Mul", ["g1", "a0"], ["g0"], "b0")])
    plan = plan_of(m, seq("f0", "f1", "b2", "b1", "b0"), min_match=0.5)   # names 5 of 8 nodes on purpose
    assert plan.order == ["const", "f0", "f1", "f2", "f3", "b2", "b1", "b0"]
    assert set(plan.unscheduled) == {"const", "f2", "f3"}
    assert all(not by_name(plan)[u].scheduled for u in plan.unscheduled)


def test_an_unnamed_node_reads_the_newest_version_where_it_is_placed():
    n = helper.make_node
    m = model([n("Relu", ["x"], ["a0"], "f0"), n("Relu", ["a0"], ["a1"], "f1"), n("Mul", ["a0", "a1"], ["c"], "u"),
               n("Mul", ["c", "w"], ["g0"], "b")])
    plan = plan_of(m, seq("f0", ("f0", 1), "f1", "b"), min_match=0.5)     # names 3 of 4 nodes on purpose
    assert plan.order == ["f0__ck1", "f1", "u", "b"] and by_name(plan)["u"].inputs == ("a0__ck1", "a1")
    assert [e.name for e in plan.pruned] == ["f0"]


# --------------------------------------------------------------------------- pruning


def test_original_whose_consumers_all_moved_to_a_clone_is_pruned():
    plan = plan_of(chain(), seq("f0", ("f0", 1), "f1", "f2", "b2", "b1", "b0"))
    assert [e.name for e in plan.pruned] == ["f0"]
    assert plan.originals_pruned == 1 and "f0__ck1" in plan.order and "f0" not in plan.order


def test_clone_whose_consumers_all_ran_before_it_is_pruned_to_a_fixpoint():
    plan = plan_of(chain(), seq(*FWD, "b2", "b1", "b0", ("f0", 1), ("f1", 1)))
    assert [e.name for e in plan.pruned] == ["f0__ck1", "f1__ck1"]  # f1's clone orphaned f0's
    assert plan.order == [*FWD, "b2", "b1", "b0"] and plan.clones_kept == 0 and plan.clones_pruned == 2


def test_pruning_an_original_can_orphan_its_producer():
    plan = plan_of(chain(), seq("f0", "f1", ("f0", 1), ("f1", 1), "f2", "b2", "b1", "b0"))
    assert {e.name for e in plan.pruned} == {"f1", "f0"}
    assert plan.order == ["f0__ck1", "f1__ck1", "f2", "b2", "b1", "b0"]


def test_producers_of_graph_outputs_are_never_pruned():
    n = helper.make_node
    m = model([n("Relu", ["x"], ["y"], "o"), n("Mul", ["y", "w"], ["g0"], "z")], outputs=("y", "g0"))
    plan = plan_of(m, seq("o", ("o", 1), "z", ("z", 1)))
    assert "o" in plan.order and "z" in plan.order            # both write graph outputs
    assert [e.name for e in plan.pruned] == ["z__ck1"]        # a clone's copy is not a graph output
    assert by_name(plan)["z"].inputs == ("y__ck1", "w")


# --------------------------------------------------------------------------- validity and refusal


def test_invalid_order_is_refused():
    with pytest.raises(CkptError, match="runs 'b2' before its input 'a2' is produced"):
        plan_of(chain(), seq("f0", "f1", "b2", "f2", "b1", "b0"))


def test_schedule_matching_under_90_percent_is_refused_naming_rate_and_names():
    s = seq("f0", "f1", "f2", "b2", "b1", "b0", "b1x", "nope", "zz", "f2")
    with pytest.raises(CkptError) as info:
        plan_of(chain(), s, force=True)
    text = str(info.value)
    assert "70.0% of its 10 entries" in text and "'b1x', 'nope', 'zz'" in text and "\n" not in text


def test_schedule_of_another_graph_is_refused_with_both_fingerprints_unless_forced():
    m = chain()
    other = "0" * 64
    with pytest.raises(CkptError) as info:
        plan_of(m, seq(*FWD, "b2", "b1", "b0"), fingerprint=other)
    assert other in str(info.value) and view_of_model(m).fingerprint() in str(info.value)
    forced = plan_of(m, seq(*FWD, "b2", "b1", "b0"), fingerprint=other, force=True)
    assert forced.fingerprint.status == "forced"
    same = plan_of(m, seq(*FWD, "b2", "b1", "b0"), fingerprint=load_graph(m).fingerprint())
    assert same.fingerprint.status == "match"   # GraphView's fingerprint is TrainGraph's
    assert plan_of(m, seq(*FWD, "b2", "b1", "b0")).fingerprint.status == "absent"   # a bare {"seq": ...} file


# --------------------------------------------------------------------------- aliases and scratch of versions


def test_aliases_and_scratch_follow_the_versions():
    n = helper.make_node
    shape = numpy_helper.from_array(np.array([4], np.int64), "shape")
    m = model([n("Relu", ["x"], ["a0"], "f0"), n("Reshape", ["a0", "shape"], ["v"], "r"),
               n("Mul", ["v", "w"], ["g0"], "b0")], extra_inits=[shape])
    view = view_of_model(m)
    plan = plan_replay(view, seq("f0", ("f0", 1), "r", "b0"))
    assert rewired_aliases(view, plan, {"v": "a0"}) == {"v": "a0__ck1"}
    assert rewired_scratch(plan, {"f0": 64}) == {"f0__ck1": 64}


# --------------------------------------------------------------------------- as Deeploy's scheduler (gs graph)


def test_scheduler_prefers_the_live_node_over_a_stale_namesake_and_drops_the_stale_one():
    graph = gs.import_onnx(chain())
    tensors = graph.tensors()
    stale = gs.Node(op="Relu", name="f2", inputs=[tensors["a1"]], outputs=[])   # lowering cleared its outputs
    graph.nodes.insert(0, stale)
    view = view_of_gs(graph)
    assert view.stale == ("f2",) and view.nodes[view.index["f2"]].outputs == ("a2",)
    groups = ReplayScheduler(seq(*FWD, "b2", "b1", "b0"))(graph)
    assert [g[0].name for g in groups] == [*FWD, "b2", "b1", "b0"]
    assert all(g[0].outputs for g in groups) and stale not in graph.nodes and not stale.inputs


def test_scheduler_second_call_replays_the_first_order_without_new_clones():
    graph = gs.import_onnx(chain())
    scheduler = ReplayScheduler(seq(*FWD, "b2", ("f1", 1), "b1", ("f0", 1), "b0"))
    first = [g[0] for g in scheduler(graph)]
    count = len(graph.nodes)
    second = [g[0] for g in scheduler(graph)]
    assert [n.name for n in first] == [n.name for n in second] == scheduler.plan.order
    assert all(a is b for a, b in zip(first, second)) and len(graph.nodes) == count == 8
    assert scheduler.calls == 2 and scheduler.plan.clones_kept == 2


def test_scheduler_rewires_consumers_and_shares_constant_arrays():
    graph = gs.import_onnx(chain())
    w = graph.tensors()["w"]
    groups = ReplayScheduler(seq(*FWD, "b2", ("f1", 1), "b1", "b0"))(graph)
    nodes = {g[0].name: g[0] for g in groups}
    clone = nodes["f1__ck1"]
    assert clone.op == "Mul" and clone.inputs[1] is not w and clone.inputs[1].name == "w"
    assert clone.inputs[1]._values is w._values      # one value store (gs's shallow copy); one buffer by name
    assert nodes["b1"].inputs[1] is clone.outputs[0] and clone.outputs[0].name == "a1__ck1"
    assert list(w.outputs) == [nodes["f1"]]          # each Constant object still has one consumer


def test_scheduler_removes_pruned_originals_from_the_graph():
    graph = gs.import_onnx(chain())
    groups = ReplayScheduler(seq("f0", ("f0", 1), "f1", "f2", "b2", "b1", "b0"))(graph)
    assert "f0" not in {n.name for n in graph.nodes} and len(groups) == len(graph.nodes)
    assert {n.name for n in graph.tensors()["x"].outputs} == {"f0__ck1"}


def test_a_schedule_naming_too_few_of_the_graphs_nodes_is_refused_as_a_fragment():
    n = helper.make_node
    m = model([n("Relu", ["x"], ["a0"], "f0"), n("Relu", ["a0"], ["a1"], "f1"), n("Mul", ["a0", "a1"], ["c"], "u"),
               n("Mul", ["c", "w"], ["g0"], "b")])
    with pytest.raises(CkptError, match=r"names only 3 of the graph's 4 nodes \(75\.0%, needs 90%\)"):
        plan_of(m, seq("f0", "f1", "b"))
