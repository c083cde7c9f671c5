"""Plain records the bridge hands back; they hold no Deeploy objects so they pickle and cache cleanly."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import onnx

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.in_place import with_in_place_updates
from ckpt.solver.memory.layout import Block

from .defects import Bound
from .setup import DEFAULT_SETUP, DeeploySetup, Flow, WeightUpdate


@dataclass
class StageTimings:
    """Wall time in seconds of each Deeploy stage, so benchmarks can say where the time goes."""

    front_end: float = 0.0  # preprocess + lower + parse
    mid_end: float = 0.0  # bind (+ tiling and static allocation when tiled)
    back_end: float = 0.0  # code transformations (this is where Deeploy counts live bytes)
    codegen: float = 0.0  # assembling and writing Network.c / Network.h
    cache_load: float = 0.0  # reading a cached result instead of running Deeploy

    @property
    def total(self) -> float:
        return self.front_end + self.mid_end + self.back_end + self.codegen + self.cache_load

    def as_dict(self) -> dict[str, float]:
        return {
            "frontEnd": self.front_end,
            "midEnd": self.mid_end,
            "backEnd": self.back_end,
            "codegen": self.codegen,
            "cacheLoad": self.cache_load,
            "total": self.total,
        }


@dataclass(frozen=True)
class ConstantPlan:
    """Constant buffer names (Deeploy's) -> what they become; bytes before and after."""

    merged: dict[str, str] = field(default_factory=dict)            # copy -> canonical
    views: dict[str, str] = field(default_factory=dict)             # copy -> canonical
    repeats: dict[str, tuple[str, int]] = field(default_factory=dict)   # copy -> (canonical, times)
    kept: tuple[str, ...] = ()                                       # other copies with bytes of their own
    bytes_before: int = 0            # every copy
    bytes_after: int = 0             # the copies that still own bytes: canonicals, repeats, kept

    def shared(self) -> dict[str, str]:
        """Every copy that reads a canonical's bytes (merged or view) -> that canonical."""
        return {**self.merged, **self.views}

    def as_dict(self) -> dict:
        return {**asdict(self), "repeats": {k: list(v) for k, v in self.repeats.items()}, "kept": list(self.kept)}

    @classmethod
    def from_dict(cls, doc: dict | None) -> ConstantPlan:
        doc = doc or {}
        return cls(dict(doc.get("merged", {})), dict(doc.get("views", {})),
                   {k: (v[0], int(v[1])) for k, v in doc.get("repeats", {}).items()}, tuple(doc.get("kept", ())),
                   int(doc.get("bytes_before", 0)), int(doc.get("bytes_after", 0)))


@dataclass
class LoweredGraph:
    """The graph Deeploy actually schedules, plus what ckpt needs to map names and buffers back."""

    model: onnx.ModelProto  # lowered graph; value_info covers every non-constant tensor
    target: str
    deeploy_version: str
    aliases: dict[str, str] = field(default_factory=dict)  # output tensor -> input tensor whose buffer it reuses
    alias_ops: dict[str, str] = field(default_factory=dict)  # aliased output tensor -> op type of its producer
    io_names: dict[str, str] = field(default_factory=dict)  # original graph I/O name -> lowered name
    node_names: dict[str, str] = field(default_factory=dict)  # original node name -> lowered name (kept nodes)
    added_nodes: list[str] = field(default_factory=list)  # lowered node names with no original counterpart
    removed_nodes: list[str] = field(default_factory=list)  # original node names that lowering dropped
    input_types: dict[str, str] = field(default_factory=dict)  # lowered input name -> Deeploy type name
    tensor_types: dict[str, str] = field(default_factory=dict)  # tensor -> Deeploy type name (bound)
    transients: dict[str, int] = field(default_factory=dict)  # node -> bytes of its per-layer scratch buffers
    timings: StageTimings = field(default_factory=StageTimings)
    constant_bytes: int = 0  # constants Deeploy deploys (static, outside any arena), with its bound types
    constants: ConstantPlan = field(default_factory=lambda: ConstantPlan())  # one copy per constant (in place)
    constant_sizes: dict[str, int] = field(default_factory=dict)  # each constant (Deeploy's name) -> its bytes as
                                                                  # the code declares it (transients.declared_constants)
    undeclared_constants: tuple[str, ...] = ()                    # those Deeploy counts and the code never declares
    from_cache: bool = False  # read back (from the on-disk cache or this process's memory), not lowered now
    cache_path: Path | None = None

    def deployed(self, graph: TrainGraph, weights: WeightUpdate) -> TrainGraph:
        """`graph` (of this lowered model, or a rewired copy of it) as the deployment writes its weights: in place,
        the updates and the shared constant copies are aliases and readers come first (solver.graph.in_place)."""
        if weights is WeightUpdate.IN_PLACE:
            return with_in_place_updates(graph, self.constants.shared())
        return graph

    def home_scratch(self, flow: Flow) -> dict[str, int]:
        """The per-layer scratch (`transients`) the home level holds under `flow`: the non-tiled code mallocs each
        transient with its layer; the tiled flow's home level holds none, as Deeploy's MemoryScheduler
        (`_calculateLifetimes`) hands TransientBuffers to the tile-level scheduler only: they live in L1 tiles."""
        return dict(self.transients) if flow is Flow.NON_TILED else {}

    def static_bytes(self, weights: WeightUpdate) -> int:
        """The home level's constants as the tiled flow deploys them: Deeploy's count, less the copies that read
        another copy's bytes when each constant is kept once (in place)."""
        shared = self.constants.bytes_before - self.constants.bytes_after
        return self.constant_bytes - (shared if weights is WeightUpdate.IN_PLACE else 0)

    @property
    def persistent_inputs(self) -> bool:
        """Whether the graph is a split step's train graph (an accumulator updates a graph input in place): its
        inputs outlive the step, as the training harness deploys it (deeploy_bridge.split_step)."""
        inputs = {i.name for i in self.model.graph.input}
        return any(n.op_type == "InPlaceAccumulatorV2" and n.input and n.input[0] in inputs
                   for n in self.model.graph.node)

    @property
    def renamed_nodes(self) -> dict[str, str]:
        """Kept nodes whose name changed (sanitising or de-duplication)."""
        return {k: v for k, v in self.node_names.items() if k != v}

    @property
    def node_order(self) -> list[str]:
        """Deeploy's default schedule: the lowered graph's node order."""
        return [n.name for n in self.model.graph.node]


@dataclass(frozen=True)
class GrownBlock:
    """A block laid out larger than Deeploy's tiler counted it: the layer's tiling code moves more into it
    (deeploy_bridge.transfers)."""

    level: str
    layer: str
    block: str
    counted: int     # bytes by the tiler's memory constraint (what Deeploy's own MiniMalloc path lays out)
    moved: int       # bytes the code moves into it: the size it was laid out with

    @property
    def line(self) -> str:
        return (f"{self.level} {self.block} of {self.layer}: {self.moved:,} B moved, {self.counted:,} B counted "
                f"(+{self.moved - self.counted:,} B)")


@dataclass
class FlowFigures:
    """Deeploy's own memory numbers for one flow, per memory level (bytes): what report.json keeps of a run."""

    # Non-tiled: Deeploy's dynamic peak (deployer.worstCaseBufferSize). Tiled: the tiler's arena sizes.
    worst_case: dict[str, int] = field(default_factory=dict)
    # Peak of the per-layer malloc/free accounting done in the back end (ctxt._maxDynamicSize), both flows.
    dynamic_peak: dict[str, int] = field(default_factory=dict)
    # Tiled: arena size per level (same as worst_case there). Non-tiled: the arena ckpt lays the locals out in, at
    # the level the code allocates it in (empty when the code mallocs each buffer on the heap, Allocator.HEAP).
    arena: dict[str, int] = field(default_factory=dict)
    # Static bytes per level: constants in the arenas' static part when tiled; all global buffers otherwise.
    static: dict[str, int] = field(default_factory=dict)
    # Tiled only, home level: peak bytes alive at one step under the tiler's own lifetimes (an allocator's
    # floor), all buffers / local activations only (comparable with ckpt's prediction) / graph I/O bytes.
    home_live: dict[str, int] = field(default_factory=dict)
    # The most bytes alive at once among the blocks laid out per level (tiled: the home level's whole-network
    # list, the largest per-layer list elsewhere; non-tiled: the arena's): a floor for the arena the allocator can
    # reach.
    live_max: dict[str, int] = field(default_factory=dict)
    allocator_calls: int = 0  # tiled with ckpt's allocator: block lists Deeploy asked it to lay out
    # tiled with ckpt's allocator: the blocks laid out larger than the tiler counted them (the code moves more)
    grown: list[GrownBlock] = field(default_factory=list)
    setup: DeeploySetup = DEFAULT_SETUP  # memory levels, cores and allocator of the run (tiled: all of it applies)
    layers: int = 0  # the layers Deeploy ran
    code_files: list[str] = field(default_factory=list)
    seconds: dict[str, float] | None = None  # Deeploy's stages (a report keeps them with --record-time only)
    # the workarounds in force as this run bound them: defect name -> the nodes whose code carries it, and those
    # it concerns whose code does not (deeploy_bridge.workarounds.bound)
    workarounds: dict[str, Bound] = field(default_factory=dict)


@dataclass
class MemoryFigures(FlowFigures):
    """One Deeploy run: its figures, and what only the run itself needs (what it executed and laid out)."""

    target: str = ""
    deeploy_version: str = ""
    tiled: bool = False
    order: list[str] = field(default_factory=list)  # node names in the order Deeploy executed them
    placed_by: dict[str, str] = field(default_factory=dict)  # ckpt's layout: level -> what placed its largest list
    laid_out: dict[str, tuple[Block, ...]] = field(default_factory=dict)  # ckpt's layout: level -> those blocks
    buffer_levels: dict[str, str] = field(default_factory=dict)  # tiled: each buffer's home level in Deeploy's context
    home_arena: dict[str, int] = field(default_factory=dict)   # split home: level -> the whole network's blocks' part
    timings: StageTimings = field(default_factory=StageTimings)
    code_dir: Path | None = None  # where Network.c / Network.h were written, if asked

    def figures(self, record_time: bool = False) -> FlowFigures:
        """The run's figures as a report keeps them (its stage seconds only when asked: they differ run to run)."""
        kept = {f.name: getattr(self, f.name) for f in fields(FlowFigures)}
        seconds = {k: round(v, 3) for k, v in self.timings.as_dict().items()} if record_time else None
        return FlowFigures(**{**kept, "layers": len(self.order), "seconds": seconds})
