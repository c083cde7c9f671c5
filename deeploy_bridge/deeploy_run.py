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
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import onnxruntime
from Deeploy import AbstractDataTypes
from Deeploy.DeeployTypes import _NoVerbosity
from Deeploy.MemoryLevelExtension.MemoryLevels import MemoryHierarchy, MemoryLevel
from Deeploy.MemoryLevelExtension.NetworkDeployers.MemoryLevelDeployer import MemoryDeployerWrapper
from Deeploy.MemoryLevelExtension.OptimizationPasses.MemoryLevelAnnotationPasses import (
    AnnotateDefaultMemoryLevel,
    AnnotateIOMemoryLevel,
)
from Deeploy.TilingExtension.TilerExtension import TilerDeployerWrapper
from onnx_graphsurgeon.logger import G_LOGGER

from ckpt.errors import CkptError

from . import (
    codegen_speed,  # noqa: F401 - applied on import: code generation linear in the network's size
    deterministic,  # noqa: F401 - applied on import: the same graph gives the same code
    parse_speed,  # noqa: F401 - applied on import: the parse's context copies without pickling's detour
    template_cache,  # noqa: F401 - applied on import: each template text compiled once
    tiler_setup,  # noqa: F401 - applied on import: the tiler's setup linear in the network's size
)
from .declared_shapes import RefuseShapeless
from .errors import BridgeError
from .home_split import persistent_pass
from .input_types import pointer_types
from .records import StageTimings
from .scratch import SCRATCH_PREFIX
from .setup import DEFAULT_SETUP, Allocator, DeeploySetup
from .split_codegen import tile_start_offsets
from .split_step import SINGLE, Role
from .targets import memory_platform_wrapper, target_parts
from .tilers import tiler_class
from .unmapped import FOLDED_OPS, RefuseUnmapped, unmapped_nodes
from .versions import deeploy_label

_RUNS = 0
def run_count() -> int:
    """How many times this process has started a Deeploy front end."""
    return _RUNS


@dataclass(frozen=True)
class DeployOptions:
    """Everything that changes what Deeploy computes (and so belongs in cache keys)."""

    target: str = "siracusa"
    setup: DeeploySetup = DEFAULT_SETUP
    tiled: bool = False
    search_strategy: str = "random-max"
    relower: bool = True  # False: the graph is already lowered; skip Deeploy's lowering passes
    role: Role | None = None   # one of the two networks of a split step (deeploy_bridge.split_step), else None

    @property
    def network(self):
        return self.role.network if self.role is not None else SINGLE

    def key(self) -> dict:
        return {"target": self.target, **self.setup.as_dict(), "tiled": self.tiled,
                "search_strategy": self.search_strategy, "relower": self.relower,
                **({"role": self.role.key()} if self.role is not None else {})}


@dataclass
class DeeployRun:
    """A deployer after some stages, with timings; the temp dir holds Deeploy's state dumps."""

    deployer: object
    options: DeployOptions
    timings: StageTimings = field(default_factory=StageTimings)
    workdir: tempfile.TemporaryDirectory | None = None

    def close(self) -> None:
        if self.workdir is not None:
            self.workdir.cleanup()
            self.workdir = None


@contextlib.contextmanager
def quiet_deeploy(level: int = logging.CRITICAL):
    """Deeploy logs every pass at INFO, and its own errors before it raises them: ckpt says each failure in its
    one line (a refusal, or the exception itself), so nothing of Deeploy's log reaches the user's terminal."""
    logger = logging.getLogger("Deeploy")
    old, surgeon = logger.level, G_LOGGER.severity
    logger.setLevel(level)
    G_LOGGER.severity = G_LOGGER.CRITICAL       # graphsurgeon's warnings from Deeploy's constant folding
    _quiet_onnxruntime()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # numpy's warnings from inside Deeploy's passes
            yield
    finally:
        logger.setLevel(old)
        G_LOGGER.severity = surgeon


def _quiet_onnxruntime() -> None:
    """onnxruntime (graphsurgeon folds Deeploy's constants with it) logs its warnings to stderr from C++."""
    onnxruntime.set_default_logger_severity(3)


def memory_levels(setup: DeeploySetup) -> list[MemoryLevel]:
    """The setup's levels as Deeploy's, outermost first: each level's neighbours are the levels beside it."""
    names = setup.level_names
    return [MemoryLevel(name=name, neighbourNames=[*names[max(i - 1, 0):i], *names[i + 1:i + 2]], size=size)
            for i, (name, size) in enumerate(setup.levels)]


def _memory_wrap(deployer, opts: DeployOptions, workdir: str):
    """Wrap a deployer for the tiled flow: the setup's memory levels, annotation passes, the tiler and its
    allocator."""
    setup = opts.setup
    if setup.allocator is Allocator.MINIMALLOC and not os.path.isfile(
            os.path.join(os.environ.get("MINIMALLOC_INSTALL_DIR", ""), "minimalloc")):
        raise BridgeError("allocator minimalloc runs $MINIMALLOC_INSTALL_DIR/minimalloc, which is not there: "
                          "point MINIMALLOC_INSTALL_DIR at a folder holding it (ckpt installs one beside its own "
                          "`ckpt` script), or use the ckpt allocator")
    hierarchy = MemoryHierarchy(memory_levels(setup))
    hierarchy.setDefaultMemoryLevel(setup.default_mem_level)
    innermost = hierarchy.memoryLevels[setup.innermost]
    deployer.Platform = memory_platform_wrapper(opts.target)(deployer.Platform, hierarchy, innermost)
    split = [persistent_pass(setup.persistent_level, opts.role, setup.on_chip_persistent, setup.parked)] \
        if setup.persistent_mem_level else []
    deployer = MemoryDeployerWrapper(deployer, [
        AnnotateIOMemoryLevel(setup.default_mem_level),
        *split,
        AnnotateDefaultMemoryLevel(hierarchy),
    ])
    tiler = tiler_class(setup.allocator, persistent_inputs=opts.role is not None, split=bool(split))
    deployer = TilerDeployerWrapper(deployer, tiler, testName="ckpt", workDir=workdir)
    deployer.tiler.memoryAllocStrategy = setup.allocator.deeploy_strategy
    deployer.tiler.parked = frozenset(setup.parked)
    deployer.tiler.searchStrategy = opts.search_strategy
    return deployer


def _parse_failure(exc: Exception, graph, opts: DeployOptions) -> BridgeError:
    """One line naming the platform and the node/op Deeploy could not map (e.g. CCT2_FT2's one-output
    SoftmaxCrossEntropyLoss on the training branch)."""
    text = str(exc)
    match = re.search(r"of node (\S+?)(Candidates|$)", text)
    op = None
    if match:
        node_name = match.group(1)
        op = next((n.op for n in graph.nodes if n.name == node_name), None)
    if "No mapping found" in text:
        op = text.split("with op type")[-1].strip()
    unmapped = _unmapped(graph, opts)
    what = f"op {op}" if op else "a node"
    extra = f"; ops without mapping: {', '.join(unmapped)} (lower with a Deeploy that maps them, or solve with " \
        "--target none)" if unmapped else ""
    try:
        platform = target_parts(opts.target, opts.setup.n_cores).mapping_name
    except BridgeError:
        platform = f"Deeploy {deeploy_label()} {opts.target}"
    return BridgeError(f"{platform}: parsing failed at {what} (no kernel it maps fits that node){extra}")


def _unmapped(graph, opts: DeployOptions) -> list[str]:
    """The graph's op types the target maps to no kernel (beyond those the front end folds away)."""
    try:
        parts = target_parts(opts.target, opts.setup.n_cores)
    except BridgeError:
        return sorted({n.op for n in graph.nodes} - FOLDED_OPS)
    return sorted(unmapped_nodes(graph, parts.platform))


_BASE_TYPE_NAMES: set | None = None


def _forget_generated_structs() -> None:
    """Drop struct classes Deeploy generated in earlier runs of this process.

    ``AbstractDataTypes.StructClass`` memoises closure-argument structs by name in that module's
    globals; a later run whose closure for the same node has other fields (tiled vs non-tiled, another
    tiling) would reuse the stale class and fail with "Can't assign {...} to <..._closure_args_t>".
    """
    global _BASE_TYPE_NAMES
    adt = AbstractDataTypes
    if _BASE_TYPE_NAMES is None:
        _BASE_TYPE_NAMES = {name for name, obj in vars(adt).items()
                            if not (isinstance(obj, type) and issubclass(obj, adt.Struct) and obj is not adt.Struct)}
    for name in list(vars(adt)):
        obj = vars(adt)[name]
        if name not in _BASE_TYPE_NAMES and isinstance(obj, type) and issubclass(obj, adt.Struct):
            del vars(adt)[name]


def start(graph, input_types: dict[str, str], scheduler: Callable, opts: DeployOptions) -> DeeployRun:
    """Construct the (wrapped) deployer for ``graph``; nothing runs yet."""
    parts = target_parts(opts.target, opts.setup.n_cores)
    _forget_generated_structs()
    workdir = tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}_")
    deployer = parts.deployer_cls(graph,
                                  parts.platform,
                                  pointer_types(input_types),
                                  parts.optimizer,
                                  scheduler,
                                  name=opts.network.prefix,
                                  default_channels_first=False,
                                  deeployStateDir=os.path.join(workdir.name, "deeployStates"),
                                  # its own dict: Deeploy's default one is shared by every deployer of the process
                                  inputOffsets={name: 0 for name in input_types})
    if not opts.relower:
        # The graph already went through these passes once; running them again would re-insert layout
        # transposes. Preprocessing (name mangling, I/O renaming) still runs and is idempotent for us.
        deployer.loweringOptimizer.passes = []
    deployer.loweringOptimizer.passes += [RefuseUnmapped(parts.platform, opts.target, parts.mapping_name),
                                          RefuseShapeless()]
    if opts.tiled:
        deployer = _memory_wrap(deployer, opts, workdir.name)
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
        except AssertionError as exc:   # a lowering pass meeting an op it has no form for (ConvGrad on 0.2.1)
            if _unmapped(run.deployer.graph, run.options):
                raise _parse_failure(exc, run.deployer.graph, run.options) from None
            raise
    run.deployer.ctxt.name = run.options.network.prefix   # Deeploy names every context DeeployNetwork: the symbols'
    run.timings.front_end = time.perf_counter() - t0


def mid_end(run: DeeployRun) -> None:
    """Bind (and, when tiled, tile and statically allocate)."""
    t0 = time.perf_counter()
    with quiet_deeploy(), _one_line("binding the graph", run.options):
        run.deployer.midEnd()
    run.timings.mid_end = time.perf_counter() - t0


def back_end(run: DeeployRun) -> None:
    """Code transformations; this is where Deeploy's per-layer alloc/free accounting happens."""
    t0 = time.perf_counter()
    with quiet_deeploy(), _one_line("generating code", run.options), \
            tile_start_offsets(bool(run.options.setup.persistent_mem_level)):
        run.deployer.backEnd(_NoVerbosity)
        run.deployer.prepared = True
    run.timings.back_end = time.perf_counter() - t0


@contextlib.contextmanager
def _one_line(stage: str, opts: DeployOptions):
    """Deeploy failing inside (an exception of its own, not one of ckpt's refusals) as one line naming the stage,
    the installed Deeploy and what it raised, instead of its traceback."""
    try:
        yield
    except (CkptError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise BridgeError(f"Deeploy {deeploy_label()} failed {stage} for {opts.target} ({type(exc).__name__}: "
                          f"{str(exc)[:200]}): this Deeploy cannot deploy this graph; report it to Deeploy with the "
                          "model, or solve with --target none") from exc
