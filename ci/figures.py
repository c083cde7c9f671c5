"""The figures CI holds a replayed schedule to, and the rules that compare them with the committed baseline.

Failing rules: name drift (under 90% of the schedule's entries match, or the graph fingerprint changed), a
replay whose outputs are not bit-identical to the graph order's (recompute changes no numbers, so any
difference is a wiring error), golden Errors above the baseline's (the device harness's count), any peak more
than 1% above the baseline's, a home arena in the generated code other than the one ckpt predicted, and the
generated code itself: each flow's code must build, run, print `Errors: 0` by the harness's rule and compute
the graph order's code's outputs bit for bit; and, where gvsoc ran it, the deployed (tiled) step on Siracusa's
model: `Errors: 0` by Deeploy's own harness and cycles no more than 2% above the baseline's (gvsoc is
deterministic: the same code gives the same cycles; a ckpt change that moves code shifts them a little).
Recomputes and clones kept are shown beside them and flagged when they change, without failing:
a changed count with unchanged peaks and outputs is a different schedule, not a broken one.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ckpt.deeploy_bridge.setup import DEFAULT_SETUP
from ckpt.replay.matching import MIN_MATCH
from ckpt.replay.report import (
    CodeRunRecord,
    CodeStatus,
    GvsocRecord,
    LevelMemory,
    ReplayReport,
    SimStatus,
    record_from_json,
)

PEAK_TOLERANCE = 0.01
CYCLES_TOLERANCE = 0.02


@dataclass(frozen=True)
class CiFigures:
    """What one replay of the CI schedule measured (all from the replay's report.json)."""

    entries: int
    matched: int
    fingerprint: str
    predicted_peak: int | None
    replayed_peak: int
    deeploy_nontiled: int | None
    levels: dict[str, LevelMemory]         # the tiled flow per memory level: Deeploy's arena, ckpt's prediction
    recomputes: int
    clones_kept: int
    replay_errors: int          # tensor versions differing from the graph order, plus reads of stale versions
    golden_errors: int | None
    golden_compared: int | None
    heap: int | None = None                # first-fit L2 heap of the non-tiled code
    code: dict[str, str] | None = None     # per flow: the generated code's run on this host ("0/198027", or why
                                           # not), and " = graph order" / " != graph order" when compared
    code_home_allocated: int | None = None   # what the tiled code allocated at its home level when it ran
                                             # (constants + arena)
    gvsoc: str | None = None               # the tiled step on gvsoc: "0/198027" or why it did not run
    gvsoc_cycles: int | None = None        # ... its cycles when it ran

    @property
    def match_rate(self) -> float:
        return self.matched / self.entries if self.entries else 1.0

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> CiFigures:
        found = {f.name: doc.get(f.name) for f in fields(cls)}
        return record_from_json(cls, {**found, "levels": found["levels"] or {}})

    @property
    def home(self) -> tuple[str, LevelMemory] | None:
        """The level whose arena ckpt predicts (the tiled flow's home)."""
        return next(((name, fig) for name, fig in self.levels.items() if fig.predicted_arena is not None), None)

    @classmethod
    def from_report(cls, report: ReplayReport) -> CiFigures:
        memory, found = report.memory, report.verification
        golden = found.golden
        return cls(entries=report.schedule.entries, matched=report.schedule.matched,
                   fingerprint=report.schedule.fingerprint.graph, predicted_peak=memory.predicted_peak,
                   replayed_peak=memory.replayed_peak, deeploy_nontiled=memory.deeploy_non_tiled,
                   levels=dict(memory.levels), recomputes=report.replay.recomputes,
                   clones_kept=report.replay.clones_kept,
                   replay_errors=-1 if found.replay_errors is None else found.replay_errors,
                   golden_errors=golden.errors if golden else None,
                   golden_compared=golden.compared if golden else None, heap=memory.heap,
                   code={flow: _code_text(run) for flow, run in report.code_runs.items()},
                   code_home_allocated=_allocated(report.code_runs.get("tiled"), _home(report)),
                   gvsoc=_gvsoc_text(report.gvsoc.get("tiled")),
                   gvsoc_cycles=report.gvsoc["tiled"].cycles if "tiled" in report.gvsoc else None)


@dataclass(frozen=True)
class Comparison:
    figure: str
    baseline: str
    now: str
    rule: str
    verdict: str                 # "ok", "FAIL", or "changed" (shown, not failing)

    @property
    def failed(self) -> bool:
        return self.verdict == "FAIL"


PEAKS = (("predicted peak B", "predicted_peak"), ("replayed peak B", "replayed_peak"),
         ("first-fit heap B", "heap"), ("Deeploy non-tiled B", "deeploy_nontiled"))


def compare(baseline: CiFigures, now: CiFigures) -> list[Comparison]:
    """Every figure side by side with its rule and verdict (see the module doc)."""
    rows = [Comparison("entries matched", f"{baseline.matched}/{baseline.entries}", f"{now.matched}/{now.entries}",
                       f">= {100 * MIN_MATCH:.0f}%", _ok(now.match_rate >= MIN_MATCH)),
            Comparison("graph fingerprint", baseline.fingerprint[:16], now.fingerprint[:16], "unchanged",
                       _ok(baseline.fingerprint == now.fingerprint))]
    arena = lambda figures, name: figures.levels[name].arena if name in figures.levels else None  # noqa: E731
    peaks = [(title, getattr(baseline, key), getattr(now, key)) for title, key in PEAKS]
    peaks += [(f"Deeploy tiled {name} B", arena(baseline, name), arena(now, name))
              for name in sorted(set(baseline.levels) | set(now.levels))]
    for title, before, after in peaks:
        if before is None and after is None:
            continue
        fits = before is not None and after is not None and after <= before * (1 + PEAK_TOLERANCE)
        rows.append(Comparison(title, _text(before), _text(after), f"<= +{100 * PEAK_TOLERANCE:.0f}%", _ok(fits)))
    if now.home is not None:
        name, figures = now.home
        before = baseline.levels[name].predicted_arena if name in baseline.levels else None
        rows.append(Comparison(f"ckpt's predicted {name} arena B", _text(before), _text(figures.predicted_arena),
                               f"== Deeploy tiled {name}", _ok(figures.predicted_arena == figures.arena)))
    rows.append(Comparison("Errors (replay vs graph order)", str(baseline.replay_errors), _errors(now.replay_errors),
                           "== 0", _ok(now.replay_errors == 0)))
    golden_ok = now.golden_errors is not None and baseline.golden_errors is not None \
        and now.golden_errors <= baseline.golden_errors
    rows.append(Comparison("golden Errors", f"{baseline.golden_errors}/{baseline.golden_compared}",
                           f"{now.golden_errors}/{now.golden_compared}", "<= baseline", _ok(golden_ok)))
    for flow in ("tiled", "non_tiled"):
        text = (now.code or {}).get(flow, "not run (no code)")
        rows.append(Comparison(f"generated {flow.replace('_', '-')} code: Errors", (baseline.code or {}).get(flow, "-"),
                               text, "ran, 0, = graph order", _ok(text.startswith("0/") and "!=" not in text)))
    if now.code_home_allocated is not None or baseline.code_home_allocated is not None:
        home = (now.home or baseline.home or ("home",))[0]
        rows.append(Comparison(f"generated tiled code: {home} allocated B", _text(baseline.code_home_allocated),
                               _text(now.code_home_allocated), "shown",
                               "ok" if baseline.code_home_allocated == now.code_home_allocated else "changed"))
    rows += _gvsoc_rows(baseline, now)
    for title, key in (("recomputes", "recomputes"), ("clones kept", "clones_kept")):
        before, after = getattr(baseline, key), getattr(now, key)
        rows.append(Comparison(title, str(before), str(after), "shown", "ok" if before == after else "changed"))
    return rows


def _home(report: ReplayReport) -> str:
    """The tiled flow's home level (Deeploy's default memory level) in the replay."""
    tiled = (report.deeploy or {}).get("tiled")
    return (tiled.setup if tiled is not None else DEFAULT_SETUP).default_mem_level


def _allocated(run: CodeRunRecord | None, level: str) -> int | None:
    """The most a flow's code kept allocated at a level when it ran."""
    use = run.stats.levels.get(level) if run is not None and run.stats is not None else None
    return use.peak if use is not None else None


def _gvsoc_rows(baseline: CiFigures, now: CiFigures) -> list[Comparison]:
    """The tiled step on gvsoc: must print Errors 0 and stay within the cycle tolerance where it ran; shown, not
    failing, where this machine cannot run it."""
    ran = now.gvsoc_cycles is not None
    rows = [Comparison("gvsoc (tiled): Errors", baseline.gvsoc or "-", now.gvsoc or "-",
                       "0 where simulated", _ok(now.gvsoc.startswith("0/")) if ran else "shown")]
    if ran and baseline.gvsoc_cycles is not None:
        fits = now.gvsoc_cycles <= baseline.gvsoc_cycles * (1 + CYCLES_TOLERANCE)
        rows.append(Comparison("gvsoc (tiled): cycles", _text(baseline.gvsoc_cycles), _text(now.gvsoc_cycles),
                               f"<= +{100 * CYCLES_TOLERANCE:.0f}%", _ok(fits)))
    return rows


def _gvsoc_text(run: GvsocRecord | None) -> str | None:
    if run is None:
        return None
    if run.status is SimStatus.MEASURED:
        return f"{run.errors}/{run.total}"
    return f"{run.status.value}: {run.reason}"


def _code_text(run: CodeRunRecord) -> str:
    """One flow's code run in one cell: its Errors and whether it equals the graph order's code, or why not."""
    if run.status is not CodeStatus.RAN:
        return f"{run.status}: {run.reason}"
    errors = run.golden.fraction if run.golden else "no goldens"
    same = {"bit-identical": " = graph order", "differs": " != graph order"}.get(run.graph_order or "", "")
    return errors + same


def _ok(condition: bool) -> str:
    return "ok" if condition else "FAIL"


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)


def _errors(value: int) -> str:
    return "not verified" if value < 0 else str(value)


def table(rows: list[Comparison]) -> str:
    cells = [("figure", "baseline", "now", "rule", "")] + [(r.figure, r.baseline, r.now, r.rule, r.verdict)
                                                          for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
                     .rstrip() for line in cells)
