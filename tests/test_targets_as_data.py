"""A memory level and a Deeploy target are data: a new one is one entry (targets.py, memory_levels.LevelMemory),
and every reader (setup, CLI choices, table, CSV, JSON, plot) follows without another edit."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from ckpt import targets
from ckpt.budgets.plot import pareto_plot
from ckpt.budgets.table import columns, csv_text, json_text, markdown_table, terminal_table
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, setup_for
from ckpt.gvsoc.run import OnChipNeed
from ckpt.memory_levels import LevelMemory
from ckpt.pipeline.row import _on_chip, empty_row

ROOT = Path(__file__).resolve().parents[1]
FAKE_LEVEL = "L4"        # a level outside the three every chip here has: a far flash, say


def _rows() -> list:
    levels = {"L3": LevelMemory(arena=4096, static=1000), "L2": LevelMemory(arena=512, static=0),
              FAKE_LEVEL: LevelMemory(arena=70000, static=12345)}
    row = empty_row("0.8", 0.8, 4096, "optimal", "")
    return [replace(row, levels=levels, predicted_peak=4000, cost_increase_pct=1.5)]


def test_a_new_level_in_the_rows_is_a_column_of_every_rendering(tmp_path):
    rows = _rows()
    # the terminal shows the ten main columns; every level's figures are in sweep.md's second section and the CSV
    assert f"{FAKE_LEVEL} " not in terminal_table(rows) and f"| {FAKE_LEVEL} const |" in markdown_table(rows)
    header = next(csv.reader(io.StringIO(csv_text(rows))))
    assert {f"static_{FAKE_LEVEL}", f"arena_{FAKE_LEVEL}", f"total_{FAKE_LEVEL}"} <= set(header)
    found = dict(zip(header, next(iter(list(csv.reader(io.StringIO(csv_text(rows))))[1:]))))
    assert found[f"total_{FAKE_LEVEL}"] == str(12345 + 70000)
    doc = json.loads(json_text(rows))
    level = doc["points"][0]["levels"][FAKE_LEVEL]
    assert level["total"] == 12345 + 70000
    assert all(p.is_file() for p in pareto_plot(rows, 1000, tmp_path / "plot"))


def test_a_new_level_of_a_target_sizes_its_home(monkeypatch):
    chip = targets.Target("fakechip", "Siracusa",
                          (targets.Level(FAKE_LEVEL, 64 * targets.MIB), targets.Level("L3", 8 * targets.MIB),
                           targets.Level("L2", 3 * targets.MIB, reserved=1000), targets.Level("L1", 64 * targets.KIB)),
                          homes=("L3", "L2"))
    monkeypatch.setitem(targets.TARGET_TABLE, chip.name, chip)
    assert setup_for("fakechip", "L2").size("L2") == 3 * targets.MIB - 1000
    assert setup_for("siracusa", "L2").size("L2") != setup_for("fakechip", "L2").size("L2")
    assert chip.level_names[0] == FAKE_LEVEL == setup_for("fakechip").outermost
    assert setup_for("fakechip").size(FAKE_LEVEL) == 64 * targets.MIB     # a level Deeploy's CI does not size


def _sram_chip(monkeypatch) -> targets.Target:
    """A chip whose levels are named otherwise: DRAM behind it, SRAM on chip (its home when on chip), TCM."""
    chip = targets.Target("sramchip", "Siracusa",
                          (targets.Level("DRAM", 16 * targets.MIB), targets.Level("SRAM", 4 * targets.MIB, reserved=96),
                           targets.Level("TCM", 64 * targets.KIB)),
                          homes=("DRAM", "SRAM"), on_chip="SRAM")
    monkeypatch.setitem(targets.TARGET_TABLE, chip.name, chip)
    return chip


def test_an_on_chip_level_of_another_name_sizes_the_deployment(monkeypatch):
    chip = _sram_chip(monkeypatch)
    setup = setup_for(chip.name, "SRAM")
    assert setup.level_names == ("DRAM", "SRAM", "TCM") and setup.default_mem_level == "SRAM"
    assert setup.size("SRAM") == 4 * targets.MIB - 96 and (setup.outermost, setup.innermost) == ("DRAM", "TCM")
    assert list(setup.as_dict())[:3] == ["tcm", "sram", "dram"]             # serialised as Deeploy's l1, l2, l3
    assert chip.off_chip == "DRAM" and chip.is_on_chip("SRAM") and not chip.is_on_chip("DRAM")
    assert list(DEFAULT_SETUP.as_dict())[:3] == ["l1", "l2", "l3"]
    with pytest.raises(KeyError):
        setup.size("L2")


def test_the_deeploy_hierarchy_follows_the_setups_levels(monkeypatch):
    from ckpt.deeploy_bridge.deeploy_run import memory_levels

    _sram_chip(monkeypatch)
    found = {level.name: (level.neighbourNames, level.size) for level in memory_levels(setup_for("sramchip", "SRAM"))}
    assert found == {"DRAM": (["SRAM"], 16 * targets.MIB), "SRAM": (["DRAM", "TCM"], 4 * targets.MIB - 96),
                     "TCM": (["SRAM"], 64 * targets.KIB)}
    assert [level.neighbourNames for level in memory_levels(DEFAULT_SETUP)] == [["L2"], ["L3", "L1"], ["L2"]]


def _report(target: str, home_total: int) -> SimpleNamespace:
    """The parts of a replay report the on-chip figure reads: the step's on-chip need and the home's figures."""
    need = OnChipNeed(static=1000, heap=500, capacity=4000, test_data=100)
    levels = {"DRAM": LevelMemory(arena=home_total - 10, static=10), "SRAM": LevelMemory(arena=200, static=0)}
    return SimpleNamespace(model=SimpleNamespace(target=target), memory=SimpleNamespace(levels=levels),
                           gvsoc={"tiled": SimpleNamespace(on_chip=need)})


def test_a_step_fits_the_on_chip_level_whatever_its_name(monkeypatch):
    _sram_chip(monkeypatch)
    assert _on_chip(_report("sramchip", 3000), "SRAM") == 1400             # home on chip: the step alone
    assert _on_chip(_report("sramchip", 3000), "DRAM") == 1400 + 3000      # home off chip: its home brought in
    row = replace(_rows()[0], home="SRAM", on_chip=1400 + 3000, on_chip_capacity=4000)
    assert row.fits_on_chip is False
    titles = [title for title, _ in columns([row], "sramchip")]
    assert "fits SRAM" in titles and "fits L2" not in titles
    assert "fits L2" in [title for title, _ in columns([row], "siracusa")]
    table = terminal_table([row], "sramchip")
    assert "no (+400)" in table and "fits the 4,000 B of SRAM" in table


FAKE_TARGET = '''
import ckpt.targets as t
src = open(t.__file__).read().replace('Target("none"),', 'Target("none"), Target("fakechip"),', 1)
exec(compile(src, t.__file__, "exec"), t.__dict__)
from ckpt.cli import cli
cli(prog_name="ckpt")
'''


@pytest.mark.parametrize("argv", [["solve", "--help"], ["replay", "--help"], ["sweep", "--help"]])
def test_a_new_target_is_one_entry_the_cli_offers(argv):
    """One entry in targets.TARGET_TABLE (a chip without Deeploy, as `none`): every command's --target takes it."""
    done = subprocess.run([sys.executable, "-c", FAKE_TARGET, *argv], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "fakechip" in done.stdout


def test_a_new_target_solves_as_its_entry_says(tmp_path):
    out = tmp_path / "seq.json"
    done = subprocess.run([sys.executable, "-c", FAKE_TARGET, "solve", "--target", "fakechip", "--budget", "0.8",
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["graph"]["target"] == "fakechip"


def test_the_table_breaks_down_the_rows_home_level_whichever_it_is():
    """Home L2 (on chip): the constants and arena columns are L2's, not the outermost level's."""
    row = replace(_rows()[0], home="L2")
    titles = [title for title, _ in columns([row])]
    assert {"L2 const", "L2 arena", "L2 total", "L3 total", f"{FAKE_LEVEL} total"} <= set(titles)
    assert "L3 const" not in titles and "L3 arena" not in titles
    assert f"{FAKE_LEVEL} const" in [title for title, _ in columns(_rows())]     # no home given: the outermost


def test_gap9s_l1_is_what_its_stacks_leave_and_siracusas_levels_stay_deeploys_ci_sizes():
    gap9 = setup_for("gap9")
    assert gap9.size("L1") == 128 * targets.KIB - targets.GAP9_L1_STACKS == 93 * targets.KIB   # not CI's 128,000
    assert gap9.size("L2") == 1_024_000 and setup_for("gap9", "L2").size("L2") == 1536 * targets.KIB
    assert setup_for("siracusa").levels == DEFAULT_SETUP.levels


def test_gap9s_steps_say_why_no_cycles_are_measured_whatever_gvsoc_is_at_hand(tmp_path):
    from ckpt.gvsoc.kit import NoKit
    from ckpt.replay.report import SimStatus
    from ckpt.replay.split_run import simulate_split

    why = "GAP9's gvsoc model ships only with GreenWaves' SDK"
    assert targets.simulation_gap("gap9") == why and targets.simulation_gap("siracusa") == ""
    found = simulate_split("tiled", tmp_path, None, None, [], None, NoKit("y"), tmp_path / "log", False, 1.0,
                           target="gap9")
    assert found.status is SimStatus.NOT_SIMULATED and found.reason == why and found.cycles is None


def test_a_gvsoc_option_for_gap9_is_refused_saying_why():
    from ckpt.cli_common import gvsoc_options_unused

    [(ignored, option, why, _)] = gvsoc_options_unused("gap9", False, False, gvsoc=Path("/opt/gvsoc"))
    assert ignored and option == "--gvsoc" and why.endswith("GAP9's gvsoc model ships only with GreenWaves' SDK")
    [(ignored, *_)] = gvsoc_options_unused("siracusa", False, False, gvsoc=Path("/opt/gvsoc"))
    assert not ignored
