"""What the benchmarks share: the model they measure unless told, and `--smoke`, each bench's smallest run.
Not a bench itself: the scripts import it from beside them.

`--smoke` runs a bench's whole table on the smallest input that still takes every step (a tiny model, one budget,
short limits); tests/test_bench_smoke.py runs it for every bench, so a bench that no longer runs fails the tests.
Options given beside `--smoke` still win.
"""
from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ckpt.examples import write_example
from ckpt.paths import shared_models

SMOKE_HELP = "the smallest run (a tiny model or graph, one budget, short limits): what the test suite runs"
MODEL_HELP = "model folder (default: $CKPT_BENCH_MODEL, else the shared cct2_ft2; with --smoke a tiny MLP)"


def default_model() -> str:
    """The model a bench measures unless told: $CKPT_BENCH_MODEL, else the shared CCT2_FT2."""
    return os.environ.get("CKPT_BENCH_MODEL", str(shared_models() / "cct2_ft2"))


def parse_args(parser: argparse.ArgumentParser, smoke: dict[str, object]) -> argparse.Namespace:
    """The command line; with --smoke, the values in `smoke` replace the defaults of the options they name."""
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    return parser.parse_args(namespace=argparse.Namespace(**smoke)) if args.smoke else args


@contextmanager
def model_folder(given: str | None, smoke: bool, batch: int = 4) -> Iterator[str]:
    """The model folder a bench measures: the one given, else with --smoke a tiny one written for this run
    (`tiny_model`), else the default."""
    if given or not smoke:
        yield given or default_model()
        return
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-smoke-") as tmp:
        yield str(tiny_model(Path(tmp) / "tiny-mlp", batch))


def tiny_model(folder: Path, batch: int = 4) -> Path:
    """A two-layer MLP training step with goldens, about the smallest graph Deeploy lowers for Siracusa. At
    batch 4 some of its budgets need recomputes; its generated code computes the goldens only at batch 1 (Deeploy
    0.2.1's SoftmaxCrossEntropyLossGrad divides by the batch twice)."""
    write_example("mlp", folder, layers=2, width=16, in_dim=8, batch=batch)
    return folder
