"""Build a fresh Deeploy platform + deployer for a target name.

Everything Deeploy keeps in module-level defaults is copied here, because PULPDeployer appends its
lowering passes to the shared ``PULPOptimizer`` list and ``PULPPlatform()`` shares one default
``PULPClusterEngine`` (and its Mapping dict) between all instances; reusing them would make a second
run in the same process differ from the first.
"""
from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass

from Deeploy.DeeployTypes import TopologyOptimizer
from Deeploy.Targets.PULPOpen.Platform import (
    MemoryPULPPlatformWrapper,
    PULPClusterEngine,
    PULPMapping,
    PULPOptimizer,
    PULPPlatform,
)

from . import workarounds
from .errors import BridgeError
from .in_place import InPlacePULPDeployer
from .layernorm_grad import restarting_layer
from .setup import DEEPLOY_TARGETS, TARGET_TABLE
from .versions import deeploy_label, has_target_package


@dataclass
class TargetParts:
    """Constructors Deeploy needs for one target."""

    platform: object  # DeploymentPlatform instance (fresh)
    deployer_cls: type
    optimizer: object  # TopologyOptimizer instance (fresh pass list)
    cluster_engine_cls: type


def _fresh_optimizer(shared) -> TopologyOptimizer:
    return TopologyOptimizer(list(shared.passes), name=getattr(shared, "name", "TopologyOptimizer"))


def _siracusa(n_cores: int) -> TargetParts:
    mapping = dict(PULPMapping)
    if workarounds.is_active(workarounds.Defect.LAYERNORM_GRAD_ZEROING):
        restarting_layer(mapping)
    engine = PULPClusterEngine("PULPCluster", Mapping=mapping, n_cores=n_cores)
    return TargetParts(PULPPlatform(engines=[engine]), InPlacePULPDeployer, _fresh_optimizer(PULPOptimizer),
                       PULPClusterEngine)


def _gap9_module(name: str):
    """GAP9 exists only in newer (devel) Deeploy, so it is imported by name when asked for, never at load."""
    if not has_target_package("GAP9"):
        raise BridgeError(f"Deeploy {deeploy_label()} has no GAP9 target (no Deeploy.Targets.GAP9); "
                          "install a Deeploy with GAP9 and training-op mappings")
    return importlib.import_module(f"Deeploy.Targets.GAP9.{name}")


def _gap9(n_cores: int) -> TargetParts:
    """Its class names follow the PULPOpen pattern."""
    platform_mod, deployer_mod = _gap9_module("Platform"), _gap9_module("Deployer")
    try:
        platform_cls = platform_mod.GAP9Platform
        optimizer = getattr(platform_mod, "GAP9Optimizer", None) or PULPOptimizer
        deployer_cls = deployer_mod.GAP9Deployer
    except AttributeError as exc:
        raise BridgeError(f"Deeploy {deeploy_label()} GAP9 target lacks an expected class: {exc}") from None
    platform = copy.copy(platform_cls())
    engine_cls = type(platform.engines[0])
    for engine in platform.engines:
        if hasattr(engine, "n_cores"):
            engine.n_cores = n_cores
    return TargetParts(platform, deployer_cls, _fresh_optimizer(optimizer), engine_cls)


def target_parts(target: str, n_cores: int) -> TargetParts:
    """Fresh platform/deployer/optimizer for a Deeploy target."""
    if target == "siracusa":
        return _siracusa(n_cores)
    if target == "gap9":
        return _gap9(n_cores)
    raise BridgeError(f"unknown Deeploy target {target!r}; expected one of {', '.join(DEEPLOY_TARGETS)}")


def memory_platform_wrapper(target: str) -> type:
    """The platform wrapper that gives a target's platform the memory hierarchy of the tiled flow."""
    if target == "siracusa":
        return MemoryPULPPlatformWrapper
    return _gap9_module("Platform").MemoryGAP9PlatformWrapper


def on_chip_level(target: str) -> str:
    """The level on chip a target's harness reads and writes directly (Siracusa's L2)."""
    level = TARGET_TABLE[target].on_chip if target in TARGET_TABLE else None
    if level is None:
        raise BridgeError(f"ckpt knows no on-chip level of target {target!r}")
    return level
