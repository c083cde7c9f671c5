"""Recompute price of each op: measured cycles where a calibration gives them, else estimated cycles from MACs
(Conv, its gradient, Gemm, MatMul) or output elements (the rest).

The estimate's coefficients are rough per-op costs for a PULP cluster; what matters for the schedule is their
ratio, and users override them from a JSON file: {"OpType": {"per_mac": x, "per_elem": y}}. A calibration
(pipeline.calibrate: the graph order's step run on gvsoc, each layer's cycles probed) gives every op its own
measured cycles, which then replace the estimate: the solver minimises what the device measured. An op a
calibration has no cycles for makes no kernel call there (a view): it costs 1, so every recompute has a price.
On the device a recompute costs more than its op's calibrated cycles: the extra layer's call and the transfers
of its clone's buffer to the readers that now read it. That price comes in as data (`per_clone`, cycles per
recompute of an op that makes a kernel call, measured on the target by bench/gvsoc.py) and is added to each such
op's measured cycles, so the solver and the predicted step both carry it.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ckpt.errors import CkptError
from ckpt.files import read_json_input
from ckpt.solver.graph.graph import Op

MAC_OPS = frozenset({"Conv", "Gemm", "MatMul", "ConvTranspose", "ConvGrad"})
MAX_COEFFICIENT = 1e6     # cycles per MAC or element: far above any kernel, far below float overflow in a sum
DEFAULT_PER_ELEM = {"Softmax": 8.0, "Gelu": 12.0, "LayerNormalization": 10.0, "MaxPool": 4.0,
                    "AveragePool": 4.0, "Transpose": 2.0, "SoftmaxCrossEntropyLoss": 8.0}


@dataclass(frozen=True)
class CostModel:
    """Cycles = per_mac * MACs + per_elem * output elements, with per-op-type coefficients."""

    per_mac: dict[str, float] = field(default_factory=dict)
    per_elem: dict[str, float] = field(default_factory=dict)
    measured: dict[str, int] | None = None      # op name -> measured cycles (a calibration), overriding the rest
    measured_step: int | None = None            # the calibration's whole graph-order step, cycles
    measured_optimizer: int | None = None       # a split step's: its optimizer network per update, cycles
    per_clone: int = 0                          # cycles a recompute of a measured op adds beyond them (see above)
    tiles: dict[str, int] | None = None         # op name -> the tiles its layer moves into the chip's level from off
                                                # chip where measured (a calibration's; absent: one)
    transfers: dict[str, dict[str, int]] | None = None   # op name -> each tensor it keeps off chip -> the copies
                                                # it issues per tile for it (a calibration's; absent: one)
    lines: dict[str, dict[str, int]] | None = None   # op name -> each such tensor -> the lines (bursts) its copies
                                                # move over all its tiles (a calibration's; absent: one per copy)
    source: str = "estimate"                    # what the costs are, as a schedule records it

    def coefficients(self, op_type: str) -> tuple[float, float]:
        mac = self.per_mac.get(op_type, 1.0 if op_type in MAC_OPS else 0.0)
        elem = self.per_elem.get(op_type, DEFAULT_PER_ELEM.get(op_type, 0.0 if op_type in MAC_OPS else 1.0))
        return mac, elem

    @classmethod
    def from_json(cls, path: str | Path) -> CostModel:
        """The coefficients of a JSON cost file (see `from_doc`), read strictly (files.read_json_input)."""
        return cls.from_doc(read_json_input(path, "cost file", COST_FILE_FORM), str(path))

    @classmethod
    def from_doc(cls, doc: object, where: str) -> CostModel:
        """Coefficients {"OpType": {"per_mac": x, "per_elem": y}}, checked field by field: each a finite number in
        [0, MAX_COEFFICIENT] (a negative one makes recomputing pay, which turns the solve into a search for cycles
        to gain, and a long one), no other key."""
        if not isinstance(doc, dict) or not doc:
            raise CkptError(f"cost file '{where}' is not an object of op types", COST_FILE_FORM)
        tables: dict[str, dict[str, float]] = {"per_mac": {}, "per_elem": {}}
        for op_type, entry in doc.items():
            if not isinstance(entry, dict):
                raise CkptError(f"cost file '{where}': {op_type} is {_shown(entry)}, not an object",
                                COST_FILE_FORM)
            for kind, value in entry.items():
                if kind not in tables:
                    raise CkptError(f"cost file '{where}': {op_type} has the key {kind!r}, which ckpt does not read",
                                    "give only per_mac and per_elem")
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                        or not 0 <= value <= MAX_COEFFICIENT:
                    raise CkptError(f"cost file '{where}': {op_type}.{kind} is {_shown(value)}",
                                    f"give cycles per MAC and per element as numbers from 0 to {MAX_COEFFICIENT:g}")
                tables[kind][op_type] = float(value)
        return cls(per_mac=tables["per_mac"], per_elem=tables["per_elem"])


COST_FILE_FORM = 'write {"OpType": {"per_mac": 1.0, "per_elem": 2.0}}'


def _shown(value: object) -> str:
    """A JSON value as a message shows it: short, NaN and Infinity as JSON writes them."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def macs(op: Op, shapes: dict[str, tuple[int, ...]]) -> int:
    """Multiply-accumulates of one execution; 0 for ops that are not matrix products or convolutions."""
    out = math.prod(shapes[op.outputs[0]]) if op.outputs else 0
    if op.op_type == "ConvGrad" and len(op.inputs) > 2:      # (dY, X, W): dX and dW, a Conv's MACs each
        return 2 * math.prod(shapes[op.inputs[0]]) * math.prod(shapes[op.inputs[2]][1:])
    if op.op_type in ("Conv", "ConvTranspose") and len(op.inputs) > 1:
        return out * math.prod(shapes[op.inputs[1]][1:])
    if op.op_type == "MatMul" and len(op.inputs) > 1:
        return out * (shapes[op.inputs[0]] or (1,))[-1]
    if op.op_type == "Gemm" and len(op.inputs) > 1 and out:
        a, b = math.prod(shapes[op.inputs[0]]), math.prod(shapes[op.inputs[1]])
        return out * round(math.sqrt(a * b / out))
    return 0


def measured_price(model: CostModel, name: str) -> int:
    """What one recompute of op `name` costs under a calibration: its measured cycles plus the clone's price on the
    device where the op makes a kernel call; 1 for an op without measured cycles (a view makes no call)."""
    cycles = (model.measured or {}).get(name)
    return 1 if cycles is None else max(1, int(cycles) + max(0, int(model.per_clone)))


def estimate_costs(ops: list[Op], shapes: dict[str, tuple[int, ...]], model: CostModel | None = None
                   ) -> dict[str, int]:
    """Op name -> estimated cycles (at least 1, so every recompute has a price)."""
    model = model or CostModel()
    if model.measured is not None:
        return {op.name: measured_price(model, op.name) for op in ops}
    costs = {}
    for op in ops:
        per_mac, per_elem = model.coefficients(op.op_type)
        elems = sum(math.prod(shapes[t]) for t in op.outputs)
        costs[op.name] = max(1, round(per_mac * macs(op, shapes) + per_elem * elems))
    return costs
