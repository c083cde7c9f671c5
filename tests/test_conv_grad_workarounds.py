"""The training branch's ConvGradX and ConvGradW defects and ckpt's workarounds, on the smallest case that shows each.

conv-grad-x-tile-origin: Deeploy's own tile constraint cuts a stride-1 3x3 ConvGradX's dX in tiles over height and
width; Deeploy's own C kernel (ConvGrad.c, built from the checkout as the generated code is) computes each tile
with the per-tile values the constraint hands it; the tiles together must be the whole ConvGradX (numpy). With the
installed constraint they are not (every tile but the first reads its neighbour's gradient), with ckpt's they are.

pw-conv-grad-w-stride: Deeploy's PULPOpen mapping binds a strided 1x1 ConvGradW to the pointwise kernel, which takes
no stride; with ckpt's mapping it goes to the general one.
"""
from __future__ import annotations

import subprocess

import numpy as np
import onnx_graphsurgeon as gs
import pytest

from ckpt.coderun.build import GLUE, RUNTIME, STRICT, BuildConfig, find_toolchain, kernel_library
from ckpt.coderun.sources import NoSources, find_sources
from ckpt.deeploy_identity import Flavour, deeploy_flavour

pytestmark = pytest.mark.deeploy

CORES = 8
P = Q = 3
PAD = 1


@pytest.fixture(scope="module")
def branch():
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip("the training branch's kernels (ConvGradX/ConvGradW) are not installed")


def _grad_x(dy: np.ndarray, w: np.ndarray, height: int, width: int) -> np.ndarray:
    """dX of a stride-1 PxQ convolution padded by PAD: [Cin, H, W] from dY [Cout, H, W] and W [Cout, Cin, P, Q]."""
    cin = w.shape[1]
    padded = np.zeros((cin, height + 2 * PAD, width + 2 * PAD), dtype=np.float64)
    for ky in range(P):
        for kx in range(Q):
            padded[:, ky:ky + height, kx:kx + width] += np.einsum("oc,ohw->chw", w[:, :, ky, kx], dy)
    return padded[:, PAD:PAD + height, PAD:PAD + width]


def _tiles(constraint: type, dy_shape, w_shape, dx_shape, cuts) -> tuple[dict, list]:
    """What `constraint` (a ConvGradX tile constraint class) hands the tiles of dX cut at `cuts` ((h0, hsize, w0,
    wsize) each): its per-tile replacements and each tile's dY cube."""
    from ckpt.deeploy_bridge.defect_probes import conv_grad_x_tiling

    replacement, schedule = conv_grad_x_tiling(constraint, (dy_shape, w_shape, dx_shape), cuts, PAD)
    return replacement.perTileReplacements, [load["grad_out"] for load in schedule.inputLoadSchedule]


def _c_array(name: str, values: np.ndarray) -> str:
    return f"static float {name}[{values.size}] = {{{', '.join(f'{v!r}f' for v in values.reshape(-1).tolist())}}};"


def _run_tiles(tmp_path, dy: np.ndarray, w: np.ndarray, dx_shape, cuts, per_tile: dict, cubes: list) -> np.ndarray:
    """Deeploy's tiled im2col ConvGradX kernel run on this host for each tile, as the generated code calls it
    (each tile's dY cube copied in, its dX tile copied out): the whole dX."""
    sources, toolchain = find_sources(), find_toolchain()
    if isinstance(sources, NoSources):
        pytest.skip(sources.reason)
    if toolchain is None:
        pytest.skip("no C compiler on PATH")
    config = BuildConfig(cores=CORES, l3_bytes=1 << 20)
    library = kernel_library(sources, toolchain, config)
    cout, cin = w.shape[0], w.shape[1]
    largest = max(c.dims[2] * c.dims[3] for c in cubes)
    lines = ['#include <stdio.h>', _c_array("weight", w.astype(np.float32)),
             f"static float dy_tile[{cout * largest}], dx_tile[{cin * dx_shape[2] * dx_shape[3]}];",
             f"static float i2c[{cout * P * Q * largest}], bt[{cin * cout * P * Q}];"]
    calls = []
    for i, (cut, cube) in enumerate(zip(cuts, cubes)):
        h0, hs, w0, ws = cut
        _, _, oy, ox = cube.offset
        tile = np.ascontiguousarray(dy[:, oy:oy + cube.dims[2], ox:ox + cube.dims[3]], dtype=np.float32)
        lines.append(_c_array(f"dy{i}", tile))
        value = {k: v[i] for k, v in per_tile.items()}
        args = (f"dy_tile, {cube.dims[2]}u, {cube.dims[3]}u, {cout}u, weight, {cin}u, {P}u, {Q}u, 1u, 1u, dx_tile, "
                f"{hs}u, {ws}u, {value['padding_y_top']}u, {value['padding_y_bottom']}u, {value['padding_x_left']}u, "
                f"{value['padding_x_right']}u, {value['offset_grad_in_h']}, {value['offset_grad_in_w']}, "
                f"{value['offset_grad_out_h']}, {value['offset_grad_out_w']}, i2c, sizeof(i2c), bt, sizeof(bt)")
        calls.append(f"  memcpy(dy_tile, dy{i}, sizeof(dy{i}));\n"
                     f"  pi_cl_team_fork({CORES}, tile{i}, NULL);\n"
                     f"  for (int c = 0; c < {cin}; c++) for (int y = 0; y < {hs}; y++)\n"
                     f"    for (int x = 0; x < {ws}; x++)\n"
                     f"    printf(\"%d %d %d %.9g\\n\", c, {h0} + y, {w0} + x, dx_tile[(c * {hs} + y) * {ws} + x]);")
        lines.append(f"static void tile{i}(void *arg) {{ (void)arg; "
                     f"PULP_ConvGradX2d_fp32_fp32_fp32_CHW_Im2Col_tiled({args}); }}")
    lines += ["int main(void) {", *calls, "  return 0;", "}"]
    tmp_path.mkdir(parents=True, exist_ok=True)
    driver = tmp_path / "driver.c"
    driver.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "driver"
    flags = [*GLUE, *config.defines(), *STRICT, *(f"-I{d}" for d in (library.folder, RUNTIME, *sources.include_dirs)),
             "-include", str(library.prelude), "-include", "string.h"]
    built = subprocess.run([toolchain.cc, *flags, str(driver), str(library.archive), "-lm", "-pthread", "-o", str(exe)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    dx = np.full((cin, dx_shape[2], dx_shape[3]), np.nan)
    for line in out.splitlines():
        c, y, x, v = line.split()
        dx[int(c), int(y), int(x)] = float(v)
    return dx


@pytest.mark.slow
def test_a_stride_1_conv_grad_x_tiled_over_height_and_width_is_the_whole_gradient_with_ckpts_constraint(
        branch, tmp_path):
    """dX [1, 2, 6, 8] in 2x3 tiles (the tiler's cuts on ResNet-8 are of this kind: layer2_0_conv2's dX in width
    4 of 16): Deeploy's constraint and kernel give every tile but the first its neighbour's gradient; with ckpt's
    constraint (origins folded into the padding) the tiles are the whole ConvGradX."""
    from Deeploy.Targets.PULPOpen.TileConstraints.ConvGradConstraint import ConvGradX2DIm2ColHWTileConstraint

    from ckpt.deeploy_bridge.conv_grad_x import origin_folded_constraint

    rng = np.random.default_rng(0)
    cout, cin, height, width = 4, 2, 6, 8
    dy = rng.normal(size=(cout, height, width)).astype(np.float32)
    w = rng.normal(size=(cout, cin, P, Q)).astype(np.float32)
    want = _grad_x(dy.astype(np.float64), w.astype(np.float64), height, width)
    shapes = ((1, cout, height, width), (cout, cin, P, Q), (1, cin, height, width))
    cuts = [(h, 3, x, ws) for h in (0, 3) for x, ws in ((0, 3), (3, 3), (6, 2))]

    installed = _run_tiles(tmp_path / "installed", dy, w, shapes[2],
                           cuts, *_tiles(ConvGradX2DIm2ColHWTileConstraint, *shapes, cuts))
    first = (slice(None), slice(0, 3), slice(0, 3))
    assert np.allclose(installed[first], want[first], atol=1e-5)       # the first tile was always right
    assert not np.allclose(installed, want, atol=1e-3)                 # the defect

    folded = origin_folded_constraint(ConvGradX2DIm2ColHWTileConstraint)
    fixed = _run_tiles(tmp_path / "folded", dy, w, shapes[2], cuts, *_tiles(folded, *shapes, cuts))
    assert np.allclose(fixed, want, atol=1e-5), np.abs(fixed - want).max()


def _conv_grad_w(strides: list[int]) -> gs.Node:
    x, dy = gs.Variable("x", np.float32, (1, 16, 32, 32)), gs.Variable("dy", np.float32, (1, 32, 16, 16))
    return gs.Node(op="ConvGradW", name="shortcut", inputs=[dy, x],
                   outputs=[gs.Variable("dw", np.float32, (32, 16, 1, 1))],
                   attrs={"kernel_shape": [1, 1], "strides": strides, "pads": [0, 0, 0, 0], "group": 1,
                          "dilations": [1, 1]})


def test_a_strided_1x1_conv_grad_w_goes_to_the_general_kernel_with_ckpts_mapping(branch):
    """ResNet-8's downsampling shortcuts (1x1, stride 2): Deeploy's pointwise parser takes them (its kernel has no
    stride: ResNet-8's two shortcut weight gradients were wrong in both flows); ckpt's refuses them and keeps
    taking a stride-1 1x1."""
    from Deeploy.Targets.PULPOpen.Platform import PULPMapping

    from ckpt.deeploy_bridge.defects import pointwise_parser
    from ckpt.deeploy_bridge.pw_conv_grad_w import stride_one_pw_conv_grad_w

    def takers(mapping, strides):
        return [type(m.parser).__name__ for m in mapping["ConvGradW"].maps if m.parser.parseNode(_conv_grad_w(strides))]

    installed = dict(PULPMapping)
    first = next(m.parser for m in installed["ConvGradW"].maps if m.parser.parseNode(_conv_grad_w([2, 2])))
    assert pointwise_parser(first)                                   # the defect: the stride-blind kernel first
    mapping = dict(PULPMapping)
    stride_one_pw_conv_grad_w(mapping)
    assert takers(mapping, [2, 2]) == ["PULPConvGradW2DParser"]      # the general (im2col) ConvGradW, stride taken
    assert takers(mapping, [1, 1])[0] == "StrideOnePULPPWConvGradW2DParser"
    assert mapping["ConvGradW"] is not installed["ConvGradW"] and PULPMapping["ConvGradW"] is installed["ConvGradW"]
