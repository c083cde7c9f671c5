"""ckpt's bridge to Deeploy: the only package in ckpt that imports Deeploy.

- ``lower``: Deeploy's lowered graph (ONNX, full value_info), aliases, name maps; cached on disk.
- ``make_scheduler``: node order (names or callable) -> the scheduler callable deployers take.
- ``deeploy_memory`` / ``generate_code`` / ``deploy``: Deeploy's memory figures for an order, and
  its generated C code, from one Deeploy run.
"""
from .errors import BridgeError
from .lowering import lower
from .memory import deeploy_memory, deploy, generate_code
from .pipeline import run_count
from .records import LoweredGraph, MemoryFigures, StageTimings
from .scheduler import make_scheduler
from .versions import deeploy_version

__all__ = [
    "BridgeError",
    "LoweredGraph",
    "MemoryFigures",
    "StageTimings",
    "deeploy_memory",
    "deeploy_version",
    "deploy",
    "generate_code",
    "lower",
    "make_scheduler",
    "run_count",
]
