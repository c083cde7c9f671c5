"""What `ckpt solve` says of the schedule it wrote: why it is not called optimal, why what runs costs less than
what was planned, and the summary line."""
from __future__ import annotations

import math

from ckpt.schedule_file import Schedule
from ckpt.solver.model.records import SolveResult

# what a predicted +% of cycles is over (SolveResult.base_cost): the op costs summed, not a step measured as a whole
OVER_OP_COSTS = "over the sum of the graph order's op costs"


def not_proven_warning(result: SolveResult) -> str:
    """Why a schedule is not called optimal, what is proven, and what may change that."""
    gap = "unknown" if result.gap is None else f"{100 * result.gap:.2f}%"
    bound = result.cost_lower_bound
    proven = "" if bound is None else f"; no schedule of the space costs less than {bound} cycles"
    text = f"warning: not proven optimal (status {result.status}, gap {gap}{proven})"
    why = ["the time limit ran out, a longer --time-limit may close the gap"] if result.timed_out else []
    if result.models_need is not None:
        why.append(f"the MILP models were not run, too big for this --time-limit (they run from "
                   f"--time-limit {math.ceil(result.models_need)})")
    return text + (": " + "; ".join(why) if why else "")


def moved_ops_note(result: SolveResult) -> str | None:
    """Why what runs costs less than the schedule the status is about (None: it does not)."""
    if result.recompute_cost >= result.planned_cost:
        return None
    return (f"note: what runs costs {result.recompute_cost} cycles, less than the {result.planned_cost} planned over "
            "the stage order: Deeploy deletes a first run nobody reads, which moves its op later; the status and "
            "the lower bound are about the planned cost")


def optimizer_note(schedule: Schedule) -> str | None:
    """What the optimizer graph of a split step adds to the schedule's figures (None: the step is one graph)."""
    found = schedule.predicted.optimizer if schedule.predicted else None
    if not found:
        return None
    return (f"note: the optimizer graph ({found['nodes']} nodes) runs after this one: its outputs add "
            f"{found['output_bytes']} B written out of place (0 B in place), its activations peak at "
            f"{found['activation_peak_bytes']} B; the step's activation peak is "
            f"{max(schedule.predicted.peak_bytes, found['activation_peak_bytes'])} B")


def solve_notes(result: SolveResult, schedule: Schedule | None = None) -> list[str]:
    """What `ckpt solve` warns of before its summary line."""
    notes = [not_proven_warning(result)] if result.status != "optimal" else []
    found = (moved_ops_note(result), optimizer_note(schedule) if schedule is not None else None)
    return notes + [note for note in found if note is not None]


def written_line(schedule: Schedule, result: SolveResult, output: str) -> str:
    """The line `ckpt solve` ends with: what it wrote and the schedule's figures."""
    predicted = schedule.predicted
    base = predicted.baseline_peak_bytes
    where = "stdout" if output == "-" else output
    return (f"wrote {where}: peak {result.peak_bytes} B ({_of_baseline(result.peak_bytes, base)}), "
            f"{predicted.checked} {predicted.checked_bytes} B, {_arena(predicted)}"
            f"{result.recomputes} recomputes, {_cycles(predicted, result)}, "
            f"status {result.status}{_over_order(result)}, "
            f"{result.seconds:.1f} s")


def _cycles(predicted, result: SolveResult) -> str:
    """The cycles the schedule adds over the sum of the graph order's op costs (OVER_OP_COSTS): its recomputes' and,
    where it parks activations off chip (--park auto), their transfers too (as predicted.step_cycles counts them),
    with what is parked."""
    parked = predicted.parked_tensors
    if not parked and not result.park_cost:
        return f"+{result.cost_increase_pct:.2f}% cycles {OVER_OP_COSTS}"
    park_pct = 100.0 * result.park_cost / result.base_cost if result.base_cost else 0.0
    what = f"{len(parked)} activation{'' if len(parked) == 1 else 's'}"
    return (f"{what} parked off chip ({(predicted.parked or {}).get('bytes', 0)} B), "
            f"+{result.cost_increase_pct + park_pct:.2f}% cycles {OVER_OP_COSTS} "
            f"(recomputes +{result.cost_increase_pct:.2f}%, parking +{park_pct:.2f}%)")


def _of_baseline(peak: int, base: int) -> str:
    """The peak as a share of the graph order's; a graph whose activations all take 0 B (empty tensors) has none."""
    if base == 0:
        return "baseline 0 B: every tensor the step computes is empty"
    return f"{100 * peak / base:.1f}% of baseline {base} B"


def _arena(predicted) -> str:
    """The non-tiled arena, where the schedule is deployed so: said when the layout exceeds the live peak."""
    if predicted.arena_bytes is None or predicted.arena_bytes <= predicted.peak_bytes:
        return ""
    return f"non-tiled arena {predicted.arena_bytes} B ({predicted.arena_bytes - predicted.peak_bytes} B of layout), "


def _over_order(result: SolveResult) -> str:
    """What an optimum with recomputes is proven over: the stage order it was solved in (the file's solver.space)."""
    return " over its stage order" if result.status == "optimal" and result.planned_cost else ""
