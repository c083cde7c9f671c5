"""Blocks below the home level laid out with what the tiling code moves into them (deeploy_bridge.transfers,
arena.place_blocks), not only with what Deeploy's tiler counted.

The sizing rule and the layout are tested here on hand-made block lists under any Deeploy; what the training
branch's tiler undercounts (ResNet-8's layer-3 ConvGradX dY tile) is tested in tests/test_split_step.py.
"""
from __future__ import annotations

import math

import pytest
from Deeploy.AbstractDataTypes import PointerClass
from Deeploy.CommonExtensions.DataTypes import float32_t
from Deeploy.DeeployTypes import ConstantBuffer, NetworkContext, StructBuffer, TransientBuffer, VariableBuffer
from Deeploy.TilingExtension.MemoryScheduler import MemoryBlock
from hypothesis import given
from hypothesis import strategies as st

from ckpt.deeploy_bridge.arena import ALIGNMENT, LayoutLog, place_blocks
from ckpt.deeploy_bridge.errors import BridgeError
from ckpt.deeploy_bridge.records import GrownBlock
from ckpt.deeploy_bridge.transfers import largest_transfer_bytes

cubes = st.lists(st.lists(st.integers(1, 64), min_size=1, max_size=4), max_size=6)


@given(cubes, st.sampled_from([8, 16, 32]), st.integers(1, 3))
def test_a_block_takes_its_largest_cube_in_each_of_its_buffers(dims, width, coefficient):
    found = largest_transfer_bytes(dims, width, coefficient)
    each = [math.ceil(math.prod(d) * width / 8) for d in dims]
    assert found == max(each, default=0) * coefficient
    assert all(found >= b * coefficient for b in each)


def test_a_cube_of_sub_byte_elements_takes_whole_bytes():
    assert largest_transfer_bytes([(3,), (5,)], 4) == 3      # five 4-bit elements: 2.5 B, the DMA moves 3


def _list(shapes: dict[str, list[int]], views: dict[str, str] | None = None
          ) -> tuple[NetworkContext, list[MemoryBlock]]:
    """One layer's block list of float tensors (all alive at step 0), and the context that types them; `views`:
    view -> the global it is a view of (a Reshape of a weight, say), not itself in the list."""
    ctxt = NetworkContext(VariableBuffer, ConstantBuffer, StructBuffer, TransientBuffer)
    for name, shape in shapes.items():
        buffer = VariableBuffer(name, shape)
        buffer._type = PointerClass(float32_t)
        ctxt.add(buffer, "local")
    for view, source in (views or {}).items():
        weight = VariableBuffer(source, ctxt.lookup(view).shape)
        weight._type = PointerClass(float32_t)
        ctxt.add(weight, "global")
        ctxt.lookup(view)._alias = source
    return ctxt, [MemoryBlock(name, "L1", (0, 0), None) for name in shapes]


def test_a_block_the_code_moves_more_into_is_laid_out_with_that_and_logged_as_grown():
    ctxt, blocks = _list({"dy": [6, 8], "w": [8, 8], "dx": [4, 4]})      # 192, 256 and 64 B counted
    log = LayoutLog()
    layout = place_blocks(blocks, ctxt, None, 10_000, "L1", log, moved={"dy": 8 * 8 * 4, "w": 100}, layer="convgradx")
    spans = {b.name: b.addrSpace for b in blocks}
    assert spans["dy"][1] - spans["dy"][0] == 256                 # what the code moves, not the 192 counted
    assert spans["w"][1] - spans["w"][0] == 256                   # moved less than counted: the count stands
    ordered = sorted(spans.values())
    assert all(a[1] <= b[0] for a, b in zip(ordered, ordered[1:]))          # no two blocks share a byte
    assert layout.size == 256 + 256 + 64 and all(start % ALIGNMENT == 0 for start, _ in ordered)
    assert log.grown == [GrownBlock("L1", "convgradx", "dy", 192, 256)]


def test_a_layer_whose_moved_blocks_do_not_fit_the_level_is_refused_naming_it():
    ctxt, blocks = _list({"dy": [6, 8], "w": [8, 8]})
    place_blocks(blocks, ctxt, None, 448, "L1")                  # as counted it fits
    with pytest.raises(BridgeError) as refused:
        place_blocks(blocks, ctxt, None, 448, "L1", moved={"dy": 256}, layer="convgradx")
    message = str(refused.value)
    assert "\n" not in message and "layer convgradx does not fit L1" in message and "64 B more" in message


def test_the_tile_of_a_view_of_a_global_has_bytes_of_its_own_where_the_code_moves_it_in():
    """A Gemm's B, a view of a weight kept in L3, is copied tile by tile into L1 like any other input: laid out as
    a view (no bytes) its tile would sit on the output's, which the cores write while others read B."""
    ctxt, blocks = _list({"b": [8, 8], "y": [8, 8]}, views={"b": "weight"})
    place_blocks(blocks, ctxt, None, 10_000, "L1")
    assert blocks[0].addrSpace == (0, 0)                          # nothing moved in: it reads the weight's bytes
    place_blocks(blocks, ctxt, None, 10_000, "L1", moved={"b": 256, "y": 256}, layer="gemm")
    (b0, b1), (y0, y1) = blocks[0].addrSpace, blocks[1].addrSpace
    assert b1 - b0 == 256 and (b1 <= y0 or y1 <= b0)
