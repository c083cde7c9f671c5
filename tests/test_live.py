"""The live displays: drawn while entered when live, the same plain lines through the callback otherwise."""
from __future__ import annotations

from ckpt.events import Incumbent, LowerBound, Step
from ckpt.live import SolveProgress, SweepProgress


def test_a_solve_off_a_terminal_says_each_event_and_keeps_the_best_incumbent_and_bound():
    lines = []
    with SolveProgress(lines.append) as progress:
        for event in (Step("greedy"), Incumbent(120, "greedy"), Incumbent(100, "milp"), LowerBound(90.0, 3)):
            progress(event)
    assert lines == [str(e) for e in (Step("greedy"), Incumbent(120, "greedy"), Incumbent(100, "milp"),
                                      LowerBound(90.0, 3))]
    assert "incumbent 100 " in progress.line() and "bound 90 " in progress.line() and "gap 10.00%" in progress.line()


def test_a_live_solve_line_is_drawn_and_cleared_and_says_nothing_through_the_callback(capsys):
    lines = []
    with SolveProgress(lines.append, live=True) as progress:
        progress(Step("exact model"))
        assert progress._display is not None
    assert lines == [] and progress._display is None


def test_a_live_sweep_table_is_left_on_the_terminal_with_each_points_last_stage(capsys):
    lines = []
    with SweepProgress(lines.append, live=True) as board:
        board.add("m", "0.9")
        board.add("m", "0.8")
        board.stage("m", "0.9", "solving")
        board.stage("m", "0.9", "done", "optimal")
        assert board.counts() == (1, 0, 1)
        board.note("resuming")
    err = capsys.readouterr().err
    assert lines == [] and "resuming" in err and "optimal" in err and "ckpt sweep: 1 done" in err


def test_a_sweep_off_a_terminal_says_its_notes_as_lines():
    lines = []
    with SweepProgress(lines.append) as board:
        board.note("lowering")
        board.stage("m", "0.9", "replaying")
    assert lines == ["lowering"] and board.counts() == (0, 1, 0)
