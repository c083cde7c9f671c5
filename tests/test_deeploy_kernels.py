"""Deeploy's own C kernels against the host executor's forms of the same op: a form a built-in example declares
must be what the kernel computes, on data where it differs from the other forms (so a wrong declaration, or a
kernel whose formula differs from the goldens', fails here and not as Errors in a whole step's code)."""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from ckpt.coderun.build import COMMON, find_toolchain
from ckpt.coderun.sources import NoSources, find_sources
from ckpt.examples.ops import DEVICE_LN_GRAD
from ckpt.hostexec import training_ops as T

pytestmark = pytest.mark.deeploy
FLOATS = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")


@pytest.fixture(scope="module")
def layer_norm_kernels(tmp_path_factory):
    """Generic/src/Layernorm_fp32.c of the checkout, built as it is into a shared library."""
    sources, toolchain = find_sources(), find_toolchain()
    if isinstance(sources, NoSources):
        pytest.skip(sources.reason)
    if toolchain is None:
        pytest.skip("no C compiler on PATH")
    library = tmp_path_factory.mktemp("kernels") / "liblayernorm.so"
    generic = sources.root / "TargetLibraries" / "Generic"
    subprocess.run([toolchain.cc, "-shared", "-fPIC", "-O1", *COMMON, f"-I{generic / 'inc'}",
                    str(generic / "src" / "Layernorm_fp32.c"), "-o", str(library), "-lm"], check=True)
    kernels = ctypes.CDLL(str(library))
    kernels.LayernormGrad_fp32_fp32.argtypes = [FLOATS, FLOATS, FLOATS, FLOATS, FLOATS, ctypes.c_float,
                                                ctypes.c_int32, ctypes.c_int32]
    kernels.LayernormGrad_fp32_fp32.restype = None
    return kernels


def _kernel_grad(kernels, dy: np.ndarray, x: np.ndarray, scale: np.ndarray, eps: float) -> np.ndarray:
    out = np.zeros_like(dy)
    kernels.LayernormGrad_fp32_fp32(dy, x, out, scale, np.zeros_like(scale), eps, dy.size, dy.shape[-1])
    return out


def _rows(seed: int, rows: int, width: int, std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (rows, width)) * std[:, None] + rng.normal(0, 1, (rows, 1))
    return x.astype(np.float32), rng.normal(0, 0.05, (rows, width)).astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_deeploys_layer_norm_grad_is_the_form_the_examples_declare(layer_norm_kernels, seed):
    """Rows spread as a transformer's residual stream is (std far from 1), a scale that is not 1: the kernel
    computes the "deeploy" form to float32 rounding, and misses the gradient by far more than that."""
    x, dy = _rows(seed, 16, 128, np.linspace(0.2, 3.0, 16))
    scale = np.random.default_rng(seed + 10).normal(1, 0.3, 128).astype(np.float32)
    device = _kernel_grad(layer_norm_kernels, dy, x, scale, 1e-5)
    declared = T.layer_norm_grad(dy, x, scale, -1, 1e-5, form=DEVICE_LN_GRAD)[0]
    gradient = T.layer_norm_grad(dy, x, scale, -1, 1e-5)[0]
    size = np.abs(gradient).max()
    assert np.abs(device - declared).max() < 1e-5 * size
    assert np.abs(device - gradient).max() > 1e-2 * size


def test_deeploys_layer_norm_grad_is_the_gradient_on_rows_of_unit_variance(layer_norm_kernels):
    """Where it is right: unit scale and every row's variance + epsilon 1, the kernel gives the gradient."""
    eps = 1e-5
    x, dy = _rows(3, 8, 64, np.ones(8))
    centred = x.astype(np.float64) - x.mean(-1, keepdims=True)
    x = (centred / np.sqrt((centred ** 2).mean(-1, keepdims=True)) * np.sqrt(1 - eps)).astype(np.float32)
    device = _kernel_grad(layer_norm_kernels, dy, x, np.ones(64, np.float32), eps)
    gradient = T.layer_norm_grad(dy, x, np.ones(64), -1, eps)[0]
    assert np.abs(device - gradient).max() < 1e-5 * np.abs(gradient).max()
