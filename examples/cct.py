"""A Compact-Convolutional-Transformer training step shaped like Deeploy's CCT2_FT2 graph.

Same op set, domains and conventions as shared/models/cct2_ft2 (minus Squeeze/Unsqueeze/ReduceSum,
replaced by Reshape and a ones-vector Gemm), so Deeploy's Siracusa target lowers and generates it,
while the number of blocks, widths and the trained subset are free. As in cct2_ft2, the conv
tokenizer, positional embedding, LayerNorm parameters and the transformer blocks' biases are
frozen; a trained block updates its q/k/v/proj/linear1/linear2 weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from .builder import INT64, MS_DOMAIN, GraphBuilder, Tensor
from .ops import (
    DEFAULT_LR,
    DEVICE_LN_GRAD,
    GradSet,
    bias_grad,
    gelu,
    gelu_grad,
    init_bias,
    init_weight,
    linear,
    linear_input_grad,
    linear_weight_grad,
    sgd_updates,
    softmax_ce_loss,
)

LN_EPS = 1e-5
Train = str | Sequence[int | str]


@dataclass(frozen=True)
class TrainSet:
    """Which parameter groups get gradients: block indices, the attention pool and the fc head."""

    blocks: frozenset[int]
    pool: bool
    fc: bool

    @staticmethod
    def parse(train: Train, blocks: int) -> TrainSet:
        """``"all"``, ``"classifier"`` (fc only: a linear probe like cct2_lp), ``"none"``, or a
        list of block indices and/or ``"pool"``, ``"fc"``, ``"head"`` (pool + fc)."""
        if isinstance(train, str):
            if train == "all":
                return TrainSet(frozenset(range(blocks)), True, True)
            if train == "classifier":
                return TrainSet(frozenset(), False, True)
            if train == "none":
                return TrainSet(frozenset(), False, False)
            raise ValueError(f"unknown train spec {train!r}")
        idx, pool, fc = set(), False, False
        for item in train:
            if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                if not 0 <= int(item) < blocks:
                    raise ValueError(f"block index {item} out of range for {blocks} blocks")
                idx.add(int(item))
            elif item == "pool":
                pool = True
            elif item == "fc":
                fc = True
            elif item == "head":
                pool = fc = True
            else:
                raise ValueError(f"unknown train item {item!r}")
        return TrainSet(frozenset(idx), pool, fc)

    @property
    def lowest(self) -> int | None:
        """The first block backward must reach (None: backward stops in the head)."""
        return min(self.blocks) if self.blocks else None


@dataclass
class _Block:
    """Forward tensors of one transformer block that its backward needs."""

    x0: Tensor
    ln_pre: Tensor
    q_t: Tensor
    k_t: Tensor
    v_t: Tensor
    att: Tensor
    attn_2d_in: Tensor
    x1: Tensor
    n1: Tensor
    l1: Tensor
    g: Tensor
    w: dict[str, Tensor]
    ln: dict[str, Tensor]


def cct(blocks: int = 2, embed_dim: int = 128, heads: int = 2, mlp_dim: int | None = None,
        image_size: int = 32, conv_layers: int = 2, conv_channels: int = 64, in_channels: int = 3,
        classes: int = 10, batch: int = 1, train: Train = "all", seed: int = 0,
        lr: float = DEFAULT_LR) -> onnx.ModelProto:
    """One SGD step of a CCT: frozen conv tokenizer (Conv/Relu/MaxPool per layer, each MaxPool
    halves the image), ``blocks`` pre-norm transformer blocks, attention-pool head, fc classifier.

    Sequence length is (image_size / 2**conv_layers)**2. Defaults reproduce cct2_ft2's shapes.
    Deeploy lowering is checked for batch=1 (cct2_ft2's batch); batch>1 relies on broadcasting
    Adds of the positional embedding.
    """
    if blocks < 0 or conv_layers < 1 or embed_dim % heads:
        raise ValueError("need blocks >= 0, conv_layers >= 1 and embed_dim divisible by heads")
    if image_size % (2 ** conv_layers):
        raise ValueError("image_size must be divisible by 2**conv_layers")
    mlp_dim = embed_dim if mlp_dim is None else mlp_dim
    ts = TrainSet.parse(train, blocks)
    rng = np.random.default_rng(seed)
    gb = GraphBuilder(f"cct{blocks}_d{embed_dim}")
    image = gb.input("input", (batch, in_channels, image_size, image_size))
    labels = gb.input("labels", (batch,), INT64)

    tokens = _tokenizer(gb, rng, image, conv_layers, conv_channels, embed_dim)
    seq = tokens.shape[1]
    pos = gb.initializer("positional_emb", (0.1 * rng.standard_normal((1, seq, embed_dim))).astype(np.float32))
    x = gb.op("Add", [tokens, pos], "pos_Add_out", tokens.shape, name="pos_Add")
    scale = gb.initializer("attn_scale", np.asarray(1.0 / np.sqrt(embed_dim // heads), dtype=np.float32))

    fwd = []
    for i in range(blocks):
        blk = _block_forward(gb, rng, x, i, heads, mlp_dim, scale)
        fwd.append(blk)
        x = gb.get(f"blocks_{i}_Add_3_out")

    norm_w = gb.initializer("norm_weight", np.ones(embed_dim, np.float32))
    norm_b = gb.initializer("norm_bias", np.zeros(embed_dim, np.float32))
    x_last = x
    xn = _layer_norm(gb, x_last, norm_w, norm_b, "norm")
    head = _head_forward(gb, rng, xn, classes)
    _, dlogits = softmax_ce_loss(gb, head["logits"], labels)

    updates: list[tuple[Tensor, Tensor]] = []
    dx = _head_backward(gb, head, xn, dlogits, ts, updates)
    if dx is not None:
        dx = _layer_norm_grad(gb, dx, x_last, norm_w, norm_b, f"{x_last.name}_grad", "norm")
        for i in reversed(range(ts.lowest, blocks)):  # type: ignore[arg-type]
            dx = _block_backward(gb, fwd[i], dx, i, heads, scale, i in ts.blocks, i > ts.lowest, updates)

    order = {name: k for k, name in enumerate(_param_order(blocks))}
    sgd_updates(gb, sorted(updates, key=lambda u: order[u[0].name]), lr)
    return gb.build(doc=f"ckpt.examples.cct(blocks={blocks}, embed_dim={embed_dim}, heads={heads}, "
                        f"mlp_dim={mlp_dim}, image_size={image_size}, conv_layers={conv_layers}, "
                        f"conv_channels={conv_channels}, classes={classes}, batch={batch}, "
                        f"train={train!r}, seed={seed}, lr={lr})")


def _param_order(blocks: int) -> list[str]:
    names = []
    for i in range(blocks):
        names += [f"blocks_{i}_{p}_weight" for p in ("q_proj", "k_proj", "v_proj", "proj", "linear1", "linear2")]
    return names + ["attention_pool_weight", "attention_pool_bias", "fc_weight", "fc_bias"]


def _tokenizer(gb: GraphBuilder, rng: np.random.Generator, image: Tensor, layers: int,
               channels: int, embed_dim: int) -> Tensor:
    """Frozen Conv(3x3)/Relu/MaxPool(3x3, stride 2) stack, flattened to [B, seq, embed_dim]."""
    x = image
    for layer in range(layers):
        cin, cout = x.shape[1], (embed_dim if layer == layers - 1 else channels)
        w = gb.initializer(f"tokenizer_conv_{layer}_weight", init_weight(rng, cin * 9, (cout, cin, 3, 3)))
        b, _, h, wd = x.shape
        x = gb.op("Conv", [x, w], f"tokenizer_conv_{layer}_out", (b, cout, h, wd), name=f"tokenizer_conv_{layer}_Conv",
                  auto_pad="NOTSET", dilations=[1, 1], group=1, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                  strides=[1, 1])
        x = gb.op("Relu", [x], f"tokenizer_relu_{layer}_out", x.shape, name=f"tokenizer_relu_{layer}_Relu")
        x = gb.op("MaxPool", [x], f"tokenizer_pool_{layer}_out", (b, cout, h // 2, wd // 2),
                  name=f"tokenizer_pool_{layer}_MaxPool", auto_pad="NOTSET", ceil_mode=0, dilations=[1, 1],
                  kernel_shape=[3, 3], pads=[1, 1, 1, 1], storage_order=0, strides=[2, 2])
    b, c, h, wd = x.shape
    shape = gb.shape_const("tokenizer_flatten_shape", (b, c, h * wd))
    x = gb.op("Reshape", [x, shape], "tokenizer_flatten_out", (b, c, h * wd), name="tokenizer_flatten_Reshape")
    return gb.op("Transpose", [x], "tokenizer_Transpose_out", (b, h * wd, c), name="tokenizer_Transpose",
                 perm=[0, 2, 1])


def _layer_norm(gb: GraphBuilder, x: Tensor, w: Tensor, b: Tensor, prefix: str) -> Tensor:
    return gb.op("LayerNormalization", [x, w, b], f"{prefix}_out", x.shape, name=f"{prefix}_LayerNormalization",
                 axis=-1, epsilon=LN_EPS, stash_type=1)


def _layer_norm_grad(gb: GraphBuilder, dy: Tensor, x: Tensor, w: Tensor, b: Tensor, out: str, prefix: str
                     ) -> Tensor:
    """d(x) of _layer_norm as Deeploy's training graphs write it (dY, X, scale, bias), in the form Deeploy
    computes (ops.DEVICE_LN_GRAD)."""
    return gb.op("LayerNormalizationGrad", [dy, x, w, b], out, x.shape,
                 name=f"{prefix}_Grad_LayerNormalizationGrad_backward", domain=MS_DOMAIN, backward=True,
                 axis=-1, epsilon=LN_EPS, stash_type=1, form=DEVICE_LN_GRAD)


def _block_forward(gb: GraphBuilder, rng: np.random.Generator, x0: Tensor, i: int, heads: int,
                   mlp_dim: int, scale: Tensor) -> _Block:
    """x1 = x0 + proj(attn(pre_norm(x0))); n1 = norm1(x1); out = n1 + linear2(gelu(linear1(n1)))."""
    p = f"blocks_{i}"
    b, s, d = x0.shape
    dh = d // heads
    ln = {f"{k}_{t}": gb.initializer(f"{p}_{k}_{t}", (np.ones(d) if t == "weight" else np.zeros(d)).astype(np.float32))
          for k in ("pre_norm", "norm1") for t in ("weight", "bias")}
    w = {n: gb.initializer(f"{p}_{n}_weight", init_weight(rng, d, (d, d)))
         for n in ("q_proj", "k_proj", "v_proj", "proj")}
    w["linear1"] = gb.initializer(f"{p}_linear1_weight", init_weight(rng, d, (d, mlp_dim)))
    w["linear2"] = gb.initializer(f"{p}_linear2_weight", init_weight(rng, mlp_dim, (mlp_dim, d)))
    bias = {n: gb.initializer(f"{p}_{n}_bias", init_bias(rng, (w[n].shape[1],)))
            for n in ("proj", "linear1", "linear2")}

    ln_pre = _layer_norm(gb, x0, ln["pre_norm_weight"], ln["pre_norm_bias"], f"{p}_pre_norm")
    heads_shape = gb.shape_const(f"attn_heads_shape_{b}x{s}x{heads}x{dh}", (b, s, heads, dh))
    proj_in = {}
    for n, perm in (("q_proj", [0, 2, 1, 3]), ("k_proj", [0, 2, 3, 1]), ("v_proj", [0, 2, 1, 3])):
        t = linear(gb, ln_pre, w[n], None, f"{p}_attn_{n}")
        t = gb.op("Reshape", [t, heads_shape], f"{p}_attn_{n}_heads_out", (b, s, heads, dh),
                  name=f"{p}_attn_{n}_heads_Reshape")
        out_shape = tuple((b, s, heads, dh)[k] for k in perm)
        proj_in[n] = gb.op("Transpose", [t], f"{p}_attn_{n}_t_out", out_shape, name=f"{p}_attn_{n}_Transpose",
                           perm=perm)
    q_t, k_t, v_t = proj_in["q_proj"], proj_in["k_proj"], proj_in["v_proj"]
    sc = gb.op("MatMul", [q_t, k_t], f"{p}_attn_scores_out", (b, heads, s, s), name=f"{p}_attn_scores_MatMul")
    sc = gb.op("Mul", [sc, scale], f"{p}_attn_scaled_out", sc.shape, name=f"{p}_attn_scale_Mul")
    att = gb.op("Softmax", [sc], f"{p}_attn_Softmax_out", sc.shape, name=f"{p}_attn_Softmax", axis=3)
    o = gb.op("MatMul", [att, v_t], f"{p}_attn_context_out", (b, heads, s, dh), name=f"{p}_attn_context_MatMul")
    o = gb.op("Transpose", [o], f"{p}_attn_merge_t_out", (b, s, heads, dh), name=f"{p}_attn_merge_Transpose",
              perm=[0, 2, 1, 3])
    merge_shape = gb.shape_const(f"seq_shape_{b}x{s}x{d}", (b, s, d))
    o = gb.op("Reshape", [o, merge_shape], f"{p}_attn_merge_out", (b, s, d), name=f"{p}_attn_merge_Reshape")
    proj = linear(gb, o, w["proj"], bias["proj"], f"{p}_attn_proj")
    x1 = gb.op("Add", [x0, proj], f"{p}_Add_out", x0.shape, name=f"{p}_Add")
    n1 = _layer_norm(gb, x1, ln["norm1_weight"], ln["norm1_bias"], f"{p}_norm1")
    l1 = linear(gb, n1, w["linear1"], bias["linear1"], f"{p}_linear1")
    g = gelu(gb, l1, f"{p}_Gelu_out", name=f"{p}_Gelu")
    l2 = linear(gb, g, w["linear2"], bias["linear2"], f"{p}_linear2")
    gb.op("Add", [n1, l2], f"{p}_Add_3_out", n1.shape, name=f"{p}_Add_3")
    return _Block(x0, ln_pre, q_t, k_t, v_t, att, o, x1, n1, l1, g, w, ln)


def _head_forward(gb: GraphBuilder, rng: np.random.Generator, xn: Tensor, classes: int) -> dict[str, Tensor]:
    """Sequence (attention) pooling then the fc classifier, as CCT's classifier head."""
    b, s, d = xn.shape
    pw = gb.initializer("attention_pool_weight", init_weight(rng, d, (d, 1)))
    pb = gb.initializer("attention_pool_bias", init_bias(rng, (1,)))
    fw = gb.initializer("fc_weight", init_weight(rng, d, (classes, d)))
    fb = gb.initializer("fc_bias", init_bias(rng, (classes,)))
    a = linear(gb, xn, pw, pb, "attention_pool")
    a_t = gb.op("Reshape", [a, gb.shape_const("pool_scores_shape", (b, 1, s))], "pool_scores_t_out", (b, 1, s),
                name="pool_scores_Reshape")
    sm = gb.op("Softmax", [a_t], "pool_Softmax_out", a_t.shape, name="pool_Softmax", axis=2)
    mm = gb.op("MatMul", [sm, xn], "pool_MatMul_out", (b, 1, d), name="pool_MatMul")
    pooled = gb.op("Reshape", [mm, gb.shape_const("pooled_shape", (b, d))], "pooled_out", (b, d),
                   name="pooled_Reshape")
    logits = gb.op("Gemm", [pooled, fw, fb], "output", (b, classes), name="fc_Gemm",
                   alpha=1.0, beta=1.0, transA=0, transB=1)
    return {"pw": pw, "pb": pb, "fw": fw, "fb": fb, "a": a, "a_t": a_t, "sm": sm, "mm": mm,
            "pooled": pooled, "logits": logits}


def _head_backward(gb: GraphBuilder, h: dict[str, Tensor], xn: Tensor, dlogits: Tensor, ts: TrainSet,
                   updates: list[tuple[Tensor, Tensor]]) -> Tensor | None:
    """Gradients of the fc and pool parameters; returns d(xn) when backward goes further down."""
    fw, fb, pooled = h["fw"], h["fb"], h["pooled"]
    if ts.fc:
        dfw = gb.op("Gemm", [dlogits, pooled], "fc_weight_grad", fw.shape, name="fc_Grad_dW_Gemm_backward",
                    backward=True, alpha=1.0, beta=0.0, transA=1, transB=0)
        updates += [(fw, dfw), (fb, bias_grad(gb, dlogits, fb, "fc"))]
    if not (ts.pool or ts.blocks):
        return None
    dpooled = gb.op("Gemm", [dlogits, fw], "pooled_out_grad", pooled.shape, name="fc_Grad_dX_Gemm_backward",
                    backward=True, alpha=1.0, beta=0.0, transA=0, transB=0)
    mm, sm, a, a_t = h["mm"], h["sm"], h["a"], h["a_t"]
    dmm = gb.op("Reshape", [dpooled, gb.shape_const("pool_MatMul_grad_shape", mm.shape)], "pool_MatMul_out_grad",
                mm.shape, name="pooled_Grad_Reshape_backward", backward=True)
    grads = GradSet(gb)
    dsm = gb.op("Gemm", [dmm, xn], "pool_Softmax_out_grad", sm.shape, name="pool_MatMul_Grad_dA_Gemm_backward",
                backward=True, alpha=1.0, beta=0.0, transA=0, transB=1)
    grads.add(xn, gb.op("Gemm", [sm, dmm], grads.name_for(xn), xn.shape, name="pool_MatMul_Grad_dB_Gemm_backward",
                        backward=True, alpha=1.0, beta=0.0, transA=1, transB=0))
    da_t = gb.op("SoftmaxGrad", [dsm, sm], "pool_scores_t_out_grad", a_t.shape,
                 name="pool_Softmax_Grad_SoftmaxGrad_backward", domain=MS_DOMAIN, backward=True, axis=2)
    da = gb.op("Reshape", [da_t, gb.shape_const("pool_scores_grad_shape", a.shape)], "attention_pool_out_grad",
               a.shape, name="pool_scores_Grad_Reshape_backward", backward=True)
    if ts.pool:
        updates += [(h["pw"], linear_weight_grad(gb, xn, da, h["pw"], "attention_pool")),
                    (h["pb"], bias_grad(gb, da, h["pb"], "attention_pool"))]
    if not ts.blocks:
        return None
    grads.add(xn, linear_input_grad(gb, da, h["pw"], xn, grads.name_for(xn), "attention_pool"))
    return grads.total(xn)


def _block_backward(gb: GraphBuilder, blk: _Block, dout: Tensor, i: int, heads: int, scale: Tensor,
                    trained: bool, need_dx: bool, updates: list[tuple[Tensor, Tensor]]) -> Tensor | None:
    """Backward of one block from d(block output); weight grads only when the block is trained."""
    p = f"blocks_{i}"
    b, s, d = blk.x0.shape
    dh = d // heads
    w = blk.w
    grads = GradSet(gb)

    def wgrad(x: Tensor, dy: Tensor, name: str) -> None:
        if trained:
            updates.append((w[name], linear_weight_grad(gb, x, dy, w[name], f"{p}_{name}")))

    # MLP: out = n1 + linear2(gelu(linear1(n1)))
    wgrad(blk.g, dout, "linear2")
    dg = linear_input_grad(gb, dout, w["linear2"], blk.g, f"{blk.g.name}_grad", f"{p}_linear2")
    dl1 = gelu_grad(gb, dg, blk.l1, f"{p}_Gelu_Grad_GeluGrad_backward")
    wgrad(blk.n1, dl1, "linear1")
    grads.add(blk.n1, linear_input_grad(gb, dl1, w["linear1"], blk.n1, grads.name_for(blk.n1), f"{p}_linear1"))
    grads.add(blk.n1, dout)
    dx1 = _layer_norm_grad(gb, grads.total(blk.n1), blk.x1, blk.ln["norm1_weight"], blk.ln["norm1_bias"],
                           f"{blk.x1.name}_grad", f"{p}_norm1")

    # Attention: x1 = x0 + proj(merge(att @ v))
    wgrad(blk.attn_2d_in, dx1, "proj")
    do = linear_input_grad(gb, dx1, w["proj"], blk.attn_2d_in, f"{blk.attn_2d_in.name}_grad", f"{p}_attn_proj")
    dv_t, dq_t, dk_t = _attention_backward(gb, blk, do, p, heads, scale)
    seq_shape = gb.shape_const(f"seq_shape_{b}x{s}x{d}", (b, s, d))
    for n, dt, inv in (("v_proj", dv_t, [0, 2, 1, 3]), ("q_proj", dq_t, [0, 2, 1, 3]), ("k_proj", dk_t, [0, 3, 1, 2])):
        t = gb.op("Transpose", [dt], f"{p}_attn_{n}_heads_out_grad", (b, s, heads, dh),
                  name=f"{p}_attn_{n}_Grad_Transpose_backward", backward=True, perm=inv)
        dproj = gb.op("Reshape", [t, seq_shape], f"{p}_attn_{n}_MatMul_out_grad", (b, s, d),
                      name=f"{p}_attn_{n}_heads_Grad_Reshape_backward", backward=True)
        wgrad(blk.ln_pre, dproj, n)
        if need_dx:
            grads.add(blk.ln_pre, linear_input_grad(gb, dproj, w[n], blk.ln_pre, grads.name_for(blk.ln_pre),
                                                    f"{p}_attn_{n}"))
    if not need_dx:
        return None
    dln = _layer_norm_grad(gb, grads.total(blk.ln_pre), blk.x0, blk.ln["pre_norm_weight"], blk.ln["pre_norm_bias"],
                           grads.name_for(blk.x0), f"{p}_pre_norm")
    grads.add(blk.x0, dx1)
    grads.add(blk.x0, dln)
    return grads.total(blk.x0)


def _attention_backward(gb: GraphBuilder, blk: _Block, do: Tensor, p: str, heads: int, scale: Tensor
                        ) -> tuple[Tensor, Tensor, Tensor]:
    """From d(merged context) back through att @ v and softmax(q k^T * scale): (dv_t, dq_t, dk_t)."""
    b, s, d = blk.x0.shape
    dh = d // heads
    do = gb.op("Reshape", [do, gb.shape_const(f"attn_heads_shape_{b}x{s}x{heads}x{dh}", (b, s, heads, dh))],
               f"{p}_attn_merge_t_out_grad", (b, s, heads, dh), name=f"{p}_attn_merge_Grad_Reshape_backward",
               backward=True)
    do = gb.op("Transpose", [do], f"{p}_attn_context_out_grad", (b, heads, s, dh),
               name=f"{p}_attn_merge_Grad_Transpose_backward", backward=True, perm=[0, 2, 1, 3])
    datt = gb.op("Gemm", [do, blk.v_t], f"{blk.att.name}_grad", blk.att.shape,
                 name=f"{p}_attn_context_Grad_dA_Gemm_backward", backward=True, alpha=1.0, beta=0.0, transA=0, transB=1)
    dv_t = gb.op("Gemm", [blk.att, do], f"{blk.v_t.name}_grad", blk.v_t.shape,
                 name=f"{p}_attn_context_Grad_dB_Gemm_backward", backward=True, alpha=1.0, beta=0.0, transA=1, transB=0)
    dsc = gb.op("SoftmaxGrad", [datt, blk.att], f"{p}_attn_scaled_out_grad", blk.att.shape,
                name=f"{p}_attn_Softmax_Grad_SoftmaxGrad_backward", domain=MS_DOMAIN, backward=True, axis=3)
    dsc = gb.op("Mul", [dsc, scale], f"{p}_attn_scores_out_grad", blk.att.shape,
                name=f"{p}_attn_scale_Grad_Mul_backward", backward=True)
    dq_t = gb.op("Gemm", [dsc, blk.k_t], f"{blk.q_t.name}_grad", blk.q_t.shape,
                 name=f"{p}_attn_scores_Grad_dA_Gemm_backward", backward=True, alpha=1.0, beta=0.0, transA=0, transB=1)
    dk_t = gb.op("Gemm", [blk.q_t, dsc], f"{blk.k_t.name}_grad", blk.k_t.shape,
                 name=f"{p}_attn_scores_Grad_dB_Gemm_backward", backward=True, alpha=1.0, beta=0.0, transA=1, transB=0)
    return dv_t, dq_t, dk_t
