"""Budget strings: a fraction of the baseline peak ("0.7"), an absolute size ("700KB", "1.2MB", "716800"), or a
memory level's total ("L3=2MB": static + arena of a tiled deployment)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from ckpt.errors import CkptError

# Embedded-memory convention: KB and MB are powers of two, as in "1.5 MB of L2".
UNITS = {"": 1, "B": 1, "KB": 1024, "KIB": 1024, "K": 1024, "MB": 1024**2, "MIB": 1024**2, "M": 1024**2}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")
_TOTAL = re.compile(r"^\s*(L[123])\s*=\s*(.+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Budget:
    """What the user asked for, as written: a fraction of the graph order's activation peak, or bytes.

    The one budget object from the command line to the solve: a fraction is resolved once, on the graph it is
    solved for (`resolved`), and then keeps both its fraction and its bytes; nothing resolves it again.
    """

    text: str
    fraction: float | None = None
    nbytes: int | None = None        # set when given in bytes, or once resolved

    def resolved(self, baseline_peak: int) -> Budget:
        """This budget on a graph whose graph-order activation peak is `baseline_peak` (bytes known)."""
        return self if self.nbytes is not None else replace(self, nbytes=int(self.fraction * baseline_peak))


@dataclass(frozen=True)
class LevelTotal:
    """What one memory level of a tiled deployment may hold in all: static constants + arena."""

    text: str
    level: str
    nbytes: int

    def as_dict(self) -> dict:
        return {"text": self.text, "level": self.level, "bytes": self.nbytes}


def _size(text: str, what: str, examples: str = "0.7, 700KB, 1.2MB or 716800") -> tuple[float, str]:
    match = _PATTERN.match(str(text))
    if not match or match.group(2).upper() not in UNITS:
        kind = "a fraction or a size" if examples.startswith("0.7") else "a size"
        raise CkptError(f"{what} '{text}' is not {kind}", f"write e.g. {examples}")
    number, unit = float(match.group(1)), match.group(2).upper()
    if not math.isfinite(number) or number <= 0:
        raise CkptError(f"{what} '{text}' must be above zero", f"write e.g. {examples}")
    return number, unit


def _whole_bytes(text: str, number: float, unit: str, what: str) -> int:
    nbytes = int(round(number * UNITS[unit]))
    if nbytes < 1:
        raise CkptError(f"{what} '{text}' is less than one byte", "write e.g. 700KB or 716800")
    return nbytes


def parse_budget(text: str) -> Budget:
    number, unit = _size(text, "budget")
    if unit == "" and number <= 1:
        return Budget(text=text, fraction=number)
    if unit == "" and number != int(number):
        raise CkptError(f"budget '{text}' is neither a fraction in (0, 1] nor a whole number of bytes",
                        "write e.g. 0.7 or 716800")
    return Budget(text=text, nbytes=_whole_bytes(text, number, unit, "budget"))


def parse_total(text: str) -> LevelTotal:
    """`L3=2MB`: a memory level and the bytes it may hold in all."""
    match = _TOTAL.match(str(text))
    if not match:
        raise CkptError(f"--budget-total '{text}' is not LEVEL=SIZE", "write e.g. L3=2MB or L2=1000000")
    number, unit = _size(match.group(2), "--budget-total size", f"{match.group(1).upper()}=2MB or "
                         f"{match.group(1).upper()}=1000000")
    if unit == "" and number <= 1:
        raise CkptError(f"--budget-total '{text}' needs a size, not a fraction", "write e.g. L3=2MB")
    nbytes = _whole_bytes(text, number, unit, "--budget-total")
    return LevelTotal(text=text, level=match.group(1).upper(), nbytes=nbytes)
