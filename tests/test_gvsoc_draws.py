"""gvsoc's figures over several starting states (ckpt.gvsoc.draws, --gvsoc-draws): each draw the same code but a
few no-ops at its init, the median of the draws kept with their least and most, the worst draw's Errors, and
every draw its own cache entry (draw 0 keeping the key runs had before draws)."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from cli_support import ckpt_here
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt.budgets.table import markdown_table
from ckpt.coderun.manifest import CodeManifest
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label
from ckpt.errors import CkptError
from ckpt.gvsoc import draws as drawn
from ckpt.gvsoc import run as gvsoc_run
from ckpt.gvsoc import train_run
from ckpt.gvsoc.run import GvsocRun, NotSimulated, OnChipNeed, median_run
from ckpt.gvsoc.train_run import TrainGvsocRun, median_training_run
from ckpt.pipeline import calibrate
from ckpt.pipeline.point import replay_key
from ckpt.pipeline.row import empty_row
from ckpt.replay.report import GvsocRecord, SimStatus
from ckpt.replay.run import ReplayOptions
from ckpt.schedule_file import Schedule

TOY = Path(__file__).parent / "toy_code"
NEED = OnChipNeed(1000, 10, 2000)
counts = st.integers(min_value=0, max_value=10**9)


# --------------------------------------------------------------------------- the median and the spread


@settings(deadline=None)
@given(st.lists(counts, min_size=1, max_size=9))
def test_the_median_lies_within_the_draws_and_ignores_their_order(values):
    found = drawn.median_count(values)
    assert min(values) <= found <= max(values)
    assert found == drawn.median_count(list(reversed(values))) == drawn.median_count(sorted(values))
    below, above = sum(v < found for v in values), sum(v > found for v in values)
    assert below <= len(values) // 2 and above <= len(values) // 2       # as many draws on either side


@settings(deadline=None)
@given(st.lists(counts, min_size=1, max_size=9, unique=True).filter(lambda v: len(v) % 2 == 1))
def test_an_odd_number_of_draws_gives_one_of_them(values):
    assert drawn.median_count(values) == sorted(values)[len(values) // 2]


@settings(deadline=None)
@given(st.integers(min_value=1, max_value=6).flatmap(
    lambda n: st.lists(st.lists(counts, min_size=n, max_size=n), min_size=1, max_size=5)))
def test_lists_take_their_median_position_by_position(draws):
    assert drawn.median_counts(draws) == [drawn.median_count([d[i] for d in draws]) for i in range(len(draws[0]))]


def test_draws_of_different_lengths_or_none_are_refused():
    with pytest.raises(ValueError):
        drawn.median_counts([[1, 2], [1]])
    with pytest.raises(ValueError):
        drawn.median_count([])


def _run(errors: int, cycles: int, layers: dict[str, int] | None, log: str = "") -> GvsocRun:
    return GvsocRun(errors, 4, cycles, layers, NEED, log or f"Errors: {errors} out of 4", {"simulate": 1.0})


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), counts, counts), min_size=2, max_size=7))
def test_a_run_of_draws_is_their_median_and_their_worst_errors(draws):
    runs = [_run(e, c, {"a": a, "b": 7}) for e, c, a in draws]
    found = median_run(runs)
    assert found.cycles == drawn.median_count([c for _, c, _ in draws])
    assert found.layers == {"a": drawn.median_count([a for *_, a in draws]), "b": 7}
    assert found.errors == max(e for e, *_ in draws)
    assert found.log == runs[[e for e, *_ in draws].index(found.errors)].log      # the first worst draw's output
    assert found.draws == [c for _, c, _ in draws]
    assert found.seconds == {"simulate": float(len(draws))}


def test_one_draw_is_the_run_as_it_was():
    run = _run(0, 1234, {"a": 5})
    assert median_run([run]) is run and run.draws == []


def _train(train: list[int], optimizer: list[int], errors: int = 0, state: str = "8:ab") -> TrainGvsocRun:
    return TrainGvsocRun(errors, 1, train, optimizer, {"l": train[0]}, NEED, {"input_0": state}, "log")


def test_a_split_steps_draws_give_the_median_per_mini_batch_and_per_update():
    runs = [_train([100, 200], [10]), _train([130, 190], [30], errors=1), _train([110, 400], [20])]
    found = median_training_run(runs)
    assert (found.train_cycles, found.optimizer_cycles, found.layers) == ([110, 200], [20], {"l": 110})
    assert found.errors == 1
    assert found.train_draws == [150, 160, 255] and found.optimizer_draws == [10, 30, 20]
    assert found.state == {"input_0": "8:ab"}


def test_draws_whose_weights_end_apart_say_so_in_the_state():
    found = median_training_run([_train([1], [1]), _train([1], [1], state="8:cd")])
    assert found.state["input_0"] == "8:ab" and "differ" in found.state["draws"]


# --------------------------------------------------------------------------- the draws' code


def test_each_draw_is_the_same_code_but_its_no_ops_at_init(tmp_path):
    base = (TOY / "Network.c").read_bytes()
    sizes = []
    for draw in range(drawn.MAX_DRAWS):
        out = drawn.drawn_code(TOY, "Network.c", draw, tmp_path / f"d{draw}")
        assert (out / "Network.h").read_bytes() == (TOY / "Network.h").read_bytes()
        assert (out / "io.json").read_bytes() == (TOY / "io.json").read_bytes()
        source = (out / "Network.c").read_bytes()
        if draw == 0:
            assert source == base
            continue
        added = [line for line in source.decode().splitlines() if line not in base.decode().splitlines()]
        assert len(added) == 1 and f".rept {drawn.NOPS[draw - 1]}\\n nop" in added[0]
        assert source.replace(added[0].encode() + b"\n", b"", 1) == base
        sizes.append(drawn.NOPS[draw - 1])
    assert len(set(sizes)) == len(sizes)                  # every draw starts from another state


def test_a_draw_beyond_the_list_is_refused():
    with pytest.raises(ValueError):
        drawn.draw_nops(drawn.MAX_DRAWS)


# --------------------------------------------------------------------------- the cache keys


KIT, SOURCES = SimpleNamespace(identity="kit"), SimpleNamespace(fingerprint="kernels", root=TOY)   # no dory_mem.c


def test_each_draw_has_its_own_run_key_and_draw_0_keeps_the_old_one(tmp_path):
    manifest = CodeManifest.read(TOY)
    feeds = {"input_0": np.zeros(64, np.float32)}
    expected = {"output_0": np.zeros(64, np.float32)}
    keys = [gvsoc_run._run_key(TOY, manifest, feeds, expected, SOURCES, KIT, 10, 0, draw) for draw in range(3)]
    assert keys[0] == gvsoc_run._run_key(TOY, manifest, feeds, expected, SOURCES, KIT, 10, 0)
    assert len(set(keys)) == 3
    shutil.copytree(TOY, tmp_path / "code")
    run = SimpleNamespace(n_steps=1, n_accum=1, grad_start=0, n_grads=0, losses=[], tolerance=1e-3,
                          learning_rate=0.1, batches=[])
    train = [train_run._run_key(tmp_path / "code", run, {}, SOURCES, KIT, 10, 0, draw) for draw in range(3)]
    assert train[0] == train_run._run_key(tmp_path / "code", run, {}, SOURCES, KIT, 10, 0) and len(set(train)) == 3


def test_a_calibration_of_several_draws_has_its_own_key_and_one_keeps_the_old():
    setup = setup_for("siracusa", "L3")
    one = calibrate._key("m", "siracusa", setup, "k", "kit")
    assert calibrate._key("m", "siracusa", setup, "k", "kit", 1) == one
    assert len({one, calibrate._key("m", "siracusa", setup, "k", "kit", 2),
                calibrate._key("m", "siracusa", setup, "k", "kit", 3)}) == 3


def test_a_replay_of_several_draws_has_its_own_key_and_one_keeps_the_old():
    schedule = Schedule(seq=(("a", 0),))
    one = replay_key(schedule, ReplayOptions(), "m", "c")
    assert replay_key(schedule, ReplayOptions(gvsoc_draws=1), "m", "c") == one
    assert replay_key(schedule, ReplayOptions(gvsoc_draws=3), "m", "c") != one


def test_the_draws_loop_runs_each_draw_on_its_code_and_stops_at_a_failure(tmp_path, monkeypatch):
    """simulate_step with draws: draw 0 on the code as it is, draw k on a copy with its no-ops; the median kept; a
    draw that fails is the answer."""
    seen = []

    def one(code_dir, feeds, expected, sources, kit, heap_peak, timeout, keep, pad, draw):
        source = (Path(code_dir) / "Network.c").read_text()
        seen.append((draw, Path(code_dir) == TOY.resolve(), f".rept {drawn.draw_nops(draw)}\\n" in source))
        return NotSimulated("hung", failed=True) if draw == fail else _run(0, 100 + 10 * draw, {"a": draw})

    monkeypatch.setattr(gvsoc_run, "harness_missing", lambda sources: None)
    monkeypatch.setattr(gvsoc_run, "_simulate_draw", one)
    fail = None
    found = gvsoc_run.simulate_step(TOY, {}, {}, SOURCES, KIT, 0, draws=3)
    assert seen == [(0, True, False), (1, False, True), (2, False, True)]
    assert (found.cycles, found.draws, found.layers) == (110, [100, 110, 120], {"a": 1})
    seen.clear()
    fail = 1
    failed = gvsoc_run.simulate_step(TOY, {}, {}, SOURCES, KIT, 0, draws=3)
    assert isinstance(failed, NotSimulated) and [s[0] for s in seen] == [0, 1]


# --------------------------------------------------------------------------- what the user sees


def test_a_calibration_keeps_its_draws_and_names_them_in_its_source():
    found = calibrate.Calibration(calibrate.KIND, calibrate.CALIBRATION_FORMAT, "m", "siracusa", {}, 110, {"a": 5},
                                  0, 4, 100, "k" * 64, draws=[100, 110, 130])
    again = calibrate.Calibration.from_doc(json.loads(found.to_json()), "c.json")
    assert again == found and "median of 3 draws" in found.cost_model().source
    assert "draws" not in replace(found, draws=[]).cost_model().source
    doc = json.loads(found.to_json())
    with pytest.raises(CkptError, match="not counts"):
        calibrate.Calibration.from_doc({**doc, "draws": [1, -2]}, "c.json")


def test_the_record_and_the_table_show_the_median_and_the_spread():
    record = GvsocRecord("tiled", SimStatus.MEASURED, None, 0, 4, 110, expected="outputs.npz", draws=[100, 110, 130])
    assert "110 cycles (median of 3 draws, 100..130)" in record.line and "worst draw" in record.line
    assert "draws" not in replace(record, draws=[]).line
    row = replace(empty_row("0.9", 0.9, 100, "optimal", ""), cycles=110, cycles_draws=[100, 110, 130],
                  optimizer_cycles=20, optimizer_draws=[20, 20, 21])
    table = markdown_table([row], "siracusa")
    assert "110 (100..130)" in table and "20 (20..21)" in table


def test_draws_are_refused_where_gvsoc_does_not_run(tmp_path):
    done = ckpt_here("sweep", "--gvsoc-draws", "3", "--no-simulate", "-o", str(tmp_path / "sw"))
    assert done.returncode != 0 and "--gvsoc-draws does nothing here" in done.stderr
    done = ckpt_here("calibrate", "--gvsoc-draws", "0")
    assert done.returncode != 0 and "--gvsoc-draws" in done.stderr


# --------------------------------------------------------------------------- on gvsoc


@pytest.mark.deeploy
@pytest.mark.gvsoc
@pytest.mark.slow
def test_simplemlps_calibration_and_replay_of_two_draws_on_gvsoc(split, deeploy_checkout, lowering_cache, tmp_path):
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip(f"the installed Deeploy is {deeploy_label()}: split steps need the training branch "
                    "(pip install ../shared/deeploy-train)")
    calibrated = ckpt_here("calibrate", str(split), "--gvsoc-draws", "2", "-o", str(tmp_path / "costs.json"))
    assert calibrated.returncode == 0, calibrated.stdout + calibrated.stderr
    costs = json.loads((tmp_path / "costs.json").read_text())
    assert costs["errors"] == 0 and len(costs["draws"]) == 2 and len(costs["optimizer_draws"]) == 2
    assert costs["step_cycles"] == drawn.median_count(costs["draws"])
    assert "median of 2 draws" in calibrated.stdout
    solved = ckpt_here("solve", str(split), "--target", "siracusa", "--budget", "0.9", "--costs",
                       str(tmp_path / "costs.json"), "-o", str(tmp_path / "seq.json"))
    assert solved.returncode == 0, solved.stderr
    replayed = ckpt_here("replay", str(tmp_path / "seq.json"), "--model", str(split), "-o", str(tmp_path / "r"),
                         "--gvsoc-draws", "2")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    tiled = json.loads((tmp_path / "r" / "report.json").read_text())["gvsoc"]["tiled"]
    assert tiled["status"] == "measured" and tiled["errors"] == 0
    assert len(tiled["draws"]) == 2 and tiled["cycles"] == drawn.median_count(tiled["draws"])
    assert tiled["optimizer_cycles"] == drawn.median_count(tiled["optimizer_draws"])
    assert "median of 2 draws" in replayed.stdout


def test_a_calibration_written_before_draws_still_reads():
    found = calibrate.Calibration(calibrate.KIND, calibrate.CALIBRATION_FORMAT, "m", "siracusa", {}, 110, {"a": 5},
                                  0, 4, 100, "k" * 64)
    doc = json.loads(found.to_json())
    del doc["draws"], doc["optimizer_draws"]
    assert calibrate.Calibration.from_doc(doc, "c.json") == found
