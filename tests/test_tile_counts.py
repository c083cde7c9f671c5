"""The tiles each layer moves into a level, read from Deeploy's generated code (deeploy_bridge.tile_counts), and
the calibration that keeps them for the level price (pipeline.calibrate)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ckpt.deeploy_bridge.tile_counts import (
    LAYER_TABLE,
    LayerCode,
    code_layers,
    code_tiles_into,
    layer_code,
    tiles_into,
)
from ckpt.errors import CkptError
from ckpt.pipeline.calibrate import CALIBRATION_FORMAT, KIND, Calibration

# as the training branch writes them (CCT's split step at 0.6: an accumulator cut into 128 one-element tiles, a
# Conv into 3 tiles of L2, each with its tiles of L1 per tile of L2)
CODE = """
static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_node_1_tokenizer_Conv_Conv_numTiles[2] = {0, 3};
static PI_L1 uint8_t DeeployNetwork_TILING_CODEGEN_L1_node_1_tokenizer_Conv_Conv_numTiles[4] = {0, 4, 8, 12};
static PI_L1 uint8_t DeeployNetwork_TILING_CODEGEN_L1_GradientAccumulator31_InPlaceAccumulatorV2_backward_numTiles[129] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128};
static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_GradientAccumulator31_InPlaceAccumulatorV2_backward_numTiles[2] = {0, 128};
static PI_L1 uint8_t DeeployNetwork_TILING_CODEGEN_L1_node_5_Relu_Relu_numTiles[2] = {0, 2};
"""  # noqa: E501


def test_the_tiles_into_a_level_are_the_last_offset_of_that_levels_table():
    assert tiles_into(CODE, "L2") == {"node_1_tokenizer_Conv_Conv": 3,
                                      "GradientAccumulator31_InPlaceAccumulatorV2_backward": 128}
    assert tiles_into(CODE, "L1") == {"node_1_tokenizer_Conv_Conv": 12,
                                      "GradientAccumulator31_InPlaceAccumulatorV2_backward": 128, "node_5_Relu_Relu": 2}


def test_a_code_folder_is_read_across_its_c_files(tmp_path):
    (tmp_path / "TrainingNetwork.c").write_text(CODE)
    (tmp_path / "OptimizerNetwork.c").write_text(
        "static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_sgd_w_numTiles[2] = {0, 5};")
    (tmp_path / "TrainingNetwork.h").write_text("TILING_CODEGEN_L2_not_code_numTiles[2] = {0, 9};")
    assert code_tiles_into(tmp_path, "L2") == {"node_1_tokenizer_Conv_Conv": 3, "sgd_w": 5,
                                               "GradientAccumulator31_InPlaceAccumulatorV2_backward": 128}


def _doc(**extra) -> dict:
    return {"kind": KIND, "format": CALIBRATION_FORMAT, "model_sha256": "0" * 64, "target": "siracusa", "setup": {},
            "step_cycles": 1000, "node_cycles": {"a": 10, "b": 20}, "errors": 0, "total": 1, "code_bytes": 0,
            "key": "0" * 64, **extra}


def test_a_calibrations_tiles_reach_its_costs_and_bad_ones_are_refused():
    costs = Calibration.from_doc(_doc(node_tiles={"a": 128}), "cal.json").cost_model()
    assert costs.tiles == {"a": 128}
    assert Calibration.from_doc(_doc(), "cal.json").cost_model().tiles is None    # none read: one tile each
    for bad in ({"a": 0}, {"a": "3"}, [1]):
        with pytest.raises(CkptError, match="node_tiles"):
            Calibration.from_doc(_doc(node_tiles=bad), "cal.json")


# MobileNetV1's all-L3 ConvGradW of features.4.conv.3, as Deeploy's training branch generates it: 576 tiles into L2,
# each copying its input activation and its output gradient from L3 one row at a time (30 copies each, waited on),
# and its weight gradient back in one
CONV_GRAD_W = Path(__file__).parent / "data" / "mobilenetv1_convgradw_l3.c"
LAYER = "node_12_features_features_4_conv_conv_3_Conv_GradConvGrad_0_ConvGrad_backward_ConvGradW"


def test_a_loop_of_row_copies_counts_each_row_as_a_transfer():
    """The level price counts what the layer issues per tile: a tensor copied row by row is 30 transfers per tile,
    not one (the layer cost 58 M cycles off chip, ~54 M of it in these copies)."""
    text = CONV_GRAD_W.read_text()
    assert tiles_into(text, "L2") == {LAYER: 576}
    found = layer_code(text, "L2", "L3")
    assert found[LAYER].transfers == {"node_0_features_features_4_conv_conv_2_Relu__0_tensor": 30,
                                      "node_0_features_features_4_conv_conv_3_Conv__0_grad_tensor": 30,
                                      "features_4_conv_3_weight_grad_tensor": 1}
    # each copy moves its bytes in lines of `length` (per tile from the tiler's tables): the output gradient's 4 B
    # copies one line each, the input's rows 1-3 lines each by tile, the weight gradient 1 line per tile
    assert found[LAYER].lines == {"node_0_features_features_4_conv_conv_2_Relu__0_tensor": 51_120,
                                  "node_0_features_features_4_conv_conv_3_Conv__0_grad_tensor": 576 * 30,
                                  "features_4_conv_3_weight_grad_tensor": 576}
    # its tables in L2: its tile offsets (2 uint16) and, per tile, four of the input's (its rows vary by tile)
    assert found[LAYER].tables == {LAYER_TABLE: 4, "node_0_features_features_4_conv_conv_2_Relu__0_tensor": 4 * 576}
    declared = sum({"uint8_t": 1, "uint16_t": 2}[kind] * int(n)
                   for kind, n in re.findall(r"PI_L2 (\w+) DeeployNetwork_TILING_CODEGEN_L2_\w+\[(\d+)\]", text))
    assert sum(found[LAYER].tables.values()) == declared
    assert layer_code(text, "L1", "L2") == {}                 # no closure of L2 in the excerpt


def test_a_copys_lines_are_its_bytes_over_its_line_length_at_each_tile():
    """ResNet-8's all-L3 ConvGradX (layer1.0.conv1) copies its output gradient's tile in 8-12 B lines: 512 lines a
    copy, each a burst of its own off chip."""
    layer = "node_9_ConvGradX"
    text = f"""
static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_{layer}_numTiles[2] = {{0, 3}};
static PI_L2 uint16_t DeeployNetwork_TILING_CODEGEN_L2_{layer}_grad_out_transfer_size[3] = {{4096, 6144, 6144}};
static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_{layer}_grad_out_length[3] = {{8, 12, 12}};
static void _{layer}_closure_L3(void* args){{
    for (int TILING_I=0; TILING_I<3; TILING_I++) {{
pi_cl_ram_copy_2d(get_ram_ptr(), DeeployNetwork_TILING_CODEGEN_L2_{layer}_g_tensor_ref, DeeployNetwork_TILING_CODEGEN_L2_{layer}_grad_out_ref, DeeployNetwork_TILING_CODEGEN_L2_{layer}_grad_out_transfer_size[TILING_I], 128, DeeployNetwork_TILING_CODEGEN_L2_{layer}_grad_out_length[TILING_I], 1, &grad_out_ExternalToLocal);
pi_cl_ram_copy_2d(get_ram_ptr(), DeeployNetwork_TILING_CODEGEN_L2_{layer}_w_ref, DeeployNetwork_TILING_CODEGEN_L2_{layer}_weight_ref, 2304, 576, 144, 1, &weight_ExternalToLocal);
    }}
}}
"""  # noqa: E501
    found = layer_code(text, "L2", "L3")[layer]
    assert found.transfers == {"g_tensor": 1, "w": 1}
    assert found.lines == {"g_tensor": 512 * 3, "w": 16 * 3}
    assert found.tables == {LAYER_TABLE: 2, "g_tensor": 3 * 2 + 3}


def test_a_single_copy_per_tile_outside_any_loop_counts_once(tmp_path):
    code = """
static void _node_3_Relu_closure_L3(void* args){
    for (int TILING_I=DeeployNetwork_TILING_CODEGEN_L2_node_3_Relu_numTiles[0]; TILING_I<2; TILING_I++) {
pi_cl_ram_copy_2d(get_ram_ptr(), DeeployNetwork_TILING_CODEGEN_L2_node_3_Relu_x_tensor_ref, l, 8, 8, 8, 1, &data_in_ExternalToLocal);
    if (data_in_ExternalToLocal.size != 0) { pi_cl_ram_copy_wait(&data_in_ExternalToLocal); }
pi_cl_ram_copy_2d(get_ram_ptr(), DeeployNetwork_TILING_CODEGEN_L2_node_3_Relu_y_tensor_ref, l, 8, 8, 8, 0, &data_out_LocalToExternal);
    }
}
static PI_L2 uint8_t DeeployNetwork_TILING_CODEGEN_L2_node_3_Relu_numTiles[2] = {0, 2};
"""  # noqa: E501
    (tmp_path / "Network.c").write_text(code)
    found = code_layers(tmp_path, "L2", "L3")
    assert found == {"node_3_Relu": LayerCode({"x_tensor": 1, "y_tensor": 1}, {LAYER_TABLE: 2},
                                              {"x_tensor": 2, "y_tensor": 2})}    # one line a copy, 2 tiles


def test_a_calibrations_transfers_reach_its_costs_and_bad_ones_are_refused():
    doc = _doc(node_transfers={"a": {"x": 30, "w": 1}}, node_lines={"a": {"x": 900, "w": 1}},
               node_tables={"a": {"": 4, "x": 2304}})
    assert Calibration.from_doc(doc, "cal.json").cost_model().transfers == {"a": {"x": 30, "w": 1}}
    assert Calibration.from_doc(doc, "cal.json").cost_model().lines == {"a": {"x": 900, "w": 1}}
    assert Calibration.from_doc(_doc(), "cal.json").cost_model().transfers is None   # none read: one each
    for bad in ({"a": {"x": -1}}, {"a": 3}, {"a": {"x": True}}, [1]):
        with pytest.raises(CkptError, match="node_transfers"):
            Calibration.from_doc(_doc(node_transfers=bad), "cal.json")
