"""Real steps on gvsoc's Siracusa model: a small CCT example calibrated, solved with its measured costs, replayed
and run (both flows), through the console script. Skipped, with the reason, without gvsoc or its compiler."""
from __future__ import annotations

import json

import pytest
from cli_support import ckpt
from gvsoc_support import gvsoc_example

pytestmark = [pytest.mark.deeploy, pytest.mark.gvsoc, pytest.mark.slow]

SMALL = ["--blocks", "1", "--embed-dim", "32", "--heads", "2", "--image-size", "16", "--conv-channels", "8"]


@pytest.fixture(scope="module")
def small(tmp_path_factory, lowering_cache):
    """The small example, calibrated and solved at 0.8 with its measured costs, and its replay."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("GVSOC_INSTALL", raising=False)
        done = gvsoc_example(tmp_path_factory.mktemp("gvsoc"), SMALL, solve=["--costs", "gvsoc"],
                             replay=["--simulate-non-tiled"])
        again = ckpt("replay", "seq.json", "--model", "model", "-o", "again", "--simulate-non-tiled", cwd=done.work)
        yield done.work, done.calibrated, done.replayed, again


def test_calibration_measures_each_layer_of_the_graph_order(small):
    work, calibrated, _, _ = small
    doc = json.loads((work / "costs.json").read_text())
    assert doc["kind"] == "ckpt calibration" and doc["errors"] == 0 and doc["step_cycles"] > 0
    assert 0 < sum(doc["node_cycles"].values()) <= doc["step_cycles"]
    assert "Errors: 0 out of" in calibrated.stdout


def test_both_flows_run_on_gvsoc_with_no_error(small):
    work, _, replayed, _ = small
    report = json.loads((work / "replay" / "report.json").read_text())
    for flow in ("tiled", "non_tiled"):
        run = report["gvsoc"][flow]
        assert run["status"] == "measured" and run["errors"] == 0 and run["cycles"] > 0, run
        assert run["total"] == report["code_runs"][flow]["golden"]["compared"]
        assert (work / "replay" / run["log"]).is_file()
    assert "gvsoc (tiled): Errors: 0 out of" in replayed.stdout


def test_each_layer_is_measured_under_its_node_recomputes_included(small):
    work, _, _, _ = small
    report = json.loads((work / "replay" / "report.json").read_text())
    order = json.loads((work / "replay" / "order.json").read_text())
    layers = report["gvsoc"]["tiled"]["layer_cycles"]
    assert set(layers) <= set(order["order"])                 # every probed layer is one the replay ran
    assert {name for name in order["clones"] if name in layers}    # the recomputes ran and were measured
    assert sum(layers.values()) < report["gvsoc"]["tiled"]["cycles"]


def test_measured_costs_predict_the_step(small):
    work, _, _, _ = small
    schedule = json.loads((work / "seq.json").read_text())
    predicted = schedule["predicted"]["step_cycles"]
    measured = json.loads((work / "replay" / "report.json").read_text())["gvsoc"]["tiled"]["cycles"]
    assert schedule["solver"]["costs"].startswith("gvsoc calibration")
    assert abs(measured - predicted) <= 0.05 * measured, (predicted, measured)


def test_the_same_step_gives_the_same_report(small):
    work, _, _, again = small
    first = json.loads((work / "replay" / "report.json").read_text())
    second = json.loads((work / "again" / "report.json").read_text())
    assert first["gvsoc"] == second["gvsoc"]
    assert (work / "replay" / "code" / "Network.c").read_bytes() == (work / "again" / "code" / "Network.c").read_bytes()
