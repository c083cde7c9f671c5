"""The data Deeploy's Siracusa harness (DeeployTest/Platforms/Siracusa/src/deeploytest.c) is compiled with.

deeploytest.c includes testinputs.h (`testInputVector[i]`: the bytes of graph input i, copied in by the harness
when the code keeps that input in L1 or L2) and testoutputs.h (`testOutputVector[o]`: the expected bytes of
output o, `OUTPUTTYPE` their element type and `ISOUTPUTFLOAT` whether the comparison is the float rule). Deeploy's
test flow writes the values as C literals; ckpt writes each array to a file and pulls it in with the assembler's
.incbin, which gives the same bytes in the same place (initialised L2 data) and compiles in no time.
Inputs the code keeps in L3 are not copied by the harness: InitNetwork loads them from their readfs file on the
hyperflash, like the constants (`hex/`), and those files are written here too.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ckpt.coderun.manifest import CodeManifest
from ckpt.errors import CkptError
from ckpt.files import atomic_write

FLOAT_TYPES = ("float32_t",)


@dataclass(frozen=True)
class HarnessData:
    folder: Path                     # testinputs.h, testoutputs.h and the arrays they pull in
    flash_files: tuple[Path, ...]    # every file InitNetwork loads (constants and L3-resident inputs)
    nbytes: int = 0                  # the arrays the harness is compiled with (in L2)


def _incbin(symbol: str, path: Path) -> str:
    """C that defines `symbol` as the bytes of `path` in initialised data, 4-byte aligned."""
    if '"' in str(path) or "\\" in str(path):
        raise CkptError(f"the folder '{path.parent}' has a quote or backslash in its path",
                        "build in a folder whose path has neither")
    return (f'__asm__(".section .data.{symbol},\\"aw\\",@progbits\\n.balign 4\\n.global {symbol}\\n{symbol}:\\n'
            f'.incbin \\"{path}\\"\\n.previous");\nextern char {symbol}[];\n')


def _vector(name: str, symbols: list[str]) -> str:
    return f"void *{name}[{max(len(symbols), 1)}] = {{{', '.join(f'(void *){s}' for s in symbols) or '0'}}};\n"


def write_harness_data(manifest: CodeManifest, code_dir: Path, feeds: Mapping[str, np.ndarray],
                       expected: Mapping[str, np.ndarray], out: Path) -> HarnessData:
    """testinputs.h/testoutputs.h and the flash files for the step on `feeds` against `expected` (by Deeploy's
    input_<i>/output_<i> names)."""
    types = {port.ctype for port in manifest.outputs}
    if len(types) != 1:
        raise ValueError(f"the harness compares all outputs as one type; this code's are {sorted(types)}")
    out.mkdir(parents=True, exist_ok=True)
    flash = sorted((Path(code_dir) / "hex").glob("*.hex"))
    inputs = []
    for index, port in enumerate(manifest.inputs):
        data = np.ascontiguousarray(np.asarray(feeds[port.name]).astype(port.dtype)).reshape(-1)
        if data.size != port.elements:
            raise ValueError(f"input {port.name} has {data.size} elements; the code's has {port.elements}")
        path = out / f"input_{index}.bin"
        atomic_write(path, data.tobytes())
        inputs.append(path)
        if port.file:
            atomic_write(out / port.file, data.tobytes())
            flash.append(out / port.file)
    outputs = []
    for index, port in enumerate(manifest.outputs):
        data = np.ascontiguousarray(np.asarray(expected[port.name]).astype(port.dtype)).reshape(-1)
        if data.size != port.elements:
            raise ValueError(f"expected {port.name} has {data.size} elements; the code's has {port.elements}")
        path = out / f"expected_{index}.bin"
        atomic_write(path, data.tobytes())
        outputs.append(path)
    ins = [f"ckpt_input_{i}" for i in range(len(inputs))]
    outs = [f"ckpt_expected_{o}" for o in range(len(outputs))]
    atomic_write((out / "testinputs.h"),
        "/* written by ckpt: the step's inputs, for deeploytest.c */\n#include <stdint.h>\n"
        + "".join(_incbin(s, p) for s, p in zip(ins, inputs)) + _vector("testInputVector", ins))
    ctype = types.pop()
    atomic_write((out / "testoutputs.h"),
        "/* written by ckpt: the expected outputs, for deeploytest.c */\n#include <stdint.h>\n"
        f"#define OUTPUTTYPE {ctype}\n#define ISOUTPUTFLOAT {1 if ctype in FLOAT_TYPES else 0}\n"
        + "".join(_incbin(s, p) for s, p in zip(outs, outputs)) + _vector("testOutputVector", outs))
    return HarnessData(out, tuple(flash), sum(p.stat().st_size for p in inputs + outputs))
