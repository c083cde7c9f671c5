"""Budget ranges for sweeps: "0.6:0.9" with a step or a point count, as fractions of the baseline peak."""
from __future__ import annotations

from ckpt.errors import CkptError

MAX_POINTS = 100         # a point is a solve, two Deeploy runs and two builds: more is a mistake, not a sweep
DECIMALS = 4             # budgets are named (and keyed) by their fraction at this precision


def parse_range(text: str, step: float | None = None, points: int | None = None) -> list[float]:
    """Fractions from high to low (the baseline end first), both ends always among them (a step that does not
    land on LOW ends there: 0.85:0.9 is 0.9 and 0.85), rounded to DECIMALS decimals so names are stable;
    refused when two would get the same name or there are more than MAX_POINTS."""
    try:
        low, high = (float(part) for part in text.split(":"))
    except ValueError:
        raise CkptError(f"budget range '{text}' is not LOW:HIGH", "write e.g. 0.6:0.9") from None
    if not 0 < low <= high <= 1:
        raise CkptError(f"budget range '{text}' must satisfy 0 < LOW <= HIGH <= 1", "write e.g. 0.6:0.9")
    if step is not None and points is not None:
        raise CkptError("--step and --points both given", "give one of them")
    if points is not None:
        if points < 1:
            raise CkptError("--points must be at least 1", "write e.g. --points 4")
        values = [high] if points == 1 else [high - i * (high - low) / (points - 1) for i in range(points)]
    else:
        step = 0.1 if step is None else step
        if step <= 0:
            raise CkptError("--step must be above zero", "write e.g. --step 0.1")
        count = int((high - low) / step + 1e-9) + 1
        values = [high - i * step for i in range(min(count, MAX_POINTS + 1))]
        if round(values[-1], DECIMALS) > round(low, DECIMALS):   # the step stops short of LOW: LOW is run too
            values.append(low)
        if len(values) > MAX_POINTS:
            raise CkptError(f"--step {step:g} gives {max(count, len(values))} budgets in {text}, more than "
                            f"{MAX_POINTS}",
                            f"use a step of at least {(high - low) / (MAX_POINTS - 1):.4g}, or --points")
    if len(values) > MAX_POINTS:
        raise CkptError(f"--points {len(values)} is more than {MAX_POINTS} budgets", f"give at most {MAX_POINTS}")
    kept = [v for v in values if v >= low - 1e-9]
    named = sorted({round(v, DECIMALS) for v in kept}, reverse=True)
    if len(named) < len(kept):
        raise CkptError(f"budgets in {text} closer than {10 ** -DECIMALS:g} apart would share a name",
                        f"space them at least {10 ** -DECIMALS:g} apart")
    return named
