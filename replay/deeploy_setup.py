"""The Deeploy configuration ckpt measures in: one record, so code generation and the gvsoc harness agree."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeeploySetup:
    """Memory levels, cores and allocator (Deeploy's CI values for the CCT training graphs)."""

    l1: int = 128_000
    l2: int = 1_024_000
    default_mem_level: str = "L3"
    n_cores: int = 8
    allocator: str = "TetrisRandom"
