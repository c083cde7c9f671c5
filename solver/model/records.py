"""What a solve takes and gives: one options record in, one result record out, tagged by its Status.

Kept apart from the code that fills them, so every stage of the solver (solver/stages.py) and every caller
reads the same definitions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from ckpt.solver.graph.baselines import Baselines
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import RunSequence
from ckpt.solver.model.backends import BackendOptions, Outcome
from ckpt.solver.model.options import Focus, Method, Objective, StageOrder, Views


class Status(StrEnum):
    """What is known of a returned schedule."""

    OPTIMAL = "optimal"        # within the gap tolerance of a proven lower bound
    FEASIBLE = "feasible"      # a solver's schedule, with a gap to the best bound
    HEURISTIC = "heuristic"    # a heuristic's schedule


@dataclass(frozen=True)
class SolveOptions:
    """How to solve, and the live bytes to hold the schedule to.

    `budget` is the solver's limit on live activation bytes, not the user's budget: the pipeline derives it from
    the one `Budget` the user gave (solver.budget), and tightens it where the deployed figure needs it
    (pipeline.deployed_solve). None with objective "peak", or until the pipeline sets it.
    """

    budget: int | None = None              # live bytes
    objective: Objective = Objective.COST
    cost_cap: int | None = None
    order: StageOrder = StageOrder.MINMEM
    method: Method = Method.MILP
    backend: BackendOptions = field(default_factory=BackendOptions)
    focus: Focus = Focus.SEED
    views: Views = Views.REMADE
    explain: bool = True                   # on an infeasible budget, spend what is left finding the smallest peak

    def __post_init__(self) -> None:       # the enums accept their values as plain strings (the CLI's, JSON's)
        for name, kind in (("objective", Objective), ("order", StageOrder), ("method", Method), ("focus", Focus),
                           ("views", Views)):
            object.__setattr__(self, name, kind(getattr(self, name)))

    @property
    def live_budget(self) -> int | None:
        """The budget the schedule is held to: None when the objective is the peak itself."""
        return self.budget if self.objective is Objective.COST else None


@dataclass(frozen=True)
class Sizes:
    """A model's size: what it has, and what Checkmate's formulation of the same graph would have."""

    variables: int = 0
    constraints: int = 0
    unpruned: int = 0


@dataclass(frozen=True)
class Answer:
    """The schedule a solve ends with, and what is proven of it."""

    decisions: Decisions
    outcome: Outcome
    booked: int | None = None              # the peak the MILP booked for it (None when no MILP gave it)
    sizes: Sizes = Sizes()
    models_need: float | None = None       # the MILP models were not run: the time limit (s) they need
    parked: frozenset[str] = frozenset()   # activations parked off chip (solver/model/parking.py)
    park_cost: int = 0                     # cycles parking them adds


@dataclass(frozen=True)
class SolveResult:
    seq: RunSequence                          # what runs: the decisions' sequence less executions nobody reads
    decisions: Decisions                   # the recomputes (stage, op) over `stage_order` (views taken out)
    stage_order: tuple[str, ...]
    peak_bytes: int                        # replayed peak of `seq`: what the schedule really uses
    booked_peak_bytes: int | None          # what the MILP booked for it (None when no MILP ran)
    baselines: Baselines
    persistent_bytes: int
    recomputes: int                        # recompute executions in `seq` (a re-made view is one, for free)
    recompute_cost: int                    # cycles the recomputes of `seq` add: what runs
    planned_cost: int                      # cycles of `decisions` over `stage_order`: what status, gap and the
                                           # lower bound are about (what runs can cost less: see result_of)
    base_cost: int
    status: Status
    gap: float | None
    seconds: float
    variables: int
    constraints: int
    variables_unpruned: int
    space: str = ""                        # the schedules a proof is relative to
    timed_out: bool = False                # a solver run ended on its time limit: another load may answer otherwise
    models_need: float | None = None       # the MILP models were not run, too big for the time limit: the limit
                                           # (s) at which they would be (time_plan.limit_for_models)
    parked: frozenset[str] = frozenset()   # activations parked off chip for the whole step (`park`): the chip's
                                           # level never holds them, so `peak_bytes` leaves them out
    park_cost: int = 0                     # cycles parking them adds to the step (their writers' and readers'
                                           # transfers from off chip, at every run)

    @property
    def cost_lower_bound(self) -> int | None:
        """The best proven lower bound on the planned cost (the relaxation's or the solver's; with parking, the
        planned cost and the parking's), if any: no schedule of the space costs less."""
        return None if self.gap is None else math.floor((self.planned_cost + self.park_cost) * (1 - self.gap) + 1e-6)

    @property
    def cost_increase_pct(self) -> float:
        return 100.0 * self.recompute_cost / self.base_cost if self.base_cost else 0.0


def space_of(options: SolveOptions) -> str:
    return f"stage order {options.order.value}, views {options.views.value}, one version of a buffer at a time"
