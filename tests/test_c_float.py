"""The training harness's float literals compile for every value, whole numbers included (`0f` does not)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.coderun.train_harness import c_float

CC = shutil.which("cc") or shutil.which("gcc")


@pytest.mark.skipif(CC is None, reason="no host C compiler")
def test_whole_numbers_and_zero_make_literals_that_compile(tmp_path):
    values = [0.0, 2.0, -3.0, 1e-3, 1e-30, 3.4e38, 0.1234567891]
    source = tmp_path / "f.c"
    source.write_text("".join(f"float v{i} = {c_float(v)};\n" for i, v in enumerate(values)))
    done = subprocess.run([CC, "-fsyntax-only", "-Werror", str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@settings(max_examples=property_examples(200))
@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_a_literal_reads_back_as_the_same_float32(value):
    import numpy as np

    assert np.float32(float(c_float(value)[:-1])) == np.float32(value)
