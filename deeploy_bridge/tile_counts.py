"""How many tiles each layer of Deeploy's generated tiled code moves into a memory level, how many transfers it
issues per tile for each tensor it keeps one level further out, and the tables the tiler declares for it, read from
the code itself.

Deeploy's tiling code generation declares, per layer and per level it tiles into, a table of cumulative tile
offsets, `..._TILING_CODEGEN_<level>_<layer>_numTiles[n] = {0, ..., total}`: its last entry is how many tiles the
layer moves into that level. A tensor the layer keeps one level further out is moved in (or out) by the layer's
closure of that outer level, `_<layer>_closure_<outer>`, once per tile, as one 2-D copy (`pi_cl_ram_copy_2d`, each
waited on) or, where the tile's rows are not contiguous there, a loop of copies, one per row (`for (... i_0 < N
...)`): each copy is a set-up and a wait, so a tensor's transfers per tile are what it costs beyond its bytes. The
copy names the tensor by its pointer in the level, `DeeployNetwork_TILING_CODEGEN_<level>_<layer>_<tensor>_ref`,
and the tiler's role for it (`&<role>_ExternalToLocal`). A 2-D copy moves `size` bytes in lines of `length` bytes
(its arguments, literal or per tile from the tiler's tables): off chip each line is a burst of its own, so a tile
whose rows are short moves its bytes in many lines. The per-tile tables the tiler keeps in the level for a layer
(`PI_<level> <type> DeeployNetwork_TILING_CODEGEN_<level>_<layer>_<role>_<field>[n]`, and the layer's `numTiles`) are
static data of the step there, as many as the layer has tiles and tensors it moves.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_TABLE = re.compile(r"_TILING_CODEGEN_(?P<level>L\d+)_(?P<layer>\w+?)_numTiles\[\d+\]\s*=\s*\{(?P<offsets>[0-9,\s]*)\}")
_CLOSURE = re.compile(r"static void _(?P<layer>\w+)_closure_(?P<outer>L\d+)\(")
_ARG = r"\s*(?P<{}>\w+(?:\[TILING_I\])?)\s*"
_TOKEN = re.compile(r"for\s*\(\s*uint32_t\s+i_\d+\s*=\s*0\s*;\s*i_\d+\s*<\s*(?P<rows>\d+)\s*;[^)]*\)\s*\{"
                    r"|(?P<open>\{)|(?P<close>\})"
                    r"|void\s*\*\s*const\s+external_buffer_offsetted\s*=\s*\(void\s*\*\)\s*\(\(char\s*\*\)\s*"
                    r"(?P<offsetted>\w+)"
                    r"|pi_cl_ram_copy_2d\(\s*[^,]+,\s*(?P<external>\w+)\s*,\s*\w+\s*,"
                    + _ARG.format("size") + "," + _ARG.format("stride") + "," + _ARG.format("length") +
                    r",[^;]*?&(?P<role>\w+?)_(?:ExternalToLocal|LocalToExternal)\s*\)")
_VALUES = re.compile(r"DeeployNetwork_TILING_CODEGEN_(?P<name>L\d+_\w+)\[\d+\]\s*=\s*\{(?P<values>[-0-9,\s]*)\}")
_DECLARED = re.compile(r"PI_(?P<level>L\d+)\s+(?P<type>u?int(?:8|16|32|64)_t|float32_t|float64_t)\s+"
                       r"DeeployNetwork_TILING_CODEGEN_(?P=level)_(?P<name>\w+)\[(?P<count>\d+)\]")
_BRACE = re.compile(r"[{}]")
_FIELDS = ("transfer_size", "length", "stride_0", "stride_1", "relativeOffset", "numTiles", "tileIdxPtr")
_WIDTH = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4, "int64_t": 8,
          "uint64_t": 8, "float32_t": 4, "float64_t": 8}
LAYER_TABLE = ""     # the key of a layer's own tables (its tile offsets) in `LayerCode.tables`


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
    for path in _c_files(code_dir):
        for layer, count in tiles_into(path.read_text(errors="replace"), level).items():
            found[layer] = max(found.get(layer, 0), count)
    return found


@dataclass(frozen=True)
class LayerCode:
    """What one layer's code does and declares in a level it tiles into from the level outside it."""

    transfers: dict[str, int] = field(default_factory=dict)   # tensor (Deeploy's name) -> copies per tile
    tables: dict[str, int] = field(default_factory=dict)      # LAYER_TABLE or tensor -> bytes of its tables there
    lines: dict[str, int] = field(default_factory=dict)       # tensor -> the lines its copies move, over all tiles


def layer_code(text: str, level: str, outer: str) -> dict[str, LayerCode]:
    """Each layer of `text` that tiles into `level` from `outer` -> its transfers per tile and its tables in
    `level` (each tensor's under its name, the layer's own under LAYER_TABLE)."""
    transfers: dict[str, dict[str, int]] = {}
    lines: dict[str, dict[str, int]] = {}
    roles: dict[str, dict[str, str]] = {}
    values = {m["name"]: [int(v) for v in m["values"].replace(" ", "").split(",") if v] for m in _VALUES.finditer(text)}
    tiles = tiles_into(text, level)
    for match in _CLOSURE.finditer(text):
        if match["outer"] == outer:
            layer = match["layer"]
            prefix = f"DeeployNetwork_TILING_CODEGEN_{level}_{layer}_"
            copies = _copies(_body(text, match.start()), prefix, values, tiles.get(layer, 1))
            transfers[layer], lines[layer], roles[layer] = copies
    tables = _tables(text, level, roles)
    return {layer: LayerCode(transfers.get(layer, {}), tables.get(layer, {}), lines.get(layer, {}))
            for layer in sorted({*transfers, *tables})}


def code_layers(code_dir: Path, level: str, outer: str) -> dict[str, LayerCode]:
    """`layer_code` over every C file of a generated code folder."""
    found: dict[str, LayerCode] = {}
    for path in _c_files(code_dir):
        found.update(layer_code(path.read_text(errors="replace"), level, outer))
    return found


def _c_files(code_dir: Path) -> list[Path]:
    return sorted(Path(code_dir).glob("*.c"))


def _body(text: str, start: int) -> str:
    """The function of `text` whose definition starts at `start`, up to its closing brace."""
    depth = 0
    for brace in _BRACE.finditer(text, text.index("{", start)):
        depth += 1 if brace[0] == "{" else -1
        if depth == 0:
            return text[start:brace.end()]
    return text[start:]


def _copies(body: str, prefix: str, values: dict[str, list[int]], tiles: int
            ) -> tuple[dict[str, int], dict[str, int], dict[str, str]]:
    """The copies per tile of a closure's body per tensor (each times the rows of the loops around it), the lines
    they move over its `tiles` tiles (a copy's bytes over its line length, each per tile where the tiler's tables in
    `values` give them per tile), and each copy's role -> its tensor, the tensor named by the part of its pointer
    after `prefix` (less `_ref`)."""
    stack: list[int] = []
    offsetted = ""
    transfers: dict[str, int] = {}
    lines: dict[str, int] = {}
    roles: dict[str, str] = {}
    for token in _TOKEN.finditer(body):
        if token["rows"] is not None:
            stack.append(int(token["rows"]))
        elif token["open"] is not None:
            stack.append(1)
        elif token["close"] is not None:
            if stack:
                stack.pop()
        elif token["offsetted"] is not None:
            offsetted = token["offsetted"]
        else:
            pointer = offsetted if token["external"] == "external_buffer_offsetted" else token["external"]
            if not pointer.startswith(prefix):
                continue
            tensor = pointer[len(prefix):].removesuffix("_ref")
            times = 1
            for rows in stack:
                times *= rows
            transfers[tensor] = transfers.get(tensor, 0) + times
            sizes = _per_tile(token["size"], values, tiles)
            lengths = _per_tile(token["length"], values, tiles)
            moved = sum(-(-size // max(1, length)) for size, length in zip(sizes, lengths, strict=True))
            lines[tensor] = lines.get(tensor, 0) + times * moved
            roles[token["role"]] = tensor
    return transfers, lines, roles


def _per_tile(argument: str, values: dict[str, list[int]], tiles: int) -> list[int]:
    """A copy's argument at each of the layer's `tiles` tiles: a literal at every tile, or a table of the tiler
    (`values`: its tables by name less their prefix) indexed by the tile (1 where it is neither)."""
    if argument.isdigit():
        return [int(argument)] * tiles
    name = argument.removesuffix("[TILING_I]").removeprefix("DeeployNetwork_TILING_CODEGEN_")
    found = values.get(name)
    return list(found[:tiles]) + [1] * (tiles - len(found)) if found else [1] * tiles


def _tables(text: str, level: str, roles: dict[str, dict[str, str]]) -> dict[str, dict[str, int]]:
    """The bytes of the tables `text` declares in `level` for each layer that tiles into it: the layer's own
    (LAYER_TABLE) and each tensor's, by the role its copies give it (`roles`: layer -> role -> tensor; a role no
    copy names counts as the layer's own)."""
    layers = sorted(tiles_into(text, level), key=len, reverse=True)
    found: dict[str, dict[str, int]] = {}
    for match in _DECLARED.finditer(text):
        if match["level"] != level:
            continue
        name = match["name"]
        layer = next((lay for lay in layers if name.startswith(f"{lay}_")), None)
        if layer is None:
            continue
        rest = name[len(layer) + 1:]
        role = next((rest[:-len(f) - 1] for f in _FIELDS if rest.endswith(f"_{f}")), "")
        key = roles.get(layer, {}).get(role, LAYER_TABLE)
        per_layer = found.setdefault(layer, {})
        per_layer[key] = per_layer.get(key, 0) + _WIDTH[match["type"]] * int(match["count"])
    return found
