"""LayerNormalizationGrad with its weight and bias gradients restarted at every call (the workaround of
workarounds.Defect.LAYERNORM_GRAD_ZEROING).

The layer's tiles each add their rows' share to the weight and bias gradients, so the gradients must start at
zero at the first tile of a call, and only there. ckpt's template zeroes them when the tile flag
`ckpt_first_tile` is set: 1 where the layer runs in one piece (the non-tiled flow, or a single tile), and, tiled,
1 for the tile at the origin of the output and 0 for every other (each tile's value is given by the tile
constraint, as Deeploy gives each tile its size). The input gradient is the installed kernel's
(`PULP_LayernormGrad_fp32_fp32`, rows split between the cores); the weight and bias gradients are summed by
core 0 alone, which also zeroes them, so no core reads them while another writes.
"""
from __future__ import annotations

from Deeploy.DeeployTypes import NodeMapper, NodeTemplate
from Deeploy.TilingExtension.TilerExtension import TilingReadyNodeBindings

from .defect_probes import layernorm_grad_binding
from .defects import Defect
from .tile_flag import FLAG, flagged_constraint

_TEXT = """
// LayerNormalizationGrad, ckpt's template (Name: ${nodeName}, Op: ${nodeOp})
// dscale and dbias restart at the first tile of each call
{
    const int32_t ckpt_rows = (int32_t)(${size}) / (int32_t)(${lastDimLength});
    const int32_t ckpt_core = (int32_t)pi_core_id();
    const int32_t ckpt_share = (ckpt_rows + NUM_CORES - 1) / NUM_CORES;
    const int32_t ckpt_from = MIN(ckpt_core * ckpt_share, ckpt_rows);
    const int32_t ckpt_to = MIN(ckpt_from + ckpt_share, ckpt_rows);
    if (ckpt_to > ckpt_from) {
        PULP_LayernormGrad_fp32_fp32(${grad_in} + ckpt_from * ${lastDimLength},
                                     ${data_in} + ckpt_from * ${lastDimLength},
                                     ${mean} + ckpt_from, ${inv_std_dev} + ckpt_from,
                                     ${grad_out} + ckpt_from * ${lastDimLength}, ${weight},
                                     (uint32_t)((ckpt_to - ckpt_from) * ${lastDimLength}), ${lastDimLength});
    }
    if (ckpt_core == 0) {
        if (${ckpt_first_tile}) {
            for (uint32_t ckpt_c = 0; ckpt_c < (uint32_t)(${lastDimLength}); ckpt_c++) {
                ${weight_grad}[ckpt_c] = 0.0f;
                ${bias_grad}[ckpt_c] = 0.0f;
            }
        }
        for (int32_t ckpt_r = 0; ckpt_r < ckpt_rows; ckpt_r++) {
            const float32_t *ckpt_dy = ${grad_in} + ckpt_r * ${lastDimLength};
            const float32_t *ckpt_x = ${data_in} + ckpt_r * ${lastDimLength};
            const float32_t ckpt_mu = ${mean}[ckpt_r];
            const float32_t ckpt_isd = ${inv_std_dev}[ckpt_r];
            for (uint32_t ckpt_c = 0; ckpt_c < (uint32_t)(${lastDimLength}); ckpt_c++) {
                const float32_t ckpt_xhat = (ckpt_x[ckpt_c] - ckpt_mu) * ckpt_isd;
                ${weight_grad}[ckpt_c] += ckpt_dy[ckpt_c] * ckpt_xhat;
                ${bias_grad}[ckpt_c] += ckpt_dy[ckpt_c];
            }
        }
    }
}
"""


class RestartingTemplate(NodeTemplate):
    """ckpt's LayerNormalizationGrad template; `ckpt_first_tile` is 1 unless the tiler gives each tile its own."""

    works_around = Defect.LAYERNORM_GRAD_ZEROING     # how a deployment's report knows it was bound (workarounds.bound)

    def __init__(self):
        super().__init__(_TEXT)

    def alignToContext(self, ctxt, operatorRepresentation):
        operatorRepresentation.setdefault(FLAG, 1)
        return ctxt, operatorRepresentation, []


def _call_starts(cls, schedule, cubes) -> list[int]:
    """Per tile, 1 where it is the call's first: the one at the origin of the output."""
    return [int(not any(cube.absoluteOffset)) for cube in cubes]


def restarting_layer(mapping: dict) -> None:
    """Give `mapping` (a fresh copy of a platform's Mapping) ckpt's LayerNormalizationGrad layer in place of the
    installed one: the same parser, type checker, code transformer and tile constraint as the mapping's own (for
    GAP9, PULPOpen's binding lent with GAP9's code transformer), ckpt's template."""
    layer = mapping.get("LayerNormalizationGrad")
    if layer is None or layernorm_grad_binding() is None:
        return
    mapper = layer.maps[0]
    binding = mapper.bindings[0]
    constraint = flagged_constraint(type(binding.template.tileConstraint), _call_starts)()
    fresh = type(binding)(binding.typeChecker, RestartingTemplate(), binding.codeTransformer)
    bindings = TilingReadyNodeBindings([fresh], constraint)
    mapping["LayerNormalizationGrad"] = type(layer)([NodeMapper(type(mapper.parser)(), bindings)])
