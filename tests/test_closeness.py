"""Each output's distance from the goldens on a scale that sees a wrong gradient (replay.closeness): the step's
update of a weight, and the non-tiled code's distance beside the tiled one's."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.hostexec.compare import TRAINING_HARNESS_TOLERANCE, compare_outputs
from ckpt.replay.closeness import OFF_UPDATE, closeness

RNG = np.random.default_rng(0)


def _step(update: float):
    """A weight of magnitude ~0.2 that the reference step moved by up to `update`: (start, golden)."""
    start = RNG.normal(0, 0.1, size=(8, 4, 3, 3)).astype(np.float32)
    golden = (start + RNG.uniform(-update, update, size=start.shape)).astype(np.float32)
    return start, golden


def test_a_weight_whose_update_is_wrong_is_off_though_the_harness_counts_no_error():
    """ResNet-8's tiled code before the conv-grad-x-tile-origin workaround: its weights moved by the wrong gradient,
    each update of the right size (1e-4) but of the wrong pixels, all within the harness's 1e-3."""
    start, golden = _step(1e-4)
    wrong = (start - (golden - start)).astype(np.float32)         # the update of the opposite direction
    count = compare_outputs({"w": wrong}, {"w": golden}, tolerance=TRAINING_HARNESS_TOLERANCE)
    assert count.errors == 0
    found = closeness(count, {"w": golden}, {"w": start})
    assert "w" in found.off and "the step's update" in found.off["w"] and found.line.startswith("1 output(s)")


def test_the_non_tiled_codes_rounding_is_not_off():
    start, golden = _step(1e-4)
    rounded = (golden + np.float32(7.5e-9)).astype(np.float32)      # as far as the non-tiled code is
    found = closeness(compare_outputs({"w": rounded}, {"w": golden}), {"w": golden}, {"w": start})
    assert not found.off and found.line is None


def test_a_tiled_result_far_beyond_the_non_tiled_ones_is_off_even_below_the_update_rule():
    start, golden = _step(1.0)                                    # a large update: the update rule does not fire
    tiled = (golden + np.float32(1e-3)).astype(np.float32)
    non_tiled = (golden + np.float32(1e-7)).astype(np.float32)
    beside = compare_outputs({"w": non_tiled}, {"w": golden})
    found = closeness(compare_outputs({"w": tiled}, {"w": golden}), {"w": golden}, {"w": start}, beside)
    assert found.tensors[0].relative < OFF_UPDATE and "non-tiled" in found.off["w"]


@settings(max_examples=property_examples(60), deadline=None)
@given(st.floats(min_value=1e-6, max_value=1.0), st.floats(min_value=0.0, max_value=0.5))
def test_an_output_is_off_exactly_when_beyond_rounding_and_a_hundredth_of_its_update(update, fraction):
    """The update rule, for any update and any error that is a fraction of it (no non-tiled code beside)."""
    start = np.full(4, 0.25, dtype=np.float32)
    golden = (start + np.float32(update)).astype(np.float32)
    code = (golden + np.float32(fraction * update)).astype(np.float32)
    count = compare_outputs({"w": code}, {"w": golden})
    found = closeness(count, {"w": golden}, {"w": start})
    t = found.tensors[0]
    rounding = 16 * float(np.finfo(np.float32).eps) * float(np.abs(golden).max())
    assert ("w" in found.off) == (t.distance > rounding and t.relative > OFF_UPDATE)


def test_a_sweeps_row_says_what_its_errors_do_not():
    """A point whose code passes the harness's count with an output off the goldens says so in its reason."""
    from ckpt.pipeline.row import _code_run
    from ckpt.replay.report import CodeRunRecord, CodeStatus

    start, golden = _step(1e-4)
    wrong = (start - (golden - start)).astype(np.float32)
    count = compare_outputs({"w": wrong}, {"w": golden}, tolerance=TRAINING_HARNESS_TOLERANCE)
    run = CodeRunRecord("tiled", CodeStatus.RAN, golden=count, graph_order="bit-identical",
                        closeness=closeness(count, {"w": golden}, {"w": start}))
    check, errors, reason = _code_run(run, "siracusa", "0/1")
    assert errors == f"0/{golden.size}" and "1 output(s) off the goldens" in reason and "w " in reason
    exact = compare_outputs({"w": golden}, {"w": golden})
    near = CodeRunRecord("tiled", CodeStatus.RAN, golden=exact, graph_order="bit-identical",
                         closeness=closeness(exact, {"w": golden}, {"w": start}))
    assert _code_run(near, "siracusa", "0/1")[2] == ""


def _host_run(golden: np.ndarray, spread: float) -> np.ndarray:
    """Another float32 run of the same step (ckpt's host executor), `spread` away from the goldens."""
    return (golden + np.float32(spread) * np.sign(RNG.normal(size=golden.shape))).astype(np.float32)


def test_a_bias_whose_exact_gradient_is_zero_is_not_off_when_the_host_run_is_as_far_from_the_goldens():
    """MobileNetV1: each block's last BatchNorm bias feeds a convolution and a BatchNorm, which removes any shift, so
    its exact gradient is 0; the goldens' update of it (~1e-10 from a zero start) is float32 noise. The code 3x that
    noise from the goldens, ckpt's own float32 host run 1x: numerics, not off (17 such biases were among the 124 of
    159 outputs flagged); without the host run beside it the rule still says off."""
    start = np.zeros(24, dtype=np.float32)
    golden = (start + RNG.uniform(-2e-10, 2e-10, size=start.shape)).astype(np.float32)
    code = compare_outputs({"b": _host_run(golden, 6.9e-10)}, {"b": golden})
    host = compare_outputs({"b": _host_run(golden, 2.5e-10)}, {"b": golden})
    assert "b" in closeness(code, {"b": golden}, {"b": start}).off
    found = closeness(code, {"b": golden}, {"b": start}, host=host)
    assert found.tensors[0].relative > 1 and not found.off and found.line is None


def test_a_wrong_update_is_off_though_the_host_run_is_beside_it_where_the_goldens_are_precise():
    """ResNet-8's wrong gradients (the branch's conv-grad defects, off): the host run agrees with the goldens to
    float rounding, so the code's wrong update is far beyond ten times its distance and stays off."""
    start, golden = _step(1e-4)
    wrong = (start - (golden - start)).astype(np.float32)
    count = compare_outputs({"w": wrong}, {"w": golden}, tolerance=TRAINING_HARNESS_TOLERANCE)
    host = compare_outputs({"w": _host_run(golden, 1.5e-8)}, {"w": golden})
    found = closeness(count, {"w": golden}, {"w": start}, host=host)
    assert "w" in found.off and "the step's update" in found.off["w"]


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=1e-6, max_value=1.0), st.floats(min_value=0.0, max_value=0.5),
       st.floats(min_value=0.0, max_value=0.5))
def test_the_update_rule_excuses_exactly_what_is_within_ten_times_the_host_runs_distance(update, fraction, spread):
    start = np.full(4, 0.25, dtype=np.float32)
    golden = (start + np.float32(update)).astype(np.float32)
    code = compare_outputs({"w": (golden + np.float32(fraction * update)).astype(np.float32)}, {"w": golden})
    host = compare_outputs({"w": (golden + np.float32(spread * update)).astype(np.float32)}, {"w": golden})
    t = closeness(code, {"w": golden}, {"w": start}, host=host).tensors[0]
    rounding = 16 * float(np.finfo(np.float32).eps) * float(np.abs(golden).max())
    found = closeness(code, {"w": golden}, {"w": start}, host=host)
    expected = t.distance > rounding and t.relative > OFF_UPDATE and t.distance > 10 * host.max_abs_diff["w"]
    assert ("w" in found.off) == expected
