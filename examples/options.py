"""Command-line options -> generator keyword arguments, refusing options a generator does not take."""
from __future__ import annotations

import inspect

from ckpt.errors import CkptError
from ckpt.examples.write import GENERATORS


def example_options(kind: str, given: dict) -> dict:
    accepted = inspect.signature(GENERATORS[kind]).parameters
    chosen = {k: v for k, v in given.items() if v is not None}
    wrong = sorted(k for k in chosen if k not in accepted)
    if wrong:
        flag = "--" + wrong[0].replace("_", "-")
        raise CkptError(f"option {flag} does not apply to a {kind} example",
                        f"{kind} takes: {', '.join(k.replace('_', '-') for k in accepted)}")
    if isinstance(chosen.get("train"), str) and "," in chosen["train"]:
        chosen["train"] = [int(p) if p.strip().isdigit() else p.strip() for p in chosen["train"].split(",")]
    return chosen
