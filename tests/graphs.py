"""Small hand-made and random TrainGraphs for solver tests (no ONNX, no Deeploy)."""
from __future__ import annotations

from hypothesis import strategies as st

from ckpt.solver.graph.graph import Op, TrainGraph


def make_graph(spec: list[tuple[str, str, list[str], list[str]]], sizes: dict[str, int],
               persistent: set[str] = frozenset(), aliases: dict[str, str] | None = None,
               costs: dict[str, int] | None = None, scratch: dict[str, int] | None = None) -> TrainGraph:
    ops = tuple(Op(name, op_type, tuple(ins), tuple(outs)) for name, op_type, ins, outs in spec)
    return TrainGraph(ops=ops, tensor_bytes=dict(sizes), persistent=frozenset(persistent),
                      aliases=dict(aliases or {}), op_cost=costs or {op.name: 1 for op in ops},
                      scratch=dict(scratch or {}))


def chain(n: int, size: int = 4) -> TrainGraph:
    """Forward chain a0..a{n-1}, then a backward chain reading each forward activation in reverse."""
    spec, sizes = [], {"x": size, "w": size}
    prev = "x"
    for i in range(n):
        spec.append((f"f{i}", "Relu", [prev], [f"a{i}"]))
        sizes[f"a{i}"] = size
        prev = f"a{i}"
    grad = prev
    for i in reversed(range(n)):
        spec.append((f"b{i}", "Mul", [grad, f"a{i}"], [f"g{i}"]))
        sizes[f"g{i}"] = size
        grad = f"g{i}"
    spec.append(("upd", "SGD", ["w", grad], ["w_new"]))
    sizes["w_new"] = size
    return make_graph(spec, sizes, {"x", "w", "w_new"}, {"w_new": "w"})


@st.composite
def random_graphs(draw, max_ops: int = 8, max_outputs: int = 2) -> TrainGraph:
    """DAGs with multi-output ops (up to `max_outputs` each), fan-out, views (aliases), weights and a persistent
    update at the end."""
    n = draw(st.integers(2, max_ops))
    spec, sizes, aliases = [], {"x": 4, "w": 4}, {}
    available = ["x"]
    for i in range(n):
        if i > 0 and draw(st.booleans()) and draw(st.booleans()):
            source = draw(st.sampled_from(available))
            out = f"v{i}"
            spec.append((f"n{i}", "Reshape", [source], [out]))
            sizes[out] = sizes[source]
            if source != "x":
                aliases[out] = source
            available.append(out)
            continue
        k = draw(st.integers(1, min(3, len(available))))
        ins = draw(st.lists(st.sampled_from(available), min_size=k, max_size=k))
        if draw(st.booleans()):
            ins.append("w")
        outs = [f"t{i}_{j}" for j in range(draw(st.integers(1, max_outputs)))]
        for t in outs:
            sizes[t] = 4 * draw(st.integers(1, 6))
        spec.append((f"n{i}", "Op", ins, outs))
        available.extend(outs)
    spec.append(("upd", "SGD", ["w", available[-1]], ["w_new"]))
    sizes["w_new"] = 4
    costs = {name: draw(st.integers(1, 9)) for name, *_ in spec}
    scratch = {name: 4 * k for name, *_ in spec if (k := draw(st.integers(0, 3)))}
    return make_graph(spec, sizes, {"x", "w", "w_new"}, aliases, costs, scratch)


@st.composite
def shaped_graphs(draw, max_ops: int = 9) -> TrainGraph:
    """DAGs with the ops that exported training graphs compute shapes and constants with: `Shape` (a tiny
    activation read late by a Reshape in the backward pass), `Constant` (a persistent value an op writes),
    `Reshape` views whose shape comes from either, `Flatten` views, zero-byte and tiny tensors."""
    n = draw(st.integers(2, max_ops))
    spec, sizes, aliases = [], {"x": 16, "w": 16}, {}
    persistent = {"x", "w", "w_new"}
    activations = ["x"]
    shapes: list[str] = []
    for i in range(n):
        kind = draw(st.sampled_from(["op", "op", "shape", "constant", "reshape", "flatten"]))
        if kind == "shape":
            out = f"s{i}"
            spec.append((f"n{i}", "Shape", [draw(st.sampled_from(activations))], [out]))
            sizes[out] = draw(st.sampled_from([0, 8, 32]))
            shapes.append(out)
        elif kind == "constant":
            out = f"c{i}"
            spec.append((f"n{i}", "Constant", [], [out]))
            sizes[out] = draw(st.sampled_from([0, 8, 64]))
            persistent.add(out)
            shapes.append(out)
        elif kind in ("reshape", "flatten") and len(activations) > 1:
            source = draw(st.sampled_from(activations[1:]))
            out = f"v{i}"
            extra = [draw(st.sampled_from(shapes))] if kind == "reshape" and shapes else []
            spec.append((f"n{i}", "Reshape" if kind == "reshape" else "Flatten", [source, *extra], [out]))
            sizes[out] = sizes[source]
            aliases[out] = source
            activations.append(out)
        else:
            k = draw(st.integers(1, min(3, len(activations))))
            ins = draw(st.lists(st.sampled_from(activations + shapes), min_size=k, max_size=k))
            outs = [f"t{i}_{j}" for j in range(draw(st.integers(1, 2)))]
            for t in outs:
                sizes[t] = 4 * draw(st.integers(0, 6))
            spec.append((f"n{i}", "Op", ins, outs))
            activations.extend(outs)
    # a backward pass: each activation read again in reverse, so views and shapes are read late
    grad = activations[-1]
    for j, t in enumerate(reversed(activations[1:])):
        extra = [shapes[j % len(shapes)]] if shapes and draw(st.booleans()) else []
        spec.append((f"b{j}", "Grad", [grad, t, *extra], [f"g{j}"]))
        sizes[f"g{j}"] = 4 * draw(st.integers(1, 6))
        grad = f"g{j}"
    spec.append(("upd", "SGD", ["w", grad], ["w_new"]))
    sizes["w_new"] = 16
    aliases["w_new"] = "w"
    costs = {name: draw(st.integers(1, 9)) for name, *_ in spec}
    return make_graph(spec, sizes, persistent, aliases, costs)


def skip_chain() -> TrainGraph:
    """A forward chain whose late ops all read a0 again (a residual's skip), the backward reading a5 and a3: at
    its floor no schedule fits. Remaking a3 in b1's stage runs f1..f3 with a0 kept until f3 reads it, and a0,
    the large a1 and b0's gradient together are over the budget (bounds on it: tests/test_relaxation_chains.py)."""
    spec = [("f0", "Op", ["x"], ["a0"]), ("f1", "Op", ["a0"], ["a1"]), ("f2", "Op", ["a1"], ["a2"]),
            ("f3", "Op", ["a2", "a0"], ["a3"]), ("f4", "Op", ["a3", "a0"], ["a4"]), ("f5", "Op", ["a4", "a0"], ["a5"]),
            ("b0", "Grad", ["a5", "a5"], ["g0"]), ("b1", "Grad", ["g0", "a3"], ["g1"]),
            ("upd", "SGD", ["w", "g1"], ["w_new"])]
    sizes = {"x": 4, "w": 4, "a0": 4, "a1": 8, "a2": 4, "a3": 4, "a4": 4, "a5": 4, "g0": 4, "g1": 4, "w_new": 4}
    return make_graph(spec, sizes, {"x", "w", "w_new"}, {"w_new": "w"})


@st.composite
def recompute_chains(draw, max_forward: int = 7, skips: bool = False) -> TrainGraph:
    """A forward chain of activations of very different sizes, the backward pass reading only some of them again:
    under a budget near the floor nothing fits beside the largest pair, so the optimum remakes long runs of the
    chain from the input in the stage that reads their end, a recompute feeding the next in one stage, the
    intermediates (a large one before a small one, ...) freed as the run goes (random_graphs' optima hardly ever
    recompute so: their activations are read soon after they are made). With `skips`, an op may also read an
    activation from further back (a residual's skip), which stays in memory while the run between them is remade."""
    n = draw(st.integers(5, max_forward))
    spec, sizes = [], {"x": 4, "w": 4}
    activations = ["x"]
    for i in range(n):
        ins = [activations[-1], "w"] if draw(st.booleans()) else [activations[-1]]
        if skips and len(activations) > 3 and draw(st.booleans()):
            ins.append(draw(st.sampled_from(activations[1:-2])))
        spec.append((f"f{i}", "Op", ins, [f"a{i}"]))
        sizes[f"a{i}"] = 4 * draw(st.integers(1, 13))
        activations.append(f"a{i}")
    grad = activations[-1]
    saved = [a for a in activations[1:-1] if draw(st.integers(0, 2)) == 0] + activations[-1:]
    for i, a in enumerate(reversed(saved)):
        spec.append((f"b{i}", "Grad", [grad, a], [f"g{i}"]))
        sizes[f"g{i}"] = 4 * draw(st.integers(1, 2))
        grad = f"g{i}"
    spec.append(("upd", "SGD", ["w", grad], ["w_new"]))
    sizes["w_new"] = 4
    costs = {name: draw(st.integers(1, 9)) for name, *_ in spec}
    return make_graph(spec, sizes, {"x", "w", "w_new"}, {"w_new": "w"}, costs)
