"""No cluster DMA transfer of 2^17 B or more in a generated step: ckpt reads them from the code (coderun.dma) and
a step with one is not built, the run failing with the transfer named."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ckpt.coderun.dma import MCHAN_LIMIT, code_transfers, oversized_reason, oversized_transfers
from ckpt.coderun.run import NotRun, run_code
from ckpt.coderun.sources import NoSources
from ckpt.coderun.train_harness import TrainingRun
from ckpt.coderun.train_run import run_training


def _push(size: int, local: str, external: str) -> str:
    return (f"{{ mchan_transfer_t __mchan_tmp = {{ .cmd = {(0b1011 << 17) + size}, .size = {size}, .loc = {local}, "
            f".ext = {external} }}; mchan_transfer_push_1d(__mchan_tmp); }}")


def _code(folder: Path, sizes: list[int]) -> Path:
    folder.mkdir()
    lines = ["#include \"DeeployMchan.h\"", "static void _node_3_conv_closure(void *args) {"]
    lines += [_push(size, f"l1_{i}", f"l2_{i}") for i, size in enumerate(sizes)]
    lines += ["}", "void RunTrainingNetwork() {", _push(8, "a", "b"), "}"]
    (folder / "TrainingNetwork.c").write_text("\n".join(lines) + "\n")
    return folder


def test_every_transfer_is_read_with_its_function_and_buffers(tmp_path):
    found = code_transfers(_code(tmp_path / "code", [256, MCHAN_LIMIT - 1]) / "TrainingNetwork.c")
    assert [(t.function, t.local, t.external, t.size, t.line) for t in found] == [
        ("_node_3_conv_closure", "l1_0", "l2_0", 256, 3), ("_node_3_conv_closure", "l1_1", "l2_1", MCHAN_LIMIT - 1, 4),
        ("RunTrainingNetwork", "a", "b", 8, 7)]
    assert oversized_transfers(tmp_path / "code") == []


def test_a_step_with_a_transfer_of_2_17_bytes_is_not_built_and_the_transfer_is_named(tmp_path):
    code = _code(tmp_path / "code", [256, MCHAN_LIMIT, MCHAN_LIMIT + 4])
    run = TrainingRun(1, 1, ((np.zeros(1, np.float32),),), 1, 0, (), 1e-3)
    for found in (run_code(code, {}, NoSources("no checkout")), run_training(code, run, {}, NoSources("none"))):
        assert isinstance(found, NotRun) and found.failed
        assert "131,072 B between l1_1 and l2_1 in _node_3_conv_closure (TrainingNetwork.c:4) (and 1 more)" in \
            found.reason


def test_a_transfer_whose_length_changes_per_tile_is_read_as_its_largest_tile(tmp_path):
    """Where a layer's tiles move different amounts, Deeploy writes the length as one entry of a per-tile array
    (`.size = <name>_size[TILING_I]`): those transfers went unread (CCT's GAP9 step: 325 of its 736), so a tile of
    2^17 B would have been built."""
    folder = tmp_path / "code"
    folder.mkdir()
    tiles = [65536, MCHAN_LIMIT, 4096]
    lines = ["#include \"DeeployMchan.h\"",
             f"static PI_L1 uint32_t conv_out_size[3] = {{{', '.join(map(str, tiles))}}};",
             f"static PI_L1 uint32_t conv_out_cmd[3] = {{{', '.join(str((0b1011 << 17) + t) for t in tiles)}}};",
             "static void _node_3_conv_closure(void *args) {",
             "{ mchan_transfer_t __mchan_tmp = { .cmd = conv_out_cmd[TILING_I], .size = conv_out_size[TILING_I], "
             ".loc = l1_out, .ext = l2_out }; mchan_transfer_push_1d(__mchan_tmp); }", "}"]
    (folder / "TrainingNetwork.c").write_text("\n".join(lines) + "\n")
    [transfer] = code_transfers(folder / "TrainingNetwork.c")
    assert (transfer.size, transfer.tiles, transfer.line) == (MCHAN_LIMIT, 3, 5)
    assert transfer.cmd == (0b1011 << 17) + MCHAN_LIMIT
    assert oversized_transfers(folder) == [transfer]
    assert "131,072 B (the largest of 3 tiles) between l1_out and l2_out in _node_3_conv_closure" in \
        oversized_reason(folder)
