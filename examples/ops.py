"""Forward/backward building blocks shared by the example training graphs.

Each helper emits the same node patterns as the Deeploy CCT training graph (cct2_ft2), because that
is what Deeploy's Siracusa target is known to lower: weights stored pre-transposed as [in, out],
weight gradients as a transA=1 Gemm on activations reshaped to 2D, input gradients as a transB=1
Gemm (batched over leading dims), gradient fan-in summed with AccumulateGrad Adds, and SGD nodes in
the default domain that turn each weight into a graph output ``<weight>_updated``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from .builder import MS_DOMAIN, GraphBuilder, Tensor

#: Learning rate of the SGD nodes (cct2_ft2 uses 0.01 too).
DEFAULT_LR = 0.01


def init_weight(rng: np.random.Generator, fan_in: int, shape: tuple[int, ...]) -> np.ndarray:
    """Scaled normal weights so activations stay O(1) whatever the depth."""
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)


def init_bias(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Small non-zero biases, so a gradient check also exercises the bias paths."""
    return (0.1 * rng.standard_normal(shape)).astype(np.float32)


@dataclass
class GradSet:
    """Collects partial gradients of forward tensors and sums them on demand (AccumulateGrad)."""

    gb: GraphBuilder
    partials: dict[str, list[Tensor]] = field(default_factory=dict)

    def name_for(self, x: Tensor) -> str:
        """Name for the next partial gradient of ``x``."""
        return f"{x.name}_grad_{len(self.partials.get(x.name, []))}"

    def add(self, x: Tensor, g: Tensor) -> None:
        if g.shape != x.shape:
            raise ValueError(f"gradient {g.name} {g.shape} does not match {x.name} {x.shape}")
        self.partials.setdefault(x.name, []).append(g)

    def total(self, x: Tensor) -> Tensor:
        """The full gradient of ``x``: a chain of Adds when several consumers contributed."""
        parts = self.partials.pop(x.name)
        acc = parts[0]
        for i, p in enumerate(parts[1:]):
            last = i == len(parts) - 2
            out = f"{x.name}_grad" if last else f"AccumulateGrad_{x.name}_grad_intermediate_{i}"
            acc = self.gb.op("Add", [acc, p], out, x.shape,
                             name=f"AccumulateGrad_{x.name}_grad_add_{i}_Add_backward", backward=True)
        return acc


def linear(gb: GraphBuilder, x: Tensor, w: Tensor, b: Tensor | None, prefix: str) -> Tensor:
    """y = x @ w (+ b) with w stored [in, out]; Gemm when there is a bias, MatMul otherwise."""
    shape = x.shape[:-1] + (w.shape[1],)
    if b is None:
        return gb.op("MatMul", [x, w], f"{prefix}_MatMul_out", shape, name=f"{prefix}_MatMul")
    return gb.op("Gemm", [x, w, b], f"{prefix}_out", shape, name=f"{prefix}_Gemm",
                 alpha=1.0, beta=1.0, transA=0, transB=0)


def to_2d(gb: GraphBuilder, t: Tensor, out: str, name: str) -> Tensor:
    """Reshape [..., n] -> [prod(...), n]; a no-op when ``t`` is already 2D."""
    if len(t.shape) == 2:
        return t
    rows = int(np.prod(t.shape[:-1]))
    shape = gb.shape_const(f"{name}_target_shape", (rows, t.shape[-1]))
    return gb.op("Reshape", [t, shape], out, (rows, t.shape[-1]), name=name, backward=True)


def linear_weight_grad(gb: GraphBuilder, x: Tensor, dy: Tensor, w: Tensor, prefix: str) -> Tensor:
    """dW[in, out] = x2d^T @ dy2d, as cct2_ft2's ``*_MatMul_Grad_Gemm`` (transA=1)."""
    a2 = to_2d(gb, x, f"{prefix}_Grad_A_reshape_2d", f"{prefix}_Grad_A_Reshape_backward")
    d2 = to_2d(gb, dy, f"{prefix}_Grad_dY_reshape_2d", f"{prefix}_Grad_dY_Reshape_backward")
    return gb.op("Gemm", [a2, d2], f"{w.name}_grad", w.shape, name=f"{prefix}_Grad_dW_Gemm_backward",
                 backward=True, alpha=1.0, beta=0.0, transA=1, transB=0)


def linear_input_grad(gb: GraphBuilder, dy: Tensor, w: Tensor, x: Tensor, out: str, prefix: str) -> Tensor:
    """dX[..., in] = dy @ w^T, a (batched) Gemm with transB=1."""
    return gb.op("Gemm", [dy, w], out, x.shape, name=f"{prefix}_Grad_dX_Gemm_backward",
                 backward=True, alpha=1.0, beta=0.0, transA=0, transB=1)


def bias_grad(gb: GraphBuilder, dy: Tensor, b: Tensor, prefix: str) -> Tensor:
    """db[out] = sum of dy over all leading dims.

    A Reshape when there is one row (cct2_ft2's classifier bias); otherwise a ones-vector Gemm
    then a Reshape, which avoids ReduceSum's opset-dependent ``axes`` (Deeploy wants the
    attribute form, ONNX >= 13 the input form).
    """
    d2 = to_2d(gb, dy, f"{prefix}_Grad_dB_dY_reshape_2d", f"{prefix}_Grad_dB_dY_Reshape_backward")
    rows = d2.shape[0]
    if rows == 1:
        src = d2
    else:
        ones = gb.initializer(f"{prefix}_Grad_dB_ones", np.ones((1, rows), dtype=np.float32))
        src = gb.op("Gemm", [ones, d2], f"{prefix}_Grad_dB_row", (1, d2.shape[1]),
                    name=f"{prefix}_Grad_dB_Gemm_backward", backward=True,
                    alpha=1.0, beta=0.0, transA=0, transB=0)
    shape = gb.shape_const(f"{prefix}_Grad_dB_shape", b.shape)
    return gb.op("Reshape", [src, shape], f"{b.name}_grad", b.shape,
                 name=f"{prefix}_Grad_dB_Reshape_backward", backward=True)


def softmax_ce_loss(gb: GraphBuilder, logits: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """SoftmaxCrossEntropyLoss with Deeploy's one-output form (log_prob) and its gradient, in the form Deeploy's
    kernel computes it (training_ops.SOFTMAX_CE_GRAD_FORMS: the same at batch 1)."""
    log_prob = gb.op("SoftmaxCrossEntropyLoss", [logits, labels], "log_prob", logits.shape,
                     name="loss_SoftmaxCrossEntropyLoss", reduction="mean")
    dlogits = gb.op("SoftmaxCrossEntropyLossGrad", [log_prob, labels], f"{logits.name}_grad",
                    logits.shape, name="loss_Grad_SoftmaxCrossEntropyLossGrad_backward",
                    domain=MS_DOMAIN, backward=True, reduction="mean", form="deeploy")
    return log_prob, dlogits


#: The Gelu Deeploy's kernels compute, whatever a graph's attributes say (v0.2.1): the tanh form forward and,
#: backward, the derivative of x * sigmoid(1.702 x). The examples say so in their nodes, so that their goldens,
#: the host executor and the generated code compute the same step.
DEVICE_GELU = "tanh"
DEVICE_GELU_GRAD = "sigmoid"

#: The LayerNormalizationGrad Deeploy's kernel computes (LayernormGrad_fp32_fp32 in v0.2.1's
#: TargetLibraries/Generic/src/Layernorm_fp32.c): not the gradient unless every row's variance + epsilon is 1
#: (hostexec.training_ops.LAYER_NORM_GRAD_FORMS). Left to the gradient, the examples' goldens miss the device
#: by more than the harness's tolerance once dY is large (short sequences: the pool's softmax spreads dY over
#: fewer tokens); the examples say so in their nodes (``form``) like the Gelu above, so goldens, host and code
#: agree. A graph without the attribute (cct2_ft2) is held to the gradient.
DEVICE_LN_GRAD = "deeploy"


def gelu(gb: GraphBuilder, x: Tensor, out: str, name: str) -> Tensor:
    """Gelu (opset 20) in the form Deeploy computes."""
    return gb.op("Gelu", [x], out, x.shape, name=name, approximate=DEVICE_GELU)


def gelu_grad(gb: GraphBuilder, dy: Tensor, x: Tensor, name: str) -> Tensor:
    """GeluGrad(dY, X) in the default domain, as cct2_ft2, in the form Deeploy computes."""
    return gb.op("GeluGrad", [dy, x], f"{x.name}_grad", x.shape, name=name, backward=True,
                 approximate=DEVICE_GELU_GRAD)


def sgd_updates(gb: GraphBuilder, pairs: list[tuple[Tensor, Tensor]], lr: float) -> list[Tensor]:
    """One SGD node per (weight, grad); each updated weight becomes a graph output."""
    outs = []
    for w, g in pairs:
        upd = gb.op("SGD", [w, g], f"{w.name}_updated", w.shape, name=f"{w.name}_sgd", lr=float(lr))
        gb.output(upd)
        outs.append(upd)
    return outs


#: The training branch of Deeploy (deeploy_identity.Flavour.TRAINING_BRANCH) computes Gelu exactly (erf) both ways
#: and LayerNormalizationGrad as the gradient (its TargetLibraries' GELU.c, GELU_fp32.c and Layernorm.c): an
#: example made for it declares no approximation on those nodes (and ckpt's bridge hands its release-form
#: LayerNormalizationGrad and loss to that Deeploy in the branch's forms, deeploy_bridge.branch_forms).
EXACT_ON_THE_BRANCH = {"Gelu": "approximate", "GeluGrad": "approximate", "LayerNormalizationGrad": "form"}


def for_training_branch(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with the forms Deeploy's training branch computes: the attributes that name the release's kernels'
    approximations removed (EXACT_ON_THE_BRANCH)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for node in out.graph.node:
        drop = EXACT_ON_THE_BRANCH.get(node.op_type)
        kept = [a for a in node.attribute if a.name != drop]
        if len(kept) != len(node.attribute):
            del node.attribute[:]
            node.attribute.extend(kept)
    return out
