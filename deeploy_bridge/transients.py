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


def constant_bytes(ctxt) -> int:
    """Bytes of the constants Deeploy deploys (weights and other initializers), at their bound types: the static
    part of the home level in the tiled flow (`MemoryScheduler.getConstantTensorOffset`)."""
    return sum(buffer_bytes(buf)
               for buf in ctxt.globalObjects.values()
               if isinstance(buf, ConstantBuffer) and "MEMORYARENA" not in buf.name and hasattr(buf, "_type"))
