"""The training branch's recompute policies as ckpt's baselines (solver.policies): its ordering rule and top-K."""
from graphs import make_graph, random_graphs
from hypothesis import given

from ckpt.solver.graph.graph import Op
from ckpt.solver.graph.simulate import check_ready, drop_dead, memory_trace, plain_sequence
from ckpt.solver.policies.policies import branch_order, is_backward, policy_result, top_k


def _net():
    """f0 -> f1 -> f2 (forward), then three backward ops reading the forward activations in reverse."""
    spec = [("f0", "Relu", ["x"], ["a0"]), ("f1", "Relu", ["a0"], ["a1"]), ("f2", "Conv", ["a1", "w"], ["a2"]),
            ("loss_backward", "LossGrad", ["a2"], ["g2"]), ("f2_Grad", "ConvGrad", ["g2", "a1", "w"], ["g1"]),
            ("f1_Grad", "ReluGrad", ["g1", "a1"], ["g0"]), ("f0_Grad", "ReluGrad", ["g0", "a0"], ["gx"])]
    sizes = {t: 64 for t in ("x", "w", "a0", "a1", "a2", "g2", "g1", "g0", "gx")}
    costs = {"f0": 1, "f1": 4, "f2": 100, "loss_backward": 1, "f2_Grad": 100, "f1_Grad": 1, "f0_Grad": 1}
    return make_graph(spec, sizes, {"x", "w", "gx"}, costs=costs)


def test_backward_nodes_are_told_as_the_branch_tells_them():
    assert is_backward(Op("a", "ConvGrad", (), ())) and is_backward(Op("n_Grad_x", "Gemm", (), ()))
    assert is_backward(Op("n_backward", "Gemm", (), ())) and not is_backward(Op("fwd", "Gemm", (), ()))


def test_a_recompute_runs_just_before_its_first_backward_reader_a_chain_producers_first():
    graph = _net()
    seq = branch_order(graph, ["f0", "f1"])
    assert seq == [("f0", 0), ("f1", 0), ("f2", 0), ("loss_backward", 0), ("f0", 1), ("f1", 1), ("f2_Grad", 0),
                   ("f1_Grad", 0), ("f0_Grad", 0)]
    check_ready(graph, seq)


def test_a_node_no_backward_node_reads_is_not_recomputed():
    graph = _net()
    assert branch_order(graph, ["f2"]) == plain_sequence(graph)      # a2 is read by the loss's backward only...
    assert sum(f for _, f in branch_order(graph, ["f1"])) == 1


def test_top_k_takes_the_forward_nodes_that_free_the_most_bytes_per_cycle():
    graph = _net()
    assert top_k(graph, 2) == ["f0", "f1"]              # 64 B per cycle, then 16: f2's 64 B cost 100 cycles
    assert top_k(graph, 9) == ["f0", "f1", "f2"]        # never a backward node


def test_a_policys_result_carries_what_runs_and_proves_nothing():
    graph = _net()
    seq = branch_order(graph, ["f0", "f1"])
    found = policy_result(graph, seq, "the branch's rule")
    assert (found.recomputes, found.recompute_cost, found.status.value) == (2, 5, "heuristic")
    assert found.peak_bytes == memory_trace(graph, seq).peak_bytes and found.cost_lower_bound is None


@given(random_graphs(max_ops=7))
def test_the_branch_rule_runs_every_first_run_in_graph_order_and_is_runnable(graph):
    seq = branch_order(graph, [op.name for op in graph.ops])
    check_ready(graph, seq)
    assert [n for n, f in seq if not f] == [n for n, _ in drop_dead(graph, plain_sequence(graph))]


def test_policy_options_that_do_not_go_together_are_refused_in_one_line(tmp_path):
    from cli_support import ckpt_here
    out = str(tmp_path / "seq.json")
    for args, says in ((("--policy", "top-k"), "--policy top-k needs --k"),
                       (("--k", "3"), "--k 3 does nothing without --policy top-k"),
                       (("--policy", "top-k", "--k", "3", "--budget", "0.7"), "answers to no budget"),
                       (("--policy", "branch-rule", "--objective", "peak"), "orders the recompute set")):
        run = ckpt_here("solve", str(tmp_path / "model"), "-o", out, *args)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 1 and len(lines) == 1 and says in lines[0], (args, run.stderr)
