"""One copy of each constant: which of Deeploy's per-reader copies hold the same bytes, read from its context.

Deeploy's front end gives every reader of a constant its own copy (`NetworkDeployer._duplicateConstants`:
`<w>_DUPLICATE_FOR_<node>`), and each reader's shape inference then reshapes or broadcasts its copy. After the
front end, the copies of one constant (same name before `_DUPLICATE_FOR_`) fall into:

- merged: the same shape and bytes as the group's canonical copy: one buffer serves them all;
- views: the same bytes under another shape (a MatMul's [1, 128, 128] of a [128, 128] weight): the tiler needs
  their shape, so they stay separate buffers, but the code points them at the canonical bytes;
- repeats: the canonical bytes repeated k times (a Gemm's bias broadcast to its rows): a copy of their own, which
  an in-place update of the canonical must refresh (deeploy_bridge.in_place);
- kept: anything else (other bytes): a copy of its own, left as Deeploy made it.

The canonical copy of a group is the one an optimizer node (SGD) reads, so an in-place update writes the bytes
every other reader reads; otherwise the first by name. The plan is made from Deeploy's own buffers, the same way
when ckpt lowers a graph (to predict) and when it deploys one (to apply).
"""
from __future__ import annotations

import numpy as np
from Deeploy.DeeployTypes import ConstantBuffer

from ckpt.solver.graph.graph import OPTIMIZER_OPS

from .buffers import buffer_bytes
from .records import ConstantPlan

DUPLICATE_TAG = "_DUPLICATE_FOR_"


def base_name(name: str) -> str:
    return name.split(DUPLICATE_TAG)[0]


def _content(buf) -> np.ndarray:
    """The bytes the code holds for a constant (its values at its bound type), flattened."""
    ref = buf._type.referencedType
    if ref.typeName.startswith("float"):
        dtype = np.dtype(f"float{ref.typeWidth}")
    else:
        dtype = np.dtype(f"{'int' if ref.typeMin < 0 else 'uint'}{ref.typeWidth}")
    return np.asarray(buf.values).astype(dtype).reshape(-1)


def constant_plan(ctxt, graph) -> ConstantPlan:
    """The plan for the deployed constants of a Deeploy context after its front end (see the module doc)."""
    optimizer_inputs = {t.name for node in graph.nodes if node.op in OPTIMIZER_OPS for t in node.inputs}
    groups: dict[str, list] = {}
    for name, buf in sorted(ctxt.globalObjects.items()):
        if isinstance(buf, ConstantBuffer) and buf._deploy and getattr(buf, "_users", None) and hasattr(buf, "_type"):
            groups.setdefault(base_name(name), []).append(buf)
    merged, views, repeats, kept = {}, {}, {}, []
    before = after = 0
    for members in groups.values():
        canonical = next((b for b in members if b.name in optimizer_inputs), members[0])
        reference = _content(canonical)
        after += buffer_bytes(canonical)
        for buf in members:
            before += buffer_bytes(buf)
            if buf is canonical:
                continue
            content = _content(buf)
            if content.size == reference.size and content.tobytes() == reference.tobytes():
                (merged if tuple(buf.shape) == tuple(canonical.shape) else views)[buf.name] = canonical.name
                continue
            times, rest = divmod(content.size, max(reference.size, 1))
            if rest == 0 and times > 1 and np.tile(reference, times).tobytes() == content.tobytes():
                repeats[buf.name] = (canonical.name, times)
            else:
                kept.append(buf.name)
            after += buffer_bytes(buf)
    return ConstantPlan(merged, views, repeats, tuple(kept), before, after)
