"""What a tensor on chip saves a layer, measured on gvsoc: the level price fitted from calibration pairs, and the
split points it predicts.

For each model (a split step of Deeploy's training branch whose split-home graph order fits L2), ckpt calibrates the
graph order on gvsoc twice, every tensor in L3 and the split home (both cached as `ckpt calibrate` caches them),
pairs the two measurements of each layer with each tensor the split home keeps in L2 (its bytes, and the copies and
lines the all-L3 code moves it in: deeploy_bridge.tile_counts), and fits the price
(solver.graph.level_price.fit_level_price): cycles per copy, per line beyond a copy's first and per byte, one rate
for every op type (`--by-type`: a rate per op type where the layers move enough bytes of it). The first table sets
each model's measured saving (its all-L3 step less its split step, summed over its layers) beside the one the price
gives, fitted on all models and with the model left out; the fitted price is printed in targets.py's form
(SIRACUSA_LEVEL_PRICE). The second table (`--point MODEL=DIR`, a replayed split point: DIR/seq.json and
DIR/replay/report.json) predicts each point's train cycles with the op costs ckpt solves the split home with (the
model's split calibration, or where its graph order overflows L2 its all-L3 calibration priced by targets.py's
price; a split+ point's with the tensors its replay brought on chip priced as well) and sets them beside the
measured ones, both as an overhead over the all-L3 graph order (its calibration), says whether the prediction holds
within max(10% of the measured overhead, 0.1 points), and sets the optimizer's predicted cycles per update beside
its measured ones. Needs the training branch and gvsoc.

Run: python bench/level_price.py [--model DIR ...] [--point MODEL_DIR=POINT_DIR ...] [--by-type] [--smoke]
(--smoke: SimpleMLP's pair alone, no point.)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common import print_needs_branch

from ckpt.deeploy_bridge.setup import setup_for
from ckpt.deeploy_identity import Flavour, deeploy_flavour
from ckpt.errors import CkptError
from ckpt.paths import shared_models
from ckpt.pipeline.calibrate import calibrate, measured_costs
from ckpt.pipeline.split_costs import load_split
from ckpt.pipeline.split_plus import priced_on_chip
from ckpt.replay.predict import split_home_of
from ckpt.solver.graph.costs import measured_price
from ckpt.solver.graph.level_price import (
    MIN_TYPE_BYTES,
    LayerPair,
    fit_level_price,
    on_chip_copies,
    on_chip_lines,
    on_chip_tensors,
)
from ckpt.solver.graph.onnx_loader import io_names
from ckpt.solver.memory.placement import split_levels
from ckpt.targets import SPLIT_HOME

TARGET = "siracusa"
MODELS = ("simplemlp_train", "dscnn_train", "cct_lora_train", "resnet8_train")


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def layer_pairs(model: Path) -> list[LayerPair]:
    """Each layer of `model` measured with every tensor in L3 and at home split, with the bytes the split home keeps
    on chip (CkptError where the split graph order cannot be calibrated)."""
    off_chip = calibrate(model, TARGET, setup_for(TARGET, "L3"), progress=progress)
    split = calibrate(model, TARGET, setup_for(TARGET, SPLIT_HOME), progress=progress)
    loaded = load_split(model, TARGET, setup_for(TARGET, SPLIT_HOME))
    inputs, _ = io_names(loaded.lowered.model.graph)
    home = split_home_of(loaded.lowered)
    levels = split_levels(loaded.graph, inputs, home, loaded.persistent_io)
    moved = on_chip_tensors(loaded.graph, levels, home.default)
    copies = on_chip_copies(loaded.graph, levels, home.default, off_chip.node_transfers)
    bursts = on_chip_lines(loaded.graph, levels, home.default, off_chip.node_lines)
    kinds = {op.name: op.op_type for op in loaded.graph.ops}
    return [LayerPair(model.name, kinds[name], moved[name], cycles, split.node_cycles[name],
                      off_chip.node_tiles.get(name, 1), copies[name], bursts[name])
            for name, cycles in sorted(off_chip.node_cycles.items()) if name in split.node_cycles]


def _saving(pairs: list[LayerPair], price) -> int:
    return sum(price.saving(p.op_type, p.moved, p.off_chip, p.tiles, p.copies or None, p.lines or None)
               for p in pairs)


def within(predicted: float, measured: float) -> str:
    return "yes" if abs(predicted - measured) <= max(0.1 * abs(measured), 0.1) else "no"


def point_row(model: Path, point: Path) -> str:
    """One replayed split (or split+) point: predicted against measured train cycles, overheads over the all-L3
    graph order; the optimizer's cycles per update beside them. A split+ point is predicted with the tensors its
    replay brought on chip (report.json's setup), priced as a solve prices them (pipeline.split_plus)."""
    setup = setup_for(TARGET, SPLIT_HOME)
    loaded = load_split(model, TARGET, setup)
    costs = measured_costs(model, TARGET, setup, progress=progress, loaded=loaded)
    seq = json.loads((point / "seq.json").read_text())["seq"]
    report = json.loads((point / "replay" / "report.json").read_text())
    measured, optimizer = (report["gvsoc"]["tiled"][k] for k in ("cycles", "optimizer_cycles"))
    brought = frozenset(report["deeploy"]["tiled"]["setup"].get("on_chip_persistent", ()))
    priced = "all-L3 priced" if "priced" in costs.source else "split"
    costs = priced_on_chip(costs, loaded, brought) if brought else costs
    base = calibrate(model, TARGET, setup_for(TARGET, "L3"), progress=progress).step_cycles
    recomputed = [name for name, flag in seq if flag]
    predicted = costs.measured_step + sum(measured_price(costs, name) for name in recomputed)
    over_p, over_m = 100 * (predicted - base) / base, 100 * (measured - base) / base
    return (f"| {model.name} {point.name} | {len(recomputed)} | {len(brought)} | {priced} | {base:,} | "
            f"{predicted:,} | {measured:,} | {over_p:+.2f}% | {over_m:+.2f}% | {within(over_p, over_m)} | "
            f"{costs.measured_optimizer or 0:,} | {optimizer or 0:,} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a split step's train folder whose split graph order fits "
                        "L2 (repeatable; default: SimpleMLP, DS-CNN, CCT-LoRA, ResNet-8)")
    parser.add_argument("--point", action="append", default=[], help="MODEL_DIR=POINT_DIR, a replayed split point")
    parser.add_argument("--by-type", action="store_true", help="a rate per byte per op type (where its layers move "
                        f"at least {MIN_TYPE_BYTES:,} B), not one for all")
    parser.add_argument("--smoke", action="store_true", help="SimpleMLP's pair alone, no point")
    args = parser.parse_args()
    models = [Path(m) for m in args.model] if args.model else [shared_models() / m for m in MODELS]
    points = [tuple(Path(p) for p in text.split("=", 1)) for text in args.point]
    if args.smoke:
        models, points = models[:1], []
    print(f"target {TARGET}; the price fitted on {', '.join(m.name for m in models)}")
    print()
    print("| model | layers | all-L3 cycles of its layers | saving at home split, measured | by the price | left out |")
    print("|---|---|---|---|---|---|")
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        print_needs_branch(models, 6)
        return 0
    pairs = {}
    for model in models:
        try:
            pairs[model.name] = layer_pairs(model)
        except CkptError as err:
            print(f"| {model.name} | - | - | not calibrated at home split: {err.problem} | - | - |")
    every = [p for found in pairs.values() for p in found]
    by_type = MIN_TYPE_BYTES if args.by_type else None
    price = fit_level_price(every, by_type)
    for name, found in pairs.items():
        others = [p for p in every if p.model != name]
        left_out = f"{_saving(found, fit_level_price(others, by_type)):,}" if others else "-"
        base = sum(p.off_chip for p in found)
        print(f"| {name} | {len(found)} | {base:,} | {sum(p.off_chip - p.on_chip for p in found):,} | "
              f"{_saving(found, price):,} | {left_out} |")
    print()
    print(f"fitted price: {json.dumps(price.as_dict(), sort_keys=True)}")
    if points:
        print()
        print("| point | recomputes | split+ on chip | costs | all-L3 graph order | predicted | measured | "
              "overhead predicted | measured | within | optimizer predicted | measured |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for model, point in points:
            print(point_row(model, point), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
