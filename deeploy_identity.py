"""Which Deeploy is installed, read from its distribution and its files (without importing it).

Two Deeploys call themselves 0.2.1: the release (PyPI's deeploy-pulp) and the training branch (pull request 169 of
github.com/pulp-platform/Deeploy, installed from a checkout in its place). They are told apart by their files: the
branch ships the PULPOpen mapping of com.microsoft InPlaceAccumulatorV2 (its training graphs' gradient
accumulation), which the release has not. `deeploy_label()` names the one installed in every report and error;
the kernels the generated code is built with come from a checkout of the same one (coderun.sources).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
from enum import StrEnum
from functools import lru_cache

# a module only the training branch has: its PULPOpen template of InPlaceAccumulatorV2
BRANCH_MARKER = "Deeploy.Targets.PULPOpen.Templates.FloatInPlaceAccumulatorV2Template"


class Flavour(StrEnum):
    """Which Deeploy is installed, by its files."""

    RELEASE = "release"
    TRAINING_BRANCH = "training branch"


@lru_cache(maxsize=1)
def deeploy_version() -> str:
    """Version of the installed Deeploy distribution (PyPI name deeploy-pulp), or 'unknown'."""
    for dist in ("deeploy-pulp", "deeploy", "Deeploy"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


@lru_cache(maxsize=1)
def deeploy_flavour() -> Flavour:
    """The release, or the training branch (see the module doc)."""
    try:
        branch = importlib.util.find_spec(BRANCH_MARKER) is not None
    except ModuleNotFoundError:
        branch = False
    return Flavour.TRAINING_BRANCH if branch else Flavour.RELEASE


def deeploy_label() -> str:
    """The installed Deeploy as reports and errors name it: its version and which of the two it is."""
    return f"{deeploy_version()} ({deeploy_flavour().value})"
