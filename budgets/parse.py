"""Budget strings: a fraction of the baseline peak ("0.7") or an absolute size ("700KB", "1.2MB", "716800")."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ckpt.errors import CkptError

# Embedded-memory convention: KB and MB are powers of two, as in "1.5 MB of L2".
UNITS = {"": 1, "B": 1, "KB": 1024, "KIB": 1024, "K": 1024, "MB": 1024**2, "MIB": 1024**2, "M": 1024**2}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")


@dataclass(frozen=True)
class Budget:
    """Exactly one of fraction (of the baseline activation peak) or nbytes is set."""

    text: str
    fraction: float | None = None
    nbytes: int | None = None

    def resolve(self, baseline_peak: int) -> int:
        """Bytes this budget allows on a graph whose baseline activation peak is `baseline_peak`."""
        return self.nbytes if self.nbytes is not None else int(self.fraction * baseline_peak)

    def as_dict(self, baseline_peak: int) -> dict:
        return {"text": self.text, "fraction": self.fraction, "bytes": self.resolve(baseline_peak)}


def parse_budget(text: str) -> Budget:
    match = _PATTERN.match(str(text))
    if not match or match.group(2).upper() not in UNITS:
        raise CkptError(f"budget '{text}' is not a fraction or a size",
                        "write e.g. 0.7, 700KB, 1.2MB or 716800")
    number, unit = float(match.group(1)), match.group(2).upper()
    if number <= 0:
        raise CkptError(f"budget '{text}' must be above zero", "write e.g. 0.7 or 700KB")
    if unit == "" and number <= 1:
        return Budget(text=text, fraction=number)
    if unit == "" and number != int(number):
        raise CkptError(f"budget '{text}' is neither a fraction in (0, 1] nor a whole number of bytes",
                        "write e.g. 0.7 or 716800")
    return Budget(text=text, nbytes=int(round(number * UNITS[unit])))
