"""io.json beside generated code: what the harness needs to feed and read the step, written by the bridge.

Deeploy names graph inputs input_<i> and outputs output_<i>, in the order of DeeployNetwork_inputs/_outputs.
An input the code keeps in L3 is loaded by InitNetwork from a file (`file`, e.g. "0.hex"); the others are
copied in by the harness, as deeploytest.c does.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ckpt.errors import CkptError
from ckpt.files import write_json

MANIFEST = "io.json"
OPTIMIZER_MANIFEST = "io-optimizer.json"     # a split step's optimizer network, beside its train network's io.json
C_TYPES = {"float32_t": np.float32, "float64_t": np.float64, "int8_t": np.int8, "uint8_t": np.uint8,
           "int16_t": np.int16, "uint16_t": np.uint16, "int32_t": np.int32, "uint32_t": np.uint32,
           "int64_t": np.int64, "uint64_t": np.uint64}


@dataclass(frozen=True)
class Port:
    """One graph input or output of the generated code."""

    name: str                  # Deeploy's: input_<i> / output_<i>
    ctype: str                 # the element type the code declares
    elements: int
    file: str | None = None    # the file InitNetwork loads it from (inputs kept in L3), else None

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(C_TYPES[self.ctype])

    @property
    def nbytes(self) -> int:
        return self.elements * self.dtype.itemsize


@dataclass(frozen=True)
class CodeManifest:
    flow: str                  # tiled | non-tiled
    cores: int                 # the cluster's core count the code was generated for (NUM_CORES)
    l3_bytes: int              # the L3 size of the memory hierarchy it was generated for
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    network: str = "Network"   # the code's files: <network>.c/.h (TrainingNetwork, OptimizerNetwork: a split step)

    @property
    def file_name(self) -> str:
        return OPTIMIZER_MANIFEST if self.network == "OptimizerNetwork" else MANIFEST

    def write(self, code_dir: Path) -> None:
        doc = asdict(self)
        if self.network == "Network":
            del doc["network"]          # a one-network step's manifest reads as it always has
        write_json(Path(code_dir) / self.file_name, doc)

    @classmethod
    def read(cls, code_dir: Path, name: str = MANIFEST) -> CodeManifest:
        path = Path(code_dir) / name
        try:
            doc = json.loads(path.read_text())
            return cls(doc["flow"], int(doc["cores"]), int(doc["l3_bytes"]),
                       tuple(Port(**p) for p in doc["inputs"]), tuple(Port(**p) for p in doc["outputs"]),
                       str(doc.get("network", "Network")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CkptError(f"'{path}' is not a code manifest ckpt wrote ({type(exc).__name__}: {exc})",
                            "generate the code again with `ckpt replay`") from None
