"""Command-line options -> generator keyword arguments, refusing options a generator does not take."""
from __future__ import annotations

import inspect

from ckpt.errors import CkptError
from ckpt.examples.write import GENERATORS


def example_options(kind: str, given: dict) -> dict:
    """`given`: every option the command line offers (None where not given): the way out names only those of
    them the generator takes, never a parameter the command line has no option for."""
    accepted = inspect.signature(GENERATORS[kind]).parameters
    chosen = {k: v for k, v in given.items() if v is not None}
    wrong = sorted(k for k in chosen if k not in accepted)
    if wrong:
        flag = "--" + wrong[0].replace("_", "-")
        offered = [f"--{k.replace('_', '-')}" for k in accepted if k in given]
        raise CkptError(f"option {flag} does not apply to a {kind} example",
                        f"{kind} takes: {', '.join(offered)}")
    if isinstance(chosen.get("train"), str) and ("," in chosen["train"] or chosen["train"].strip().isdigit()):
        chosen["train"] = [int(p) if p.strip().isdigit() else p.strip() for p in chosen["train"].split(",")]
    values = _sized(kind, {**{k: p.default for k, p in accepted.items()}, **chosen})
    if values > MAX_VALUES:
        raise CkptError(f"this {kind} example would hold about {values:.3g} numbers ({4 * values / 2 ** 30:.1f} GiB "
                        "of weights and activations)", "choose smaller options: examples are graphs for a device")
    return chosen


MAX_VALUES = 2 ** 28          # about a GiB of float32: far above what a device trains, below what a host holds


def _sized(kind: str, o: dict) -> float:
    """A rough count of the numbers an example's graph holds (weights, their gradients, one activation set)."""
    if kind == "cct":
        tokens = (o["image_size"] // 4) ** 2
        width = o["mlp_dim"] or 2 * o["embed_dim"]
        weights = o["blocks"] * (4 * o["embed_dim"] ** 2 + 2 * o["embed_dim"] * width)
        return 2 * weights + o["batch"] * (o["image_size"] ** 2 * o["conv_channels"]
                                           + o["blocks"] * tokens * (8 * o["embed_dim"] + tokens * o["heads"]))
    if kind == "mlp":
        return 2 * o["layers"] * o["width"] ** 2 + o["batch"] * o["layers"] * o["width"] * 4
    return 2 * o["blocks"] * 18 * o["channels"] ** 2 + o["batch"] * o["blocks"] * 8 * o["channels"] * \
        o["image_size"] ** 2
