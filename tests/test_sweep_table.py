"""The sweep's table as a person reads it: ten main columns, a line per point that needs a word, every other
figure in a second section and the CSV in the same order, with a legend; the plot's labels carry their bytes."""
from __future__ import annotations

import csv
import io
import re
from dataclasses import replace

import pytest

from ckpt.budgets.plot import pareto_plot
from ckpt.budgets.table import csv_text, main_columns, markdown_table, terminal_table
from ckpt.memory_levels import LevelMemory
from ckpt.pipeline.row import empty_row

MAIN_TITLES = ["point", "budget B", "peak B", "on chip B", "fits L2", "train cycles", "+% (pred)",
               "Errors host, gvsoc", "recomp", "status"]


def _rows() -> list:
    levels = {"L3": LevelMemory(arena=4096, static=1000), "L2": LevelMemory(arena=512, static=0)}
    base = replace(empty_row("baseline", None, None, "baseline", ""), predicted_peak=2400, replayed_peak=2400,
                   recomputes=0, levels=levels, home="L3", on_chip=96358, on_chip_capacity=2031616, cycles=100000,
                   cycles_predicted=99000, overhead_pct=0.0, overhead_pct_predicted=0.0, code_errors="0/596",
                   gvsoc_errors="0/596", errors="0/596", host_errors="0/596", code_check="bit-identical",
                   check="bit-identical")
    reordered = replace(base, label="0.9", budget_fraction=0.9, budget_bytes=2160, status="optimal",
                        predicted_peak=2080, replayed_peak=2080, overhead_pct=0.34, overhead_pct_predicted=0.0)
    failed = replace(base, label="0.7", budget_fraction=0.7, budget_bytes=1680, status="optimal", predicted_peak=1600,
                     replayed_peak=1600, recomputes=3, recompute_cost=120, overhead_pct=4.1,
                     overhead_pct_predicted=3.9, gvsoc_errors="failed", errors="failed",
                     reason="gvsoc failed: exit 139")
    return [base, reordered, failed]


def test_the_terminal_shows_ten_columns_and_a_line_per_point_that_needs_a_word():
    text = terminal_table(_rows(), "siracusa")
    head = text.splitlines()[0]
    assert re.split(r"\s{2,}", head.strip()) == MAIN_TITLES
    assert "0.34 (0.00)" in text and "0/596, failed" in text and "0/596, 0/596" in text
    assert "0.9: no recompute: its peak is 320 B (13.3%) below the baseline's from reordering alone" in text
    assert "its +0.34% cycles are code layout" in text
    assert "0.7: FAILED (gvsoc failed)" in text
    assert "baseline:" not in text                          # nothing to say of the baseline


def test_sweep_md_has_the_main_table_then_every_figure_then_a_legend_in_the_csv_order():
    rows = _rows()
    text = markdown_table(rows, "siracusa")
    assert text.splitlines()[0] == "| " + " | ".join(MAIN_TITLES) + " |"
    assert "- on chip: the whole step fits the 2,031,616 B of L2 at point baseline" in text     # as the terminal
    main, _, rest = text.partition("## Every figure")
    details, _, legend = rest.partition("## Legend")
    assert "L3 const" not in main and "| L3 const | L3 arena | L3 total | L2 total |" in details
    names = next(csv.reader(io.StringIO(csv_text(rows, "siracusa"))))
    said = re.findall(r"^- \*\*.+?\*\* \((.+?)\): ", legend, re.M)
    assert [n.strip("`") for entry in said for n in entry.split(", ")] == names      # one legend line per column
    assert names[:11] == ["label", "budget_bytes", "peak", "on_chip", "fits_on_chip", "cycles", "overhead_pct",
                          "overhead_pct_predicted", "code_errors", "gvsoc_errors", "recomputes"]
    assert "not the code itself: see on chip B" in legend       # what L2 total is beside on chip B
    const = next(line for line in legend.splitlines() if line.startswith("- **L3 const**"))
    assert "Deeploy's tiler counts" in const and "never declares" in const     # not what the code declares: Deeploy
                                                # counts the shape constants it never declares (CCT split+: 848 B)


def test_the_main_columns_name_the_targets_on_chip_level():
    assert [c.title for c in main_columns("siracusa")] == MAIN_TITLES
    assert "fits on-chip memory" in [c.title for c in main_columns(None)]


def test_a_gvsoc_failure_is_the_points_verdict_and_fails_it():
    """gvsoc exiting 139: the row's Errors are not the host's, and the point failed (the sweep exits 1)."""
    failed = _rows()[2]
    assert failed.code_failed and not failed.verified and failed.errors == "failed"


def test_the_plot_labels_carry_their_bytes(tmp_path):
    rows = [replace(r, gvsoc_errors=r.code_errors, errors=r.code_errors, reason="") for r in _rows()]
    rows[2] = replace(rows[2], replayed_peak=2080, label="0.8")
    svg = pareto_plot(rows, 1000, tmp_path / "pareto", "t")[1].read_text()
    for label in ("baseline: 2,400 B", "budget 0.9: 2,080 B", "budget 0.8: 2,080 B", "lower bound (1,000 B)"):
        assert label in svg
    assert " KiB" not in re.sub(r"\(KiB\)", "", svg)           # the axes' unit, no rounded label


def test_a_failed_gvsoc_run_is_the_rows_errors_not_the_hosts():
    from ckpt.pipeline.row import _gvsoc
    from ckpt.replay.report import GvsocRecord, SimStatus

    failed = GvsocRecord("tiled", SimStatus.FAILED, "the step did not finish on gvsoc (exit code 139)")
    cycles, errors, reason = _gvsoc(failed, True)
    assert cycles is None and errors == "failed" and "exit code 139" in reason


def test_a_split_plus_point_says_how_many_persistent_tensors_it_brings_on_chip_and_their_bytes():
    """sweep.md's details and the CSV carry split+'s count and bytes, from the schedule's `predicted.split_plus`
    (the SimpleMLP 0.9 point's record); a sweep without split+ shows no such column in sweep.md."""
    import json
    from pathlib import Path

    from ckpt.pipeline.row import solved_row
    from ckpt.schedule_file import Schedule

    doc = json.loads((Path(__file__).parent / "data" / "simplemlp_split_plus_0.9.json").read_text())
    row = solved_row("0.9", 0.9, 2160, Schedule.from_dict(doc), 0.0, "bit-identical", "", "points/1/seq.json")
    assert (row.persist_on_chip, row.persist_on_chip_bytes) == (6, 4880)
    rows = [*_rows(), replace(_rows()[1], label="0.8", persist_on_chip=6, persist_on_chip_bytes=4880)]
    text = markdown_table(rows, "siracusa")
    details = text.partition("## Every figure")[2].partition("## Legend")[0]
    assert "| split+ on chip |" in details and "| 6 (4,880 B) |" in details
    names = next(csv.reader(io.StringIO(csv_text(rows, "siracusa"))))
    assert "persist_on_chip" in names and "persist_on_chip_bytes" in names
    assert "split+ on chip" not in markdown_table(_rows(), "siracusa").partition("## Legend")[0]


def test_a_steps_on_chip_parts_name_what_the_runtime_holds_and_add_up_to_its_on_chip_bytes():
    """A split step's on-chip bytes count what pulp-sdk's runtime allocates in L2 for itself (gvsoc.run.runtime_heap):
    its parts say so, and still add up to the whole."""
    from types import SimpleNamespace

    from ckpt.gvsoc.run import OnChipNeed
    from ckpt.pipeline.row import _on_chip, _on_chip_parts

    need = OnChipNeed(static=775_168, heap=1_251_940, capacity=2_097_152, test_data=1_000, runtime=119_664)
    levels = {"L3": LevelMemory(arena=3_113_816, static=53_880)}
    report = SimpleNamespace(gvsoc={"tiled": SimpleNamespace(on_chip=need)},
                             model=SimpleNamespace(target="siracusa"), memory=SimpleNamespace(levels=levels))
    parts = _on_chip_parts(report, "L2", levels)
    assert parts["runtime"] == 119_664 and sum(parts.values()) == _on_chip(report, "L2") == need.step


def _split_rows() -> list:
    """A split-home sweep whose graph order does not fit L2 (as MobileNetV1's): its baseline refused, one budget
    point on chip, and the graph order deployed off chip for reference."""
    from ckpt.pipeline.row import REFERENCE, PointCheck

    base, point, _ = _rows()
    base = replace(empty_row("baseline", None, None, "baseline", "does not fit L2: its activations alone need "
                             "4,443,336 B, 2,411,720 B more than the 2,031,616 B L2 gives"),
                   predicted_peak=2400, recomputes=0, cycles_predicted=144_000, check=PointCheck.DOES_NOT_FIT.value,
                   overhead_pct_predicted=0.0)                   # as an earlier run over itself stored it
    point = replace(point, overhead_pct=None, overhead_pct_predicted=None, cycles=150_000, cycles_predicted=180_000,
                    recomputes=2, recompute_cost=100, home="L2")
    reference = replace(_rows()[0], label=REFERENCE, status="reference", cycles=240_000, cycles_predicted=None,
                        overhead_pct=None, overhead_pct_predicted=None, home="L3")
    return [base, point, reference]


def test_a_baseline_that_does_not_fit_its_home_is_said_so_and_overheads_are_over_the_off_chip_graph_order():
    """--home split on a model whose graph order cannot fit L2: the baseline is not a failure (the sweep does not
    exit 1 for it) and the points' measured and predicted +% are over the off-chip graph order, labelled so."""
    from pathlib import Path

    from ckpt.budgets.plot import time_axis
    from ckpt.budgets.sweep import SweepResult
    from ckpt.pipeline.row import with_overheads

    base, point, reference = with_overheads(_split_rows())
    assert point.overhead_pct == -37.5 and point.overhead_pct_predicted == -25.0       # over 240,000 measured
    assert base.overhead_pct is None and base.overhead_pct_predicted is None
    assert reference.overhead_pct is None                                             # as before: its own row
    rows = [base, point, reference]
    text = markdown_table(rows, "siracusa")
    assert text.splitlines()[0].split(" | ")[6] == "+% off chip (pred)" and "| -37.50 (-25.00) |" in text
    assert "- baseline: does not fit L2: its activations alone need 4,443,336 B" in text and "FAILED" not in text
    assert "over the off-chip graph order's (its row; the baseline does not fit L2)" in text   # the legend
    assert "+% off chip (pred)" in terminal_table(rows, "siracusa").splitlines()[0]
    assert "over the off-chip graph order" in time_axis(rows[:2])[1]                   # the plot, as reports.py
    names = next(csv.reader(io.StringIO(csv_text(rows, "siracusa"))))
    assert names[6:8] == ["overhead_pct", "overhead_pct_predicted"]                    # the CSV's fields as ever
    result = SweepResult(Path("."), rows, [], [], 0, 2400, [], {}, 0.0)
    assert result.failed == []                                                        # exit 0
    assert [r.label for r in SweepResult(Path("."), _rows(), [], [], 0, 2400, [], {}, 0.0).failed] == ["0.7"]


def test_where_the_baseline_runs_the_overheads_stay_over_it_and_the_reference_row_has_none():
    from ckpt.pipeline.row import BASELINE, PointCheck, with_overheads

    rows = _split_rows()
    ran = replace(rows[0], check=PointCheck.BIT_IDENTICAL.value, cycles=120_000, reason="")
    base, point, reference = with_overheads([ran, *rows[1:]])
    assert base.status == BASELINE and base.overhead_pct == 0.0
    assert point.overhead_pct == 25.0 and point.overhead_pct_predicted == 25.0        # 150k/120k, 180k/144k
    assert reference.overhead_pct is None and reference.overhead_pct_predicted is None
    text = markdown_table([base, point, reference], "siracusa")
    assert text.splitlines()[0] == "| " + " | ".join(MAIN_TITLES) + " |" and "off chip (pred)" not in text


def test_a_split_order_refused_for_its_activations_does_not_fit_at_the_baseline_and_a_point_not_a_failure(
        tmp_path, monkeypatch):
    """replay_point: the refusal a split replay gives before Deeploy runs (replay.run.ActivationsBeyondChip) makes
    the baseline row `does not fit` with the bytes, and is kept; so does the same refusal at a budget point (a
    budget above what fits L2: no failure, the sweep exits 0)."""
    import json
    from pathlib import Path

    from ckpt.pipeline import point as point_module
    from ckpt.pipeline.point import PointSpec, ReplayTask, replay_point
    from ckpt.pipeline.row import PointCheck
    from ckpt.replay.run import ActivationsBeyondChip, ReplayOptions
    from ckpt.schedule_file import Schedule

    def refuse(*_args, **_kwargs):
        raise ActivationsBeyondChip("L2", 4_443_336, 2_031_616)

    monkeypatch.setattr(point_module, "replay_schedule", refuse)
    doc = Schedule.from_dict(json.loads((Path(__file__).parent / "data" / "simplemlp_split_plus_0.9.json").read_text()))
    found = {}
    for spec in (PointSpec("baseline", None), PointSpec.at(0.5, 10_000)):
        task = ReplayTask(spec, "model", doc, None, ReplayOptions(), str(tmp_path / spec.label), "key",
                          show_progress=False)
        found[spec.label] = replay_point(task)
    base, point = found["baseline"], found["0.5"]
    assert base.row.check == PointCheck.DOES_NOT_FIT and base.stored
    assert base.row.reason == ("does not fit L2: its activations alone need 4,443,336 B, 2,411,720 B more than the "
                               "2,031,616 B L2 gives")
    assert point.row.check == PointCheck.DOES_NOT_FIT and point.stored and point.row.reason == base.row.reason
    assert point.row.status != "error" and not PointCheck(point.row.check).failed


def test_a_combined_table_names_the_overheads_off_chip_only_where_every_models_baseline_does_not_fit():
    from ckpt.pipeline.row import over_off_chip, with_overheads

    split = with_overheads(_split_rows())
    ran = [replace(r, label=f"b/{r.label}") for r in _rows()]
    assert over_off_chip(split) and not over_off_chip(split + ran)
    assert markdown_table(split + ran, "siracusa").splitlines()[0] == "| " + " | ".join(MAIN_TITLES) + " |"


def test_a_split_budget_whose_arena_overflows_l2_is_refused_with_a_way_out_for_the_split_home():
    """ckpt solve --home split at a budget above what fits L2 (a wide MLP at 0.5): the refusal names the split home
    and a lower budget, not --home L2 (the user gave --home split); --home L2 keeps its way out."""
    from ckpt.errors import InfeasibleBudget
    from ckpt.pipeline.on_chip import OnChipHome, refuse_over

    split = OnChipHome("L2", 2_031_616, 0, None, "split")
    with pytest.raises(InfeasibleBudget) as found:
        refuse_over(split, 2_949_120, "0.5")
    assert found.value.problem == ("at --budget 0.5 the step does not fit L2: the schedule's arena (2,949,120 B) = "
                                   "2,949,120 B, 917,504 B more than the 2,031,616 B L2 gives")
    assert found.value.way_out == ("give a lower --budget (ckpt sweep --home split names the largest that fits), or "
                                   "keep its activations off chip (drop --home split)")
    with pytest.raises(InfeasibleBudget) as found:
        refuse_over(OnChipHome("L2", 2_031_616, 1_000_000, None, "L2"), 1_100_000, "0.5")
    assert found.value.way_out.endswith("--budget-total L2=2031616, or keep its tensors off chip (drop --home L2)")
