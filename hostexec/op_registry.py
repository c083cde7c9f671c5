"""Turn one ONNX node into a numpy callable: ckpt's own kernel or an onnx.reference op class.

Binding happens once per node (attribute parsing, op-class lookup), so replaying a schedule
costs only the numpy work.  Building a ReferenceEvaluator per call would cost ~ms per node and
cannot run these graphs anyway (SGD, GeluGrad and Gelu live in the default domain at opset 19).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import defs, helper
from onnx.reference.ops import load_op

from ckpt.hostexec import conv_training as C
from ckpt.hostexec import training_ops as T
from ckpt.hostexec.channels import DEEPLOY_ANNOTATIONS, channels_last, is_channels_last

Kernel = Callable[..., Sequence[np.ndarray]]

# Attributes no schema defines: exporters' notes for humans, and Deeploy's annotations on lowered graphs
# (the template it chose; the layout flag, which bind_node handles by wrapping the kernel).
_IGNORED_ATTRS = frozenset({"description"}) | DEEPLOY_ANNOTATIONS


class UnsupportedOpError(NotImplementedError):
    """Raised when a node has no own kernel and no onnx reference implementation."""


@dataclass(frozen=True)
class BoundNode:
    """A node ready to run: its I/O names and the kernel that computes it."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    kernel: Kernel
    impl: str  # "ckpt" or "onnx.reference:<OpClass>"
    # input positions the op updates in place (ORT's InPlaceAccumulatorV2 with only its flag as output): the
    # kernel returns their new values after its outputs, and the run rebinds those inputs to them
    writes_back: tuple[int, ...] = ()


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.name in _IGNORED_ATTRS:
            continue
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


# --------------------------------------------------------------------------- own kernels
# Each factory gets (node, attrs, ctx) and returns a kernel taking the node's input arrays
# (None for an omitted optional input) and returning a tuple of output arrays.


@dataclass(frozen=True)
class BindContext:
    """What a factory may need beyond the node: the opset and declared ranks (value_info)."""

    opset: int
    declared_rank: dict[str, int]
    declared_shape: dict[str, tuple[int, ...]] = field(default_factory=dict)   # static shapes of value_info
    declared_type: dict[str, int] = field(default_factory=dict)                # elem types of value_info


def _gelu(node, attrs, ctx) -> Kernel:
    approximate = attrs.get("approximate", "none")
    return lambda x: (T.gelu(x, approximate),)


def _gelu_grad(node, attrs, ctx) -> Kernel:
    approximate = attrs.get("approximate", "none")
    return lambda dy, x: (T.gelu_grad(dy, x, approximate),)


def _softmax_grad(node, attrs, ctx) -> Kernel:
    axis = int(attrs.get("axis", 1))
    return lambda dy, y: (T.softmax_grad(dy, y, axis),)


def _sce_loss(node, attrs, ctx) -> Kernel:
    """Standard outputs are (loss, log_prob?); Deeploy's graphs keep only log_prob, as output 0.

    Told apart by the declared rank of output 0: the loss has rank 0 ('mean'/'sum') or the
    labels' rank ('none'), log_prob has the logits' rank.
    """
    reduction = attrs.get("reduction", "mean")
    ignore_index = attrs.get("ignore_index")
    out0_rank = ctx.declared_rank.get(node.output[0])
    n_out = len(node.output)

    def run(logits, labels, weight=None):
        loss, log_prob = T.softmax_cross_entropy_loss(logits, labels, weight, reduction, ignore_index)
        if n_out == 1 and out0_rank is not None and out0_rank == np.ndim(logits) != np.ndim(loss):
            return (log_prob,)
        return (loss, log_prob)[:n_out]

    return run


def _sce_loss_grad(node, attrs, ctx) -> Kernel:
    """com.microsoft form is (dY, log_prob, label, weight?); Deeploy's is (log_prob, label) with
    dY = 1 implied.  Told apart by the dtype of input 1 (integer labels => Deeploy form)."""
    reduction = attrs.get("reduction", "mean")
    ignore_index = attrs.get("ignore_index")
    form = attrs.get("form", "exact")             # training_ops.SOFTMAX_CE_GRAD_FORMS

    def run(*args):
        if np.issubdtype(np.asarray(args[1]).dtype, np.integer):
            log_prob, labels, *rest = args
            dloss: Any = 1.0
        else:
            dloss, log_prob, labels, *rest = args
        weight = rest[0] if rest else None
        return (T.softmax_cross_entropy_loss_grad(dloss, log_prob, labels, weight, reduction, ignore_index, form),)

    return run


def _layer_norm_grad(node, attrs, ctx) -> Kernel:
    """5 inputs: com.microsoft (dY, X, scale, mean, inv_std); 3-4: Deeploy (dY, X, scale[, bias]).
    A ``form`` attribute says which dX the graph means (training_ops.LAYER_NORM_GRAD_FORMS)."""
    axis = int(attrs.get("axis", -1))
    epsilon = float(attrs.get("epsilon", 1e-5))
    form = attrs.get("form", "exact")
    n_out = len(node.output)

    def run(dy, x, scale, *rest):
        mean, inv_std = (rest[0], rest[1]) if len(rest) >= 2 else (None, None)
        return T.layer_norm_grad(dy, x, scale, axis, epsilon, mean, inv_std, form)[:n_out]

    return run


def _sgd(node, attrs, ctx) -> Kernel:
    lr = float(attrs["lr"])
    return lambda w, g: (T.sgd(w, g, lr),)


def _accumulator(node, attrs, ctx) -> Kernel:
    """ORT outputs (updated flag, buffer); Deeploy's fork keeps only the buffer; the training branch keeps only
    the flag (a bool output), the buffer being updated in place (see `writes_back`)."""
    n_out = len(node.output)
    flag_only = n_out == 1 and ctx.declared_type.get(node.output[0]) == onnx.TensorProto.BOOL

    def run(buffer, value, overwrite=None):
        flag, new = T.inplace_accumulator_v2(buffer, value, overwrite)
        if flag_only:
            return (flag.reshape(1), new)
        return (new, new) if n_out == 1 else (flag, new)   # one output: it is the new buffer, written back too

    return run


def accumulator_writes_back(node: onnx.NodeProto, ctx: BindContext) -> tuple[int, ...]:
    """The buffer (input 0) an InPlaceAccumulatorV2 with one output updates in place: the training branch's flag,
    or, on the graph Deeploy lowered from it, the flag turned into an alias of the updated buffer (Deeploy types it
    as the buffer); a graph that keeps only the new buffer as its output never reads the old one again."""
    if node.op_type == "InPlaceAccumulatorV2" and len(node.output) == 1:
        return (0,)
    return ()


def _pair(attrs, name: str, default: int) -> tuple[int, int]:
    value = list(attrs.get(name, [default, default]))
    return (int(value[0]), int(value[1]))


def _pads(attrs) -> tuple[int, int, int, int]:
    pads = [int(p) for p in attrs.get("pads", [0, 0, 0, 0])]
    return (pads[0], pads[1], pads[2], pads[3])


def _conv_grad(node, attrs, ctx) -> Kernel | None:
    """com.microsoft ConvGrad(dY, X, W) -> (dX, dW, dB), 2-D with explicit pads."""
    if attrs.get("auto_pad", "NOTSET") != "NOTSET" or len(attrs.get("kernel_shape", [0, 0])) != 2:
        return None
    kw = dict(strides=_pair(attrs, "strides", 1), pads=_pads(attrs), dilations=_pair(attrs, "dilations", 1),
              group=int(attrs.get("group", 1)))
    return lambda dy, x, w: C.conv2d_grad(dy, x, w, **kw)


def _conv_grad_part(node, attrs, ctx) -> Kernel | None:
    """The training branch's lowering splits ConvGrad in three (Deeploy's SplitConvGradPass): ConvGradX(dY, W)
    -> dX, ConvGradW(dY, X) -> dW, ConvGradB(dY) -> dB; the operand a part does not read is given by the shape
    of its output (value_info)."""
    if attrs.get("auto_pad", "NOTSET") != "NOTSET" or len(attrs.get("kernel_shape", [0, 0])) != 2:
        return None
    kw = dict(strides=_pair(attrs, "strides", 1), pads=_pads(attrs), dilations=_pair(attrs, "dilations", 1),
              group=int(attrs.get("group", 1)))
    shape = ctx.declared_shape.get(node.output[0])
    if node.op_type == "ConvGradB":
        return lambda dy: (np.asarray(dy).sum(axis=(0, 2, 3)).astype(np.asarray(dy).dtype),)
    if shape is None:
        return None
    if node.op_type == "ConvGradX":
        return lambda dy, w: (C.conv2d_grad(dy, np.zeros(shape, np.asarray(w).dtype), w, **kw)[0],)
    return lambda dy, x: (C.conv2d_grad(dy, x, np.zeros(shape, np.asarray(x).dtype), **kw)[1],)


def _batch_norm_internal(node, attrs, ctx) -> Kernel:
    """com.microsoft BatchNormInternal: training mode (the batch's statistics) unless training_mode=0."""
    epsilon = float(attrs.get("epsilon", 1e-5))
    momentum = float(attrs.get("momentum", 0.9))
    training = int(attrs.get("training_mode", 1))

    def run(x, scale, bias, mean, var):
        if training:
            return C.batch_norm_training(x, scale, bias, mean, var, epsilon, momentum)
        inv_std = 1.0 / np.sqrt(np.asarray(var, np.float64) + epsilon)
        shape = (1, -1) + (1,) * (np.ndim(x) - 2)
        y = (np.asarray(x, np.float64) - np.asarray(mean, np.float64).reshape(shape)) * (
            inv_std * np.asarray(scale, np.float64)).reshape(shape) + np.asarray(bias, np.float64).reshape(shape)
        return (y.astype(np.asarray(x).dtype), mean, var, mean, inv_std.astype(np.asarray(var).dtype))

    return run


def _batch_norm_grad(node, attrs, ctx) -> Kernel:
    return lambda dy, x, scale, mean, inv_std: C.batch_norm_grad(dy, x, scale, mean, inv_std)


def _relu_grad(node, attrs, ctx) -> Kernel:
    return lambda dy, x: (C.relu_grad(dy, x),)


def _declared_output_shape(node, ctx, what: str) -> tuple[int, ...]:
    shape = ctx.declared_shape.get(node.output[0])
    if shape is None:
        raise UnsupportedOpError(f"node {node.name!r}: {what} needs the shape of its output in value_info")
    return shape


def _global_average_pool_grad(node, attrs, ctx) -> Kernel:
    """The pooled extent from `kernel_shape` (the branch's fused form), else from the output's declared shape."""
    spatial = tuple(int(k) for k in attrs["kernel_shape"]) if "kernel_shape" in attrs \
        else _declared_output_shape(node, ctx, "GlobalAveragePoolGrad")[2:]
    return lambda dy: (C.global_average_pool_grad(dy, spatial),)


def _average_pool_grad(node, attrs, ctx) -> Kernel:
    shape = _declared_output_shape(node, ctx, "AveragePoolGrad")
    kernel = _pair(attrs, "kernel_shape", 1)
    strides, pads = _pair(attrs, "strides", 1), _pads(attrs)
    include = bool(int(attrs.get("count_include_pad", 0)))
    return lambda dy: (C.average_pool_grad(dy, (np.shape(dy)[0], *shape[1:]), kernel, strides, pads, include),)


def _max_pool_grad(node, attrs, ctx) -> Kernel:
    shape = _declared_output_shape(node, ctx, "MaxPoolGrad")
    return lambda dy, indices: (C.max_pool_grad(dy, indices, (np.shape(dy)[0], *shape[1:])),)


def _mse_loss(node, attrs, ctx) -> Kernel:
    return lambda prediction, target: (C.mse_loss(prediction, target),)


def _mse_loss_grad(node, attrs, ctx) -> Kernel:
    return lambda prediction, target: (C.mse_loss_grad(prediction, target),)


def _reduce_sum(node, attrs, ctx) -> Kernel | None:
    """ReduceSum with its pre-13 `axes` attribute beside opset 13's `noop_with_empty_axes` (the training branch's
    exporter writes both: no schema version has the pair); the input form goes to the reference."""
    if "axes" not in attrs:
        return None
    axes = tuple(int(a) for a in attrs["axes"])
    keepdims = bool(int(attrs.get("keepdims", 1)))

    def run(x, *_ignored):
        x = np.asarray(x)
        return (np.sum(x.astype(np.float64) if x.dtype.kind == "f" else x, axis=axes, keepdims=keepdims)
                .astype(x.dtype),)

    return run


def _axes_attribute(attrs) -> tuple[int, ...] | None:
    """The pre-13 `axes` attribute, a list or (as the training branch's exporter writes it) a single int."""
    if "axes" not in attrs:
        return None
    axes = attrs["axes"]
    return (int(axes),) if isinstance(axes, (int, np.integer)) else tuple(int(a) for a in axes)


def _squeeze(node, attrs, ctx) -> Kernel | None:
    axes = _axes_attribute(attrs)
    if axes is None:
        return None
    return lambda x, *_ignored: (np.squeeze(np.asarray(x), axis=tuple(a % np.ndim(x) for a in axes)),)


def _unsqueeze(node, attrs, ctx) -> Kernel | None:
    axes = _axes_attribute(attrs)
    if axes is None:
        return None

    def run(x, *_ignored):
        rank = np.ndim(x) + len(axes)
        return (np.expand_dims(np.asarray(x), axis=tuple(sorted(a % rank for a in axes))),)

    return run


def _adam(node, attrs, ctx) -> Kernel:
    """ONNX Adam(R, T, X1..Xn, G1..Gn, V1..Vn, H1..Hn) -> X_new.. (the branch's form), or X_new.., V_new..,
    H_new.. (ONNX's)."""
    kw = {k: float(attrs[k]) for k in ("alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post")
          if k in attrs}
    tensors = (len(node.input) - 2) // 4
    full = len(node.output) == 3 * tensors

    def run(r, t, *state):
        found = [C.adam(float(np.asarray(r).reshape(-1)[0]), int(np.asarray(t).reshape(-1)[0]), state[k],
                        state[tensors + k], state[2 * tensors + k], state[3 * tensors + k], **kw)
                 for k in range(tensors)]
        xs, vs, hs = ([f[j] for f in found] for j in range(3))
        return (*xs, *vs, *hs) if full else tuple(xs)

    return run


def _gemm(node, attrs, ctx) -> Kernel | None:
    """Own kernel only when some operand has rank > 2 (decided at run time)."""
    ref = _reference_kernel(node, ctx.opset)[0]
    kw = dict(
        alpha=float(attrs.get("alpha", 1.0)),
        beta=float(attrs.get("beta", 1.0)),
        trans_a=int(attrs.get("transA", 0)),
        trans_b=int(attrs.get("transB", 0)),
    )

    def run(a, b, c=None):
        if np.ndim(a) > 2 or np.ndim(b) > 2:
            return (T.batched_gemm(a, b, c, **kw),)
        return ref(a, b, c) if c is not None else ref(a, b)

    return run


def _conv(node, attrs, ctx) -> Kernel | None:
    """Own im2col kernel for plain 2-D convs; anything fancier falls back to the reference."""
    if attrs.get("auto_pad", "NOTSET") != "NOTSET" or len(attrs.get("kernel_shape", [0, 0])) != 2:
        return None
    pads = tuple(attrs.get("pads", [0, 0, 0, 0]))
    kw = dict(
        strides=tuple(attrs.get("strides", [1, 1])),
        pads=(pads[0], pads[1], pads[2], pads[3]),
        dilations=tuple(attrs.get("dilations", [1, 1])),
        group=int(attrs.get("group", 1)),
    )
    return lambda x, w, b=None: (T.conv2d(x, w, b, **kw),)


_OWN: dict[tuple[str, str], Callable[..., Kernel | None]] = {
    ("", "Gelu"): _gelu,
    ("com.microsoft", "Gelu"): _gelu,
    ("", "GeluGrad"): _gelu_grad,
    ("com.microsoft", "GeluGrad"): _gelu_grad,
    ("com.microsoft", "SoftmaxGrad"): _softmax_grad,
    ("com.microsoft", "SoftmaxGrad_13"): _softmax_grad,
    ("", "SoftmaxCrossEntropyLoss"): _sce_loss,
    ("com.microsoft", "SoftmaxCrossEntropyLossGrad"): _sce_loss_grad,
    ("", "LayerNormalizationGrad"): _layer_norm_grad,
    ("com.microsoft", "LayerNormalizationGrad"): _layer_norm_grad,
    ("", "SGD"): _sgd,
    ("com.microsoft", "InPlaceAccumulatorV2"): _accumulator,
    ("", "Gemm"): _gemm,
    ("", "Conv"): _conv,
    ("com.microsoft", "ConvGrad"): _conv_grad,
    ("", "ConvGradX"): _conv_grad_part,
    ("", "ConvGradW"): _conv_grad_part,
    ("", "ConvGradB"): _conv_grad_part,
    ("com.microsoft", "BatchNormInternal"): _batch_norm_internal,
    ("com.microsoft", "BatchNormalizationGrad"): _batch_norm_grad,
    ("com.microsoft", "ReluGrad"): _relu_grad,
    ("", "ReluGrad"): _relu_grad,
    ("", "GlobalAveragePoolGrad"): _global_average_pool_grad,
    ("com.microsoft", "GlobalAveragePoolGrad"): _global_average_pool_grad,
    ("", "AveragePoolGrad"): _average_pool_grad,
    ("com.microsoft", "AveragePoolGrad"): _average_pool_grad,
    ("", "MaxPoolGrad"): _max_pool_grad,
    ("com.microsoft", "MaxPoolGrad"): _max_pool_grad,
    ("", "MSELoss"): _mse_loss,
    ("", "MSELossGrad"): _mse_loss_grad,
    ("", "ReduceSum"): _reduce_sum,
    ("", "Squeeze"): _squeeze,
    ("", "Unsqueeze"): _unsqueeze,
    ("", "Adam"): _adam,
    ("ai.onnx.preview.training", "Adam"): _adam,
}

OWN_OPS: frozenset[tuple[str, str]] = frozenset(_OWN)


# --------------------------------------------------------------------------- reference ops


def _schema_version_for(node: onnx.NodeProto, opset: int) -> int:
    """Newest schema version <= opset that defines every attribute the node carries.

    These graphs declare opset 19 but keep pre-13 attribute forms (ReduceSum/Squeeze/Unsqueeze
    with an `axes` attribute); picking the matching older op class honours what was meant.
    """
    names = {a.name for a in node.attribute} - _IGNORED_ATTRS
    version = opset
    while version >= 1:
        try:
            schema = defs.get_schema(node.op_type, version, node.domain)
        except defs.SchemaError:
            break
        if names <= set(schema.attributes):
            return schema.since_version
        version = schema.since_version - 1
    return opset


_RUN_PARAMS: dict[str, Any] = {"log": lambda *a: None, "opsets": {"": 19}, "new_ops": None, "verbose": 0}


def _reference_kernel(node: onnx.NodeProto, opset: int) -> tuple[Kernel, str]:
    version = _schema_version_for(node, opset)
    try:
        cls = load_op(node.domain, node.op_type, version)
    except Exception as exc:  # onnx raises several unrelated types here
        raise UnsupportedOpError(
            f"node {node.name!r}: no ckpt kernel and no onnx reference implementation for "
            f"{node.domain or 'ai.onnx'}::{node.op_type} (opset {version}): {exc}"
        ) from None
    params = dict(_RUN_PARAMS, opsets={"": opset})
    clean = onnx.NodeProto()
    clean.CopyFrom(node)
    del clean.attribute[:]
    clean.attribute.extend(a for a in node.attribute if a.name not in _IGNORED_ATTRS)
    op = cls(clean, params)
    return op.run, f"onnx.reference:{cls.__name__}"


def _raw_layout_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """The layout flag, which _attrs drops with the other annotations."""
    return {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name == "channels_first"}


def bind_node(node: onnx.NodeProto, opset: int, ctx: BindContext) -> BoundNode:
    """Pick the kernel for one node: ckpt's own when registered, else onnx's reference op."""
    factory = _OWN.get((node.domain, node.op_type))
    kernel = factory(node, _attrs(node), ctx) if factory else None
    if kernel is not None:
        impl = "ckpt+onnx.reference:Gemm(2-D)" if node.op_type == "Gemm" else "ckpt"
    else:
        kernel, impl = _reference_kernel(node, opset)
    if is_channels_last(node.op_type, _raw_layout_attrs(node)):
        kernel, impl = channels_last(node.op_type, kernel), impl + "+channels_last"
    return BoundNode(
        name=node.name,
        op_type=node.op_type,
        domain=node.domain,
        inputs=tuple(node.input),
        outputs=tuple(node.output),
        kernel=kernel,
        impl=impl,
        writes_back=accumulator_writes_back(node, ctx),
    )
