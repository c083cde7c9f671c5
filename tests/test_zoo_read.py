"""bench/zoo.py reads a model's sweeps from their folders: one table per model from several sweeps over different
ranges (merged, the graph order first and the budgets from the largest down), an interrupted sweep's finished
points (their overheads over its baseline), and each point's code runs and checks from its replay report."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from bench_support import bench_module

from ckpt.errors import CkptError
from ckpt.examples import write_example
from ckpt.pipeline.calibrate import CALIBRATION_FORMAT, KIND
from ckpt.pipeline.row import empty_row

zoo = bench_module("zoo")


def _row(label: str, fraction: float | None, cycles: int, predicted: int, replayed: bool = True):
    status = "baseline" if fraction is None else "optimal"
    row = replace(empty_row(label, fraction, None if fraction is None else int(42112 * fraction), status, ""),
                  predicted_peak=40000, recomputes=0 if fraction is None else 3, cycles_predicted=predicted,
                  host_errors="0/2736", check="bit-identical" if fraction is not None else "-")
    if replayed:
        row = replace(row, replayed_peak=40000, cycles=cycles, gvsoc_errors="0/1", code_check="bit-identical")
    return row


def _folder(root: Path, rows, *, finished: bool, runs: dict[str, dict] | None = None) -> Path:
    """A sweep folder as `ckpt sweep` leaves it: points/<label>/point.json, a replay report where the point ran,
    and (finished) sweep.json with the overheads over the baseline."""
    for row in rows:
        point = root / "points" / row.label
        point.mkdir(parents=True)
        (point / "point.json").write_text(json.dumps({"label": row.label, "row": asdict(row),
                                                      "stage_seconds": {"gvsoc": 12.0}}))
        if row.replayed_peak is not None:
            (point / "replay").mkdir()
            (point / "replay" / "report.json").write_text(json.dumps({"code_runs": runs or {}}))
    if finished:
        base = next(r for r in rows if r.status == "baseline")
        rows = [replace(r, overhead_pct=None if r.cycles is None else 100 * (r.cycles - base.cycles) / base.cycles,
                        overhead_pct_predicted=None if r.cycles_predicted is None
                        else 100 * (r.cycles_predicted - base.cycles_predicted) / base.cycles_predicted) for r in rows]
        (root / "sweep.json").write_text(json.dumps({"points": [asdict(r) for r in rows]}))
    return root


def test_sweeps_over_two_ranges_are_one_table_from_the_graph_order_down(tmp_path):
    """The first folder's 0.9 to 0.7 and the second's 0.6 to 0.2 (each with its own baseline) are one sweep: one
    baseline, then 0.9 down to 0.2; a point both hold comes from the one that replayed it."""
    base = _row("baseline", None, 1000, 1000)
    high = _folder(tmp_path / "high", [base, _row("0.9", 0.9, 1040, 1040), _row("0.7", 0.7, 1120, 1121),
                                       _row("0.6", 0.6, 0, 1200, replayed=False)], finished=True)
    low = _folder(tmp_path / "low", [base, _row("0.2", 0.2, 1900, 1880), _row("0.6", 0.6, 1180, 1182),
                                     _row("0.4", 0.4, 1400, 1390)], finished=True)
    merged = zoo.SweepRead.merged([zoo.SweepRead.of(high), zoo.SweepRead.of(low)])
    assert [r.label for r in merged.rows] == ["baseline", "0.9", "0.7", "0.6", "0.4", "0.2"]
    assert next(r for r in merged.rows if r.label == "0.6").cycles == 1180
    assert merged.replays["0.6"] == low / "points" / "0.6" / "replay"
    assert [r.label for r in merged.run] == ["baseline", "0.9", "0.7", "0.6", "0.4", "0.2"]


def test_a_longer_solves_proof_of_infeasibility_beats_another_sweeps_no_schedule(tmp_path):
    """0.3 without a schedule in the first sweep (its time limit ran out) and proven infeasible in a second one
    (a longer time limit): the table says infeasible whichever folder comes first; a replayed point still wins."""
    base = _row("baseline", None, 1000, 1000)
    undecided = empty_row("0.3", 0.3, 12633, "no schedule", "no schedule found within the time limit")
    proven = empty_row("0.3", 0.3, 12633, "infeasible", "no schedule fits 12633 B")
    short = _folder(tmp_path / "short", [base, _row("0.9", 0.9, 1040, 1040), undecided], finished=True)
    long = _folder(tmp_path / "long", [base, proven, _row("0.9", 0.9, 0, 1040, replayed=False)], finished=True)
    for reads in ([short, long], [long, short]):
        merged = zoo.SweepRead.merged([zoo.SweepRead.of(f) for f in reads])
        point = {r.label: r for r in merged.rows}
        assert (point["0.3"].status, point["0.3"].reason) == ("infeasible", "no schedule fits 12633 B")
        assert point["0.9"].replayed_peak == 40000


def test_merged_sweeps_that_measured_different_graph_orders_say_so(tmp_path, capsys):
    """Each point's overhead is over its own sweep's graph order: where two sweeps measured it differently, the
    merge says so (the same graph order, the same code: gvsoc gives the same cycles)."""
    one = _folder(tmp_path / "a", [_row("baseline", None, 1000, 1000), _row("0.9", 0.9, 1040, 1040)], finished=True)
    two = _folder(tmp_path / "b", [_row("baseline", None, 1000, 1000), _row("0.5", 0.5, 1400, 1400)], finished=True)
    zoo.SweepRead.merged([zoo.SweepRead.of(one), zoo.SweepRead.of(two)])
    assert "different graph orders" not in capsys.readouterr().err
    other = _folder(tmp_path / "c", [_row("baseline", None, 1010, 1000)], finished=True)
    zoo.SweepRead.merged([zoo.SweepRead.of(one), zoo.SweepRead.of(other)])
    assert "different graph orders (train, optimizer cycles): [(1000, None), (1010, None)]" in capsys.readouterr().err


def test_an_interrupted_sweep_gives_its_finished_points_with_their_overheads(tmp_path):
    """No sweep.json (the sweep was stopped): the points that finished, each point's overhead over the baseline
    computed as a finished sweep computes it."""
    folder = _folder(tmp_path / "s", [_row("baseline", None, 2000, 2000), _row("0.5", 0.5, 2100, 2110)],
                     finished=False)
    read = zoo.SweepRead.of(folder)
    point = next(r for r in read.rows if r.label == "0.5")
    assert (point.overhead_pct, point.overhead_pct_predicted) == (5.0, 5.5)
    with pytest.raises(CkptError, match="no finished point"):
        zoo.SweepRead.of(tmp_path / "empty")


def test_an_interrupted_sweeps_point_proven_infeasible_is_read_from_its_solve(tmp_path):
    """A long solve proved 0.3 infeasible, then the sweep stopped while replaying another point: 0.3's row is in its
    solved.json alone (no point.json follows a point without a schedule), and the table gives it."""
    folder = _folder(tmp_path / "s", [_row("baseline", None, 2000, 2000)], finished=False)
    proven = empty_row("0.3", 0.3, 12633, "infeasible", "no schedule fits 12633 B")
    (folder / "points" / "0.3").mkdir()
    (folder / "points" / "0.3" / "solved.json").write_text(json.dumps({"label": "0.3", "schedule": None,
                                                                       "row": asdict(proven)}))
    (folder / "points" / "0.5").mkdir()         # solved, its replay not finished: not a row yet
    (folder / "points" / "0.5" / "solved.json").write_text(json.dumps({"label": "0.5", "schedule": {}, "row": None}))
    read = zoo.SweepRead.of(folder)
    assert [(r.label, r.status) for r in read.rows] == [("baseline", "baseline"), ("0.3", "infeasible")]
    (folder / "points" / "baseline" / "point.json").unlink()
    assert [r.label for r in zoo.SweepRead.of(folder).rows] == ["0.3"]
    assert zoo.named_folder(f"m={folder}") == ("m", str(folder))


def test_a_points_line_shows_both_flows_bit_identity_and_whether_the_prediction_holds(tmp_path):
    runs = {"non_tiled": {"golden": {"errors": 0, "compared": 2736}, "graph_order": "bit-identical"},
            "tiled": {"golden": {"errors": 2, "compared": 2736}, "graph_order": "differs"}}
    folder = _folder(tmp_path / "s", [_row("baseline", None, 1000, 1000), _row("0.5", 0.5, 1100, 1130)],
                     finished=True, runs=runs)
    lines = zoo.point_lines(Path("dscnn_train"), zoo.SweepRead.of(folder))
    cells = [c.strip() for c in lines[1].split("|")[1:-1]]
    head = [c.strip() for c in zoo.POINTS_HEAD.split("|")[1:-1]]
    line = dict(zip(head, cells, strict=True))
    assert line["overhead % measured (pred)"] == "+10.00 (+13.00)" and line["within"] == "no"   # 3 > 1 point
    assert line["Errors host: ckpt; code non-tiled, tiled"] == "0/2736; 0/2736, 2/2736"
    assert line["bit-identical"] == "tiled differs"
    assert line["peak B replayed (predicted)"] == "40000 (40000)" and line["gvsoc s"] == "12"
    runs["tiled"] = {**runs["tiled"], "graph_order": "bit-identical"}
    assert zoo.identity(zoo.SweepRead.of(folder).rows[1], runs) == "yes (host, non-tiled, tiled)"


@pytest.mark.parametrize(("predicted", "measured", "verdict"), [
    (4.03, 4.01, "yes"), (10.45, 10.79, "yes"), (0.0, 0.21, "no"), (0.05, 0.14, "yes"), (None, 1.0, "-")])
def test_the_prediction_tolerance_is_ten_percent_or_a_tenth_of_a_point(predicted, measured, verdict):
    assert zoo.within(predicted, measured) == verdict


@pytest.mark.slow      # it runs a whole sweep (solve and replay) first: CI runs it, not the fast tier
def test_a_point_replayed_whole_but_not_recorded_is_read_from_its_schedule_and_report(tmp_path):
    """A sweep stopped between a point's replay report (written last by the replay) and its point.json: the point
    is read from its seq.json and report.json as the sweep would have recorded it (MobileNetV1's 0.8 last time)."""
    from ckpt.budgets.sweep import SweepOptions, run_sweep
    from ckpt.examples import write_example

    write_example("mlp", tmp_path / "mlp")
    folder = tmp_path / "sw"
    run_sweep(str(tmp_path / "mlp"), folder, SweepOptions(fractions=(0.8,), target="none"))
    finished = {r.label: r for r in zoo.SweepRead.of(folder).rows}
    assert finished["0.8"].replayed_peak is not None
    (folder / "sweep.json").unlink()
    (folder / "points" / "0.8" / "point.json").unlink()
    read = zoo.SweepRead.of(folder)
    assert [r.label for r in read.rows] == ["baseline", "0.8"]
    rebuilt = next(r for r in read.rows if r.label == "0.8")
    assert replace(rebuilt, seconds=None) == replace(finished["0.8"], seconds=None)


class _Swept(Exception):
    """Raised by the stand-in of run_sweep once it has the sweep's options."""


@pytest.mark.parametrize("given, costs", [((), "auto"), (("--costs", "estimate"), "estimate"),
                                          (("--costs", "gvsoc"), "gvsoc")])
def test_the_points_are_solved_with_the_costs_given(split, tmp_path, monkeypatch, given, costs):
    """`--costs` reaches the sweep as `ckpt sweep --costs` takes it (auto unless given)."""
    seen = []

    def swept(model, folder, options, progress):
        seen.append(options.costs)
        raise _Swept
    monkeypatch.setattr(zoo, "run_sweep", swept)
    monkeypatch.setattr(zoo, "deeploy_flavour", lambda: zoo.Flavour.TRAINING_BRANCH)
    monkeypatch.setattr("sys.argv", ["zoo.py", "--model", str(split), "--budgets", "0.9", *given,
                                     "--outdir", str(tmp_path / "out")])
    with pytest.raises(_Swept):
        zoo.main()
    assert seen == [costs] and not (tmp_path / "out").exists()


def test_another_models_calibration_is_refused_before_any_work(split, tmp_path, monkeypatch, capsys):
    """A cost file is checked against each model the bench sweeps before anything runs: one line, exit 1."""
    other = tmp_path / "other"
    write_example("mlp", other, layers=2)
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"kind": KIND, "format": CALIBRATION_FORMAT, "target": "siracusa", "setup": {},
                                 "model_sha256": hashlib.sha256((other / "network.onnx").read_bytes()).hexdigest(),
                                 "step_cycles": 1000, "node_cycles": {}, "errors": 0, "total": 1, "code_bytes": 0,
                                 "key": "0" * 64}))
    monkeypatch.setattr(zoo, "run_sweep", lambda *a: pytest.fail("swept with another model's calibration"))
    monkeypatch.setattr("sys.argv", ["zoo.py", "--model", str(split), "--costs", str(costs), "--outdir",
                                     str(tmp_path / "out")])
    assert zoo.run_bench(zoo.main) == 1
    out = capsys.readouterr()
    assert f"'{costs}' is a calibration of another model" in out.err and out.out == ""
    assert not (tmp_path / "out").exists()


BASE_DRAWS, POINT_DRAWS = [96101959, 96202286, 96151065], [96708423, 96691376, 96855478]   # README 0.9, 3 draws


def test_a_miss_within_the_draws_spread_of_the_measured_overhead_is_in_band_and_one_draw_measures_none(tmp_path):
    """The README example's 0.9 with three draws: predicted +0.46%, measured +0.58% (medians), 0.12 points off,
    outside the rule; one draw of the point over one of the graph order measures as little as +0.51% and as much
    as +0.79%, so the miss lies inside what the draws alone move the overhead by: "in band". With one draw each
    there is no spread to measure: "no"."""
    base = replace(_row("baseline", None, 96151065, 96151065), cycles_draws=BASE_DRAWS)
    point = replace(_row("0.9", 0.9, 96708423, 96589508), cycles_draws=POINT_DRAWS)
    for rows, verdict in (([base, point], "in band"),
                          ([replace(base, cycles_draws=[]), replace(point, cycles_draws=[])], "no")):
        folder = _folder(tmp_path / verdict, rows, finished=True)
        cells = [c.strip() for c in zoo.point_lines(Path("readme"), zoo.SweepRead.of(folder))[1].split("|")[1:-1]]
        line = dict(zip([c.strip() for c in zoo.POINTS_HEAD.split("|")[1:-1]], cells, strict=True))
        assert line["overhead % measured (pred)"] == "+0.58 (+0.46)" and line["within"] == verdict


def test_the_draws_band_is_the_farthest_one_pair_of_draws_strays_from_the_medians_overhead():
    band = zoo.draws_band(POINT_DRAWS, BASE_DRAWS, 100.0 * (96708423 - 96151065) / 96151065)
    assert band == pytest.approx(100.0 * (96855478 - 96101959) / 96101959 - 100.0 * (96708423 - 96151065) / 96151065)
    assert zoo.draws_band(POINT_DRAWS, BASE_DRAWS[:1], 0.58) is None and zoo.draws_band([1], [1, 2], 0.5) is None
    assert zoo.draws_band(POINT_DRAWS, BASE_DRAWS, None) is None


# SimpleMLP's graph order and its 0.9 point (a reorder, no recompute) as a kept sweep measured them (3 draws, the
# train network per mini-batch; the optimizer's layers probed beside it)
MLP_BASE = {"node_1_fc1_Gemm_Gemm": 15360, "node_2_fc2_Gemm_Gemm": 10627, "sce": 13295, "sce_grad": 10428,
            "fc2_grad_1": 8887, "fc2_grad_0": 8292, "fc1_grad_0": 12491, "acc2": 10575, "acc1": 18045,
            "sgd_fc1_weight": 16943, "sgd_fc2_weight": 8603}
MLP_POINT = {"node_1_fc1_Gemm_Gemm": 15406, "node_2_fc2_Gemm_Gemm": 10677, "sce": 13280, "sce_grad": 10476,
             "fc2_grad_1": 8809, "acc2": 10431, "fc2_grad_0": 8418, "fc1_grad_0": 12563, "acc1": 18019,
             "sgd_fc1_weight": 16882, "sgd_fc2_weight": 8647}


def _measured(folder: Path, label: str, cycles: int, layers: dict[str, int]) -> None:
    """A kept point's replay as gvsoc measured it, layer by layer, and the order its train network ran."""
    replay = folder / "points" / label / "replay"
    (replay / "report.json").write_text(json.dumps({"code_runs": {}, "gvsoc": {"tiled": {
        "status": "measured", "cycles": cycles, "layer_cycles": layers}}}))
    (replay / "order.json").write_text(json.dumps({"clones": {}, "order": [n for n in layers
                                                                           if not n.startswith("sgd_")]}))


def test_a_miss_is_split_into_the_layers_the_point_runs_unchanged_and_the_rest_naming_the_one_that_moved_most(
        tmp_path):
    """SimpleMLP's 0.9 (predicted +0.00%, measured +0.16%, outside the rule): of its +191 cycles, the layers it runs
    as the graph order does moved +79 (the accumulator it moved earlier -144 the most), the rest lies outside the
    probed layers; the optimizer's layers, probed beside the train network, are no part of it. A point within the
    rule gets no line."""
    base = replace(_row("baseline", None, 116508, 116508), cycles_draws=[116607, 116381, 116508])
    point = replace(_row("0.9", 0.9, 116699, 116508), recomputes=0, cycles_draws=[116699, 116647, 116728])
    good = replace(_row("0.8", 0.8, 116520, 116508), recomputes=0)
    folder = _folder(tmp_path / "mlp", [base, point, good], finished=True)
    for label, cycles, layers in (("baseline", 116508, MLP_BASE), ("0.9", 116699, MLP_POINT),
                                  ("0.8", 116520, MLP_BASE)):
        _measured(folder, label, cycles, layers)
    lines = zoo.miss_lines(Path("simplemlp_train"), zoo.SweepRead.of(folder))
    assert lines == ["- simplemlp_train 0.9 (no: +0.16% measured, +0.00% predicted): +191 cycles over the graph "
                     "order's step = its recomputes 0 (+0 over their originals there) + the layers it runs as the "
                     "graph order does +79 (most: acc2 -144) + outside the probed layers +112"]


def test_the_split_of_a_step_sums_to_its_change_over_the_graph_order_with_its_recomputes_apart():
    """A recompute clone (`__ck1`) counts apart from the layers both run; the parts sum to the step's change."""
    common = bench_module("common")
    base = {"a": 100, "b": 200, "sgd": 50}
    point = {"a": 110, "b": 190, "b__ck1": 230, "sgd": 70}
    split = common.miss_split(base, 1000, point, 1300, ["a", "b", "b__ck1"])
    assert (split.recomputes, split.clones, split.unchanged, split.largest, split.outside) == (230, 30, 0,
                                                                                           ("b", -10), 70)
    assert split.recomputes + split.unchanged + split.outside == 1300 - 1000
    assert common.miss_split(base, 1000, point, 1300).unchanged == 20           # every probed layer: sgd too


def test_a_miss_within_the_models_layout_band_is_in_band_and_named_so_under_the_table(tmp_path):
    """SimpleMLP's 0.9 as the earlier build measured it (+0.16% against +0.00% predicted) misses the rule and its
    draws' band (0.13 points); its graph order's step moved by 0.18% when only its network moved by 4 B
    (117,463 against 117,253 cycles, `--noise`): within that, "in band", in the table and the line under it."""
    base = replace(_row("baseline", None, 116508, 116508), cycles_draws=[116607, 116381, 116508])
    point = replace(_row("0.9", 0.9, 116699, 116508), recomputes=0, cycles_draws=[116699, 116647, 116728])
    folder = _folder(tmp_path / "mlp", [base, point], finished=True)
    _measured(folder, "baseline", 116508, MLP_BASE)
    _measured(folder, "0.9", 116699, MLP_POINT)
    sweep, layout = zoo.SweepRead.of(folder), 100.0 * (117463 - 117253) / 117253
    heads = [c.strip() for c in zoo.POINTS_HEAD.split("|")[1:-1]]
    for band, verdict in ((None, "no"), (layout, "in band")):
        cells = [c.strip() for c in zoo.point_lines(Path("simplemlp_train"), sweep, band)[1].split("|")[1:-1]]
        assert dict(zip(heads, cells, strict=True))["within"] == verdict
        assert zoo.miss_lines(Path("simplemlp_train"), sweep, band)[0].startswith(f"- simplemlp_train 0.9 ({verdict}:")


def test_the_layout_band_without_gvsoc_is_refused_before_any_work(split, tmp_path, monkeypatch, capsys):
    """`--noise N` runs the graph order's step on gvsoc: without gvsoc, one line naming why, exit 1, nothing run."""
    from ckpt.gvsoc.kit import NoKit

    monkeypatch.setattr(zoo, "find_kit", lambda: NoKit("no gvsoc here"))
    monkeypatch.setattr(zoo, "run_sweep", lambda *a: pytest.fail("swept without gvsoc for --noise"))
    monkeypatch.setattr("sys.argv", ["zoo.py", "--model", str(split), "--noise", "2", "--outdir",
                                     str(tmp_path / "out")])
    with pytest.raises(SystemExit) as stopped:
        zoo.run_bench(zoo.main)
    assert stopped.value.code == 1
    out = capsys.readouterr()
    assert "--noise runs the graph order's step on gvsoc: no gvsoc here" in out.err and out.out == ""
    assert not (tmp_path / "out").exists()
