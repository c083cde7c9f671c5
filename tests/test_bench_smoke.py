"""Every bench in bench/ runs against today's code: `python bench/X.py --smoke` (its smallest run: a tiny model or
graph, one budget, short limits) exits 0 and prints its whole table, so a bench the code moved away from fails here
instead of rotting unseen. Run as a user runs them, in a subprocess from another folder."""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ckpt.coderun.sources import NoSources, find_sources
from ckpt.deeploy_identity import Flavour, deeploy_flavour
from ckpt.examples import write_example
from ckpt.gvsoc.kit import NoKit, find_kit
from ckpt.paths import REPO_ROOT, shared_models

BENCH = REPO_ROOT / "bench"
HUNG = 600       # seconds after which a bench that has not finished fails (a smoke run takes a small part of it)


@dataclass(frozen=True)
class Smoke:
    """One bench's smoke run: its arguments beside --smoke, the table rows it prints, text its output holds."""

    script: str
    args: tuple[str, ...] = ()
    rows: int = 0
    shows: tuple[str, ...] = ()
    models: tuple[str, ...] = ()    # the shared models it reads by default: without them it is skipped, saying so


FAST = [
    Smoke("solvers", rows=3, shows=("| 0.70 | greedy |", "| 0.70 | highs |", "| 0.70 | cbc |")),
    Smoke("stages", rows=4, shows=("| 0.8 | MILP method (all five) |",)),
    Smoke("decisive", args=("--json", "cells.json", "--compare", "cells.json"), rows=6,
          shows=("### mlp:", "### cct1:", "6 cells:", "answers changed against cells.json: 0")),
    Smoke("decisive", args=("--grid", "--targets", "none", "--fractions", "0.9,0.5", "--draws", "2"), rows=2,
          shows=("### target none:", "| mlp | 26 | optimal", "| cct1 | 106 |", "4 cells:")),
    Smoke("rounds", rows=5, shows=("| resnet | 0.5 | 34 | 2 | 0 |", "| CPU s before | CPU s after |")),
    Smoke("model_cost", rows=2, shows=("| none:mlp:0.5 | exact |", "| none:mlp:0.5 | focused |")),
    Smoke("scale", rows=3, shows=("| cct blocks=1 | 106 | milp | highs |", "| cct blocks=1 | 106 | greedy |")),
    Smoke("scale", args=("--kind", "mlp", "--build-only"), rows=1, shows=("| mlp layers=2 | 17 | build |",)),
]
DEEPLOY = [
    Smoke("fidelity", rows=3, shows=("| graph order |", "| min-memory order |", "| solved 0.8 (")),
    Smoke("arena", rows=4, shows=("| in-place | graph order |", "| in-place | 0.8 |", "| out-of-place | 0.8 |")),
    Smoke("coderun", rows=2, shows=("| baseline | 0/314, 0/314 |", "| 1.0 | 0/314, 0/314 |")),
    Smoke("sweep", args=("--warm-cache",), rows=2, shows=("## local", "| baseline |", "| 1 |", "Errors host, gvsoc")),
    # the branch: the model's line and its two points (graph order, 0.9); the release: one line saying what it needs
    Smoke("zoo", rows=3 if deeploy_flavour() is Flavour.TRAINING_BRANCH else 1, shows=("| simplemlp_train |",),
          models=("simplemlp_train", "simplemlp_optimizer")),
    Smoke("peer_policies", args=("-o", "peer"), rows=1, shows=("| simplemlp_train |",),
          models=("simplemlp_train", "simplemlp_optimizer")),
    Smoke("first_command", rows=11, shows=("| total |", "cold ", "warm ")),
    Smoke("level_total", args=("--home", "L2"), rows=2,
          shows=("| point | L2 total T B |", "| baseline | 3296 | 0 | 0 | 0 | optimal |", "| optimal | 1984 |")),
]
GVSOC = [Smoke("gvsoc", rows=3,
               shows=("| baseline | 0 |", "| 0.8 |", "| 0/6507 |", "| point | measured - predicted |")),
         # the same code started at three offsets: one locks a pair on its shared FPU
         Smoke("fpu_lock", rows=3, shows=("fmadd.s in a row in the loop: 7", "| 0 | 20,833 | +0.0% |",
                                          "1 of 3 offsets lock a pair (10)")),
         Smoke("gap9_prediction", rows=1, shows=("| tiny-mlp | 0.8 | 4 |", "(prediction) | none published | - |")),
         # the branch: SimpleMLP's nine layers calibrated in L3 and at home split, and the price fitted on them
         Smoke("level_price", rows=1, shows=("| simplemlp_train | 9 | 108,174 | 55,842 |", "fitted price:")
               if deeploy_flavour() is Flavour.TRAINING_BRANCH else ("needs Deeploy's training branch",))]


def run_bench(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / f"{script}.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=HUNG)


def table_rows(text: str) -> int:
    """Markdown table rows printed, headers left out (each table has one, above its |--- line)."""
    lines = text.splitlines()
    return sum(1 for line in lines if line.startswith("| ")) - sum(1 for line in lines if line.startswith("|---"))


def check(smoke: Smoke, cwd: Path) -> None:
    if missing := [m for m in smoke.models if not (shared_models() / m).is_dir()]:
        pytest.skip(f"bench/{smoke.script}.py reads {', '.join(missing)} from the shared models, not at "
                    f"{shared_models()} (set CKPT_SHARED_MODELS)")
    run = run_bench(smoke.script, "--smoke", *smoke.args, cwd=cwd)
    assert run.returncode == 0, f"bench/{smoke.script}.py --smoke {' '.join(smoke.args)}:\n{run.stdout}\n{run.stderr}"
    assert table_rows(run.stdout) == smoke.rows, run.stdout
    for text in smoke.shows:
        assert text in run.stdout, f"{text!r} not in:\n{run.stdout}"


@pytest.mark.parametrize("smoke", FAST, ids=lambda s: " ".join((s.script, *s.args)))
def test_bench_runs_at_its_smallest_size(smoke: Smoke, tmp_path):
    check(smoke, tmp_path)


@pytest.mark.slow      # the bench smoke runs every hostile case through the CLI: CI runs it, not the fast tier
def test_the_hostile_bench_runs_its_smoke_cases_and_skips_saying_why_where_a_fixture_cannot_be_made(tmp_path):
    """Its two split-step cases read SimpleMLP's split step from the shared models: without them they are
    skipped, each saying why, and the other six still run."""
    split = (shared_models() / "simplemlp_train").is_dir() and (shared_models() / "autoencoder_optimizer").is_dir()
    check(Smoke("hostile", rows=16 if split else 13,
                shows=("| all | 8 | 8 | 0 | 0 | 0 | 0 | 0 | 0 |",) if split else
                ("| all | 6 | 6 | 0 | 0 | 0 | 0 | 0 | 0 |", "its fixture could not be made here (no split step")),
          tmp_path)


@pytest.mark.deeploy
@pytest.mark.parametrize("smoke", DEEPLOY, ids=lambda s: s.script)
def test_deeploy_bench_runs_at_its_smallest_size(smoke: Smoke, tmp_path, lowering_cache):
    if smoke.script == "coderun" and isinstance(sources := find_sources(), NoSources):
        pytest.skip(f"bench/coderun.py runs the generated code: {sources.reason}")
    check(smoke, tmp_path)


@pytest.mark.deeploy
@pytest.mark.gvsoc
@pytest.mark.slow
@pytest.mark.parametrize("smoke", GVSOC, ids=lambda s: s.script)
def test_gvsoc_bench_runs_at_its_smallest_size(smoke: Smoke, tmp_path, lowering_cache):
    kit = find_kit()
    if isinstance(kit, NoKit):
        pytest.skip(kit.reason)
    check(smoke, tmp_path)


@pytest.mark.deeploy
@pytest.mark.gvsoc
@pytest.mark.slow
def test_the_on_chip_bench_runs_each_deployment_of_simplemlp_or_says_what_it_needs(tmp_path, lowering_cache):
    """Under the training branch (with gvsoc) SimpleMLP's four deployments at the graph order, else one row saying
    what it needs."""
    branch = deeploy_flavour() is Flavour.TRAINING_BRANCH
    if branch and isinstance(kit := find_kit(), NoKit):
        pytest.skip(kit.reason)
    check(Smoke("on_chip", ("-o", "oc"), rows=4 if branch else 1,
                shows=("| simplemlp_train | all-L3 |", "| simplemlp_train | split | graph order |",
                       "| simplemlp_train | split+ | graph order (fits) |", "| simplemlp_train | all-L2 |") if branch
                else ("needs Deeploy's training branch",)), tmp_path)
    if branch:
        assert (tmp_path / "oc" / "on_chip.csv").read_text().startswith(
            "model,deployment,budget,l2_total,l3_total,train_cycles,optimizer_cycles,errors,host_errors\n")
        assert (tmp_path / "oc" / "on_chip.png").stat().st_size > 0


def test_the_on_chip_bench_counts_each_steps_gvsoc_seconds_also_where_gvsocs_cache_gave_the_run_back(tmp_path):
    """Its seconds line printed 0: it summed the sweeps' stage time, which leaves out the off-chip reference and is
    next to nothing for a point whose gvsoc run came from the cache. Each step's replay records them now."""
    import json
    from dataclasses import replace

    from bench_support import bench_module

    from ckpt.pipeline.row import empty_row

    on_chip = bench_module("on_chip")
    for folder, seconds in (("points/0.6/replay", {"build": 61.5, "simulate": 211.6}), ("reference", {"simulate": 9}),
                            ("points/baseline/replay", None)):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "report.json").write_text(json.dumps({"gvsoc": {"tiled": {"seconds": seconds}}}))
    point = replace(empty_row("0.6", 0.6, 100, "optimal", ""), schedule="points/0.6/seq.json")
    assert on_chip.gvsoc_seconds(tmp_path, point) == 273.1
    assert on_chip.gvsoc_seconds(tmp_path, replace(point, label="reference", status="reference")) == 9
    baseline = replace(point, label="baseline", schedule="points/baseline/seq.json")
    assert on_chip.gvsoc_seconds(tmp_path, baseline) is None                               # not run on gvsoc
    assert on_chip.gvsoc_seconds(tmp_path, replace(point, schedule="points/0.5/seq.json")) is None  # never replayed


def test_every_bench_has_a_smoke_run():
    scripts = {path.stem for path in BENCH.glob("*.py") if 'if __name__ == "__main__"' in path.read_text()}
    assert scripts == {smoke.script for smoke in FAST + DEEPLOY + GVSOC} | {"hostile", "on_chip"}   # their own tests
    for script in scripts:
        assert "--smoke" in (BENCH / f"{script}.py").read_text().split('"""')[1], f"{script}: --smoke undocumented"


def test_benches_read_the_shared_models_where_CKPT_SHARED_MODELS_says(tmp_path, monkeypatch):
    """Without --model a bench measures cct2_ft2 from the shared models folder, $CKPT_SHARED_MODELS when set."""
    shared = tmp_path / "elsewhere" / "models"
    write_example("mlp", shared / "cct2_ft2", layers=2, width=16, in_dim=8, golden=False)
    monkeypatch.setenv("CKPT_SHARED_MODELS", str(shared))
    monkeypatch.delenv("CKPT_BENCH_MODEL", raising=False)
    run = run_bench("solvers", "--budgets", "0.9", "--solvers", "highs", "--time-limit", "10", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert re.match(rf"model {re.escape(str(shared / 'cct2_ft2'))}: 17 ops", run.stdout), run.stdout


def test_the_on_chip_bench_takes_a_models_own_split_budget_and_keeps_an_earlier_runs_rows(tmp_path):
    """MobileNetV1's largest fitting split budget (about 0.23) lies far below the default range's: `--budget NAME=F`
    runs its split row at F alone, and `--include` keeps the rows of the models an earlier run measured (not run
    again) beside it, numbers as numbers."""
    from bench_support import bench_module

    from ckpt.errors import CkptError

    on_chip = bench_module("on_chip")
    assert on_chip.model_budgets(["mobilenetv1_train=0.23", "cct_train=0.5:0.6"]) == {
        "mobilenetv1_train": (0.23,), "cct_train": (0.6, 0.5)}
    with pytest.raises(CkptError, match="NAME=FRACTION"):
        on_chip.model_budgets(["0.23"])
    earlier = tmp_path / "on_chip.csv"
    earlier.write_text(",".join(on_chip.COLUMNS) + "\n"
                       "resnet8_train,split,graph order (fits),1260440,627056,88699048,1617826,0/1,0/78046\n"
                       "mobilenetv1_train,all-L2,graph order,,,,,does not fit: 1 B over,-\n")
    rows = on_chip.included_rows(earlier, frozenset({"mobilenetv1_train"}))
    assert [r.cells() for r in rows] == [["resnet8_train", "split", "graph order (fits)", "1260440", "627056",
                                          "88699048", "1617826", "0/1", "0/78046"]]
    assert rows[0].train_cycles == 88699048
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(CkptError, match="not an on_chip.csv"):
        on_chip.included_rows(tmp_path / "other.csv")


def test_the_on_chip_bench_runs_a_models_own_budget_in_its_first_sweep_with_the_costs_asked_for(monkeypatch):
    """Each split sweep deploys the off-chip reference again (MobileNetV1: about 14 minutes busy): with the model's
    own budget the graph order is known not to fit, so one sweep runs the budget beside it, solved with --costs."""
    from bench_support import bench_module

    from ckpt.errors import CkptError

    on_chip, calls = bench_module("on_chip"), []

    def refused(model, out, home, fractions, time_limit, clock, costs="auto"):
        calls.append((home, fractions, costs))
        raise CkptError("stop here", "-")

    monkeypatch.setattr(on_chip, "_sweep", refused)
    rows, _ = on_chip.measure(Path("m"), Path("out"), (0.23,), 60.0, costs="estimate", own=True)
    assert calls == [("split", (0.23,), "estimate")] and rows[0].errors == "refused: stop here"
    calls.clear()
    on_chip.measure(Path("m"), Path("out"), (0.6, 0.5), 60.0)
    assert calls == [("split", (), "auto")]         # the range's sweep only where the graph order does not fit


@pytest.mark.deeploy
def test_the_on_chip_benchs_split_plus_where_nothing_more_fits_is_the_split_rows_step_not_run_again(
        tmp_path, monkeypatch, lowering_cache):
    """MobileNetV1 0.21: split+ brought 0 tensors on chip, yet the bench built and ran the split row's step again
    (minutes of Deeploy). SimpleMLP with its code taken to fill L2: split+ chooses nothing, so its row is the split
    row's figures, said so, and nothing is replayed; with the code left out it brings tensors and replays."""
    import shutil
    from dataclasses import replace

    from bench_support import bench_module

    from ckpt.pipeline.row import empty_row

    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip("the split step is the training branch's")
    on_chip, replayed = bench_module("on_chip"), []
    (tmp_path / "points" / "0.9").mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "data" / "simplemlp_split_plus_0.9.json", tmp_path / "points/0.9/seq.json")
    split = replace(empty_row("0.9", 0.9, 2160, "optimal", ""), schedule="points/0.9/seq.json", cycles=53_554,
                    optimizer_cycles=5_000, errors="0/1", host_errors="0/6507", on_chip=30_000,
                    on_chip_capacity=2_031_616, home="L2")

    def replay(*args, **kwargs):
        replayed.append(args[0])
        raise on_chip.CkptError("replayed", "-")

    monkeypatch.setattr(on_chip, "replay_schedule", replay)
    monkeypatch.setattr(on_chip, "measured_tiler_tables", lambda *args, **kwargs: None)
    model = shared_models() / "simplemlp_train"
    for code, label in ((2_031_616, "full"), (None, "room")):
        monkeypatch.setattr(on_chip, "measured_code_bytes", lambda *args, _code=code, **kwargs: _code)
        found = on_chip._split_plus(model, tmp_path / label, tmp_path, split, "0.9")
        if label == "full":
            assert not replayed and found.deployment == "split+" and found.gvsoc_seconds is None
            assert (found.l2_total, found.train_cycles, found.optimizer_cycles, found.host_errors) == \
                (30_000, 53_554, 5_000, "0/6507")
            assert found.errors == f"0/1 ({on_chip.NOTHING_MORE})" and "0 persistent tensors" in found.errors
    assert replayed == [tmp_path / "points/0.9/seq.json"] and found.errors == "refused: replayed"
