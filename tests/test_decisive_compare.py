"""bench/decisive.py keeps its last grid as a table (--store) and --compare names every cell that got worse
against it: a decided cell now open, a larger gap, a schedule no longer found, or a decision that flipped."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from bench_support import bench_module

from ckpt.paths import REPO_ROOT

BENCH = REPO_ROOT / "bench"
STORED = """### target none: status and seconds per budget (limit 20 s, one thread, load 0)
| graph | ops | 0.9 | 0.5 | 0.4 |
|---|---|---|---|---|
| a | 10 | optimal 0.1 s | gap 5.00% 20.0 s | gap 5.00% 20.0 s |
| b | 12 | infeasible 0.0 s | no schedule 20.0 s | optimal 3.0 s |
| c | - | not lowered: no mapping |  |  |
"""


def decisive():
    return bench_module("decisive")


def cell(graph, fraction, status, gap=None, cost=None):
    return {"graph": graph, "target": "none", "fraction": fraction, "status": status, "cost": cost, "gap": gap,
            "seconds": 1.0}


def test_a_stored_grid_reads_back_cell_by_cell():
    cells = {(c["graph"], c["fraction"]): c for c in decisive().stored_cells(STORED)}
    assert set(cells) == {("a", 0.9), ("a", 0.5), ("a", 0.4), ("b", 0.9), ("b", 0.5), ("b", 0.4)}
    assert cells["a", 0.5]["status"] == "other" and cells["a", 0.5]["gap"] == 0.05
    assert cells["b", 0.5]["status"] == "other" and not cells["b", 0.5]["schedule"]
    assert cells["b", 0.9]["status"] == "infeasible" and cells["a", 0.9]["seconds"] == 0.1


def test_compare_names_every_cell_worse_than_the_stored_grid_and_no_other():
    bench = decisive()
    now = [cell("a", 0.9, "other", 0.01, cost=5),        # was optimal: worse
           cell("a", 0.5, "other", 0.08, cost=5),        # gap 5% -> 8%: worse
           cell("a", 0.4, "optimal", 0.0, cost=5),       # gap -> optimal: better
           cell("b", 0.9, "optimal", 0.0, cost=5),       # infeasible -> optimal: one of them is wrong
           cell("b", 0.5, "other", 0.5, cost=5),         # no schedule -> a schedule: better
           cell("b", 0.4, "other")]                      # optimal -> no schedule: worse
    worse = {(c["graph"], c["fraction"]) for _, c in bench.worse_cells(now, bench.stored_cells(STORED))}
    assert worse == {("a", 0.9), ("a", 0.5), ("b", 0.9), ("b", 0.4)}


def test_a_grid_stored_over_the_table_it_is_compared_with_is_compared_with_the_old_table(tmp_path, monkeypatch,
                                                                                          capsys):
    """`--store T --compare T` (issue 56's grid command): the table is read before the new one replaces it, else
    every cell is compared with itself and none is ever worse (CCT 0.3 went from gap 27.10% to 62.05%: 0 worse)."""
    bench = decisive()
    table = tmp_path / "grid.md"
    table.write_text(STORED)
    now = [{**cell("a", 0.9, "other", 0.01, cost=5), "cpu": 1.0}]
    monkeypatch.setattr(bench, "grid", lambda args, scratch: (now, ["", "a new table"]))
    monkeypatch.setattr(sys, "argv", ["decisive.py", "--grid", "--store", str(table), "--compare", str(table)])
    assert bench.main() == 0
    assert table.read_text() == "a new table\n"
    assert f"cells worse than in {table}: 1" in capsys.readouterr().out


@pytest.mark.slow  # runs whole commands in subprocesses
def test_a_grid_stored_and_compared_with_itself_is_no_worse(tmp_path):
    grid = tmp_path / "grid.md"
    args = [sys.executable, str(BENCH / "decisive.py"), "--smoke", "--grid", "--graphs", "mlp", "--targets", "none",
            "--fractions", "0.9"]
    first = subprocess.run([*args, "--store", str(grid)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "| mlp | 26 | optimal" in grid.read_text()
    again = subprocess.run([*args, "--compare", str(grid)], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"cells worse than in {grid}: 0" in again.stdout, again.stdout


def test_a_cell_counts_the_cpu_seconds_of_the_solver_runs_it_forks():
    """On a loaded machine a cell's wall clock says more about the load than about the solve: a cell adds its
    CPU seconds, those of the watched HiGHS runs the solver forks included (here a child that only spins)."""
    bench = decisive()
    cpu: list[float] = []
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"

    def solve_in_a_child(*args, **kwargs):
        subprocess.run([sys.executable, "-c", spin], check=True)
        raise bench.InfeasibleBudget("none fits", "raise it")

    original = bench.solve
    bench.solve = solve_in_a_child
    try:
        status, cost, gap, seconds = bench.cell(None, 1, 1.0, cpu=cpu)
    finally:
        bench.solve = original
    assert status == "infeasible" and cost is None and len(cpu) == 1
    assert cpu[0] >= 0.25, cpu


def test_a_model_the_target_crashes_lowering_is_a_row_saying_so_and_the_grid_goes_on(tmp_path, monkeypatch):
    """The release Deeploy raises an IndexError lowering cct_train for Siracusa: that model's row says so, and
    the models after it still get their cells."""
    bench = decisive()
    real = bench.graph_of

    def graph_of(name, scratch, zoo_dir=None):
        model = name.partition("@")[0]
        if model == "crashes":
            raise IndexError("list index out of range")
        return real(model, scratch)

    monkeypatch.setattr(bench, "graph_of", graph_of)
    args = argparse.Namespace(fractions="0.9", graphs="crashes,mlp", targets="siracusa", zoo_dir=None,
                              time_limit=5.0, order="minmem", load=0, clock="wall", draws=1)
    cells, lines = bench.grid(args, tmp_path)
    assert "| crashes | - | not lowered: IndexError while lowering: list index out of range |" in lines
    assert [c["graph"] for c in cells] == ["mlp"] and cells[0]["status"] == "optimal"


def test_a_cell_not_decided_is_drawn_again_and_shows_its_best_its_worst_and_how_many_decided(tmp_path, monkeypatch):
    """--draws 3: on the CPU clock one draw cannot tell a regression from spread (CCT none 0.3: gap 62.05% in one
    run, 33.55% in another of the same code). A cell decided at once is not drawn again; an open one is drawn
    three times, shows its best draw (the one --compare reads), how many draws decided it and its worst, and its
    table text reads back as that best draw."""
    bench = decisive()
    answers = {0.9: [("optimal", 5, 0.0)],
               0.5: [("other", 9, 0.3), ("optimal", 7, 0.0), ("other", 8, 0.1)],
               0.4: [("other", 9, 0.3), ("other", None, None), ("other", 8, 0.1)]}
    asked: dict[float, int] = {}

    def cell(graph, budget, limit, order="minmem", cpu=None, clock="wall"):
        fraction = round(budget / 1000, 2)
        n = asked[fraction] = asked.get(fraction, 0) + 1
        cpu.append(float(n))
        return (*answers[fraction][n - 1], 20.0 + n)

    monkeypatch.setattr(bench, "cell", cell)
    monkeypatch.setattr(bench, "graph_of", lambda name, scratch, zoo_dir=None: examples_graph())
    monkeypatch.setattr(bench, "baselines", lambda graph: argparse.Namespace(graph_order_peak=1000))
    args = argparse.Namespace(fractions="0.9,0.5,0.4", graphs="g", targets="none", zoo_dir=None, time_limit=5.0,
                              order="minmem", load=0, clock="cpu", draws=3)
    cells, lines = bench.grid(args, tmp_path)
    assert asked == {0.9: 1, 0.5: 3, 0.4: 3}
    by = {c["fraction"]: c for c in cells}
    assert by[0.9]["cost"] == 5 and len(by[0.9]["draws"]) == 1
    assert (by[0.5]["status"], by[0.5]["cost"], by[0.5]["decided"], by[0.5]["cpu"]) == ("optimal", 7, 1, 6.0)
    assert (by[0.4]["status"], by[0.4]["gap"], by[0.4]["decided"]) == ("other", 0.1, 0)
    row = next(line for line in lines if line.startswith("| g |"))
    assert row == ("| g | 3 | optimal 21.0 s | optimal (1/3 decided, worst gap 30.00%) 22.0 s | "
                   "gap 10.00% (0/3 decided, worst no schedule) 23.0 s |")
    stored = {c["fraction"]: c for c in bench.stored_cells("\n".join(lines))}
    assert stored[0.5]["status"] == "optimal" and stored[0.4]["gap"] == 0.1 and stored[0.4]["seconds"] == 23.0
    assert bench.worse_cells(cells, list(stored.values())) == []


def examples_graph():
    from graphs import chain
    return chain(1)


def test_draws_are_refused_outside_the_grid(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["decisive.py", "--draws", "2"])
    with pytest.raises(SystemExit) as stopped:
        decisive().main()
    assert stopped.value.code == 1 and "--draws is for the grid's cells" in capsys.readouterr().err
