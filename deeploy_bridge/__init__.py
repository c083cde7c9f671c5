"""ckpt's bridge to Deeploy: the only package in ckpt that imports Deeploy.

- ``lower``: Deeploy's lowered graph (ONNX, full value_info), aliases, name maps; cached on disk.
- ``make_scheduler``: node order (names or callable) -> the scheduler callable deployers take.
- ``deeploy_memory`` / ``generate_code`` / ``deploy``: Deeploy's memory figures for an order, and
  its generated C code, from one Deeploy run.
- ``arena``: the arena ckpt lays out for a memory level, in Deeploy's tiler and as a prediction.
- ``code_memory``: what the generated non-tiled code holds, read from the code itself.
- ``setup``: the targets and the Deeploy configuration (no Deeploy import).

Importing Deeploy takes a second, so the names below are loaded on first use (PEP 562): a command that never
touches Deeploy (`ckpt solve --target none`) never pays for it.
"""
from __future__ import annotations

import importlib

_WHERE = {
    "BridgeError": "errors", "lower": "lowering", "deeploy_memory": "memory", "deploy": "memory",
    "generate_code": "memory", "remove_stale_scratch": "scratch", "run_count": "deeploy_run",
    "LoweredGraph": "records", "MemoryFigures": "records", "StageTimings": "records", "make_scheduler": "scheduler",
    "is_lowered": "sources", "deeploy_version": "versions", "deeploy_label": "versions",
    "deeploy_flavour": "versions", "home_blocks": "arena", "lay_out_home": "arena", "deeploy_tensor_name": "arena",
    "ALIGNMENT": "arena", "arena_overflow": "arena",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
