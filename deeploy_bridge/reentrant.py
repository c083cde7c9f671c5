"""A generated step that can run again: the second RunNetwork computes what the first did, on its own inputs.

Deeploy 0.2.1's tiled code keeps a per-tile value (a tile's size, say) in element 0 of that value's own table:
TilingVariableReplacement hoists the table (`static PI_L1 uint16_t X[n] = {...}`) and a reference into it at
offset 0 (`X_ref = X + 0`), and before each tile TilingVariableReplacementUpdate writes `*X_ref = X[TILING_I];`.
After one step every such table starts with its last tile's value, so a second step would run its first tile
with the last tile's size (measured: a second step of CCT2_FT2's code then differs by up to 4 from what it must
compute). Only element 0 changes, and every later tile reads its own element before anything writes it.

ckpt's code assembly (deeploy_bridge.memory) therefore copies element 0 of each such table at the end of
InitNetwork and puts it back at the start of RunNetwork. The first step runs unchanged (it restores the values it
starts with); every later step starts where the first did.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Deeploy's TilingVariableReplacementUpdate._updateReferenceTemplate, as it appears in the generated body
_UPDATE = re.compile(r"^\s*\*(\w+) = (\w+)\[TILING_I\];", re.MULTILINE)


@dataclass(frozen=True)
class RestoreCode:
    """The three pieces of C that make RunNetwork re-runnable (empty strings when nothing needs them)."""

    declarations: str     # file scope, after the tables are declared
    save: str             # end of InitNetwork
    restore: str          # start of RunNetwork


def restore_code(body: str) -> RestoreCode:
    """The C that restores element 0 of every table a tiling loop writes through its reference (see the doc)."""
    tables = sorted({table for _, table in _UPDATE.findall(body)})
    if not tables:
        return RestoreCode("", "", "")
    head = ("// ckpt: element 0 of these tiling tables is overwritten by every step's tiling loop; kept here so "
            "each step starts as the first did")
    declarations = [head] + [f"static __typeof__({t}[0]) ckpt_first_{k};" for k, t in enumerate(tables)]
    save = [f"ckpt_first_{k} = {t}[0];" for k, t in enumerate(tables)]
    restore = [f"{t}[0] = ckpt_first_{k};" for k, t in enumerate(tables)]
    return RestoreCode("\n".join(declarations) + "\n", "\n".join(save) + "\n", "\n".join(restore) + "\n")
