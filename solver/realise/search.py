"""A local search over schedules that fit: ruin and recreate.

Why: deep budgets on transformer graphs (CCT-LoRA on Siracusa at 0.4) leave the greedy's repair of the
relaxation's answers far above the optimum, and the exact models too big to run; the relaxation's rounds there
prove a bound and find no schedule near it. The greedy always repairs a near miss the same way, so a search
round drops the recomputes of a window (of stages, or of ops: the recompute of one attention block, say),
repairs what no longer fits with the greedy whose scores are randomised (greedy.Jitter) and polishes what the
repair added (the rest was polished before: a polish of every recompute is a replay each, most of a round's
time); the result is kept when it costs no more than the best (equal cost: a step across a plateau). Every
schedule it keeps was replayed within the budget and inside the schedule space by the greedy and the polish.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from ckpt.events import Incumbent, Progress, ignore
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.model import clock
from ckpt.solver.realise.greedy import Jitter, greedy, polish

SPREAD = 0.3          # the greedy's scores scaled by up to this much either way
STAGE_WINDOW = 40     # the most stages whose recomputes one round drops...
OP_WINDOW = 20        # ... or the most ops whose recomputes it drops, wherever they run
STALL = 50            # rounds in a row without a cheaper schedule, after which the search gives its time back
SEED = 0              # one seed: the same rounds give the same schedules on every machine


@dataclass(frozen=True)
class Searched:
    schedule: Decisions
    rounds: int


def searched(graph: TrainGraph, budget: int, start: Decisions, deadline: float, target: float = 0.0,
             progress: Progress = ignore) -> Searched:
    """The cheapest schedule the rounds find from `start` (a schedule that fits) by `deadline` (a clock.now()),
    stopping early at one that costs `target` or less (one that meets a proven bound), or after STALL rounds
    in a row that found nothing cheaper (a small graph's rounds take milliseconds: the rest is not worth it)."""
    rng = random.Random(SEED)
    jitter = Jitter(rng, SPREAD)
    best, cost, rounds, since = start, start.cost(graph), 0, 0
    while cost > target and clock.now() < deadline and best.recomputes and since < STALL:
        rounds += 1
        since += 1
        kept = _ruined(best, rng)
        repaired = greedy(graph, budget, start=kept, deadline=deadline, jitter=jitter)
        if repaired is None:
            continue
        trial = polish(graph, repaired, budget, deadline, only=repaired.recomputes - kept.recomputes)
        trial_cost = trial.cost(graph)
        if trial_cost <= cost:
            if trial_cost < cost:
                progress(Incumbent(trial_cost, "ruin and recreate"))
                since = 0
            best, cost = trial, trial_cost
    if rounds:     # the repairs were polished alone: what they changed may free an older recompute
        best = polish(graph, best, budget, deadline)
    return Searched(best, rounds)


def _ruined(decisions: Decisions, rng: random.Random) -> Decisions:
    """The recomputes of a random window dropped: of stages (what one backward stretch recomputes), or of ops
    (one forward stretch, wherever it is recomputed)."""
    chosen = sorted(decisions.recomputes)
    by_stage = rng.random() < 0.5
    keys = sorted({t if by_stage else i for t, i in chosen})
    first = rng.choice(keys)
    width = rng.randint(1, STAGE_WINDOW if by_stage else OP_WINDOW)
    return Decisions(frozenset(r for r in chosen if not first <= (r[0] if by_stage else r[1]) < first + width))
