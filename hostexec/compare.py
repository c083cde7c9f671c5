"""Compare outputs with goldens as Deeploy's device harness does, or with another run bit for bit.

The harness (DeeployTest/Platforms/{Siracusa,PULPOpen,GAP9}/src/deeploytest.c) walks every float output
*element*: `diff = expected - actual` in float32, an error when `diff < -1e-4 || diff > 1e-4 || isnan(diff)`,
and prints `Errors: N out of M` with M the number of output elements. `compare_outputs` counts the same way, so
the host's line is the line the device would print for the same numbers. Integer outputs are compared exactly,
as the harness does. A golden tensor the run did not produce, or produced with another shape, counts all of its
elements as errors (the device cannot show that case; here it means a wiring fault).

Deeploy's training branch checks its split step with its own harness
(DeeployTest/Platforms/Siracusa/src/deeploytraintest.c): the losses and the final weights, an error where
|computed - reference| > TRAINING_TOLERANCE_ABS, which its runner sets to 1e-3 unless told otherwise
(testUtils/trainingUtils.py, `--tolerance`). Positional step data is compared by that rule.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

HARNESS_TOLERANCE = 1e-4            # absolute, per element (deeploytest.c)
TRAINING_HARNESS_TOLERANCE = 1e-3   # absolute, per element (the training branch's deeploytraintest.c default)


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
    """`errors` out of `compared` output elements; `failed` names the tensors holding at least one error."""

    errors: int
    compared: int
    tensors: int = 0
    worst: WorstElement | None = None
    failed: list[str] = field(default_factory=list)
    errors_by_tensor: dict[str, int] = field(default_factory=dict)   # tensors with errors only
    max_abs_diff: dict[str, float] = field(default_factory=dict)
    nan_inputs: list[str] = field(default_factory=list)
    inf_inputs: list[str] = field(default_factory=list)       # inputs holding an infinity (as meaningless)
    tolerance: float = HARNESS_TOLERANCE      # the largest |diff| that is not an error

    @property
    def ok(self) -> bool:
        return self.errors == 0

    @property
    def line(self) -> str:
        return f"Errors: {self.errors} out of {self.compared}"

    @property
    def fraction(self) -> str:
        return f"{self.errors}/{self.compared}"

    def format(self) -> str:
        lines = [self.line + f" ({self.tensors} output tensors, |diff| > {self.tolerance:g} or NaN)"]
        if self.worst is not None:
            w = self.worst
            lines.append(f"Worst: {w.tensor}[{', '.join(map(str, w.index))}] actual={w.actual!r} "
                         f"expected={w.expected!r} abs diff={w.abs_diff:.3e}")
        if self.failed:
            lines.append("Failed: " + ", ".join(self.failed))
        if self.nan_inputs:
            lines.append("NaN in inputs: " + ", ".join(self.nan_inputs))
        if self.inf_inputs:
            lines.append("Inf in inputs: " + ", ".join(self.inf_inputs))
        return "\n".join(lines)


def nan_tensors(arrays: Mapping[str, np.ndarray], test=np.isnan) -> list[str]:
    """Names of float arrays holding a NaN (or, test=np.isinf, an infinity): inputs that make every Errors line
    meaningless."""
    return [name for name, a in arrays.items()
            if np.issubdtype(np.asarray(a).dtype, np.floating) and test(np.asarray(a)).any()]


def _element_errors(act: np.ndarray, exp: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """(error mask, |diff| with NaN as inf) by the harness rule for this dtype."""
    if np.issubdtype(exp.dtype, np.floating):
        with np.errstate(invalid="ignore", over="ignore"):      # inf - inf is NaN: an error by the rule, no warning
            diff = exp.astype(np.float32) - act.astype(np.float32)
        nan = np.isnan(diff)
        magnitude = np.where(nan, np.inf, np.abs(diff.astype(np.float64)))
        return nan | (magnitude > tolerance), magnitude
    magnitude = np.abs(exp.astype(np.float64) - act.astype(np.float64))
    return magnitude != 0, magnitude


def compare_outputs(actual: Mapping[str, np.ndarray], golden: Mapping[str, np.ndarray],
                    feeds: Mapping[str, np.ndarray] | None = None,
                    tolerance: float = HARNESS_TOLERANCE) -> VerifyResult:
    """Check every golden tensor against `actual` element by element; extra tensors in `actual` are ignored."""
    result = VerifyResult(errors=0, compared=0, tensors=len(golden), nan_inputs=nan_tensors(feeds or {}),
                          inf_inputs=nan_tensors(feeds or {}, np.isinf),
                          tolerance=tolerance)
    worst_key = -1.0
    for name, exp in golden.items():
        exp = np.asarray(exp)
        result.compared += exp.size
        if name not in actual or np.asarray(actual[name]).shape != exp.shape:
            result.errors += exp.size
            why = "missing" if name not in actual else f"shape {np.asarray(actual[name]).shape} != {exp.shape}"
            result.errors_by_tensor[name] = exp.size
            result.failed.append(f"{name} ({why})")
            continue
        act = np.asarray(actual[name])
        bad, magnitude = _element_errors(act, exp, tolerance)
        if bad.any():
            result.errors += int(bad.sum())
            result.errors_by_tensor[name] = int(bad.sum())
            result.failed.append(name)
        if magnitude.size:
            flat = int(np.argmax(magnitude))
            result.max_abs_diff[name] = float(magnitude.flat[flat])
            if magnitude.flat[flat] > worst_key:
                worst_key = float(magnitude.flat[flat])
                idx = tuple(int(i) for i in np.unravel_index(flat, magnitude.shape))
                result.worst = WorstElement(name, idx, float(act.flat[flat]), float(exp.flat[flat]),
                                            float(magnitude.flat[flat]))
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
