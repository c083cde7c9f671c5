"""Drive one Deeploy run (front end, mid end, back end) and time each stage.

This is the only place that constructs deployers. ``run_count()`` counts real Deeploy runs so tests
and benchmarks can prove a cache hit did not touch Deeploy.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from .errors import BridgeError
from .input_types import pointer_types
from .records import StageTimings
from .targets import target_parts
from .versions import deeploy_version

_RUNS = 0


def run_count() -> int:
    """How many times this process has started a Deeploy front end."""
    return _RUNS


@dataclass
class DeployOptions:
    """Everything that changes what Deeploy computes (and so belongs in cache keys)."""

    target: str = "siracusa"
    n_cores: int = 8
    tiled: bool = False
    l1: int = 128_000
    l2: int = 1_024_000
    l3: int = 64_000_000
    default_mem_level: str = "L3"
    allocator: str = "TetrisRandom"  # or "MiniMalloc" (needs MINIMALLOC_INSTALL_DIR)
    search_strategy: str = "random-max"
    relower: bool = True  # False: the graph is already lowered; skip Deeploy's lowering passes

    def key(self) -> dict:
        return dict(self.__dict__)


@dataclass
class DeeployRun:
    """A deployer after some stages, with timings; the temp dir holds Deeploy's state dumps."""

    deployer: object
    options: DeployOptions
    timings: StageTimings = field(default_factory=StageTimings)
    workdir: Optional[tempfile.TemporaryDirectory] = None

    def close(self) -> None:
        if self.workdir is not None:
            self.workdir.cleanup()
            self.workdir = None


@contextlib.contextmanager
def quiet_deeploy(level: int = logging.WARNING):
    """Deeploy logs every pass at INFO; keep benchmark output readable."""
    logger = logging.getLogger("Deeploy")
    old = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(old)


def _single_buffer_tiler():
    """Tiler that keeps one copy of each tile (training flows use single buffering)."""
    from Deeploy.TilingExtension.TilerExtension import Tiler

    class SingleBufferTiler(Tiler):

        def multiBufferStrategy(self, tilerModel, ctxt, pattern, path, hop, tensorName):
            return 1

    return SingleBufferTiler


def _memory_wrap(deployer, platform_parts, opts: DeployOptions, workdir: str):
    """Wrap a deployer for the tiled flow: memory levels L3/L2/L1, annotation passes, tiler."""
    from Deeploy.MemoryLevelExtension.MemoryLevels import MemoryHierarchy, MemoryLevel
    from Deeploy.MemoryLevelExtension.NetworkDeployers.MemoryLevelDeployer import MemoryDeployerWrapper
    from Deeploy.MemoryLevelExtension.OptimizationPasses.MemoryLevelAnnotationPasses import \
        AnnotateDefaultMemoryLevel, AnnotateIOMemoryLevel
    from Deeploy.TilingExtension.TilerExtension import TilerDeployerWrapper

    if opts.allocator == "MiniMalloc":
        binary = os.path.join(os.environ.get("MINIMALLOC_INSTALL_DIR", ""), "minimalloc")
        if not os.path.isfile(binary):
            raise BridgeError("allocator MiniMalloc needs MINIMALLOC_INSTALL_DIR/minimalloc; use TetrisRandom")
    l3 = MemoryLevel(name="L3", neighbourNames=["L2"], size=opts.l3)
    l2 = MemoryLevel(name="L2", neighbourNames=["L3", "L1"], size=opts.l2)
    l1 = MemoryLevel(name="L1", neighbourNames=["L2"], size=opts.l1)
    hierarchy = MemoryHierarchy([l3, l2, l1])
    hierarchy.setDefaultMemoryLevel(opts.default_mem_level)
    if opts.target == "siracusa":
        from Deeploy.Targets.PULPOpen.Platform import MemoryPULPPlatformWrapper as Wrapper
    else:
        import importlib
        Wrapper = getattr(importlib.import_module("Deeploy.Targets.GAP9.Platform"), "MemoryGAP9PlatformWrapper")
    deployer.Platform = Wrapper(deployer.Platform, hierarchy, l1)
    deployer = MemoryDeployerWrapper(deployer, [
        AnnotateIOMemoryLevel(opts.default_mem_level),
        AnnotateDefaultMemoryLevel(hierarchy),
    ])
    deployer = TilerDeployerWrapper(deployer, _single_buffer_tiler(), testName="ckpt", workDir=workdir)
    deployer.tiler.memoryAllocStrategy = opts.allocator
    deployer.tiler.searchStrategy = opts.search_strategy
    return deployer


def _parse_failure(exc: Exception, graph, opts: DeployOptions) -> BridgeError:
    """One line naming the node/op Deeploy could not map (e.g. LayerNormalizationGrad on GAP9)."""
    text = str(exc)
    match = re.search(r"of node (\S+?)(Candidates|$)", text)
    op = None
    if match:
        node_name = match.group(1)
        op = next((n.op for n in graph.nodes if n.name == node_name), None)
    if "No mapping found" in text:
        op = text.split("with op type")[-1].strip()
    unmapped = sorted({n.op for n in graph.nodes} - set(_mapped_ops(opts)))
    what = f"op {op}" if op else "a node"
    extra = f"; ops without mapping: {', '.join(unmapped)}" if unmapped else ""
    return BridgeError(f"Deeploy {deeploy_version()} {opts.target} parsing failed at {what}{extra}")


def _mapped_ops(opts: DeployOptions) -> set:
    try:
        parts = target_parts(opts.target, opts.n_cores)
    except BridgeError:
        return set()
    ops = set()
    for engine in parts.platform.engines:
        ops |= set(engine.Mapping)
    return ops


_BASE_TYPE_NAMES: Optional[set] = None


def _forget_generated_structs() -> None:
    """Drop struct classes Deeploy generated in earlier runs of this process.

    ``AbstractDataTypes.StructClass`` memoises closure-argument structs by name in that module's
    globals; a later run whose closure for the same node has other fields (tiled vs non-tiled, another
    tiling) would reuse the stale class and fail with "Can't assign {...} to <..._closure_args_t>".
    """
    global _BASE_TYPE_NAMES
    from Deeploy import AbstractDataTypes as adt

    if _BASE_TYPE_NAMES is None:
        _BASE_TYPE_NAMES = {name for name, obj in vars(adt).items()
                            if not (isinstance(obj, type) and issubclass(obj, adt.Struct) and obj is not adt.Struct)}
    for name in list(vars(adt)):
        obj = vars(adt)[name]
        if name not in _BASE_TYPE_NAMES and isinstance(obj, type) and issubclass(obj, adt.Struct):
            del vars(adt)[name]


def start(graph, input_types: dict[str, str], scheduler: Callable, opts: DeployOptions,
          name: str = "DeeployNetwork") -> DeeployRun:
    """Construct the (wrapped) deployer for ``graph``; nothing runs yet."""
    parts = target_parts(opts.target, opts.n_cores)
    _forget_generated_structs()
    workdir = tempfile.TemporaryDirectory(prefix="ckpt_deeploy_")
    deployer = parts.deployer_cls(graph,
                                  parts.platform,
                                  pointer_types(input_types),
                                  parts.optimizer,
                                  scheduler,
                                  name=name,
                                  default_channels_first=False,
                                  deeployStateDir=os.path.join(workdir.name, "deeployStates"))
    if not opts.relower:
        # The graph already went through these passes once; running them again would re-insert layout
        # transposes. Preprocessing (name mangling, I/O renaming) still runs and is idempotent for us.
        deployer.loweringOptimizer.passes = []
    if opts.tiled:
        deployer = _memory_wrap(deployer, parts, opts, workdir.name)
    return DeeployRun(deployer=deployer, options=opts, workdir=workdir)


def front_end(run: DeeployRun) -> None:
    """Preprocess + lower + parse; parse failures become one-line BridgeErrors."""
    global _RUNS
    _RUNS += 1
    t0 = time.perf_counter()
    with quiet_deeploy():
        try:
            run.deployer.frontEnd()
        except RuntimeError as exc:
            if "mapping" in str(exc).lower():
                raise _parse_failure(exc, run.deployer.graph, run.options) from None
            raise
    run.timings.front_end = time.perf_counter() - t0


def mid_end(run: DeeployRun) -> None:
    """Bind (and, when tiled, tile and statically allocate)."""
    t0 = time.perf_counter()
    with quiet_deeploy():
        run.deployer.midEnd()
    run.timings.mid_end = time.perf_counter() - t0


def back_end(run: DeeployRun) -> None:
    """Code transformations; this is where Deeploy's per-layer alloc/free accounting happens."""
    from Deeploy.DeeployTypes import _NoVerbosity

    t0 = time.perf_counter()
    with quiet_deeploy():
        run.deployer.backEnd(_NoVerbosity)
        run.deployer.prepared = True
    run.timings.back_end = time.perf_counter() - t0
