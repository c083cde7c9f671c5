"""The split home (`--home split`): what persists off chip, activations and transients on chip.

ckpt decides each tensor's level from the graph (solver.memory.placement); Deeploy's tiled flow is given the decision as
an annotation pass (deeploy_bridge.home_split) and generates the code. The levels checked here are read back from
Deeploy's own context after it generated the code, not from ckpt's record.
"""
import re
from pathlib import Path

import pytest
from cli_support import ckpt_here
from graphs import random_graphs
from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.deeploy_bridge.setup import setup_for
from ckpt.deeploy_identity import Flavour, deeploy_flavour
from ckpt.solver.graph.graph import Op, TrainGraph
from ckpt.solver.memory.layout import Block, aligned, lay_out
from ckpt.solver.memory.placement import SplitHome, over_capacity, split_levels
from ckpt.targets import SPLIT_HOME, TARGET_TABLE


def _split_replay_of_example(tmp_path: Path, *example: str, home: str = SPLIT_HOME):
    """A CCT example (`example` its options) solved for Siracusa at 1.0 with estimated costs and replayed with
    the split home (or `home`) on the host: the replay's completed process and its output folder."""
    model, schedule, out = tmp_path / "cct", tmp_path / "seq.json", tmp_path / "replay"
    made = ckpt_here("example", "cct", "--blocks", "1", "--embed-dim", "32", "--heads", "2", *example,
                     "-o", str(model))
    assert made.returncode == 0, made.stderr
    solved = ckpt_here("solve", str(model), "--target", "siracusa", "--budget", "1.0", "--costs", "estimate",
                       "-o", str(schedule))          # solved for home L3: nothing held on L2
    assert solved.returncode == 0, solved.stderr
    run = ckpt_here("replay", str(schedule), "--model", str(model), "--home", home, "-o", str(out),
                    "--no-simulate")
    return run, out

HOME = SplitHome("L2", "L3")


def _graph() -> TrainGraph:
    ops = (Op("fwd", "Gemm", ("x", "w", "b"), ("h",)), Op("view", "Reshape", ("w",), ("w_view",)),
           Op("bwd", "Gemm", ("h", "w_view"), ("g",)), Op("acc", "InPlaceAccumulatorV2", ("acc_in", "g"), ("acc",)))
    sizes = {"x": 64, "w": 256, "b": 16, "h": 64, "w_view": 256, "g": 256, "acc_in": 256, "acc": 256}
    return TrainGraph(ops=ops, tensor_bytes=sizes, persistent=frozenset({"w", "b"}), aliases={"w_view": "w"},
                      op_cost={op.name: 1.0 for op in ops})


def test_what_persists_goes_off_chip_activations_and_per_batch_io_stay_on_chip():
    levels = split_levels(_graph(), {"x", "w", "acc_in"}, HOME, persistent_io={"w", "acc_in"})
    assert {t for t, level in levels.items() if level == "L3"} == {"w", "b", "w_view", "acc_in"}
    assert {t for t, level in levels.items() if level == "L2"} == {"x", "h", "g", "acc"}


def test_a_one_graph_step_keeps_only_its_constants_off_chip():
    levels = split_levels(_graph(), {"x", "w", "acc_in"}, HOME)
    assert {t for t, level in levels.items() if level == "L3"} == {"b"}


def test_the_split_home_is_a_home_of_the_targets_that_have_a_chip_and_a_ram_behind_it():
    chip = TARGET_TABLE["siracusa"]
    assert SPLIT_HOME in chip.homes and chip.home_levels(SPLIT_HOME) == type(chip.home_levels("L2"))("L2", "L3")
    setup = setup_for("siracusa", SPLIT_HOME)
    assert (setup.default_mem_level, setup.persistent_level, setup.home) == ("L2", "L3", SPLIT_HOME)
    assert setup.size("L2") == chip.level("L2").usable
    assert "persistent_mem_level" not in setup_for("siracusa", "L2").as_dict()   # the other homes' keys unchanged


# --------------------------------------------------------------------------- with the training branch installed


@pytest.mark.deeploy
@pytest.mark.parametrize("model", ["simplemlp_train", "dscnn_train"])
def test_the_generated_code_keeps_each_buffer_where_ckpt_decided(branch, shared_models, lowering_cache, tmp_path,
                                                                  model):
    from ckpt.deeploy_bridge import lower
    from ckpt.deeploy_bridge.setup import DEFAULT_SETUP
    from ckpt.replay.predict import predicted_buffer_levels, predicted_split_levels
    from ckpt.replay.split_run import deploy_split, split_step
    from ckpt.solver.graph.onnx_loader import read_model

    folder = shared_models / model
    lowered = lower(folder, "siracusa")
    step = split_step(folder, read_model(folder / "network.onnx"), lowered.io_names, None, lowered.model)
    train, optimizer = deploy_split(lowered.model, lowered.node_order, step, "siracusa", True,
                                    setup_for("siracusa", SPLIT_HOME), Path(tmp_path) / "code")
    decided = predicted_buffer_levels(lowered, step.persistent_io)
    generated = train.buffer_levels
    compared = sorted(set(decided) & set(generated))
    assert len(compared) >= 0.9 * len(decided)        # Deeploy keeps nearly every tensor of the lowered graph
    assert {name: generated[name] for name in compared} == {name: decided[name] for name in compared}
    assert {generated[name] for name in step.on_chip} == {"L2"}
    assert {level for name, level in generated.items() if name.startswith("input_") and name not in step.on_chip} \
        == {"L3"}
    shared = {name for name, _ in optimizer_shared(step)}
    assert shared and {optimizer.buffer_levels[name] for name in shared} == {"L3"}   # the train network's bytes
    assert train.arena.get("L2", 0) > 0 and train.arena.get("L3", 0) > 0
    predicted = predicted_split_levels(lowered, [(n, 0) for n in lowered.node_order], DEFAULT_SETUP.weights,
                                       step.persistent_io)
    assert train.home_arena["L2"] == predicted["L2"].arena > 0       # the activations' arena the code reserves
    assert train.arena["L2"] >= train.home_arena["L2"]               # the layers' tiles above it


def optimizer_shared(step):
    from ckpt.deeploy_bridge.split_step import optimizer_role
    return optimizer_role(step.io, step.optimizer, step.elements).shared


@pytest.mark.deeploy
def test_a_step_whose_activations_fit_l2_at_no_budget_is_refused_with_the_bytes_before_any_long_work(
        lowering_cache, tmp_path):
    if deeploy_flavour() is Flavour.TRAINING_BRANCH:
        pytest.skip("the training branch maps no SoftmaxCrossEntropyLoss, which ckpt's generated CCT ends in")
    model = tmp_path / "big"       # its tokenizer's convolution alone writes 4 MiB of activations
    made = ckpt_here("example", "cct", "--blocks", "1", "--embed-dim", "32", "--heads", "2", "--image-size", "64",
                     "--conv-channels", "160", "-o", str(model))
    assert made.returncode == 0, made.stderr
    solved = ckpt_here("solve", "--costs", "estimate", str(model), "--target", "siracusa", "--home", SPLIT_HOME,
                       "--budget", "0.9",
                       "-o", str(tmp_path / "seq.json"))
    assert solved.returncode == 2 and "cannot run with its activations in L2 at any budget" in solved.stderr
    assert "5,242,880 B" in solved.stderr and "2,031,616 B L2 gives" in solved.stderr
    assert not (tmp_path / "seq.json").exists()
    swept = ckpt_here("sweep", "--model", str(model), "--target", "siracusa", "--home", SPLIT_HOME,
                      "-o", str(tmp_path / "sweep"), "--costs", "estimate")
    assert swept.returncode == 2 and "at any budget" in swept.stderr, swept.stderr
    assert not (tmp_path / "sweep" / "points").exists()          # nothing solved, nothing replayed


@settings(max_examples=property_examples(60), deadline=None)
@given(random_graphs(), st.booleans(), st.integers(0, 200), st.integers(0, 200))
def test_each_level_of_a_split_placement_stays_within_its_capacity(graph, weight_persists, chip, ram):
    from ckpt.deeploy_bridge.arena import home_blocks

    inputs, outputs = frozenset({"x", "w"}), frozenset({"w_new"})
    persistent_io = {"w", "w_new"} if weight_persists else set()
    where = split_levels(graph, inputs, HOME, persistent_io)
    order = [(op.name, op.inputs, op.outputs) for op in graph.ops]
    blocks = [Block(b.name.removesuffix("_tensor"), b.first, b.last, b.size)
              for b in home_blocks(order, graph, inputs, outputs)]
    capacity = {"L2": chip, "L3": ram}
    held = {}
    for level in ("L2", "L3"):
        mine = [b for b in blocks if where[b.name] == level]
        layout = lay_out(mine, 4)
        held[level] = layout.size
        for a in mine:
            start = layout.offsets[a.name]
            assert 0 <= start and start + aligned(a.size, 4) <= layout.size      # inside the level's arena
            for b in mine:
                if a.name < b.name and a.first <= b.last and b.first <= a.last:    # alive at once: never overlap
                    other = layout.offsets[b.name]
                    assert start + aligned(a.size, 4) <= other or other + aligned(b.size, 4) <= start
    assert all(where[t] == "L3" for t in graph.tensor_bytes if graph.root(t) in persistent_io)
    over = over_capacity(held, capacity)
    assert set(over) == {level for level in held if held[level] > capacity[level]}
    assert all(held[level] <= capacity[level] for level in held if level not in over)


@pytest.mark.deeploy
def test_a_replay_with_recomputes_reserves_on_chip_the_activation_arena_ckpt_predicted(
        branch, shared_models, deeploy_checkout, lowering_cache, tmp_path):
    from ckpt.replay.report import ReplayReport

    model, schedule, out = shared_models / "dscnn_train", tmp_path / "seq.json", tmp_path / "replay"
    solved = ckpt_here("solve", str(model), "--target", "siracusa", "--budget", "0.7", "--costs", "estimate",
                       "-o", str(schedule))
    assert solved.returncode == 0, solved.stderr
    run = ckpt_here("replay", str(schedule), "--model", str(model), "--home", SPLIT_HOME, "-o", str(out),
                    "--no-simulate")
    assert run.returncode == 0, run.stdout + run.stderr
    report = ReplayReport.read(out / "report.json")
    assert report.replay.clones_kept > 0
    on_chip, off_chip = report.memory.levels["L2"], report.memory.levels["L3"]
    assert on_chip.home_arena == on_chip.predicted_arena and off_chip.home_arena == off_chip.predicted_arena
    assert on_chip.arena > on_chip.home_arena                 # the layers' tiles of what L3 keeps, above it
    for flow, code in report.code_runs.items():
        assert code.harness.errors == 0 and code.golden.errors == 0 and code.graph_order == "bit-identical", flow


@pytest.mark.deeploy
def test_a_layer_with_tensors_in_both_levels_that_takes_several_tiles_is_refused_not_deployed_wrong(
        lowering_cache, tmp_path):
    """The tokenizer's convolutions read their weights from L3 and write their outputs to L2, in three tiles each:
    Deeploy's code ran the on-chip loop once per off-chip tile from its start (the release's faulted on a DMA of size
    0; the training branch's wrote every tile onto the first, so CCT's loss was off by up to 0.76)."""
    if deeploy_flavour() is Flavour.TRAINING_BRANCH:
        pytest.skip("the training branch's tiles nest one per call: its code is fixed, not refused (next test)")
    run, out = _split_replay_of_example(tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "the split home cannot deploy tokenizer_conv_0_Conv, tokenizer_conv_1_Conv" in run.stderr
    assert "use --home L3 or --home L2" in run.stderr and "Traceback" not in run.stderr
    assert not (out / "code" / "Network.c").exists()           # no wrong code written


@pytest.mark.deeploy
def test_a_split_replay_whose_activations_alone_overflow_l2_is_refused_with_the_bytes_before_deeploy_runs(
        lowering_cache, tmp_path):
    run, out = _split_replay_of_example(tmp_path, "--image-size", "64", "--conv-channels", "160")
    assert run.returncode == 2, run.stdout + run.stderr
    line = run.stderr.strip().splitlines()[-1]
    assert "activations alone need 5,242,884 B of L2" in line and "2,031,616 B L2 gives" in line
    assert "--home L3" in line and "Deeploy" not in run.stderr and "Traceback" not in run.stderr
    assert not out.exists()


@pytest.mark.deeploy
def test_an_all_l2_replay_whose_arena_cannot_fit_is_refused_in_deeploys_words_before_any_code_generation(
        lowering_cache, tmp_path, monkeypatch):
    """--home L2: a replayed order whose whole-network arena, as ckpt predicts it, overflows what L2 leaves beside the
    constants is refused with the words Deeploy's tiler would say (deeploy_bridge.arena.arena_overflow) before
    Deeploy generates any code (neither flow runs: the spy would fail the replay; no replay folder is written)."""
    from ckpt import deeploy_bridge
    from ckpt.replay import run as replay_run

    def no_deeploy(*args, **kwargs):
        raise AssertionError("Deeploy generated code")

    monkeypatch.setattr(deeploy_bridge, "deploy", no_deeploy)
    monkeypatch.setattr(replay_run, "deploy_split", no_deeploy)
    run, out = _split_replay_of_example(tmp_path, "--image-size", "64", "--conv-channels", "160", home="L2")
    line = run.stderr.strip().splitlines()[-1]
    assert run.returncode == 1 and "the L2 arena needs" in line and "B free: raise the level's size" in line, line
    needs, free = (int(n) for n in re.findall(r"needs (\d+) B .* has (\d+) B free", line)[0])
    assert needs > free and free < 2_031_616 and "Traceback" not in run.stderr
    assert not out.exists()


@pytest.mark.deeploy
@pytest.mark.gvsoc       # a calibration needs gvsoc at hand; refused before it runs, in seconds
def test_an_all_l2_calibration_whose_arena_cannot_fit_is_refused_before_any_code_generation(
        lowering_cache, deeploy_checkout, tmp_path, monkeypatch):
    """`ckpt calibrate --home L2` of a graph order whose arena overflows L2 beside the constants: the same words as
    the replay's refusal, before Deeploy generates the code (a sweep or bench/on_chip.py at home L2 asks for it
    before their baseline replay)."""
    from ckpt import deeploy_bridge
    from ckpt.gvsoc.kit import NoKit, find_kit
    from ckpt.pipeline import calibrate

    if isinstance(find_kit(None), NoKit):
        pytest.skip(find_kit(None).reason)

    def no_deeploy(*args, **kwargs):
        raise AssertionError("Deeploy generated code")

    monkeypatch.setattr(deeploy_bridge, "deploy", no_deeploy)
    monkeypatch.setattr(calibrate, "deploy_split", no_deeploy)
    model = tmp_path / "cct"
    made = ckpt_here("example", "cct", "--blocks", "1", "--embed-dim", "32", "--heads", "2", "--image-size", "64",
                     "--conv-channels", "160", "-o", str(model))
    assert made.returncode == 0, made.stderr
    done = ckpt_here("calibrate", str(model), "--target", "siracusa", "--home", "L2")
    line = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and "the L2 arena needs 5242884 B" in line and "B free" in line, line


@pytest.mark.deeploy
def test_a_layer_with_tensors_in_both_levels_computes_each_tile_where_it_lies(branch, lowering_cache, tmp_path):
    """The training branch calls the on-chip loop once per off-chip tile, and Deeploy pointed it at the start of
    every tensor homed on chip at each call: the tokenizer's convolutions wrote their three tiles onto the first
    (CCT's loss off by up to 0.76). Now the split home's tiled code computes what the non-tiled code does."""
    from ckpt.replay.report import ReplayReport

    _, out = _split_replay_of_example(tmp_path)
    report = ReplayReport.read(out / "report.json")
    tiled, non_tiled = report.code_runs["tiled"], report.code_runs["non_tiled"]
    assert tiled.golden is not None and non_tiled.golden is not None, tiled.reason
    assert tiled.golden.errors <= non_tiled.golden.errors       # before: 4,038 of 6,507 against 0
    assert tiled.host.max_abs_diff < 1e-3                        # before: 0.024
    assert "Conv_data_out_tile_start[3]" in (out / "code" / "Network.c").read_text()   # 3 tiles each


# --------------------------------------------------------------------------- split+: what persists brought on chip


@settings(max_examples=property_examples(80), deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.integers(0, 500)), min_size=1, max_size=8), st.integers(0, 300))
def test_what_split_plus_brings_on_chip_is_the_most_cycles_saved_that_fits_the_room(items, room):
    from itertools import combinations

    from ckpt.solver.model.on_chip import Candidate, bring_on_chip

    candidates = {f"w{i}": Candidate(nbytes, float(saves)) for i, (nbytes, saves) in enumerate(items)}
    chosen = bring_on_chip(candidates, room)
    assert sum(candidates[n].nbytes for n in chosen) <= room
    best = max(sum(candidates[n].saves for n in subset) for k in range(len(candidates) + 1)
               for subset in combinations(candidates, k) if sum(candidates[n].nbytes for n in subset) <= room)
    assert sum(candidates[n].saves for n in chosen) == pytest.approx(best, abs=1e-6)


@st.composite
def _layered_steps(draw):
    """A training step of `n` layers: layer i reads a_{i-1} and its weight w_i, the backward pass reads both and
    accumulates w_i's gradient into acc_i (updated in place); the weights and accumulators persist."""
    n = draw(st.integers(1, 5))
    ops, sizes, aliases, persistent_io = [], {"x": 4 * draw(st.integers(1, 8))}, {}, set()
    prev = "x"
    for i in range(n):
        sizes[f"w{i}"] = sizes[f"acc{i}"] = sizes[f"acc{i}_new"] = sizes[f"gw{i}"] = 4 * draw(st.integers(1, 16))
        sizes[f"a{i}"] = 4 * draw(st.integers(1, 16))
        ops.append(Op(f"f{i}", "Gemm", (prev, f"w{i}"), (f"a{i}",)))
        persistent_io |= {f"w{i}", f"acc{i}"}
        prev = f"a{i}"
    grad = prev
    for i in reversed(range(n)):
        ops.append(Op(f"b{i}", "GemmGrad", (grad, f"a{i}", f"w{i}"), (f"gw{i}", f"g{i}")))
        sizes[f"g{i}"] = sizes[f"a{i - 1}" if i else "x"]
        ops.append(Op(f"u{i}", "InPlaceAccumulatorV2", (f"acc{i}", f"gw{i}"), (f"acc{i}_new",)))
        aliases[f"acc{i}_new"] = f"acc{i}"
        grad = f"g{i}"
    graph = TrainGraph(ops=tuple(ops), tensor_bytes=sizes, persistent=frozenset(persistent_io), aliases=aliases,
                       op_cost={op.name: 1.0 for op in ops})
    return graph, frozenset({"x"} | persistent_io), frozenset(persistent_io)


@settings(max_examples=property_examples(60), deadline=None)
@given(_layered_steps(), st.integers(0, 1200), st.integers(0, 200), st.integers(1, 30), st.integers(0, 9))
def test_split_plus_never_holds_more_on_chip_than_the_level_gives(step, limit, reserve, per_access, per_byte):
    from ckpt.deeploy_bridge.arena import home_blocks
    from ckpt.solver.graph.level_price import LevelPrice, tensor_savings
    from ckpt.solver.memory.placement import persistent_roots
    from ckpt.solver.model.on_chip import Candidate, on_chip_within

    graph, inputs, persistent_io = step
    outputs = frozenset(t for t in graph.tensor_bytes if t.endswith("_new"))
    order = [(op.name, op.inputs, op.outputs) for op in graph.ops]
    blocks = [Block(b.name.removesuffix("_tensor"), b.first, b.last, b.size)
              for b in home_blocks(order, graph, inputs, outputs, True)]

    def placed(chosen: frozenset[str]) -> dict[str, int]:
        where = split_levels(graph, inputs, HOME, persistent_io, chosen)
        return {level: lay_out([b for b in blocks if where[b.name] == level], 4).size for level in ("L2", "L3")}

    roots = persistent_roots(graph, inputs, persistent_io)
    saves = tensor_savings(graph, roots, LevelPrice(per_access, per_byte))
    candidates = {t: Candidate(aligned(graph.tensor_bytes[t], 4), saves[t]) for t in roots}
    chosen = on_chip_within(candidates, limit, lambda c: placed(c)["L2"], reserve)
    held = placed(chosen)
    if chosen == frozenset(candidates):
        assert held["L2"] <= limit
    elif chosen:
        assert not over_capacity(held, {"L2": limit - reserve})
    where = split_levels(graph, inputs, HOME, persistent_io, chosen)
    assert all(where[t] == ("L2" if graph.root(t) in chosen else "L3") for t in graph.tensor_bytes
               if graph.root(t) in roots)           # the rest of what persists stays off chip, views with it
    if placed(frozenset())["L2"] + sum(c.nbytes for c in candidates.values()) <= limit:
        assert chosen == frozenset(candidates)      # everything fits: everything on chip


@settings(max_examples=property_examples(60), deadline=None)
@given(_layered_steps(), st.integers(0, 3000), st.integers(0, 20), st.integers(0, 20), st.integers(0, 40),
       st.data())
def test_split_plus_weighs_a_tensor_at_what_the_cost_model_prices_it_on_chip(step, per_tensor, per_byte, gemm_rate,
                                                                             per_line, data):
    """One price for one fact: what split+'s knapsack weighs a persistent tensor at is exactly what the cost model
    (solver.graph.level_price.priced_at_levels) takes off the step when that tensor alone is moved on chip, with the
    target's level price, its per-op-type rates included, at the tiles, copies per tile and lines the calibration
    read for each layer. It had its own fitted price (7,592 cycles per layer + 5.20 per byte) beside the level price
    the cost model used (1,538 + 1.6, per op type); then it weighed each tensor at one copy per layer, no lines,
    where the cost model priced its tiles, copies and lines."""
    from ckpt.solver.graph.costs import CostModel
    from ckpt.solver.graph.level_price import LevelPrice, priced_at_levels, tensor_savings
    from ckpt.solver.memory.placement import persistent_roots

    graph, inputs, persistent_io = step
    price = LevelPrice(float(per_tensor), float(per_byte), {"GemmGrad": float(gemm_rate)}, float(per_line))
    read = [op for op in graph.ops if data.draw(st.booleans())]          # the layers the calibration read
    tiles = {op.name: data.draw(st.integers(1, 20)) for op in read}
    transfers = {op.name: {t: data.draw(st.integers(0, 40)) for t in (*op.inputs, *op.outputs)
                           if data.draw(st.booleans())} for op in read}
    lines = {op: {t: data.draw(st.integers(0, 2000)) for t in found} for op, found in transfers.items()}
    costs = CostModel(measured={op.name: 10**12 for op in graph.ops}, measured_step=10**13, tiles=tiles,
                      transfers=transfers, lines=lines)
    roots = persistent_roots(graph, inputs, persistent_io)
    weighed = tensor_savings(graph, roots, price, tiles=tiles, transfers=transfers, lines=lines)
    for root in roots:
        levels = {t: "L2" if graph.root(t) == root else "L3" for t in graph.tensor_bytes}
        priced = priced_at_levels(costs, graph, levels, "L2", price, SPLIT_HOME)
        assert weighed[root] == costs.measured_step - priced.measured_step
    assert not hasattr(TARGET_TABLE["siracusa"], "off_chip_price")      # no second price of the same fact


@pytest.mark.deeploy
def test_split_plus_code_keeps_on_chip_exactly_what_ckpt_brought_there_in_both_networks(
        branch, shared_models, lowering_cache, tmp_path):
    """Half of what persists fits the room: the generated code of both networks (read from Deeploy's context) keeps
    those buffers in L2 and the rest in L3, and reserves the on-chip arena ckpt predicted with them."""
    from ckpt.deeploy_bridge import lower
    from ckpt.deeploy_bridge.setup import DEFAULT_SETUP
    from ckpt.replay.predict import (
        OnChipRoom,
        chosen_on_chip,
        level_price,
        predicted_buffer_levels,
        predicted_split_levels,
    )
    from ckpt.replay.split_run import deploy_split, split_step
    from ckpt.solver.graph.onnx_loader import read_model

    folder = shared_models / "simplemlp_train"
    lowered = lower(folder, "siracusa")
    step = split_step(folder, read_model(folder / "network.onnx"), lowered.io_names, None, lowered.model)
    order = [(n, 0) for n in lowered.node_order]
    weights = DEFAULT_SETUP.weights
    alone = predicted_split_levels(lowered, order, weights, step.persistent_io)["L2"].arena
    everything = predicted_split_levels(lowered, order, weights, step.persistent_io,
                                        frozenset(step.persistent_io))["L2"].arena
    room = OnChipRoom(alone + (everything - alone) // 2, 0, 0)
    chosen = chosen_on_chip(lowered, order, weights, step.persistent_io, room, level_price("siracusa"),
                            step.optimizer_layers())
    assert chosen and chosen < step.persistent_io                 # some, not all, of what persists
    setup = setup_for("siracusa", SPLIT_HOME, persist_on_chip=True, on_chip_persistent=tuple(sorted(chosen)))
    train, optimizer = deploy_split(lowered.model, lowered.node_order, step, "siracusa", True, setup,
                                    Path(tmp_path) / "code")
    decided = predicted_buffer_levels(lowered, step.persistent_io, weights, chosen)
    generated = train.buffer_levels
    compared = sorted(set(decided) & set(generated))
    assert len(compared) >= 0.9 * len(decided)
    assert {name: generated[name] for name in compared} == {name: decided[name] for name in compared}
    assert {generated[name] for name in chosen} == {"L2"}
    assert {generated[name] for name in step.persistent_io - chosen} == {"L3"}
    for own, symbol in optimizer_shared_pairs(step):              # the optimizer's I/O lives with its train buffer
        assert optimizer.buffer_levels[own] == generated[symbol.removeprefix("DeeployNetwork_")], own
    predicted = predicted_split_levels(lowered, order, weights, step.persistent_io, chosen)
    assert train.home_arena["L2"] == predicted["L2"].arena > alone   # the arena the code reserves, with them in it
    _, plain = deploy_split(lowered.model, lowered.node_order, step, "siracusa", True,
                            setup_for("siracusa", SPLIT_HOME), Path(tmp_path) / "plain")
    assert optimizer.arena.get("L2", 0) <= plain.arena.get("L2", 0)    # the optimizer lays out no room for the train
                                                                      # network's buffers on chip (it had, 624,336 B
                                                                      # for ResNet-8: more than L2 had left)


def optimizer_shared_pairs(step):
    from ckpt.deeploy_bridge.split_step import optimizer_role
    return optimizer_role(step.io, step.optimizer, step.elements).shared


def test_split_plus_without_a_split_home_is_refused_in_one_line_before_any_work(tmp_path):
    schedule = tmp_path / "seq.json"
    solved = ckpt_here("solve", "--budget", "1.0", "--costs", "estimate", "-o", str(schedule))
    assert solved.returncode == 0, solved.stderr
    run = ckpt_here("replay", str(schedule), "--target", "siracusa", "--home", "L2", "--persist-on-chip", "auto",
                    "-o", str(tmp_path / "r"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "--persist-on-chip auto" in run.stderr and "add --home split" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "r").exists()


def _resnet8_replayed(schedule: Path, model: Path, out: Path, home: str, workarounds: str):
    """ResNet-8's schedule replayed on the host in a process of its own: the tiled code's figures against the
    goldens, per tensor (report.json)."""
    import json
    import os

    from cli_support import ckpt

    env = {**os.environ, "CKPT_DEEPLOY_WORKAROUNDS": workarounds}
    run = ckpt("replay", str(schedule), "--model", str(model), "--home", home, "--no-simulate", "-o", str(out),
               env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((out / "report.json").read_text())
    tiled = report["code_runs"]["tiled"]
    return tiled["golden"]["max_abs_diff"], report["model"]["deeploy_workarounds"], tiled["closeness"]["off"]


@pytest.mark.deeploy
@pytest.mark.slow
def test_a_conv_weight_gradient_tiled_over_height_and_width_in_l2_keeps_every_tiles_share(branch, shared_models,
                                                                                        lowering_cache, tmp_path):
    """The branch zeroed ConvGradW's weight gradient when *tileIdxPtr == 0: under home L3 each L1 tile is a call
    of its own and only the first is zeroed, but a layer in L2 runs its 16 H/W tiles in one call, tileIdxPtr stays
    0 and each tile was zeroed (conv1, layer1's and layer2_0_conv1's weights). With ckpt's template the split
    home's tiled code computes each weight as home L3's does; without it, it does not. With every workaround (the
    tiled ConvGradX's tile origins and the strided shortcut's ConvGradW too) no output of either home is off the
    goldens by the closeness rule; without the ConvGradX one, the gradients from layer2_0_bn1 back are."""
    model, schedule = shared_models / "resnet8_train", tmp_path / "seq.json"
    solved = ckpt_here("solve", str(model), "--target", "siracusa", "--budget", "1.0", "--costs", "estimate",
                       "-o", str(schedule))
    assert solved.returncode == 0, solved.stderr
    l3, _, l3_off = _resnet8_replayed(schedule, model, tmp_path / "l3", "L3", "on")
    split, named, split_off = _resnet8_replayed(schedule, model, tmp_path / "split", SPLIT_HOME, "on")
    assert split == l3 and not l3_off and not split_off
    found = {w["name"]: w for w in named}
    conv_w = found["conv-grad-w-zeroing"]
    assert conv_w["deeploy_file"].endswith("Templates/FloatConvGradTemplate.py") and conv_w["deeploy_line"] > 0
    assert "node_1_conv1_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW" in conv_w["nodes"] and not conv_w["missed"]
    conv_x = found["conv-grad-x-tile-origin"]
    assert conv_x["deeploy_file"] == "TargetLibraries/PULPOpen/src/ConvGrad.c" and not conv_x["missed"]
    assert "node_14_layer2_layer2_0_conv2_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradX" in conv_x["nodes"]
    assert len(found["pw-conv-grad-w-stride"]["nodes"]) == 2 and not found["pw-conv-grad-w-stride"]["missed"]
    off, _, flagged = _resnet8_replayed(schedule, model, tmp_path / "off", SPLIT_HOME,
                                        "softmax-grad-axis,layernorm-grad-zeroing")
    assert off != l3
    assert {"conv1_weight", "layer1_0_conv2_weight", "layer2_0_bn1_weight"} <= set(flagged)


def test_split_plus_on_solve_or_sweep_without_a_split_home_is_refused_in_one_line(tmp_path):
    for command in (["solve", "--target", "siracusa", "--budget", "1.0", "-o", str(tmp_path / "seq.json")],
                    ["sweep", "1.0:1.0", "--target", "siracusa", "-o", str(tmp_path / "sweep")]):
        run = ckpt_here(*command, "--home", "L2", "--persist-on-chip", "auto")
        assert run.returncode == 1, run.stdout + run.stderr
        assert "--persist-on-chip auto" in run.stderr and "add --home split" in run.stderr, run.stderr
        assert "Traceback" not in run.stderr
    assert not (tmp_path / "seq.json").exists() and not (tmp_path / "sweep").exists()


@pytest.mark.deeploy
def test_a_split_plus_solve_writes_its_levels_with_what_it_brings_on_chip(tmp_path, lowering_cache):
    """`ckpt solve --home split --persist-on-chip auto`: the schedule's L2 and L3 totals are those of the deployment
    the replay builds, with the persistent tensors split+ brings on chip (all of them here: they fit), and it says
    which; before, split+ existed on `replay` only."""
    import json

    model = tmp_path / "mlp"
    assert ckpt_here("example", "mlp", "--layers", "2", "--width", "32", "-o", str(model)).returncode == 0
    docs = {}
    for name, extra in (("split", ()), ("plus", ("--persist-on-chip", "auto"))):
        run = ckpt_here("solve", str(model), "--target", "siracusa", "--home", SPLIT_HOME, "--budget", "1.0",
                        "--costs", "estimate", *extra, "-o", str(tmp_path / f"{name}.json"))
        assert run.returncode == 0, run.stderr
        docs[name] = json.loads((tmp_path / f"{name}.json").read_text())["predicted"]
    plus, split = docs["plus"], docs["split"]
    assert "split_plus" not in split
    brought = plus["split_plus"]
    assert brought["tensors"] and brought["bytes"] > 0
    assert plus["levels"]["L2"]["total"] >= split["levels"]["L2"]["total"] + brought["bytes"]
    assert plus["levels"]["L3"]["total"] < split["levels"]["L3"]["total"]


@pytest.mark.deeploy
def test_split_plus_counts_each_constant_at_the_bytes_the_generated_code_declares_it_with(tmp_path, lowering_cache):
    """Deeploy's shape inference (`ONNXLayer.broadcast`) deploys each reader's copy of a constant at the reader's
    shape: a Mul's scalar attention scale (4 B in the graph) is a [8192] float array in L2, a Gemm's bias read by no
    optimizer a [64, 32] one; and Deeploy's lowering leaves some constants as float64 that the code declares
    `float32_t`. split+'s room counted the scale at 4 B (CCT at 0.6: 33,322 B of L2 static not predicted), then the
    float64 constants at twice and the biases at one row (the built-in CCT example: 239,444 B predicted against the
    173,484 B the code declares): it counts what the code declares, so the predicted L2 static is the code's."""
    import json
    import re

    from ckpt import deeploy_bridge
    from ckpt.deeploy_bridge.broadcast import declared_constant_bytes
    from ckpt.deeploy_bridge.setup import DEFAULT_SETUP
    from ckpt.replay.predict import _SplitBlocks, predicted_split_levels
    from ckpt.schedule_file import read_schedule

    model, schedule, out = tmp_path / "cct", tmp_path / "seq.json", tmp_path / "replay"
    assert ckpt_here("example", "cct", "--blocks", "1", "--embed-dim", "32", "--heads", "2",
                     "-o", str(model)).returncode == 0
    solved = ckpt_here("solve", str(model), "--target", "siracusa", "--home", SPLIT_HOME, "--budget", "1.0",
                       "--costs", "estimate", "-o", str(schedule))
    assert solved.returncode == 0, solved.stderr
    run = ckpt_here("replay", str(schedule), "--model", str(model), "--home", SPLIT_HOME, "--persist-on-chip", "auto",
                    "--no-verify", "-o", str(out))
    assert run.returncode == 0, run.stderr
    width = {"float32_t": 4, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
             "int64_t": 8}
    code = (out / "code" / "Network.c").read_text()
    declared = {name: int(n) * 4 for name, n in re.findall(r"float32_t DeeployNetwork_(\w+)\[(\d+)\]", code)}
    l2 = sum(width[kind] * int(n) for kind, n in re.findall(r"PI_L2 (\w+) DeeployNetwork_\w+\[(\d+)\]", code))
    lowered = deeploy_bridge.lower(model, "siracusa")
    found = declared_constant_bytes(lowered.model, lowered.constant_sizes)
    scale = [t for t in found if t.startswith("attn_scale")]
    assert scale and all(found[t] == 32768 for t in scale)
    name = deeploy_bridge.deeploy_tensor_name
    deployed = [name(t) for t in scale if name(t) in declared]
    assert deployed and all(declared[t] == 32768 for t in deployed)         # what the code holds in L2
    assert found["tokenizer_conv_1_weight_tensor"] == declared[name("tokenizer_conv_1_weight_tensor")] == 73_728
    assert found["blocks_0_proj_bias_tensor"] == declared[name("blocks_0_proj_bias_tensor")] == 8_192
    seq = list(read_schedule(schedule).seq)
    blocks = _SplitBlocks.of(lowered, seq, DEFAULT_SETUP.weights)
    root = blocks.graph.root(scale[0])
    assert blocks.constant_bytes(root) == 32768                           # split+'s room and layout count it so
    tiled = json.loads((out / "report.json").read_text())["deeploy"]["tiled"]
    levels = predicted_split_levels(lowered, seq, DEFAULT_SETUP.weights, frozenset(),
                                    frozenset(tiled["setup"]["on_chip_persistent"]))
    assert levels["L2"].static == l2 and levels["L3"].static == tiled["static"]["L3"]


def test_a_split_steps_optimizer_borrows_the_on_chip_arena_unless_something_that_persists_lives_there():
    """The two networks never run at once: under a split home the train network's L2 arena holds only what a
    mini-batch makes or the harness writes again before each run, so the optimizer takes it as its own; where split+
    brought a weight there, or the home keeps every weight on chip, it does not."""
    split = setup_for("siracusa", SPLIT_HOME)
    assert split.optimizer_borrows == ("L2", "L1")
    assert setup_for("siracusa", SPLIT_HOME, persist_on_chip=True, on_chip_persistent=("input_3",)
                     ).optimizer_borrows == ("L1",)
    assert setup_for("siracusa", SPLIT_HOME, persist_on_chip=True).optimizer_borrows == ("L2", "L1")  # none brought
    assert setup_for("siracusa", "L2").optimizer_borrows == ("L1",)
    assert setup_for("siracusa", "L3").optimizer_borrows == ("L1",)


@pytest.mark.deeploy
def test_a_split_steps_optimizer_runs_in_the_train_networks_on_chip_arena_and_still_updates_right(
        branch, shared_models, lowering_cache, deeploy_checkout, tmp_path):
    """The optimizer's generated code allocates no arena of its own (both are the train network's, which holds as
    much as it needs), and the step run by the harness on this host still matches the goldens."""
    import re

    from ckpt.coderun.run import NotRun
    from ckpt.coderun.train_run import run_training
    from ckpt.deeploy_bridge import lower
    from ckpt.replay.split_run import deploy_split, split_code_record, split_step
    from ckpt.solver.graph.onnx_loader import read_model

    folder = shared_models / "simplemlp_train"
    lowered = lower(folder, "siracusa")
    step = split_step(folder, read_model(folder / "network.onnx"), lowered.io_names, None, lowered.model)
    code = Path(tmp_path) / "code"
    train, optimizer = deploy_split(lowered.model, lowered.node_order, step, "siracusa", True,
                                    setup_for("siracusa", SPLIT_HOME), code)
    source = (code / "OptimizerNetwork.c").read_text()
    for level in ("L1", "L2"):
        taken = re.search(rf"DeeployOptNetwork_MEMORYARENA_{level} = \(int8_t\*\) (\S+);", source)
        assert taken and taken.group(1) == f"DeeployNetwork_MEMORYARENA_{level}", level
        assert train.arena[level] >= optimizer.arena[level] > 0, level
    outcome = run_training(code, step.run, step.data.feeds, deeploy_checkout)
    record = split_code_record("tiled", outcome, step, NotRun("not compared here"), False)
    assert record.harness.errors == 0 and record.golden.errors == 0, record.reason


@pytest.mark.deeploy
def test_the_split_homes_l2_static_counts_the_tilers_tables_for_the_layers_it_tiles_from_l3(tmp_path, lowering_cache):
    """Deeploy's tiler declares in L2, for each layer it tiles from L3, the layer's tile offsets and, per tensor it
    moves from L3, that tensor's per-tile sizes and offsets (`TILING_CODEGEN_L2_*`): static data of the step on
    chip. Predicted from the code with every tensor in L3 (the calibration's code: its layers' copies and tables),
    for the layers that still move a tensor from L3 at the split home, the predicted L2 static is what the split
    code declares `PI_L2` (the built-in CCT example, its weights and constants in L3: before, the tables were not
    counted and the prediction fell short of the code)."""
    import re

    from ckpt import deeploy_bridge
    from ckpt.deeploy_bridge.setup import DEFAULT_SETUP
    from ckpt.pipeline.calibrate import code_tiler_tables
    from ckpt.replay.predict import predicted_split_levels
    from ckpt.schedule_file import read_schedule

    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip("the release refuses this example at the split home (its tokenizer's tiles nest from L3: the "
                    "test above); the training branch deploys it")
    split, split_out = _split_replay_of_example(tmp_path / "split")
    assert split.returncode == 0, split.stderr
    off_chip, off_chip_out = _split_replay_of_example(tmp_path / "l3", home="L3")
    assert off_chip.returncode == 0, off_chip.stderr
    width = {"float32_t": 4, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
             "int64_t": 8}
    code = (split_out / "code" / "Network.c").read_text()
    declared = sum(width[kind] * int(n) for kind, n in re.findall(r"PI_L2 (\w+) DeeployNetwork_\w+\[(\d+)\]", code))
    tables = sum(width[kind] * int(n) for kind, n in
                 re.findall(r"PI_L2 (\w+) DeeployNetwork_TILING_CODEGEN_L2_\w+\[(\d+)\]", code))
    assert tables > 0                                           # the case has tables to count
    lowered = deeploy_bridge.lower(tmp_path / "split" / "cct", "siracusa")
    seq = list(read_schedule(tmp_path / "split" / "seq.json").seq)
    found = code_tiler_tables(off_chip_out / "code", list(lowered.node_order), lowered.model, "siracusa")
    with_tables = predicted_split_levels(lowered, seq, DEFAULT_SETUP.weights, frozenset(), tables=found)["L2"]
    without = predicted_split_levels(lowered, seq, DEFAULT_SETUP.weights, frozenset())["L2"]
    assert with_tables.static == declared
    assert without.static == declared - tables


@pytest.mark.deeploy
def test_split_plus_l2_static_is_what_the_train_code_declares_tables_of_the_tiler_included(
        branch, shared_models, lowering_cache, tmp_path):
    """SimpleMLP's split step with half of what persists brought on chip (the room counting the tiler's tables):
    its train network's `PI_L2` declarations, the constants brought there and the tiler's tables for the layers that
    still tile from L3, are what ckpt predicts, the tables from the split home's own code at the graph order (what
    its calibration keeps). Without them the prediction fell short of the code."""
    import re

    from ckpt.deeploy_bridge import lower
    from ckpt.deeploy_bridge.setup import DEFAULT_SETUP
    from ckpt.pipeline.calibrate import code_tiler_tables
    from ckpt.replay.predict import OnChipRoom, chosen_on_chip, level_price, predicted_split_levels
    from ckpt.replay.split_run import deploy_split, split_step
    from ckpt.solver.graph.onnx_loader import read_model

    folder = shared_models / "simplemlp_train"
    lowered = lower(folder, "siracusa")
    step = split_step(folder, read_model(folder / "network.onnx"), lowered.io_names, None, lowered.model)
    order = [(n, 0) for n in lowered.node_order]
    weights = DEFAULT_SETUP.weights
    deploy_split(lowered.model, lowered.node_order, step, "siracusa", True, setup_for("siracusa", SPLIT_HOME),
                 Path(tmp_path) / "plain")
    tables = code_tiler_tables(Path(tmp_path) / "plain", list(lowered.node_order), lowered.model, "siracusa")
    alone = predicted_split_levels(lowered, order, weights, step.persistent_io)["L2"].arena
    everything = predicted_split_levels(lowered, order, weights, step.persistent_io,
                                        frozenset(step.persistent_io))["L2"].arena
    room = OnChipRoom(alone + (everything - alone) // 2, 0, 0, tables)
    chosen = chosen_on_chip(lowered, order, weights, step.persistent_io, room, level_price("siracusa"),
                            step.optimizer_layers())
    assert chosen and not step.persistent_io <= chosen             # some, not all, of what persists
    setup = setup_for("siracusa", SPLIT_HOME, persist_on_chip=True, on_chip_persistent=tuple(sorted(chosen)))
    deploy_split(lowered.model, lowered.node_order, step, "siracusa", True, setup, Path(tmp_path) / "code")
    width = {"float32_t": 4, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4,
             "int64_t": 8}
    code = (Path(tmp_path) / "code" / "TrainingNetwork.c").read_text()
    declared = sum(width[kind] * int(n) for kind, n in re.findall(r"PI_L2 (\w+) DeeployNetwork_\w+\[(\d+)\]", code))
    held = sum(width[kind] * int(n) for kind, n in
               re.findall(r"PI_L2 (\w+) DeeployNetwork_TILING_CODEGEN_L2_\w+\[(\d+)\]", code))
    assert held > 0
    predicted = predicted_split_levels(lowered, order, weights, step.persistent_io, chosen, tables=tables)["L2"]
    assert predicted.static == declared
    assert predicted_split_levels(lowered, order, weights, step.persistent_io, chosen)["L2"].static == declared - held


def test_the_tiler_tables_option_leaves_the_replay_keys_of_earlier_sweeps_as_they_were():
    """A sweep's replays are cached by their options: counting the tiler's tables is a new option, unset in a sweep,
    so a replay without it keeps the key it had before the option existed (this one's, computed then)."""
    from ckpt.pipeline.point import replay_key
    from ckpt.replay.predict import TilerTables
    from ckpt.replay.run import ReplayOptions
    from ckpt.schedule_file import Schedule

    schedule = Schedule(seq=(("a", 0),))
    assert replay_key(schedule, ReplayOptions(), "m", "c") == \
        "b9c079101f04f0cdaa4520b4ccab4b793737be05dfcb68c7f9e574fc09702011"
    assert replay_key(schedule, ReplayOptions(on_chip_tables=TilerTables({"n": {"w": 1}}, {"n": {"": 2}})),
                      "m", "c") != replay_key(schedule, ReplayOptions(), "m", "c")


def test_split_plus_weighs_a_tensor_copied_row_by_row_or_over_many_tiles_above_one_copied_once():
    """Two weights of the same bytes, each read by one layer: the one its layer copies row by row (30 copies a
    tile) or over 16 tiles saves more on chip than the one copied once, as the cost model prices them, so the
    knapsack keeps it where only one fits. It weighed both at one copy each."""
    from ckpt.solver.graph.level_price import LevelPrice, tensor_savings
    from ckpt.solver.model.on_chip import Candidate, bring_on_chip

    graph = TrainGraph(ops=(Op("f0", "Gemm", ("x", "w0"), ("a0",)), Op("f1", "Gemm", ("a0", "w1"), ("a1",))),
                       tensor_bytes={"x": 64, "w0": 4096, "w1": 4096, "a0": 64, "a1": 64},
                       persistent=frozenset({"w0", "w1"}), op_cost={"f0": 1.0, "f1": 1.0})
    price = LevelPrice(2310.8, 1.311, per_line=27.83)
    for often, plain in (("f0", "f1"), ("f1", "f0")):
        weight = {"f0": "w0", "f1": "w1"}
        for tiles, copies in (({often: 1}, {often: {weight[often]: 30}, plain: {weight[plain]: 1}}),
                              ({often: 16, plain: 1}, {often: {weight[often]: 1}, plain: {weight[plain]: 1}})):
            saves = tensor_savings(graph, ("w0", "w1"), price, tiles=tiles, transfers=copies)
            assert saves[weight[often]] > saves[weight[plain]]
            chosen = bring_on_chip({t: Candidate(4096, saves[t]) for t in ("w0", "w1")}, 4096)
            assert chosen == {weight[often]}


@pytest.mark.deeploy
def test_split_plus_brings_on_chip_the_tensor_its_code_copies_row_by_row(branch, shared_models, lowering_cache):
    """SimpleMLP's fc1 weight and its gradient accumulator have the same bytes and are read or written by as many
    layers, room for one: the knapsack solve and replay run (replay.predict.chosen_on_chip) keeps the one whose
    layer the code copies row by row (30 copies a tile), the other copied once. It weighed each at one copy per
    layer whatever the code copied (a tie: the same one kept either way)."""
    from ckpt.deeploy_bridge import lower
    from ckpt.deeploy_bridge.setup import DEFAULT_SETUP
    from ckpt.replay.predict import OnChipRoom, TilerTables, chosen_on_chip, level_price, predicted_split_levels
    from ckpt.replay.split_run import split_step
    from ckpt.solver.graph.onnx_loader import read_model

    folder = shared_models / "simplemlp_train"
    lowered = lower(folder, "siracusa")
    step = split_step(folder, read_model(folder / "network.onnx"), lowered.io_names, None, lowered.model)
    order = [(n, 0) for n in lowered.node_order]
    weights, persistent = DEFAULT_SETUP.weights, step.persistent_io
    layer = {"input_2": next(n for n in lowered.node_order if "fc1_Gemm_Gemm" in n),          # reads the weight
             "input_4": next(n for n in lowered.node_order if "GradientAccumulator1" in n)}  # its accumulator
    everything = predicted_split_levels(lowered, order, weights, persistent, frozenset(persistent))["L2"]
    room = everything.arena + everything.static + 64 - 2048           # one of the two 2,048 B tensors stays off
    for kept, other in (("input_2", "input_4"), ("input_4", "input_2")):
        tables = TilerTables({layer[kept]: {kept: 30}, layer[other]: {other: 1}}, {})
        chosen = chosen_on_chip(lowered, order, weights, persistent, OnChipRoom(room, 0, 0, tables),
                                level_price("siracusa"), step.optimizer_layers())
        assert kept in chosen and other not in chosen, (kept, chosen)


def test_a_split_plus_sweep_counts_the_tilers_tables_in_its_solves_and_replays_as_ckpt_solve_and_replay_do(
        monkeypatch):
    """A sweep with split+ passes the tiler's tables of its model (measured once, as `ckpt solve` and `ckpt replay`
    measure them) to each point's solve and replay, and its solve key names them; a sweep without split+ keys its
    points as before. Within a sweep split+ left the tables out of its room and its predicted L2."""
    from types import SimpleNamespace

    from ckpt.budgets import sweep
    from ckpt.pipeline import point
    from ckpt.pipeline.point import PointSpec, SolveTask, replay_key
    from ckpt.replay.predict import TilerTables
    from ckpt.replay.run import ReplayOptions
    from ckpt.schedule_file import Schedule
    from ckpt.solver.solve import SolveOptions

    tables = TilerTables({"n": {"w": 2}}, {"n": {"": 24, "w": 8}}, {"n": 3}, {"n": {"w": 60}})
    model = SimpleNamespace(split_plus_code=1000, split_plus_tables=tables)
    plus = sweep.SweepOptions((0.5,), replay=ReplayOptions(deeploy=setup_for("siracusa", SPLIT_HOME,
                                                                               persist_on_chip=True)))
    replay = sweep._replay_options(plus, model)
    assert replay.on_chip_tables == tables and replay.on_chip_code == 1000
    assert sweep._split_plus(plus, model)["split_plus_tables"] == \
        {"transfers": {"n": {"w": 2}}, "tables": {"n": {"": 24, "w": 8}}, "tiles": {"n": 3}, "lines": {"n": {"w": 60}}}
    plain = sweep.SweepOptions((0.5,))
    assert sweep._split_plus(plain, model) == {} and sweep._replay_options(plain, model).on_chip_tables is None
    schedule = Schedule(seq=(("a", 0),))
    assert replay_key(schedule, sweep._replay_options(plain, model), "m", "c") == \
        "b9c079101f04f0cdaa4520b4ccab4b793737be05dfcb68c7f9e574fc09702011"      # the key before the tables

    passed = []

    def solved(*args, **kwargs):
        passed.append(kwargs.get("split_plus_tables"))
        return None, SimpleNamespace(seconds=0.0)

    monkeypatch.setattr(point, "solve_model", solved)
    monkeypatch.setattr(point, "load_for_target", lambda *a, **k: None)
    monkeypatch.setattr(point, "baseline_schedule", lambda *args: passed.append(args[3]))
    for spec in (PointSpec.at(0.5, 10_000), PointSpec("baseline", None)):
        point._solve(SolveTask(spec, "m", "siracusa", SolveOptions(), "f", "k", 0, persist_on_chip=True,
                               split_plus_code=1000, split_plus_tables=tables), lambda m: None)
    assert passed == [tables, tables]


def test_a_recomputes_clone_is_weighed_at_the_copies_its_original_makes():
    """split+ weighs a tensor over the schedule's rewired graph, where a recompute is the clone `<node>__ck<k>`: the
    clone's layer is its original's code again, so it takes its original's tiles, copies and lines."""
    from ckpt.replay.predict import TilerTables

    graph = TrainGraph(ops=(Op("f0", "Gemm", ("x", "w0"), ("a0",)), Op("f0__ck1", "Gemm", ("x", "w0"), ("a0__ck1",))),
                       tensor_bytes={"x": 64, "w0": 4096, "a0": 64, "a0__ck1": 64}, persistent=frozenset({"w0"}),
                       op_cost={"f0": 1.0, "f0__ck1": 1.0})
    found = TilerTables({"f0": {"w0": 30}}, {"f0": {"": 8}}, {"f0": 4}, {"f0": {"w0": 900}}).of_runs(graph)
    assert found == TilerTables(*({"f0": v, "f0__ck1": v} for v in ({"w0": 30}, {"": 8}, 4, {"w0": 900})))
