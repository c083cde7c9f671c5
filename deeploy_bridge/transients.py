"""Per-node scratch memory Deeploy allocates for one layer only (``TransientBuffer``s), read from its context.

Templates hoist them during binding (``NodeTemplate.hoistTransientBuffers``), e.g. the PULP float Conv's
im2col buffer (``Targets/PULPOpen/Templates/FloatConvTemplate``: bytes = weight width * n_cores * ch_in *
kx * ky). Non-tiled, ``MemoryManagementGeneration`` mallocs them with the layer's outputs and frees them
right after the layer, so they add to that layer's level only. (Tiled, they live in L1 tiles instead.)
"""
from __future__ import annotations

from Deeploy.DeeployTypes import ConstantBuffer, TransientBuffer

from .buffers import buffer_bytes


def collect_transients(ctxt) -> dict[str, int]:
    """Node name -> bytes of the transient buffers its layer allocates (nodes without any are left out)."""
    found: dict[str, int] = {}
    for buf in ctxt.localObjects.values():
        if isinstance(buf, TransientBuffer):
            size = buf.sizeInBytes      # a method in Deeploy 0.2.1, a property since Deeploy's #160 (devel)
            for node in buf._users:
                found[node] = found.get(node, 0) + int(size() if callable(size) else size)
    return dict(sorted(found.items()))


def _constants(ctxt) -> dict:
    return {name: buf for name, buf in sorted(ctxt.globalObjects.items())
            if isinstance(buf, ConstantBuffer) and "MEMORYARENA" not in buf.name and hasattr(buf, "_type")}


def declared_constants(ctxt) -> dict[str, int]:
    """Each constant of Deeploy's context (Deeploy's name) -> its bytes as Deeploy sizes it and the generated code
    declares it: its buffer's shape (a reader's copy broadcast to the reader's shape by the front end) at its bound
    type, whatever the dtype its values are held in (Deeploy's lowering leaves some as float64 and the code declares
    them `float32_t`). Deeploy's count holds them all; the code declares those `undeclared_constants` leaves out."""
    return {name: buffer_bytes(buf) for name, buf in _constants(ctxt).items()}


def undeclared_constants(ctxt) -> list[str]:
    """The constants Deeploy counts but the code never declares (`_deploy` off: a Reshape's shape, say)."""
    return [name for name, buf in _constants(ctxt).items() if not buf._deploy]


def constant_bytes(ctxt) -> int:
    """Bytes of the constants Deeploy counts as deployed, at their bound types: the static part of the home level in
    the tiled flow (`MemoryScheduler.getConstantTensorOffset`)."""
    return sum(declared_constants(ctxt).values())
