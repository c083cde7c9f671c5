"""Compare replayed outputs with goldens (tolerance) or with another schedule (bit identity).

The tolerance check mirrors the device harness's "Errors: N out of M" line, counted per tensor:
a tensor is an error if any element is beyond atol + rtol*|expected|, if it contains a NaN, or
if it is missing or has the wrong shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np


@dataclass(frozen=True)
class WorstElement:
    """The element with the largest absolute difference (NaN counts as infinite)."""

    tensor: str
    index: tuple[int, ...]
    actual: float
    expected: float
    abs_diff: float


@dataclass
class VerifyResult:
    errors: int
    compared: int
    worst: WorstElement | None = None
    failed: list[str] = field(default_factory=list)
    max_abs_diff: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.errors == 0

    def format(self) -> str:
        lines = [f"Errors: {self.errors} out of {self.compared}"]
        if self.worst is not None:
            w = self.worst
            lines.append(
                f"Worst: {w.tensor}[{', '.join(map(str, w.index))}] actual={w.actual!r} "
                f"expected={w.expected!r} abs diff={w.abs_diff:.3e}"
            )
        if self.failed:
            lines.append("Failed: " + ", ".join(self.failed))
        return "\n".join(lines)


def compare_outputs(
    actual: Mapping[str, np.ndarray],
    golden: Mapping[str, np.ndarray],
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> VerifyResult:
    """Check every golden tensor against `actual`; extra tensors in `actual` are ignored."""
    result = VerifyResult(errors=0, compared=len(golden))
    worst_key = -1.0
    for name, exp in golden.items():
        exp = np.asarray(exp)
        if name not in actual:
            result.errors += 1
            result.failed.append(f"{name} (missing)")
            continue
        act = np.asarray(actual[name])
        if act.shape != exp.shape:
            result.errors += 1
            result.failed.append(f"{name} (shape {act.shape} != {exp.shape})")
            continue
        a64 = act.astype(np.float64)
        e64 = exp.astype(np.float64)
        diff = np.abs(a64 - e64)
        nan = np.isnan(a64) | np.isnan(e64)
        diff = np.where(nan, np.inf, diff)
        bad = nan | (diff > atol + rtol * np.abs(np.where(nan, 0.0, e64)))
        if bad.any():
            result.errors += 1
            result.failed.append(name)
        if diff.size:
            flat = int(np.argmax(diff))
            result.max_abs_diff[name] = float(diff.flat[flat])
            if diff.flat[flat] > worst_key:
                worst_key = float(diff.flat[flat])
                idx = tuple(int(i) for i in np.unravel_index(flat, diff.shape))
                result.worst = WorstElement(name, idx, float(a64.flat[flat]), float(e64.flat[flat]),
                                            float(diff.flat[flat]))
    return result


def bit_identical(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> list[str]:
    """Names whose tensors differ in presence, dtype, shape or any byte (NaNs compare by bits)."""
    differ: list[str] = []
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            differ.append(name)
            continue
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            differ.append(name)
    return differ
