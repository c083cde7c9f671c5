"""Bad input, the leftovers of round five (issue 54): a step whose tensors are all empty, and a graph without
value_info for a Deeploy target."""
from __future__ import annotations

import pytest
from bench_support import bench_module
from test_cli_errors import one_line, run

HOSTILE = bench_module("hostile")        # the bench's spoilt models, one definition for both


def test_a_solve_of_a_step_with_a_baseline_peak_of_0_says_so_instead_of_dividing_by_it(tmp_path):
    model = HOSTILE.empty_step(tmp_path / "empty")
    code, out, err = run("solve", str(model), "--target", "none", "--budget", "1.0", "-o", str(tmp_path / "s.json"))
    assert code == 0 and "Traceback" not in err, err
    assert "peak 0 B (baseline 0 B: every tensor the step computes is empty)" in out + err


@pytest.mark.deeploy
def test_a_graph_without_value_info_is_refused_in_one_line_before_deeploy_parses(tmp_path):
    folder = HOSTILE.shapeless_mlp(tmp_path / "bare")
    code, _, err = run("solve", str(folder), "--target", "siracusa", "--budget", "0.9", "--costs", "estimate",
                       "-o", str(tmp_path / "s.json"))
    line = one_line(err)
    assert code == 1 and "tensors ('fc0_out' first) have no shape in the model's value_info" in line
    assert "value_info" in line.rsplit(":", 1)[-1] and not (tmp_path / "s.json").exists()
