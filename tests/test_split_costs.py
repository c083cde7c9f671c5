"""The split home's op costs where its graph order overflows the chip (pipeline.split_costs): that graph order is
never deployed to be calibrated (its calibration is refused in seconds, with the bytes), and the costs come from the
all-L3 calibration priced per tensor level."""
from __future__ import annotations

import time

import pytest

from ckpt.deeploy_bridge.setup import setup_for
from ckpt.errors import CkptError
from ckpt.examples import write_example
from ckpt.pipeline.calibrate import calibrate
from ckpt.pipeline.split_costs import graph_order_overflow, load_split
from ckpt.targets import SPLIT_HOME

pytestmark = pytest.mark.deeploy


@pytest.fixture(scope="module")
def wide_mlp(tmp_path_factory):
    """An MLP whose graph order keeps several MiB of activations: more than Siracusa's L2."""
    folder = tmp_path_factory.mktemp("wide") / "mlp"
    write_example("mlp", folder, layers=3, width=512, batch=512)
    return folder


def test_a_split_calibration_of_a_graph_order_beyond_the_chip_is_refused_with_the_bytes_before_deeploy_runs(
        wide_mlp, lowering_cache):
    """Before, Deeploy deployed it (minutes on MobileNetV1) until its tiler found the constraints infeasible, and the
    sweep's costs fell back to the estimate."""
    setup = setup_for("siracusa", SPLIT_HOME)
    why = graph_order_overflow(load_split(wide_mlp, "siracusa", setup), setup)
    assert why is not None and "B more than the 2,031,616 B L2 gives" in why
    start = time.perf_counter()
    with pytest.raises(CkptError) as err:
        calibrate(wide_mlp, "siracusa", setup)
    assert "graph order's activations alone need" in err.value.problem
    assert "every tensor off chip" in err.value.way_out
    assert time.perf_counter() - start < 60


def test_a_split_steps_refusal_never_counts_the_all_off_chip_code_as_its_own(wide_mlp, lowering_cache, monkeypatch):
    """`ckpt solve --home split` refused MobileNetV1 at every budget ("829,920 B + its code and data (1,214,536 B)"):
    that code was measured with every tensor off chip, where every layer is tiled from L3, not the split step's
    (which tiles from L3 only the layers that read or write what persists). A proven refusal cannot rest on it: where
    the split graph order overflows the chip, its code is not counted (the solve says so)."""
    import ckpt.pipeline.calibrate as calibration

    measured = []

    def off_chip_only(source, target, setup, *args, **kwargs):       # what gvsoc would measure, without the run
        if setup.home == SPLIT_HOME:
            raise CkptError("cannot calibrate with --home split: the graph order's activations overflow L2")
        measured.append(setup.home)
        return calibration.Calibration(calibration.KIND, calibration.CALIBRATION_FORMAT, "0" * 64, target, {}, 1,
                                       {}, 0, 1, 1_214_536, "k" * 64)

    monkeypatch.setattr(calibration, "calibrate", off_chip_only)
    notes = []
    assert calibration.measured_code_bytes(wide_mlp, "siracusa", setup_for("siracusa", SPLIT_HOME),
                                           notes.append) is None
    assert measured == [] and "not counted" in notes[0]
    # home L2 keeps its count (its own graph order's code, else the off-chip one, the safe side of a total)
    assert calibration.measured_code_bytes(wide_mlp, "siracusa", setup_for("siracusa", "L2")) == 1_214_536


def test_split_plus_counts_the_all_off_chip_code_where_the_split_code_cannot_be_measured(
        wide_mlp, lowering_cache, monkeypatch):
    """split+ fills L2 up to the room left beside the code: with the code not counted (as a refusal must not count
    it), CCT's split+ at 0.6 brought 88 tensors on chip, L2 held 2,000,554 B of static + arena and the step did not
    link. Its room counts the all-off-chip code, larger than the split step's: the safe side."""
    import ckpt.pipeline.calibrate as calibration

    def off_chip_only(source, target, setup, *args, **kwargs):
        if setup.home == SPLIT_HOME:
            raise CkptError("cannot calibrate with --home split: the graph order's activations overflow L2")
        return calibration.Calibration(calibration.KIND, calibration.CALIBRATION_FORMAT, "0" * 64, target, {}, 1,
                                       {}, 0, 1, 365_897, "k" * 64)

    monkeypatch.setattr(calibration, "calibrate", off_chip_only)
    notes = []
    setup = setup_for("siracusa", SPLIT_HOME)
    assert calibration.measured_code_bytes(wide_mlp, "siracusa", setup, notes.append, safe_side=True) == 365_897
    assert "counted at the code with every tensor off chip" in notes[0]
    loaded = load_split(wide_mlp, "siracusa", setup)           # the caller's load, used as it is
    monkeypatch.setattr(calibration, "load_split", lambda *a, **k: pytest.fail("loaded again"))
    assert calibration.measured_code_bytes(wide_mlp, "siracusa", setup, loaded=loaded, safe_side=True) == 365_897


def test_a_split_solve_with_measured_costs_loads_the_model_once(tmp_path, lowering_cache, monkeypatch):
    """`ckpt solve --home split --costs gvsoc` loaded the model four times: the floor's check, the costs
    (pipeline.split_costs.load_split), the code's count (again load_split) and the solve. One load is handed on."""
    import ckpt.deeploy_bridge as bridge
    import ckpt.pipeline.calibrate as calibration
    from ckpt.cli import main

    folder = tmp_path / "mlp"
    write_example("mlp", folder, layers=2, width=32, batch=8)
    lowered = []
    real_lower = bridge.lower

    def counted(source, target, *args, **kwargs):
        lowered.append(source)
        return real_lower(source, target, *args, **kwargs)

    def measured(source, target, setup, *args, **kwargs):          # what gvsoc would measure, without the run
        return calibration.Calibration(calibration.KIND, calibration.CALIBRATION_FORMAT, "0" * 64, target, {}, 1000,
                                       {}, 0, 1, 4096, "k" * 64)

    monkeypatch.setattr(bridge, "lower", counted)
    monkeypatch.setattr(calibration, "calibrate", measured)
    main(["solve", str(folder), "--target", "siracusa", "--home", SPLIT_HOME, "--budget", "1.0", "--costs", "gvsoc",
          "-o", str(tmp_path / "seq.json")])
    assert (tmp_path / "seq.json").is_file()
    assert len(lowered) == 1, lowered
