"""Which outputs reuse an input's buffer, by op type: the default when Deeploy's own answer is not at hand.

The Deeploy bridge reads the real alias set from Deeploy's allocation; this table is only the fallback for
`--target none`. An alias costs no bytes, and its op is never recomputed (a clone would get a new buffer).
"""
from __future__ import annotations

from ckpt.solver.graph.graph import Op

# op type -> for each output position, the input position whose buffer it shares.
VIEW_OPS = {"Reshape": {0: 0}, "Squeeze": {0: 0}, "Unsqueeze": {0: 0}, "Flatten": {0: 0}, "Identity": {0: 0}}
IN_PLACE_OPS = {"InPlaceAccumulatorV2": {0: 0}, "InPlaceAccumulator": {0: 0}, "SGD": {0: 0}}
DEFAULT_ALIAS_RULES = {**VIEW_OPS, **IN_PLACE_OPS}


def aliases_by_op_type(ops: list[Op] | tuple[Op, ...], rules: dict[str, dict[int, int]] | None = None
                       ) -> dict[str, str]:
    """Output tensor -> input tensor for every op whose type the rules name."""
    rules = DEFAULT_ALIAS_RULES if rules is None else rules
    found: dict[str, str] = {}
    for op in ops:
        for out_pos, in_pos in rules.get(op.op_type, {}).items():
            if out_pos < len(op.outputs) and in_pos < len(op.inputs):
                found[op.outputs[out_pos]] = op.inputs[in_pos]
    return found
