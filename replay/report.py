"""report.json of a replay as a typed record: written and read here only, so a renamed field fails at once.

Every reader (the sweep's rows, the CI figures, the Deeploy CI files) takes a `ReplayReport`, never a dict.
`ReplayReport.read(path)` / `.write(path)` round-trip the JSON; the same report gives the same bytes.
"""
from __future__ import annotations

import json
import types
import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from enum import Enum, StrEnum
from pathlib import Path

from ckpt.coderun.run import RuntimeStats
from ckpt.deeploy_bridge.records import FlowFigures
from ckpt.errors import CkptError
from ckpt.files import write_json
from ckpt.gvsoc.draws import spread_text
from ckpt.gvsoc.open_files import DORY_MEM
from ckpt.gvsoc.run import OnChipNeed
from ckpt.gvsoc.step import COMPACT
from ckpt.hostexec.compare import VerifyResult, WorstElement
from ckpt.memory_levels import LevelMemory
from ckpt.replay.closeness import Closeness


@dataclass(frozen=True)
class FingerprintRecord:
    schedule: str | None       # the schedule's names_sha256 (None: a bare {"seq": ...} file)
    graph: str                 # the replayed graph's
    status: str                # match | absent | forced


@dataclass(frozen=True)
class ScheduleSection:
    path: str
    sha256: str
    entries: int
    matched: int
    rate: float
    missing: list[str]
    fingerprint: FingerprintRecord
    solved_on: dict


@dataclass(frozen=True)
class WorkaroundRecord:
    """A defect of the installed Deeploy that ckpt worked around in this replay (deeploy_bridge.workarounds)."""

    name: str
    deeploy_file: str
    deeploy_line: int
    what: str
    nodes: list[str]                 # the nodes whose generated code carries the workaround, as Deeploy bound them
    missed: list[str] = field(default_factory=list)   # nodes it concerns whose binding does not: the defect left in

    @property
    def line(self) -> str:
        where = f"Deeploy's {self.name} ({self.deeploy_file}:{self.deeploy_line})"
        said = f"worked around {where} at {len(self.nodes)} node(s): {self.what}" if self.nodes else \
            f"did not work around {where}"
        if self.missed:
            said += (f"; NOT worked around at {len(self.missed)} node(s) ({self.missed[0]} first): the binding the "
                     "platform elected for them is not ckpt's")
        return f"{said} (CKPT_DEEPLOY_WORKAROUNDS=off turns it off)"


@dataclass(frozen=True)
class ModelSection:
    path: str
    sha256: str
    target: str
    same_as_solved: bool | None
    deeploy_version: str | None
    nodes: int
    deeploy_workarounds: list[WorkaroundRecord] = field(default_factory=list)


@dataclass(frozen=True)
class ReplaySection:
    """What the replay ran: counts, then the names behind them."""

    schedule_entries: int
    matched_entries: int
    recomputes: int
    clones_kept: int
    clones_pruned: int
    originals_pruned: int
    unscheduled_nodes_placed: int
    stale_nodes_dropped: int
    executions: int
    clones: list[str]
    pruned: list[str]
    unscheduled: list[str]
    stale: list[str]


@dataclass(frozen=True)
class MemorySection:
    predicted_peak: int | None         # the schedule file's figure (on the graph it was solved on)
    replayed_peak: int                 # ckpt's replay semantics on the rewired graph
    heap: int                          # the first-fit L2 heap the non-tiled code needs (fragmentation included)
    deeploy_non_tiled: int | None      # Deeploy's own non-tiled counter (worstCaseBufferSize)
    persistent_predicted: int | None
    persistent_replayed: int
    deeploy_non_tiled_static: int | None
    baseline_peak: int | None
    peak_index: int
    peak_after: str | None
    levels: dict[str, LevelMemory] = field(default_factory=dict)   # tiled flow, per level
    arena: int | None = None           # the non-tiled flow's arena ckpt lays out for the replayed order
    arena_live_max: int | None = None  # its floor: the most (word-rounded) bytes alive at once
    arena_code: int | None = None      # the arena the generated non-tiled code allocates (None: no code, or the
                                       # code mallocs each buffer on the heap, --allocator heap)

    @property
    def arena_fits(self) -> bool:
        """The non-tiled code reserves no more than ckpt predicted for it (true where nothing is to compare)."""
        return self.arena_code is None or self.arena is None or self.arena_code <= self.arena


@dataclass(frozen=True)
class BudgetRecord:
    """The schedule's budget held against what its replay measured: the figure it was checked on when solved
    (peak_bytes, heap_bytes or total_<level>), its limit and its replayed value."""

    checked: str
    limit: int
    replayed: int | None       # None: this replay does not measure that figure (no Deeploy target)

    @property
    def fits(self) -> bool:
        return self.replayed is None or self.replayed <= self.limit


@dataclass
class ScheduleCheck:
    """The replayed order against the graph order: which tensor versions differ (none is the pass)."""

    executions: int
    clones_kept: int
    clones_pruned: int
    versions_compared: int
    differing: list[str] = field(default_factory=list)      # versions whose values differ from the graph order's
    stale_reads: list[str] = field(default_factory=list)    # reads of a version older than the newest

    @property
    def ok(self) -> bool:
        return not self.differing and not self.stale_reads

    def line(self) -> str:
        head = (f"replayed order ({self.executions} executions, {self.clones_kept} clones kept, "
                f"{self.clones_pruned} pruned) vs graph order: ")
        if self.ok:
            return head + f"bit-identical ({self.versions_compared} tensor versions compared)"
        parts = []
        if self.differing:
            parts.append(f"{len(self.differing)} of {self.versions_compared} tensor versions differ: "
                         + few(self.differing))
        if self.stale_reads:
            parts.append(f"{len(self.stale_reads)} read(s) of an older version: " + few(self.stale_reads))
        return head + "MISWIRED: " + "; ".join(parts)



SHOWN = 5


def few(items: list[str]) -> str:
    more = f" (and {len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


@dataclass(frozen=True)
class VerificationSection:
    """What the host check found: Errors against the goldens (and the graph order's, when a schedule was
    checked), the replayed order against the graph order, a hint; or why it did not run (status skipped)."""

    status: CheckStatus
    reason: str | None = None
    golden: VerifyResult | None = None
    baseline_golden: VerifyResult | None = None         # the graph order's, when a schedule was checked
    schedule: ScheduleCheck | None = None
    hint: str | None = None
    fixed_bias_gelu: list[str] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)   # golden tensors the step does not write
    seconds: float | None = None                            # with --record-time only
    no_golden: list[str] = field(default_factory=list)      # what the step writes that outputs.npz does not hold

    @classmethod
    def of(cls, golden: VerifyResult | None, baseline_golden: VerifyResult | None, schedule: ScheduleCheck | None,
           hint: str | None, fixed: list[str], not_compared: list[str], no_golden: list[str] = ()
           ) -> VerificationSection:
        status = CheckStatus.BIT_IDENTICAL if schedule is None or schedule.ok else CheckStatus.MISWIRED
        return cls(status, None, golden, baseline_golden, schedule, hint, list(fixed), list(not_compared),
                   no_golden=list(no_golden))

    @property
    def ok(self) -> bool:
        return (self.golden is None or self.golden.ok) and (self.schedule is None or self.schedule.ok)

    @property
    def replay_errors(self) -> int | None:
        """Tensor versions differing from the graph order plus reads of stale versions (None: not checked)."""
        if self.schedule is None:
            return None
        return len(self.schedule.differing) + len(self.schedule.stale_reads)


@dataclass(frozen=True)
class HostDiffRecord:
    """The generated code's outputs against ckpt's host executor's (same schedule, same inputs)."""

    max_abs_diff: float
    worst: WorstElement | None
    over_tolerance: int          # elements differing by more than the harness's tolerance


@dataclass(frozen=True)
class HarnessCount:
    """The `Errors: N out of M` a harness printed about its own run, and the rule it counted by."""

    errors: int
    total: int
    rule: str

    @property
    def line(self) -> str:
        return f"Errors: {self.errors} out of {self.total}"


@dataclass(frozen=True)
class CodeRunRecord:
    """One flow's generated code, built with Deeploy's kernels and run on this host (ckpt.coderun).

    status: ran | failed (the code did not build or run: its fault) | not run (this host cannot: `reason`).
    """

    flow: str
    status: CodeStatus
    reason: str | None = None
    weights: str = "out-of-place"                # how this flow's code writes the updated weights
    golden: VerifyResult | None = None           # Errors by deeploytest.c's rule, against outputs.npz
    graph_order: str | None = None               # bit-identical | differs | why it was not compared
    differing: list[str] = field(default_factory=list)   # outputs that differ from the graph order's code
    host: HostDiffRecord | None = None
    stats: RuntimeStats | None = None            # what the code allocated per level and what it moved
    skipped_kernels: list[str] = field(default_factory=list)
    seconds: dict[str, float] | None = None
    steps: list[VerifyResult] = field(default_factory=list)   # steps in a row: each against the host executor's
                                                              # same step (updated weights fed back), same rule
    harness: HarnessCount | None = None          # a split step: what the training branch's harness itself counted
    closeness: Closeness | None = None           # each output's distance from the goldens on a scale that sees a
                                                 # wrong gradient (replay.closeness); flagged, never counted as Errors

    @property
    def trains(self) -> bool | None:
        """Whether steps in a row computed what the host's steps compute (None: one step only)."""
        return None if len(self.steps) < 2 else all(step.errors == 0 for step in self.steps)

    @property
    def ok(self) -> bool:
        """Ran, no golden error, the same outputs as the graph order's code where compared, and every step in a
        row as the host computes it (every flow ckpt deploys trains: its updates in place, or written back into
        the weights at the end of the step)."""
        return (self.status is CodeStatus.RAN and (self.golden is None or self.golden.errors == 0)
                and self.graph_order != "differs" and self.trains is not False
                and (self.harness is None or self.harness.errors == 0))

    @property
    def verdict(self) -> str:
        """What a table shows: the Errors line, or why there is none."""
        if self.status is not CodeStatus.RAN:
            return f"{self.status.value} ({self.reason})"
        return self.golden.fraction if self.golden else "ran (no goldens)"


class CodeStatus(StrEnum):
    """What became of a flow's generated code on this host."""

    RAN = "ran"
    FAILED = "failed"                  # it did not build or run: the code's fault (reason)
    NOT_RUN = "not run"                # this host cannot run it (reason)


class CheckStatus(StrEnum):
    """What the host check found of a replay."""

    BIT_IDENTICAL = "bit-identical"    # the replayed order computes, bit for bit, what the graph order computes
    MISWIRED = "miswired"              # it does not: a clone read too late or a stale version read
    SKIPPED = "skipped"                # not checked (reason)


class SimStatus(StrEnum):
    """What became of a flow's step on gvsoc."""

    MEASURED = "measured"              # it ran to the harness's Errors line
    NOT_SIMULATED = "not simulated"    # nothing ran: no gvsoc or compiler here, or the step does not fit (reason)
    FAILED = "failed"                  # the step did not build, crashed or hung on the model (reason)


@dataclass(frozen=True)
class GvsocRecord:
    """One flow's generated step built for Siracusa and run on gvsoc's model of it (ckpt.gvsoc)."""

    flow: str
    status: SimStatus
    reason: str | None = None
    errors: int | None = None          # deeploytest.c's Errors: N out of M
    total: int | None = None
    cycles: int | None = None          # the harness's Runtime: the step on the cluster
    layer_cycles: dict[str, int] = field(default_factory=dict)   # probed cycles per layer, by deployed node name
    expected: str | None = None        # what the harness compared with: outputs.npz, or the host executor's step
    on_chip: OnChipNeed | None = None  # what the step needs on chip, counted before it ran
    log: str | None = None             # gvsoc's output, relative to the replay folder
    seconds: dict[str, float] | None = None
    optimizer_cycles: int | None = None  # a split step: the optimizer network per update (cycles: the train
    batches: int | None = None           # network per mini-batch), over this many mini-batches
    updates: int | None = None           # and updates
    state: dict[str, str] = field(default_factory=dict)   # a split step: each train-network input when the run
                                                          # ended, "<bytes>:<fnv1a>" (the device's weights)
    relaxed: bool = True               # linked with ld's relaxation; False: only without it (gvsoc.step), said
    draws: list[int] = field(default_factory=list)   # run from several starting states (gvsoc.draws): each draw's
    optimizer_draws: list[int] = field(default_factory=list)   # cycles (and optimizer cycles), of which `cycles`
                                                               # (`optimizer_cycles`) is the median; empty: one draw

    @property
    def line(self) -> str:
        head = f"gvsoc ({self.flow.replace('_', '-')}): "
        if self.status is not SimStatus.MEASURED:
            return head + f"{self.status.value} ({self.reason})"
        linked = "" if self.relaxed else ("; linked without ld's relaxation (a relaxed link truncated a "
                                          "compressed jump): its code differs from a relaxed build's")
        compact = (f"; its generated code compiled for size ({' '.join(COMPACT)}): compiled like the kernels, it "
                   "left the step no room in L2" if self.on_chip is not None and self.on_chip.compact else "")
        if self.on_chip is not None and not self.on_chip.probed:
            compact += "; built without its per-layer probes (with them, the step had no room in L2): no layer's cycles"
        if self.on_chip is not None and self.on_chip.closes_files:
            compact += (f"; worked around Deeploy's readfs-files-kept-open ({DORY_MEM}): "
                        "each data file closed at the next open (CKPT_DEEPLOY_WORKAROUNDS=off turns it off)")
        worst = " (the worst draw's)" if self.draws else ""
        if self.optimizer_cycles is not None:
            return head + (f"Errors: {self.errors} out of {self.total}{worst} ({self.expected}); train network "
                           f"{self.cycles:,} cycles per mini-batch{spread_text(self.draws)}, optimizer "
                           f"{self.optimizer_cycles:,} per update{spread_text(self.optimizer_draws)} "
                           f"({self.batches} mini-batches, {self.updates} updates){compact}{linked}")
        return head + (f"Errors: {self.errors} out of {self.total}{worst} against {self.expected}; {self.cycles:,} "
                       f"cycles{spread_text(self.draws)}{compact}{linked}")


@dataclass(frozen=True)
class ReplayReport:
    ok: bool
    schedule: ScheduleSection
    model: ModelSection
    replay: ReplaySection
    memory: MemorySection
    deeploy: dict[str, FlowFigures] | None
    verification: VerificationSection
    gvsoc: dict[str, GvsocRecord]             # per flow: tiled, non_tiled
    files: dict[str, str | None]
    code_runs: dict[str, CodeRunRecord] = field(default_factory=dict)   # tiled / non_tiled
    budget: BudgetRecord | None = None          # None: the schedule carries no budget
    deeploy_optimizer: dict[str, FlowFigures] | None = None   # a split step: the optimizer network's figures

    @property
    def code_verdict(self) -> CodeRunRecord | None:
        """The code run that decides the point: the tiled flow's (what is deployed), else the non-tiled one's."""
        return self.code_runs.get("tiled") or self.code_runs.get("non_tiled")

    def to_dict(self) -> dict:
        return asdict(self)

    def write(self, path: Path) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, doc: dict) -> ReplayReport:
        return record_from_json(cls, doc)

    @classmethod
    def read(cls, path: Path) -> ReplayReport:
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CkptError(f"'{path}' is not a replay report of this ckpt version ({type(exc).__name__}: {exc})",
                            "replay the schedule again with `ckpt replay`") from None


def record_from_json(kind, value):
    """Rebuild a value of type `kind` (a dataclass, a container of them, an enum or a plain type) from its JSON
    form."""
    if isinstance(kind, type) and issubclass(kind, Enum) and value is not None:
        return kind(value)
    origin = typing.get_origin(kind)
    if origin is tuple and value is not None:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(record_from_json(args[0], item) for item in value)
        return tuple(record_from_json(k, item) for k, item in zip(args, value)) if args else tuple(value)
    if origin in (typing.Union, types.UnionType):
        options = [k for k in typing.get_args(kind) if k is not type(None)]
        if value is None:
            return None
        return record_from_json(options[0], value) if len(options) == 1 else value
    if is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        known = {f.name for f in fields(kind)}
        unknown = set(value) - known
        if unknown:
            raise KeyError(f"unknown field(s) {sorted(unknown)} for {kind.__name__}")
        return kind(**{name: record_from_json(hints[name], item) for name, item in value.items()})
    if origin is dict and value is not None:
        _, item_kind = typing.get_args(kind)
        return {k: record_from_json(item_kind, v) for k, v in value.items()}
    if origin is list and value is not None:
        (item_kind,) = typing.get_args(kind)
        return [record_from_json(item_kind, v) for v in value]
    return value
