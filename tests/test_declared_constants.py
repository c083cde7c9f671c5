"""Each constant at the bytes Deeploy's generated code declares it with, read from Deeploy's own buffers: its bound
type (not the dtype Deeploy's lowering left its values in) and its shape after each reader's broadcast; a constant
the code never declares (a Reshape's shape) apart."""
import numpy as np
from Deeploy.AbstractDataTypes import PointerClass
from Deeploy.CommonExtensions.DataTypes import float32_t, int64_t
from Deeploy.DeeployTypes import ConstantBuffer, NetworkContext, StructBuffer, TransientBuffer, VariableBuffer
from onnx import TensorProto, helper, numpy_helper

from ckpt.deeploy_bridge.broadcast import declared_constant_bytes
from ckpt.deeploy_bridge.transients import constant_bytes, declared_constants, undeclared_constants


def _buffer(name: str, values: np.ndarray, bound, deploy: bool = True) -> ConstantBuffer:
    buf = ConstantBuffer(name, list(values.shape), values)
    buf._type = PointerClass(bound)
    buf._deploy = deploy
    return buf


def _context() -> NetworkContext:
    """CCT's tokenizer weight as Deeploy's lowering leaves it (float64 values, bound float32_t), a Gemm's bias
    broadcast to its 64 rows by the front end, and a Reshape's shape."""
    weight = _buffer("tokenizer_conv_1_weight_tensor", np.zeros((32, 3, 3, 64), np.float64), float32_t)
    bias = _buffer("blocks_0_proj_bias_tensor", np.broadcast_to(np.zeros(32, np.float64), (64, 32)), float32_t)
    shape = _buffer("tokenizer_flatten_shape_tensor", np.array([1, 64, 32], np.int64), int64_t, deploy=False)
    ctxt = NetworkContext(VariableBuffer, ConstantBuffer, StructBuffer, TransientBuffer)
    for buf in (weight, bias, shape):
        ctxt.add(buf, "global")
    return ctxt


def test_a_constant_is_counted_at_its_bound_type_and_broadcast_shape_not_at_its_values_dtype():
    sizes = declared_constants(_context())
    assert sizes == {"blocks_0_proj_bias_tensor": 64 * 32 * 4, "tokenizer_conv_1_weight_tensor": 18_432 * 4,
                     "tokenizer_flatten_shape_tensor": 3 * 8}
    assert constant_bytes(_context()) == sum(sizes.values())          # Deeploy's own count holds them all
    assert undeclared_constants(_context()) == ["tokenizer_flatten_shape_tensor"]


def test_the_lowered_graphs_constants_that_the_code_declares_at_other_bytes_are_those_bytes():
    """The lowered ONNX holds the weight as DOUBLE (147,456 B) and the bias as its one row (128 B): what the code
    declares is 73,728 B and 8,192 B; a constant at its own bytes is left out."""
    weight = numpy_helper.from_array(np.zeros((32, 3, 3, 64), np.float64), "tokenizer_conv_1_weight_tensor")
    bias = numpy_helper.from_array(np.zeros(32, np.float32), "blocks_0_proj_bias_tensor")
    other = numpy_helper.from_array(np.zeros(8, np.float32), "fc_bias_tensor")
    graph = helper.make_graph([], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                              initializer=[weight, bias, other])
    sizes = {**declared_constants(_context()), "fc_bias_tensor": 32}
    assert declared_constant_bytes(helper.make_model(graph), sizes) == {
        "tokenizer_conv_1_weight_tensor": 73_728, "blocks_0_proj_bias_tensor": 8_192}
