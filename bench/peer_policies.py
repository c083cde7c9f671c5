"""ckpt's schedules beside the training branch's recompute policies, on the same replay, code and gvsoc.

Per model (a split step of Deeploy's training branch, for Siracusa):
- ckpt: `ckpt sweep` over the budgets (each point solved, its two networks built and run on gvsoc);
- branch-rule: the recompute set ckpt chose at each of those budgets, ordered by the branch's rule
  (gcpScheduler.py: each recompute just before its first backward reader): what ckpt's ordering is worth;
- top-k: K forward nodes recomputed, for the branch's K lists (DS-CNN 1,2,3,5,8,11,12,18; ResNet-8
  1,2,4,8,11,13,16,20; MobileNetV1 1,4,8,16,24,32,40,48; CCT 1,2,4,9,17,19, used for CCT-LoRA too), the K that free
  the most bytes per cycle, so ordered. The branch's own choice of K nodes is not public: this is ckpt's reading.
A baseline point no ckpt point dominates gets one more ckpt point: ckpt solved at that baseline's live peak.
Every schedule goes through the same `ckpt replay` (its two networks generated, built with the branch's harness,
run on this host and on gvsoc). Writes OUT/peer.csv (model, policy, k_or_budget, l2_total, arena, train_cycles,
optimizer_cycles, errors), one plot per model (OUT/<model>.png: whole-step L2 need against measured train cycles per
mini-batch, one marker per policy, L2's size as a line), and prints the table and, per baseline point, whether a
ckpt point dominates it (at most its cycles at at most its L2 need) or why not.

Run: python bench/peer_policies.py --model DIR [--model DIR ...] -o OUT [--range 0.5:0.9] [--home L3] [--smoke]
(--smoke: SimpleMLP, one budget and K = 1; needs the training branch installed, else each model's line says so.)
"""
from __future__ import annotations

import csv
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from common import (  # noqa: E402,I001
    BenchParser, budget_range, existing, print_needs_branch, removed_on_error, run_bench, seconds, split_step)
from matplotlib.figure import Figure  # noqa: E402

from ckpt.budgets.ranges import parse_range  # noqa: E402
from ckpt.budgets.sweep import SweepOptions, run_sweep  # noqa: E402
from ckpt.deeploy_bridge.setup import setup_for  # noqa: E402
from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label  # noqa: E402
from ckpt.files import check_output_dir, write_bytes  # noqa: E402
from ckpt.errors import CkptError  # noqa: E402
from ckpt.paths import shared_models  # noqa: E402
from ckpt.pipeline.deployed_solve import SolveRequest, solve_and_document  # noqa: E402
from ckpt.pipeline.row import BASELINE, REFERENCE, PointRow, empty_row, replayed_row, solved_row  # noqa: E402
from ckpt.replay.run import ReplayOptions, replay_schedule  # noqa: E402
from ckpt.schedule_file import write_schedule  # noqa: E402
from ckpt.solver.budget import parse_budget  # noqa: E402
from ckpt.solver.model.backends import BackendOptions  # noqa: E402
from ckpt.solver.model.options import Policy  # noqa: E402
from ckpt.solver.model.records import SolveOptions  # noqa: E402

K_LISTS = {"dscnn": (1, 2, 3, 5, 8, 11, 12, 18), "resnet8": (1, 2, 4, 8, 11, 13, 16, 20),
           "mobilenetv1": (1, 4, 8, 16, 24, 32, 40, 48), "cct": (1, 2, 4, 9, 17, 19)}
DEFAULT_K = (1, 2, 4, 8)
FIELDS = ("model", "policy", "k_or_budget", "l2_total", "arena", "train_cycles", "optimizer_cycles", "errors")
MARKERS = {"ckpt": "o", "branch-rule": "s", "top-k": "^", "reference": "x"}


@dataclass(frozen=True)
class Point:
    model: str
    policy: str
    k_or_budget: str
    row: PointRow

    def record(self) -> dict:
        home = self.row.home_figures
        return {"model": self.model, "policy": self.policy, "k_or_budget": self.k_or_budget,
                "l2_total": self.row.on_chip, "arena": home.arena if home else None, "train_cycles": self.row.cycles,
                "optimizer_cycles": self.row.optimizer_cycles, "errors": self.row.errors}


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def k_list(model: Path) -> tuple[int, ...]:
    name = model.name.replace("_train", "")
    return next((ks for key, ks in K_LISTS.items() if name == key or name.startswith(f"{key}_")), DEFAULT_K)


def _baseline(model: Path, folder: Path, policy: Policy, budget: str | None, k: int | None, home: str,
              time_limit: float) -> PointRow:
    """One schedule of `policy` written and replayed as any other (same replay, code and gvsoc)."""
    options = SolveOptions(backend=BackendOptions(time_limit=time_limit))
    request = SolveRequest(str(model), "siracusa", parse_budget(budget) if budget else None, options=options,
                           home=home, policy=policy, k=k)
    schedule, _ = solve_and_document(request)
    folder.mkdir(parents=True, exist_ok=True)
    write_schedule(folder / "seq.json", schedule)
    result = replay_schedule(folder / "seq.json", model, folder / "replay",
                             ReplayOptions(deeploy=setup_for("siracusa", home), overwrite=True), progress)
    row = solved_row(budget or f"k={k}", None, None, schedule, None, "-", "", "seq.json")
    return replayed_row(row, result.report, True)


def measure(model: Path, out: Path, fractions: tuple[float, ...], ks: tuple[int, ...], home: str,
            time_limit: float) -> list[Point]:
    options = SweepOptions(fractions=fractions, target="siracusa",
                           solve=SolveOptions(backend=BackendOptions(time_limit=time_limit)),
                           replay=ReplayOptions(deeploy=setup_for("siracusa", home)))
    swept = run_sweep(model, out / model.name / "ckpt", options, progress)
    name = model.name
    points = [Point(name, "ckpt" if r.label != REFERENCE else "reference", r.label, r) for r in swept.rows
              if r.replayed_peak is not None]
    for row in swept.rows:
        if row.status == BASELINE or row.budget_fraction is None or row.replayed_peak is None:
            continue
        progress(f"{name}: branch-rule at budget {row.label}")
        found = _baseline(model, out / name / f"branch-rule-{row.label}", Policy.BRANCH_RULE, row.label, None, home,
                          time_limit)
        points.append(Point(name, "branch-rule", row.label, found))
    for k in ks:
        progress(f"{name}: top-k, K = {k}")
        try:
            found = _baseline(model, out / name / f"top-k-{k}", Policy.TOP_K, None, k, home, time_limit)
        except CkptError as err:                  # a K the graph has no nodes for: a row saying so, not the K=1 one
            found = empty_row(f"k={k}", None, None, "refused", str(err))
        points.append(Point(name, "top-k", str(k), found))
    for p in [p for p in points if p.policy not in ("ckpt", "reference") and not _dominators(p, points)]:
        if p.row.predicted_peak is None:
            continue
        progress(f"{name}: ckpt at the live peak of {p.policy} {p.k_or_budget} ({p.row.predicted_peak} B)")
        label = f"at {p.policy} {p.k_or_budget}"
        found = _baseline(model, out / name / f"ckpt-at-{p.policy}-{p.k_or_budget}", Policy.SOLVE,
                          str(p.row.predicted_peak), None, home, time_limit)
        points.append(Point(name, "ckpt", label, found))
    return points


def _dominators(p: Point, points: list[Point]) -> list[Point]:
    """The ckpt points at most `p`'s cycles at at most its L2 need."""
    if p.row.cycles is None or p.row.on_chip is None:
        return []
    return [q for q in points if q.policy == "ckpt" and q.row.cycles is not None and q.row.on_chip is not None
            and q.row.cycles <= p.row.cycles and q.row.on_chip <= p.row.on_chip]


def dominated(points: list[Point]) -> list[str]:
    """Per baseline point: the ckpt point that dominates it, or why none does."""
    lines = []
    ours = [p for p in points if p.policy == "ckpt" and p.row.cycles is not None and p.row.on_chip is not None]
    for p in points:
        if p.policy in ("ckpt", "reference"):
            continue
        cycles, need = p.row.cycles, p.row.on_chip
        if cycles is None or need is None:
            lines.append(f"{p.model} {p.policy} {p.k_or_budget}: not measured ({p.row.reason or 'no gvsoc run'})")
            continue
        best = _dominators(p, points)
        strictly = [q for q in best if (q.row.on_chip, q.row.cycles) != (need, cycles)]
        if strictly:
            q = min(strictly, key=lambda q: (q.row.cycles, q.row.on_chip))
            lines.append(f"{p.model} {p.policy} {p.k_or_budget}: dominated by ckpt {q.k_or_budget} "
                         f"({q.row.on_chip:,} B <= {need:,} B, {q.row.cycles:,} <= {cycles:,} cycles)")
        elif best:                                 # the same bytes and cycles: a tie, not a domination
            lines.append(f"{p.model} {p.policy} {p.k_or_budget}: ties with ckpt {best[0].k_or_budget} "
                         f"({need:,} B, {cycles:,} cycles)")
        else:
            near = min(ours, key=lambda q: (abs(q.row.on_chip - need), q.row.cycles), default=None)
            why = (f"the ckpt point nearest in L2 ({near.k_or_budget}: {near.row.on_chip:,} B, {near.row.cycles:,} "
                   f"cycles)" if near else "no ckpt point measured")
            lines.append(f"{p.model} {p.policy} {p.k_or_budget}: NOT dominated ({need:,} B, {cycles:,} cycles); "
                         f"{why}")
    return lines


def plot(points: list[Point], path: Path) -> None:
    fig = Figure(figsize=(7, 4.5), dpi=110)
    ax = fig.subplots()
    for policy, marker in MARKERS.items():
        chosen = [p for p in points if p.policy == policy and p.row.cycles is not None and p.row.on_chip is not None]
        ax.plot([p.row.on_chip / 1024 for p in chosen], [p.row.cycles for p in chosen], marker, linestyle="none",
                label=policy + (" (ckpt's reading of the branch's K)" if policy == "top-k" else ""))
    capacity = next((p.row.on_chip_capacity for p in points if p.row.on_chip_capacity), None)
    needs = [p.row.on_chip / 1024 for p in points if p.row.on_chip is not None and p.row.cycles is not None]
    if capacity and needs and capacity / 1024 <= 1.3 * max(needs):
        ax.axvline(capacity / 1024, color="grey", linestyle="--", label="L2")
    elif capacity:                       # far to the right of every point: said, not drawn
        ax.text(0.99, 0.02, f"L2: {capacity / 1024:,.0f} KiB, beyond every point", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8, color="grey")
    ax.set_xlabel("whole step's L2 need (KiB)")
    ax.set_ylabel("train network, cycles per mini-batch (gvsoc)")
    ax.set_title(points[0].model if points else "")
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    write_bytes(path, buffer.getvalue())


def main() -> int:
    parser = BenchParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", type=existing, help="a split step's train folder (repeatable)")
    parser.add_argument("-o", "--outdir", default="peer")
    parser.add_argument("--range", default="0.5:0.9", type=budget_range)
    parser.add_argument("--home", default="L3", choices=("L3", "L2"))
    parser.add_argument("--time-limit", type=seconds, default=60.0)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    models = [Path(m) for m in args.model] if args.model else [shared_models() / "dscnn_train"]
    if args.smoke:
        models, args.range = [shared_models() / "simplemlp_train"], "0.9:0.9"
    for model in models:
        split_step(model)
    out = Path(args.outdir)
    check_output_dir(str(out))
    print(f"Deeploy {deeploy_label()}; budgets {args.range}, home {args.home}")
    print()
    print("| " + " | ".join(FIELDS) + " |")
    print("|" + "---|" * len(FIELDS))
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        print_needs_branch(models, len(FIELDS))
        return 0
    everything = []
    with removed_on_error(out, *(out / model.name for model in models)):
        for model in models:
            ks = (1,) if args.smoke else k_list(model)
            points = measure(model, out, tuple(parse_range(args.range)), ks, args.home, args.time_limit)
            for p in points:
                record = p.record()
                print("| " + " | ".join("-" if record[f] is None else str(record[f]) for f in FIELDS) + " |",
                      flush=True)
            plot(points, out / f"{model.name}.png")
            everything += points
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(p.record() for p in everything)
        write_bytes(out / "peer.csv", text.getvalue().encode())
    print()
    for line in dominated(everything):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
