"""Each kernel told the size of the scratch its tile was given.

Deeploy's training branch hoists a kernel's scratch (a TransientBuffer: ConvGradX's im2col and transposed
weights, ConvGradW's im2col) with the size the whole layer would need and passes that size to the kernel
(`ctxtBufferSize`, `btBufferSize`), while its tiler gives the scratch only what one tile needs, in L1. A kernel
that trusts the size it is told writes past its buffer into the tiles beside it (ResNet-8's layer-3 ConvGradX is
told 147,456 B and given less; it overwrites its dY tile while other cores read it, and the weights' gradients come
out wrong, which the harness's losses do not show). ckpt passes each such kernel the size its scratch was given
in the level the kernels compute in; the kernels size their work by it (ConvGradX halves its block of output
channels until it fits).
"""
from __future__ import annotations

from Deeploy.DeeployTypes import TransientBuffer

SIZE_SUFFIX = "Size"


def tile_scratch_sizes(ctxt, tiling_solution, level: str) -> dict[str, int]:
    """Bytes each kernel scratch (TransientBuffer) is given in `level`, per the tiler's solution."""
    sizes: dict[str, int] = {}
    for pattern in tiling_solution or []:
        for node in pattern.nodeConstraints:
            for name, tensor in node.tensorMemoryConstraints.items():
                if level in tensor.memoryConstraints and isinstance(ctxt.lookup(name), TransientBuffer):
                    size = int(tensor.memoryConstraints[level].size)
                    sizes[name] = min(size, sizes.get(name, size))
    return sizes


def fit_scratch_sizes(deployer, sizes: dict[str, int]) -> list[str]:
    """Tell every kernel that takes its scratch's size (`<key>` and `<key>Size` in its operator representation)
    the size that scratch was given, where that is less; returns the scratches whose size changed."""
    changed = []
    for layer in deployer.layerBinding.values():
        representation = layer.mapper.parser.operatorRepresentation
        for key, value in list(representation.items()):
            told = representation.get(key + SIZE_SUFFIX)
            if isinstance(value, str) and value in sizes and isinstance(told, int) and sizes[value] < told:
                representation[key + SIZE_SUFFIX] = sizes[value]
                changed.append(value)
    return changed
