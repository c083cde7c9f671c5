"""`ckpt sweep --target siracusa` on a small CCT: the real Deeploy lowers, generates code and is verified,
and `--emit-ci` writes the files a Deeploy repository adopts."""
from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from ckpt.coderun.sources import NoSources, find_sources
from ckpt.examples import write_example

pytestmark = pytest.mark.deeploy


@pytest.fixture(scope="module")
def cct1(tmp_path_factory):
    """A narrow block and a narrow tokenizer: the block's activations, not one conv, set the peak, so 0.8 of it
    needs recomputes (the graph the code-run and gvsoc tests use: one lowering per session)."""
    folder = tmp_path_factory.mktemp("cct1")
    write_example("cct", folder, blocks=1, embed_dim=32, heads=2, image_size=16, conv_channels=8)
    return folder


def test_one_point_siracusa_sweep_with_deeploy_figures_and_ci_files(cct1, lowering_cache, tmp_path):
    outdir, emitted = tmp_path / "sweep", tmp_path / "deeploy-ci"
    run = subprocess.run([sys.executable, "-m", "ckpt", "sweep", "0.8:0.8", "--model", str(cct1), "--target",
                          "siracusa", "-o", str(outdir), "--time-limit", "10", "--emit-ci", str(emitted),
                          "--ci-test-name", "Models/Training/cct1"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    base, point = json.loads((outdir / "sweep.json").read_text())["points"]
    assert base["label"] == "baseline" and point["label"] == "0.8"
    sources = find_sources()       # without a Deeploy checkout the code is not run, and the row says so
    for row in (base, point):
        l3 = row["levels"]["L3"]
        assert row["check"] == "bit-identical" and row["home"] == "L3"
        assert row["errors"] == "not run" if isinstance(sources, NoSources) else row["errors"].startswith("0/")
        assert row["deeploy_nontiled"] > 0 and l3["arena"] > 0 and row["cycles"] is None
        assert row["replayed_peak"] == row["predicted_peak"] and l3["arena"] == row["arena_predicted"]
        assert l3["total"] == l3["static"] + l3["arena"] > l3["arena"]   # constants + the arena
    assert point["recomputes"] > 0 and point["replayed_peak"] <= point["budget_bytes"] < base["replayed_peak"]
    assert point["deeploy_nontiled"] < base["deeploy_nontiled"]
    assert point["levels"]["L3"]["arena"] <= base["levels"]["L3"]["arena"]
    csv_head = (outdir / "sweep.csv").read_text().splitlines()[0].split(",")
    assert {"arena_L3", "static_L3", "total_L2", "cycles", "cycles_predicted"} <= set(csv_head)
    assert (outdir / "points" / "0.8" / "replay" / "code" / "Network.c").is_file()
    assert "lowering" in run.stderr and "once for the whole sweep" in run.stderr

    schedule = emitted / "DeeployTest" / "Tests" / "Models" / "Training" / "cct1" / "recompute_0.8.json"
    assert schedule.read_text() == (outdir / "points" / "0.8" / "seq.json").read_text()
    config = emitted / "DeeployTest" / "test_siracusa_tiled_recompute_config.py"
    namespace: dict = {}
    exec(compile(config.read_text(), str(config), "exec"), namespace)
    assert namespace["L3_SINGLEBUFFER_RECOMPUTE_MODELS"] == {"Models/Training/cct1": [128000]}
    assert namespace["TRAINING_RECOMPUTE_OVERRIDES"]["Models/Training/cct1"]["training_recompute_schedule"] \
        == "recompute_0.8.json"
    cases = (emitted / "DeeployTest" / "test_siracusa_training_recompute.py").read_text()
    ast.parse(cases)
    assert "@pytest.mark.recompute" in cases and "mark.singlebuffer" not in cases   # not in the singlebuffer job
    workflow = (emitted / ".github" / "workflows" / "ci-platform-siracusa-tiled-recompute.yml").read_text()
    assert 'training and recompute"' in workflow and "test_siracusa_training_recompute.py" in workflow


@pytest.mark.slow
def test_a_split_plus_sweep_tabulates_what_each_point_brings_on_chip_as_its_replay_brings_it(lowering_cache,
                                                                                          tmp_path):
    """`ckpt sweep --home split --persist-on-chip auto` (one budget, estimated costs, no host check, no gvsoc): each
    point's row counts the persistent tensors its schedule brings on chip, and its replay brought those very
    tensors (read from the Deeploy setup its report records); sweep.md shows the column."""
    model, outdir = tmp_path / "mlp", tmp_path / "sweep"
    write_example("mlp", model, layers=2, width=32)
    run = subprocess.run([sys.executable, "-m", "ckpt", "sweep", "0.98:0.98", "--model", str(model), "--target",
                          "siracusa", "--home", "split", "--persist-on-chip", "auto", "--costs", "estimate",
                          "--no-verify", "--no-simulate", "--jobs", "1", "-o", str(outdir)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rows = {row["label"]: row for row in json.loads((outdir / "sweep.json").read_text())["points"]}
    for label in ("baseline", "0.98"):
        row = rows[label]
        report = json.loads((outdir / row["schedule"]).with_name("replay").joinpath("report.json").read_text())
        brought = report["deeploy"]["tiled"]["setup"]["on_chip_persistent"]
        assert row["persist_on_chip"] == len(brought) > 0 and row["persist_on_chip_bytes"] > 0, label
        seq = json.loads((outdir / row["schedule"]).read_text())
        assert sorted(seq["predicted"]["split_plus"]["tensors"]) == sorted(brought)
    assert "| split+ on chip |" in (outdir / "sweep.md").read_text()


@pytest.mark.slow
def test_a_parked_sweep_point_says_what_it_parks_and_its_replay_holds_the_budget_in_l2(lowering_cache, tmp_path):
    """`ckpt sweep --home split --park auto` on the built-in MLP at 0.6 (below its split step's single-op floor: only
    parking fits; estimated costs, no gvsoc): the point's row counts what its schedule parks, its replay homes those
    very activations in L3 (the Deeploy setup its report records), and the code's L2 activations stay within the
    budget; sweep.md shows the column."""
    model, outdir = tmp_path / "mlp", tmp_path / "sweep"
    write_example("mlp", model, layers=2, width=32)
    run = subprocess.run([sys.executable, "-m", "ckpt", "sweep", "0.6:0.6", "--model", str(model), "--target",
                          "siracusa", "--home", "split", "--park", "auto", "--costs", "estimate", "--no-simulate",
                          "--jobs", "1", "-o", str(outdir)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    row = {row["label"]: row for row in json.loads((outdir / "sweep.json").read_text())["points"]}["0.6"]
    seq = json.loads((outdir / row["schedule"]).read_text())
    parked = seq["predicted"]["parked"]
    assert row["parked"] == len(parked["tensors"]) > 0 and row["parked_bytes"] == parked["bytes"] > 0
    report = json.loads((outdir / row["schedule"]).with_name("replay").joinpath("report.json").read_text())
    assert sorted(report["deeploy"]["tiled"]["setup"]["parked"]) == sorted(parked["tensors"])
    assert row["check"] == "bit-identical", row
    assert row["replayed_peak"] <= row["budget_bytes"] < row["levels"]["L2"]["home_arena"] + parked["bytes"]
    for level in ("L2", "L3"):                     # the code's whole-network blocks: the parked in L3, not in L2
        assert row["levels"][level]["home_arena"] == row["levels"][level]["predicted_arena"], level
    assert row["levels"]["L3"]["home_arena"] >= parked["bytes"]
    assert "| parked |" in (outdir / "sweep.md").read_text()


@pytest.mark.slow  # the off-chip graph order deployed by Deeploy (about half a minute)
def test_a_split_sweep_whose_graph_order_cannot_fit_l2_says_so_of_its_baseline_and_exits_0(lowering_cache, tmp_path):
    """MobileNetV1's case on a wide MLP: its split graph order's activations overflow L2 (why one sweeps it), so the
    baseline says it does not fit, with the bytes, and is no failure; so does its point 0.5, whose schedule's
    activations still overflow L2 (said before Deeploy runs for it: no code folder); its point 0.3, below what any
    schedule fits, is infeasible (no failure either), and the off-chip graph order is deployed for reference."""
    model, outdir = tmp_path / "mlp", tmp_path / "sweep"
    write_example("mlp", model, layers=6, width=256, batch=512, golden=False)
    run = subprocess.run([sys.executable, "-m", "ckpt", "sweep", "0.3:0.5", "--points", "2", "--model", str(model),
                          "--home", "split", "--costs", "estimate", "--no-simulate", "--no-verify", "--jobs", "1",
                          "-o", str(outdir), "--time-limit", "20"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "baseline: does not fit L2: its activations alone need 5,842,984 B, 3,811,368 B more than the " \
           "2,031,616 B L2 gives" in run.stdout and "FAILED" not in run.stdout
    assert "0.5: does not fit L2: its activations alone need 2,949,120 B, 917,504 B more than the 2,031,616 B L2 " \
           "gives" in run.stdout
    doc = json.loads((outdir / "sweep.json").read_text())
    base, loose, point, reference = doc["points"]
    assert base["check"] == "does not fit" and point["status"] == "infeasible"
    assert loose["check"] == "does not fit" and loose["status"] != "error"
    assert not (outdir / "points" / "0.5" / "replay" / "code").exists()
    assert reference["label"] == "off-chip graph order" and doc["overheads_over"] == "off-chip graph order"
