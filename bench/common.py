"""What the benchmarks share. Not a bench itself: the scripts import it from beside them."""
from __future__ import annotations

import os

from ckpt.paths import shared_models


def default_model() -> str:
    """The model a bench measures unless told: $CKPT_BENCH_MODEL, else the shared CCT2_FT2."""
    return os.environ.get("CKPT_BENCH_MODEL", str(shared_models() / "cct2_ft2"))
