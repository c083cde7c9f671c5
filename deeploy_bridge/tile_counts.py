"""How many tiles each layer of Deeploy's generated tiled code moves into a memory level, read from the code itself.

Deeploy's tiling code generation declares, per layer and per level it tiles into, a table of cumulative tile
offsets, `..._TILING_CODEGEN_<level>_<layer>_numTiles[n] = {0, ..., total}`: its last entry is how many tiles the
layer moves into that level. A tensor the layer keeps one level further out is transferred once per such tile (a
set-up and a wait each time), so the count is what a tensor brought into the level saves per transfer, times.
"""
from __future__ import annotations

import re
from pathlib import Path

_TABLE = re.compile(r"_TILING_CODEGEN_(?P<level>L\d+)_(?P<layer>\w+?)_numTiles\[\d+\]\s*=\s*\{(?P<offsets>[0-9,\s]*)\}")


def tiles_into(text: str, level: str) -> dict[str, int]:
    """Each layer of the generated code `text` that tiles into `level` -> its number of tiles there."""
    found = {}
    for match in _TABLE.finditer(text):
        offsets = [int(v) for v in match["offsets"].replace(" ", "").split(",") if v]
        if match["level"] == level and offsets:
            found[match["layer"]] = max(found.get(match["layer"], 0), offsets[-1])
    return found


def code_tiles_into(code_dir: Path, level: str) -> dict[str, int]:
    """`tiles_into` over every C file of a generated code folder."""
    found: dict[str, int] = {}
    for path in sorted(Path(code_dir).glob("*.c")):
        for layer, count in tiles_into(path.read_text(errors="replace"), level).items():
            found[layer] = max(found.get(layer, 0), count)
    return found
