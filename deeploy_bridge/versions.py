"""Which Deeploy is installed and which targets it offers, so errors can name the exact version."""
from __future__ import annotations

import importlib.metadata
import importlib.util
from functools import lru_cache


@lru_cache(maxsize=1)
def deeploy_version() -> str:
    """Version of the installed Deeploy distribution (PyPI name deeploy-pulp), or 'unknown'."""
    for dist in ("deeploy-pulp", "deeploy", "Deeploy"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def has_target_package(name: str) -> bool:
    """True when Deeploy ships the module Deeploy.Targets.<name> (e.g. 'GAP9', 'PULPOpen')."""
    try:
        return importlib.util.find_spec(f"Deeploy.Targets.{name}") is not None
    except ModuleNotFoundError:
        return False
