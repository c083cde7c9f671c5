"""How near each output of the generated code is to the goldens, on a scale that sees a wrong gradient.

The harness's rule (an absolute tolerance per element: 1e-4, the training branch's 1e-3) is blind to a wrong
gradient whenever the step changes a weight by less than the tolerance: a learning rate of 1e-3 makes every update
of ResNet-8 smaller than 3e-4, so a gradient of the wrong pixels, or of the wrong sign, passes with `Errors: 0`.
The bit-identity check is blind too, where a replay is held to code of its own flow that carries the same defect.

So each output's largest distance from its golden is also measured against what the reference step changed in it
(the largest |golden - start| of a weight the step updates; for any other output, its largest |golden|), and
against the other flow's distance: the non-tiled code runs Deeploy's kernels whole, without the tiler. An output is
off where its distance exceeds the float rounding of its values (ROUNDING_ULPS units in the last place of its
largest golden) and either OFF_UPDATE of its scale or OFF_FLOW times the non-tiled code's distance.

The goldens are themselves a float32 computation, and on a deep network with BatchNorm they are not near the exact
step on that scale: each block's last BatchNorm bias feeds a convolution and another BatchNorm, which removes any
per-channel shift, so its exact gradient is 0 and the goldens' update of it is float32 noise (MobileNetV1's
inverted-residual blocks); and behind a chain of BatchNorms many weights' golden updates are percents off a float64
run's. So the update rule holds an output to the goldens only beyond OFF_HOST times the distance of ckpt's own
float32 host run of the step from them (`host`): closer than that, the code is as near the exact step as the
goldens are. A wrong gradient is still seen wherever the goldens are precise (the host run then agrees with them far
more closely than a wrong update does). Cheap: it reads the distances the harness's count and the host check
already measured.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ckpt.hostexec.compare import VerifyResult

ROUNDING_ULPS = 16           # float32 rounding of a few accumulations over the step, never a wrong gradient
OFF_UPDATE = 0.01            # a hundredth of what the step changed
OFF_FLOW = 100.0             # a hundred times the non-tiled code's distance
OFF_HOST = 10.0              # ten times the host run's distance: two float32 runs of one step land within a few
                             # times each other's distance from the goldens; a wrong gradient, orders of magnitude off
EPS32 = float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class TensorCloseness:
    """One output of one flow's code against its golden."""

    tensor: str
    distance: float                      # largest |code - golden|
    scale: float                         # what the step changed in it (`updated`), else its largest |golden|
    updated: bool                        # whether `scale` is the step's update of a weight
    other_flow: float | None = None      # the non-tiled code's distance (the tiled flow only)
    host: float | None = None            # ckpt's float32 host run's distance from the goldens (None: not known)

    @property
    def relative(self) -> float:
        """The distance as a fraction of the scale (inf where the scale is 0 and the distance is not)."""
        return self.distance / self.scale if self.scale else (0.0 if not self.distance else float("inf"))

    @property
    def within_golden_noise(self) -> bool:
        """Whether the code is no farther from the goldens than OFF_HOST times the host run is (module doc)."""
        return self.host is not None and self.distance <= OFF_HOST * self.host

    def off(self, rounding: float) -> str | None:
        """Why this output is off the goldens beyond float rounding (`rounding`: its allowance), or None."""
        if not self.distance > rounding:
            return None
        if self.relative > OFF_UPDATE and not self.within_golden_noise:
            of = "the step's update" if self.updated else "its largest golden value"
            return f"{self.relative:.3g}x {of}"
        if self.other_flow is not None and self.distance > OFF_FLOW * self.other_flow:
            return f"{self.distance / self.other_flow if self.other_flow else float('inf'):.3g}x the non-tiled code's"
        return None


@dataclass(frozen=True)
class Closeness:
    """Every output of one flow's code on the scale above, and those that are off (tensor -> why)."""

    tensors: list[TensorCloseness]
    off: dict[str, str]

    @property
    def line(self) -> str | None:
        """One line naming the outputs that are off, worst first (None: none is)."""
        if not self.off:
            return None
        by = {t.tensor: t for t in self.tensors}
        worst = sorted(self.off, key=lambda n: -by[n].relative)
        shown = "; ".join(f"{n} {by[n].distance:.3g} ({self.off[n]})" for n in worst[:3])
        more = f"; {len(worst) - 3} more" if len(worst) > 3 else ""
        return f"{len(worst)} output(s) off the goldens though within the harness's tolerance: {shown}{more}"


def scales(golden: Mapping[str, np.ndarray], starts: Mapping[str, np.ndarray]) -> dict[str, tuple[float, bool]]:
    """Per golden tensor, (the scale it is measured on, whether that is the step's update of a start value)."""
    found = {}
    for name, value in golden.items():
        exp = np.asarray(value, dtype=np.float64)
        start = starts.get(name)
        if start is not None and np.asarray(start).shape == exp.shape:
            found[name] = (float(np.abs(exp - np.asarray(start, dtype=np.float64)).max(initial=0.0)), True)
        else:
            found[name] = (float(np.abs(exp).max(initial=0.0)), False)
    return found


def closeness(result: VerifyResult, golden: Mapping[str, np.ndarray], starts: Mapping[str, np.ndarray],
              other: VerifyResult | None = None, host: VerifyResult | None = None) -> Closeness:
    """`result` (one flow's count against `golden`) on the scale above; `starts`: each updated weight's value when
    the step began (golden names); `other`: the non-tiled code's count, beside the tiled one's; `host`: ckpt's
    float32 host run of the same step against the same goldens (golden names)."""
    scale = scales(golden, starts)
    tensors, off = [], {}
    for name, distance in result.max_abs_diff.items():
        if name not in scale:
            continue
        size, updated = scale[name]
        beside = other.max_abs_diff.get(name) if other is not None else None
        own = host.max_abs_diff.get(name) if host is not None else None
        tensor = TensorCloseness(name, distance, size, updated, beside, own)
        tensors.append(tensor)
        rounding = ROUNDING_ULPS * EPS32 * float(np.abs(np.asarray(golden[name], dtype=np.float64)).max(initial=0.0))
        why = tensor.off(rounding)
        if why:
            off[name] = why
    return Closeness(tensors, off)
