"""Build a fresh Deeploy platform + deployer for a target name.

Everything Deeploy keeps in module-level defaults is copied here, because PULPDeployer appends its
lowering passes to the shared ``PULPOptimizer`` list and ``PULPPlatform()`` shares one default
``PULPClusterEngine`` (and its Mapping dict) between all instances; reusing them would make a second
run in the same process differ from the first.
"""
from __future__ import annotations

import functools
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
from .conv_grad_w import restarting_conv_grad_w
from .conv_grad_x import origin_folded_conv_grad_x
from .errors import BridgeError
from .in_place import InPlaceAllocation, InPlacePULPDeployer
from .layernorm_grad import restarting_layer
from .lent_kernels import Lent, lend
from .pw_conv_grad_w import stride_one_pw_conv_grad_w
from .setup import DEEPLOY_TARGETS, TARGET_TABLE
from .versions import deeploy_label, has_target_package


@dataclass
class TargetParts:
    """Constructors Deeploy needs for one target."""

    platform: object  # DeploymentPlatform instance (fresh)
    deployer_cls: type
    optimizer: object  # TopologyOptimizer instance (fresh pass list)
    cluster_engine_cls: type
    mapping_name: str = ""   # whose mapping the platform's engines hold, as a refusal names it


def _fresh_optimizer(shared) -> TopologyOptimizer:
    return TopologyOptimizer(list(shared.passes), name=getattr(shared, "name", "TopologyOptimizer"))


def _siracusa(n_cores: int) -> TargetParts:
    mapping = dict(PULPMapping)
    if workarounds.is_active(workarounds.Defect.PW_CONV_GRAD_W_STRIDE):
        stride_one_pw_conv_grad_w(mapping)      # first: the ConvGradW workaround below keeps each mapper's parser
    if workarounds.is_active(workarounds.Defect.LAYERNORM_GRAD_ZEROING):
        restarting_layer(mapping)
    if workarounds.is_active(workarounds.Defect.CONV_GRAD_W_ZEROING):
        restarting_conv_grad_w(mapping)
    if workarounds.is_active(workarounds.Defect.CONV_GRAD_X_TILE_ORIGIN):
        origin_folded_conv_grad_x(mapping)
    engine = PULPClusterEngine("PULPCluster", Mapping=mapping, n_cores=n_cores)
    return TargetParts(PULPPlatform(engines=[engine]), InPlacePULPDeployer, _fresh_optimizer(PULPOptimizer),
                       PULPClusterEngine, f"Deeploy {deeploy_label()}'s PULPOpen platform (Siracusa)")


def _gap9_module(name: str):
    """GAP9 exists only in newer (devel) Deeploy, so it is imported by name when asked for, never at load."""
    if not has_target_package("GAP9"):
        raise BridgeError(f"Deeploy {deeploy_label()} has no GAP9 target (no Deeploy.Targets.GAP9): install "
                          "Deeploy's training branch in its place (pip install ../shared/deeploy-train), whose GAP9 "
                          "platform ckpt completes with PULPOpen's training kernels")
    return importlib.import_module(f"Deeploy.Targets.GAP9.{name}")


def _gap9(n_cores: int, lend_kernels: bool = True) -> TargetParts:
    """GAP9's platform with a fresh engine, its mapping completed with PULPOpen's training kernels
    (deeploy_bridge.lent_kernels) unless `lend_kernels` is False (Deeploy's GAP9 as it ships)."""
    platform_mod, deployer_mod = _gap9_module("Platform"), _gap9_module("Deployer")
    try:
        platform_cls, engine_cls = platform_mod.GAP9Platform, platform_mod.GAP9ClusterEngine
        mapping = platform_mod.GAP9Mapping
        optimizer = getattr(platform_mod, "GAP9Optimizer", None) or PULPOptimizer
        deployer_cls = deployer_mod.GAP9Deployer
    except AttributeError as exc:
        raise BridgeError(f"Deeploy {deeploy_label()} GAP9 target lacks an expected class: {exc}") from None
    name = f"Deeploy {deeploy_label()}'s GAP9 platform"
    if lend_kernels:
        mapping = _lent()[0]
        name += " (with the PULPOpen kernels ckpt lends it)"
    mapping = dict(mapping)
    if workarounds.is_active(workarounds.Defect.PW_CONV_GRAD_W_STRIDE):
        stride_one_pw_conv_grad_w(mapping)  # a no-op where GAP9's ConvGradW has no pointwise mapper
    if workarounds.is_active(workarounds.Defect.LAYERNORM_GRAD_ZEROING):
        restarting_layer(mapping)     # the lent PULPOpen layer has the branch's defect as Siracusa's does
    if workarounds.is_active(workarounds.Defect.CONV_GRAD_W_ZEROING):
        restarting_conv_grad_w(mapping)     # a no-op where GAP9's own ConvGradW has no such guard
    if workarounds.is_active(workarounds.Defect.CONV_GRAD_X_TILE_ORIGIN):
        origin_folded_conv_grad_x(mapping)  # a no-op where GAP9's ConvGradX binds no tiled im2col kernel
    engine = engine_cls("GAP9Cluster", Mapping=mapping, n_cores=n_cores)
    return TargetParts(platform_cls(engines=[engine]), _in_place(deployer_cls), _fresh_optimizer(optimizer),
                       engine_cls, name)


@functools.cache
def _in_place(deployer_cls: type) -> type:
    """A platform's deployer with ckpt's in-place allocation (deeploy_bridge.in_place) mixed in."""
    return type(f"InPlace{deployer_cls.__name__}", (InPlaceAllocation, deployer_cls), {})


@functools.cache
def _lent() -> tuple[dict, Lent]:
    """GAP9's mapping with PULPOpen's kernels lent, made once per process: a layer is copied for each node it maps
    (ONNXLayer.__call__), so runs share the mapping as they share Deeploy's own."""
    return lend(PULPMapping, _gap9_module("Platform").GAP9Mapping, _gap9_module("Bindings"))


def lent_to_gap9() -> Lent:
    """What ckpt lends GAP9 of PULPOpen's kernels under the installed Deeploy."""
    return _lent()[1]


def target_parts(target: str, n_cores: int, lend_kernels: bool = True) -> TargetParts:
    """Fresh platform/deployer/optimizer for a Deeploy target (`lend_kernels`: see _gap9)."""
    if target == "siracusa":
        return _siracusa(n_cores)
    if target == "gap9":
        return _gap9(n_cores, lend_kernels)
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
