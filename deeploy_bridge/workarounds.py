"""Defects of the installed Deeploy that ckpt works around, each found in the installed Deeploy itself.

Deeploy's training branch (a0e1e531) computes two of CCT's gradients and the tiled convolutions' weight gradients
wrong, and ckpt does not edit Deeploy's
files; it works around each where the installed Deeploy has it:

- ``softmax-grad-axis``: the PULPOpen tile constraint of SoftmaxGrad hands the kernel the tile's last dimension
  as the softmax length, whatever the node's `axis`: CCT's sequence pool ([1,64,1], axis 1) gets length 1 and
  loses the cross terms. ckpt hands such a SoftmaxGrad its inputs reshaped to their 2-D form, the axis (and all
  after it) last (deeploy_bridge.softmax_axis).
- ``layernorm-grad-zeroing``: the PULPOpen template of LayerNormalizationGrad zeroes the weight and bias gradients
  behind a C `static` flag, once per process; they are transients of a shared arena, so from the second mini-batch
  on they accumulate onto whatever the arena holds. ckpt binds its own template, which zeroes them at the first
  tile of every call (deeploy_bridge.layernorm_grad).
- ``conv-grad-w-zeroing``: the PULPOpen templates of ConvGradW zero the weight gradient when `*tileIdxPtr == 0`,
  which counts the calls of the L1 tile loop: right under home L3 (one tile per call), but a layer in L2 (home L2
  or split) runs all its H/W tiles in one call and is zeroed at each, keeping only the last tile's share. ckpt
  binds the installed template with that guard replaced by a per-tile flag: zeroed at the first H/W tile of the
  layer (deeploy_bridge.conv_grad_w).

Each is on where the defect is found and can be turned off with $CKPT_DEEPLOY_WORKAROUNDS (`off`, or the names to
keep, comma-separated: `softmax-grad-axis`), to see what Deeploy computes without it.
"""
from __future__ import annotations

import importlib
import os
from functools import lru_cache

from ckpt.errors import CkptError

from .defects import Defect, Found
from .softmax_axis import SUFFIX

__all__ = ["ENV", "Defect", "Found", "defects_found", "wanted", "active", "is_active", "key", "applied"]

ENV = "CKPT_DEEPLOY_WORKAROUNDS"


@lru_cache(maxsize=1)
def defects_found() -> tuple[Found, ...]:
    """The defects of the installed Deeploy that ckpt knows a workaround for."""
    try:        # Deeploy is loaded on first use, as the package's names are (deeploy_bridge.__init__)
        probes = importlib.import_module(f"{__package__}.defect_probes").PROBES
    except ImportError:                  # a Deeploy without those files has none of these defects
        return ()
    found = []
    for probe in probes:
        try:
            hit = probe()
        except Exception:      # a Deeploy without that file, or whose code takes no such probe: nothing to work around
            hit = None
        if hit is not None:
            found.append(hit)
    return tuple(found)


def wanted() -> frozenset[Defect] | None:
    """The workarounds $CKPT_DEEPLOY_WORKAROUNDS keeps (None: every one, its default)."""
    value = os.environ.get(ENV, "").strip()
    if value in ("", "on", "all"):
        return None
    if value in ("off", "none"):
        return frozenset()
    names = {v.strip() for v in value.split(",") if v.strip()}
    unknown = sorted(names - {d.value for d in Defect})
    if unknown:
        raise CkptError(f"${ENV} names no workaround {', '.join(map(repr, unknown))}",
                        f"set it to off, on, or a comma-separated list of {', '.join(d.value for d in Defect)}")
    return frozenset(Defect(n) for n in names)


def active() -> tuple[Found, ...]:
    """The workarounds in force: the defects found in the installed Deeploy that $CKPT_DEEPLOY_WORKAROUNDS keeps."""
    keep = wanted()
    return tuple(f for f in defects_found() if keep is None or f.defect in keep)


def is_active(defect: Defect) -> bool:
    return any(f.defect is defect for f in active())


def key() -> list[str]:
    """What cache keys of Deeploy's output record of the workarounds: their names."""
    return sorted(f.defect.value for f in active())


def applied(model) -> list[tuple[Found, list[str]]]:
    """The workarounds in force that touch `model` (a lowered graph, onnx), each with the nodes it touches."""
    nodes = list(getattr(getattr(model, "graph", None), "node", []))
    touched = {Defect.SOFTMAX_GRAD_AXIS: [n.name for n in nodes
                                          if n.op_type == "SoftmaxGrad" and any(SUFFIX in i for i in n.input)],
               Defect.LAYERNORM_GRAD_ZEROING: [n.name for n in nodes if n.op_type == "LayerNormalizationGrad"],
               Defect.CONV_GRAD_W_ZEROING: [n.name for n in nodes if n.op_type == "ConvGradW"]}
    return [(found, touched[found.defect]) for found in active() if touched[found.defect]]
