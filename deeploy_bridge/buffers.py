"""The bytes Deeploy gives a buffer: its element count times its element type's width (no alignment in 0.2.1), the
one formula every figure ckpt reads from Deeploy's context uses."""
from __future__ import annotations

import numpy as np


def buffer_bytes(buf) -> int:
    """Bytes of a Deeploy buffer (VariableBuffer, ConstantBuffer) of its declared shape."""
    return elements_bytes(int(np.prod(buf.shape)), buf)


def elements_bytes(elements: int, buf) -> int:
    """Bytes of `elements` elements of the buffer's type (a tile of it, say)."""
    return elements * buf._type.referencedType.typeWidth // 8
