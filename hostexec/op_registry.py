"""Turn one ONNX node into a numpy callable: ckpt's own kernel or an onnx.reference op class.

Binding happens once per node (attribute parsing, op-class lookup), so replaying a schedule
costs only the numpy work.  Building a ReferenceEvaluator per call would cost ~ms per node and
cannot run these graphs anyway (SGD, GeluGrad and Gelu live in the default domain at opset 19).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import defs, helper
from onnx.reference.ops import load_op

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

    def run(*args):
        if np.issubdtype(np.asarray(args[1]).dtype, np.integer):
            log_prob, labels, *rest = args
            dloss: Any = 1.0
        else:
            dloss, log_prob, labels, *rest = args
        weight = rest[0] if rest else None
        return (T.softmax_cross_entropy_loss_grad(dloss, log_prob, labels, weight, reduction, ignore_index),)

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
    """ORT outputs (updated flag, buffer); Deeploy's fork keeps only the buffer."""
    n_out = len(node.output)

    def run(buffer, value, overwrite=None):
        flag, new = T.inplace_accumulator_v2(buffer, value, overwrite)
        return (new,) if n_out == 1 else (flag, new)

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
    )
