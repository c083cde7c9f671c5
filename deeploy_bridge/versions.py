"""Which Deeploy is installed (ckpt.deeploy_identity), its files' fingerprint, and which targets it offers."""
from __future__ import annotations

import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path

from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label, deeploy_version

from . import workarounds

__all__ = ["Flavour", "deeploy_flavour", "deeploy_label", "deeploy_version", "deeploy_fingerprint",
           "has_target_package", "bridge_fingerprint"]


@lru_cache(maxsize=1)
def deeploy_fingerprint() -> str:
    """The installed Deeploy's version and a sha256 over its Python files: a branch of Deeploy installed in place
    of the release can report the release's version, and must not be served the release's cached results."""
    spec = importlib.util.find_spec("Deeploy")
    digest = hashlib.sha256()
    for folder in (spec.submodule_search_locations or []) if spec else []:
        root = Path(folder)
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return f"{deeploy_version()}+{digest.hexdigest()[:16]}"


def has_target_package(name: str) -> bool:
    """True when Deeploy ships the module Deeploy.Targets.<name> (e.g. 'GAP9', 'PULPOpen')."""
    try:
        return importlib.util.find_spec(f"Deeploy.Targets.{name}") is not None
    except ModuleNotFoundError:
        return False


@lru_cache(maxsize=1)
def _bridge_files() -> str:
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(here.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def bridge_fingerprint() -> str:
    """sha256 over this package's files and the workarounds in force: the code ckpt assembles around Deeploy's (in
    place, write back, a re-runnable step, its own templates) comes from them, so a cached result of generated
    code is keyed by them too."""
    active = ",".join(workarounds.key())
    return f"{_bridge_files()}+{active}" if active else _bridge_files()
