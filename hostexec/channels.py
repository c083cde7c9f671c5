"""Deeploy's channels-last annotation, for running its lowered graphs on the host.

Deeploy's Siracusa lowering keeps the ONNX op types but marks Conv/MaxPool nodes `channels_first=0`: their
activations are NHWC and a Conv weight is [O, kH, kW, I] (it inserts the Transposes around them itself).
The reference kernels only know NCHW, so a marked node runs its NCHW kernel between transposes; the
numbers are the same ones the NCHW graph computes, only the layout of the tensors changes.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Kernel = Callable[..., Sequence[np.ndarray]]

# Deeploy annotations that change no numbers (the template it picked, the layout flag handled below).
DEEPLOY_ANNOTATIONS = frozenset({"mapping", "channels_first"})

# op type -> input positions in channels-last layout (activations and, for Conv, the weight).
SPATIAL_INPUTS = {"Conv": (0, 1), "MaxPool": (0,), "AveragePool": (0,), "GlobalAveragePool": (0,),
                  "GlobalMaxPool": (0,)}


def is_channels_last(op_type: str, attrs: dict) -> bool:
    """True when Deeploy marked this node NHWC (an unmarked node is ONNX's NCHW)."""
    return op_type in SPATIAL_INPUTS and int(attrs.get("channels_first", 1)) == 0


def _to_first(x: np.ndarray) -> np.ndarray:
    return np.transpose(x, (0, x.ndim - 1, *range(1, x.ndim - 1)))


def _to_last(x: np.ndarray) -> np.ndarray:
    return np.transpose(x, (0, *range(2, x.ndim), 1))


def channels_last(op_type: str, kernel: Kernel) -> Kernel:
    """Wrap an NCHW kernel so it reads and writes Deeploy's NHWC tensors."""
    positions = SPATIAL_INPUTS[op_type]

    def run(*args):
        moved = [_to_first(np.asarray(a)) if i in positions and a is not None else a for i, a in enumerate(args)]
        return tuple(_to_last(np.asarray(y)) if np.ndim(y) >= 3 else y for y in kernel(*moved))

    return run
