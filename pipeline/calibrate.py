"""Op costs the solver can believe: the graph order's generated step run on gvsoc, each layer's cycles measured.

`calibrate` lowers the model, generates the graph order's tiled code (the deployment the points use), runs it on
this host (which says how much L2 it allocates, and that it computes what it should), then on gvsoc's Siracusa
model with a probe around each layer (ckpt.gvsoc). Each node of the lowered graph gets the cycles its layer took;
views make no call and get none. The result is cached per model, target, Deeploy setup, kernels and gvsoc kit
($CKPT_CACHE_DIR/calibration: a checked entry, measured again when it does not check out), and written as a cost
file `--costs FILE` reads (for that model and target only).
"""
from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

from ckpt import deeploy_bridge
from ckpt.cached import read_entry, write_entry
from ckpt.coderun.run import NotRun, run_code
from ckpt.coderun.sources import KernelSources, NoSources, find_sources
from ckpt.deeploy_bridge.setup import SIMULATED_TARGETS, DeeploySetup, setup_for
from ckpt.deeploy_bridge.tile_counts import LayerCode, code_layers, code_tiles_into
from ckpt.errors import CkptError
from ckpt.files import atomic_write, read_json_input
from ckpt.gvsoc.kernels import device_fingerprint
from ckpt.gvsoc.kit import GvsocKit, NoKit, find_kit
from ckpt.gvsoc.run import NotSimulated, simulate_step, simulation_timeout
from ckpt.gvsoc.step import LAYOUT
from ckpt.paths import cache_root
from ckpt.pipeline.load import LoadedModel
from ckpt.pipeline.split_costs import graph_order_overflow, load_split, priced_for_split
from ckpt.replay.code_run import graph_order_outputs
from ckpt.replay.gvsoc import node_cycles
from ckpt.replay.predict import TilerTables, home_arena_overflow
from ckpt.replay.report import CodeStatus, SimStatus
from ckpt.replay.run import ESTIMATE_SCALE
from ckpt.replay.split_run import SplitStep, deploy_split, run_split_code, simulate_split, split_step
from ckpt.replay.verification import step_data
from ckpt.solver.graph.costs import COST_FILE_FORM, CostModel
from ckpt.solver.graph.onnx_loader import load_graph, open_model, read_model
from ckpt.targets import SPLIT_HOME, TARGET_TABLE, simulation_gap

CALIBRATION_FORMAT = 7  # 4: node_tiles; 7: node_transfers, node_lines, node_tables (every layer of the code)
CACHE_FORMAT = 2         # of the cached entry (2: checked, ckpt.cached), apart from the file's format
KIND = "ckpt calibration"          # the `kind` of a calibration file, which `--costs FILE` recognises


@dataclass(frozen=True)
class Calibration:
    """Measured cycles of a model's graph-order step on gvsoc."""

    kind: str
    format: int
    model_sha256: str
    target: str
    setup: dict
    step_cycles: int                   # the whole step: the harness's Runtime
    node_cycles: dict[str, int]        # per node of the lowered graph that makes a kernel call
    errors: int                        # the harness's Errors: N out of M of that step
    total: int
    code_bytes: int                    # the step's own code and data in L2 (neither constants nor test data)
    key: str                           # what it was measured with (model, setup, kernels, kit), hashed
    optimizer_cycles: int = 0          # a split step: its optimizer network per update (step_cycles and
                                       # node_cycles are then its train network's, per mini-batch)
    node_tiles: dict[str, int] = field(default_factory=dict)   # per node that tiles into the chip's level from off
                                       # chip: its tiles there, read from the generated code (a layer moves each
                                       # tensor it keeps off chip once per tile: what the level price counts)
    node_transfers: dict[str, dict[str, int]] = field(default_factory=dict)   # per node that tiles from off chip:
                                       # each tensor it keeps there (the lowered graph's name) -> the copies it
                                       # issues per tile for it (a copy per row where its rows are apart there)
    node_lines: dict[str, dict[str, int]] = field(default_factory=dict)   # per such node and tensor: the lines
                                       # (bursts off chip) those copies move over all its tiles
    node_tables: dict[str, dict[str, int]] = field(default_factory=dict)   # per such node: the bytes of the
                                       # tables the tiler declares on chip for it, its own under "" and each
                                       # tensor's it moves under the tensor's name
    draws: list[int] = field(default_factory=list)   # measured from several starting states (gvsoc.draws): each
    optimizer_draws: list[int] = field(default_factory=list)   # draw's step (optimizer) cycles, of which the
                                       # figures above are the medians (each layer's too); empty: one draw

    def tiler_tables(self) -> TilerTables:
        """Its code's tables on chip, copies from off chip, tiles and lines per layer (replay.predict: the tiler's
        tables predicted for a split step and what split+ weighs each tensor at)."""
        return TilerTables(self.node_transfers, self.node_tables, self.node_tiles, self.node_lines)

    def cost_model(self) -> CostModel:
        return CostModel(measured=dict(self.node_cycles), measured_step=self.step_cycles,
                         measured_optimizer=self.optimizer_cycles or None, tiles=dict(self.node_tiles) or None,
                         transfers={k: dict(v) for k, v in self.node_transfers.items()} or None,
                         lines={k: dict(v) for k, v in self.node_lines.items()} or None,
                         per_clone=TARGET_TABLE[self.target].clone_cycles,
                         source=f"gvsoc calibration {self.key[:12]}{self._drawn} + "
                                f"{TARGET_TABLE[self.target].clone_cycles} cycles per recompute")

    @property
    def _drawn(self) -> str:
        return f" (median of {len(self.draws)} draws)" if self.draws else ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_doc(cls, doc: dict, where: str) -> Calibration:
        """The calibration a document holds, checked field by field (every field ckpt writes, each of its type:
        counts are integers >= 0, the node cycles an object of them), one line for the first that is not."""
        way_out = "make it again with `ckpt calibrate`"
        if not isinstance(doc, dict):
            raise CkptError(f"'{where}' is not a calibration this ckpt wrote (not an object)", way_out)
        names = [f.name for f in fields(cls)]
        needed = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        missing, unknown = [n for n in needed if n not in doc], [k for k in doc if k not in names]
        if missing or unknown:
            what = f"lacks \"{missing[0]}\"" if missing else f"has the field \"{unknown[0]}\", which ckpt never writes"
            raise CkptError(f"'{where}' is not a calibration this ckpt wrote (it {what})", way_out)
        if doc["kind"] != KIND or doc["format"] != CALIBRATION_FORMAT:
            raise CkptError(f"'{where}' is a calibration of another format", way_out)
        for name, kind in (("model_sha256", str), ("target", str), ("key", str), ("setup", dict),
                           ("node_cycles", dict), ("step_cycles", int), ("errors", int), ("total", int),
                           ("code_bytes", int), ("optimizer_cycles", int)):
            if name not in doc:
                continue
            value = doc[name]
            if not isinstance(value, kind) or isinstance(value, bool) or (kind is int and value < 0):
                wanted = {str: "a string", dict: "an object", int: "an integer >= 0"}[kind]
                raise CkptError(f"'{where}': \"{name}\" is {json.dumps(value)[:40]}, not {wanted}", way_out)
        counts = [*doc["node_cycles"].values(), *doc.get("draws", []), *doc.get("optimizer_draws", [])]
        if not all(isinstance(doc.get(name, []), list) for name in ("draws", "optimizer_draws")) \
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts):
            raise CkptError(f"'{where}' has cycles that are not counts", way_out)
        tiles = doc.get("node_tiles", {})
        if not isinstance(tiles, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                                  for v in tiles.values()):
            raise CkptError(f"'{where}': \"node_tiles\" is not an object of tile counts >= 1", way_out)
        for name in ("node_transfers", "node_lines", "node_tables"):
            nested = doc.get(name, {})
            if not isinstance(nested, dict) or not all(
                    isinstance(v, dict) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                                for n in v.values()) for v in nested.values()):
                raise CkptError(f"'{where}': \"{name}\" is not an object of counts per node and tensor", way_out)
        if doc["target"] not in SIMULATED_TARGETS:
            raise CkptError(f"'{where}': \"target\" is {json.dumps(doc['target'])[:40]}, not one of "
                            f"{', '.join(SIMULATED_TARGETS)}", way_out)
        return cls(**doc)


def is_calibration(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == KIND


def _key(model_sha: str, target: str, setup: DeeploySetup, kernels: str, kit: str, draws: int = 1) -> str:
    """What a calibration is measured with, hashed; one draw keeps the key calibrations had before draws."""
    blob = json.dumps({"format": CALIBRATION_FORMAT, "cache": CACHE_FORMAT, "model": model_sha, "target": target,
                       "setup": setup.as_dict(), "kernels": kernels, "kit": kit, "device": device_fingerprint(),
                       "layout": LAYOUT, **({"draws": draws} if draws > 1 else {})}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def calibrate(source: str | Path, target: str, setup: DeeploySetup, gvsoc: Path | None = None,
              deeploy_root: Path | None = None, progress: Callable[[str], None] = lambda m: None,
              timeout: float | None = None, loaded: LoadedModel | None = None, draws: int = 1) -> Calibration:
    """The model's calibration, measured now unless cached (see the module doc); CkptError when it cannot be.
    `timeout`: seconds each gvsoc run may take (default: scaled from the built-in estimate of its cycles); `loaded`:
    the model as the caller loaded it for a split home (else loaded here to check its graph order fits); `draws`:
    the step run from as many starting states, each figure their median (gvsoc.draws), the Errors the worst's."""
    if target not in SIMULATED_TARGETS:
        raise CkptError(f"ckpt measures op costs on gvsoc's model of {', '.join(SIMULATED_TARGETS)}, not {target}",
                        "solve with --costs estimate or a cost file")
    if setup.home == SPLIT_HOME:          # refused in seconds, not after Deeploy's tiler has tried
        overflow = graph_order_overflow(loaded or load_split(source, target, setup), setup)
        if overflow is not None:
            raise CkptError(f"cannot calibrate with --home {SPLIT_HOME}: {overflow}",
                            "calibrate with every tensor off chip (ckpt prices it for the split home)")
    kit = find_kit(gvsoc)
    if isinstance(kit, NoKit):
        raise CkptError(f"cannot calibrate: {kit.reason}",
                        "make gvsoc available, or solve with the built-in estimate (--costs estimate)")
    sources = find_sources(deeploy_root)
    if isinstance(sources, NoSources):
        raise CkptError(f"cannot calibrate: {sources.reason}",
                        "give the Deeploy checkout, or solve with --costs estimate")
    model_sha, chip = open_model(source).sha256, TARGET_TABLE[target]
    key = _key(model_sha, target, setup, sources.fingerprint, kit.identity, draws)
    cached = cache_root() / "calibration" / f"{key[:32]}.entry"
    known = _cached_calibration(cached, key)
    if known is not None:
        return known
    lowered = deeploy_bridge.lower(source, target)
    folder = Path(source) if Path(source).is_dir() else Path(source).parent
    order = [node.name for node in lowered.model.graph.node]
    overflow = home_arena_overflow(lowered, [(name, 0) for name in lowered.node_order], setup)
    if overflow is not None:             # refused in seconds, in the words Deeploy's tiler says it after minutes
        raise overflow
    split = split_step(folder, read_model(source), lowered.io_names, None, lowered.model)
    if split is not None:
        found = _split_calibration(lowered.model, split, order, target, setup, sources, kit, model_sha, key, progress,
                                   timeout, draws)
        write_entry(cached, key, found.to_json().encode())
        return found
    data = step_data(folder, read_model(source), lowered.io_names)
    with tempfile.TemporaryDirectory(prefix="ckpt_calibrate_") as scratch:
        code = Path(scratch) / "code"
        progress(f"calibrating: the graph order's tiled code for {target}")
        figures = deeploy_bridge.deploy(lowered.model, order, target, tiled=True, setup=setup, code_dir=code)
        progress("calibrating: running it on this host")
        host = run_code(code, data.feeds, sources)
        if isinstance(host, NotRun):
            raise CkptError(f"cannot calibrate: the graph order's code did not run on this host ({host.reason})",
                            "check `ckpt replay` of the baseline, or solve with --costs estimate")
        graph_order_outputs(lowered.model, target, setup, True, sources, data.feeds, ran=host.outputs)
        expected = data.golden or host.outputs
        progress(f"calibrating: running it on gvsoc{_times(draws)} (once per model; cached)")
        estimate = ESTIMATE_SCALE * sum(load_graph(lowered.model).op_cost.values())
        run = simulate_step(code, data.feeds, expected, sources, kit, host.stats.levels[chip.on_chip].peak,
                            timeout=timeout or simulation_timeout(estimate), draws=draws)
        tiles = code_tiles_into(code, chip.on_chip)
        layers = code_layers(code, chip.on_chip, chip.off_chip)
    if isinstance(run, NotSimulated):
        raise not_calibrated(run.reason, run.failed, _kept_log(cached, run.log))
    if run.layers is None:
        raise CkptError("cannot calibrate: the step's layer probes did not come back", "report this")
    code_bytes = run.on_chip.static - run.on_chip.test_data - figures.static.get(chip.on_chip, 0)
    found = Calibration(KIND, CALIBRATION_FORMAT, model_sha, target, setup.as_dict(), run.cycles,
                        node_cycles(run.layers, order), run.errors, run.total, code_bytes, key,
                        node_tiles=_known(tiles, order), draws=list(run.draws),
                        **_transfers_and_tables(layers, order, lowered.model))
    unknown = [name for name in found.node_cycles if name not in set(order)]
    if unknown:
        raise CkptError(f"cannot calibrate: probed layers {unknown[:3]} name no node of the lowered graph",
                        "report this: Deeploy's layer names changed")
    write_entry(cached, key, found.to_json().encode())
    return found


def _split_calibration(base, split: SplitStep, order: list[str], target: str, setup: DeeploySetup,
                       sources: KernelSources, kit: GvsocKit, model_sha: str, key: str, progress,
                       timeout: float | None, draws: int = 1) -> Calibration:
    """A split step's calibration: the graph order's two networks run by the training harness on this host, then
    on gvsoc; each train-network layer's cycles per mini-batch, the optimizer's per update."""
    chip = TARGET_TABLE[target]
    with tempfile.TemporaryDirectory(prefix="ckpt_calibrate_") as scratch:
        code = Path(scratch) / "code"
        progress(f"calibrating: the graph order's two networks (tiled) for {target}")
        train, optimizer = deploy_split(base, order, split, target, True, setup, code)
        progress("calibrating: running them on this host with the training harness")
        host = run_split_code("tiled", code, base, split, target, setup, sources, False)
        if host.status is not CodeStatus.RAN:
            raise CkptError(f"cannot calibrate: the graph order's code did not run on this host ({host.reason})",
                            "check `ckpt replay` of the baseline, or solve with --costs estimate")
        progress(f"calibrating: running them on gvsoc{_times(draws)} (once per model; cached)")
        estimate = ESTIMATE_SCALE * sum(load_graph(base).op_cost.values()) * split.run.first_update().n_network_runs
        log = Path(scratch) / "gvsoc.log"
        run = simulate_split("tiled", code, host, split, order, sources, kit, log, False,
                             timeout or simulation_timeout(estimate), draws=draws)
        tiles = code_tiles_into(code, chip.on_chip)
        layers = code_layers(code, chip.on_chip, chip.off_chip)
        kept = _kept_log(cache_root() / "calibration" / f"{key[:32]}.entry",
                         log.read_text(errors="replace") if run.status is SimStatus.FAILED and run.log is not None
                         and log.is_file() else None)   # a failed run's only: a measured one's is not kept
    if run.status is not SimStatus.MEASURED:
        raise not_calibrated(run.reason or "no figures", run.status is SimStatus.FAILED, kept)
    if not run.layer_cycles:
        raise CkptError("cannot calibrate: the step's layer probes did not come back", "report this")
    static = train.static.get(chip.on_chip, 0) + optimizer.static.get(chip.on_chip, 0)
    code_bytes = run.on_chip.static - run.on_chip.test_data - static
    nodes = {name: cycles for name, cycles in run.layer_cycles.items() if name in set(order)}
    return Calibration(KIND, CALIBRATION_FORMAT, model_sha, target, setup.as_dict(), run.cycles, nodes, run.errors,
                       run.total, code_bytes, key, run.optimizer_cycles or 0, _known(tiles, order),
                       draws=list(run.draws), optimizer_draws=list(run.optimizer_draws),
                       **_transfers_and_tables(layers, order, base))


class FailedOnGvsoc(CkptError):
    """A calibration whose step ran on gvsoc and failed there: gvsoc is at hand, so making it available is no way
    out (what a missing gvsoc is told); the log says why."""


def not_calibrated(reason: str, failed: bool, log: Path | None) -> CkptError:
    """Why a calibration's gvsoc run gave no figures, as the error to raise: `failed` (the step was built and ran on
    gvsoc, or hung, and gave no verdict) a FailedOnGvsoc naming the kept `log`, else the run never happened (the
    step does not fit, no harness) and the estimate is the way out."""
    if not failed:
        return CkptError(f"cannot calibrate: {reason}", "solve with --costs estimate")
    if log is None:                      # it failed to build or to start: gvsoc printed nothing
        return FailedOnGvsoc(f"cannot calibrate: the graph order's step did not build or start on gvsoc ({reason})",
                             "report this, or solve with --costs estimate")
    return FailedOnGvsoc(f"cannot calibrate: the graph order's step ran on gvsoc and failed ({reason}; its log: "
                         f"{log})", "report this with the log, or solve with --costs estimate")


def _kept_log(entry: Path, log: str | None) -> Path | None:
    """A failed calibration's gvsoc log kept beside its cache entry (the run's own folder is temporary); None
    where gvsoc did not run."""
    if log is None:
        return None
    path = entry.with_suffix(".gvsoc.log")
    atomic_write(path, log)
    return path


def _known(tiles: dict[str, int], order: list[str]) -> dict[str, int]:
    """The tile counts of the lowered graph's nodes (the code's other tables, e.g. the optimizer's, left out)."""
    return {name: count for name, count in sorted(tiles.items()) if name in set(order)}


def _transfers_and_tables(layers: dict[str, LayerCode], order: list[str], model) -> dict[str, dict]:
    """The calibration's node_transfers, node_lines and node_tables from the code's layers
    (deeploy_bridge.tile_counts): every layer of the train network's code (those Deeploy adds for a node, e.g. a
    weight's transpose, too; the optimizer network's left out), each tensor by the lowered graph's name (a buffer
    Deeploy adds keeps its own)."""
    names = {deeploy_bridge.deeploy_tensor_name(t): t for node in model.graph.node for t in (*node.input, *node.output)
             if t}
    nodes = sorted(order, key=len, reverse=True)

    def renamed(counts: dict[str, int]) -> dict[str, int]:
        return {names.get(t, t): n for t, n in sorted(counts.items())}

    mine = [(n, c) for n, c in sorted(layers.items()) if any(n == node or n.startswith(f"{node}_") for node in nodes)]
    return {"node_transfers": {n: renamed(c.transfers) for n, c in mine if c.transfers},
            "node_lines": {n: renamed(c.lines) for n, c in mine if c.lines},
            "node_tables": {n: renamed(c.tables) for n, c in mine if c.tables}}


def code_tiler_tables(code_dir: Path, order: list[str], model, target: str) -> TilerTables:
    """The tiler's tables on chip and the copies from off chip of each layer of generated code (a calibration's
    node_tables and node_transfers), for predicting the tables of another home's code (replay.predict)."""
    chip = TARGET_TABLE[target]
    found = _transfers_and_tables(code_layers(code_dir, chip.on_chip, chip.off_chip), order, model)
    return TilerTables(found["node_transfers"], found["node_tables"], _known(code_tiles_into(code_dir, chip.on_chip),
                                                                             order), found["node_lines"])


def _times(draws: int) -> str:
    return f" from {draws} starting states" if draws > 1 else ""


def _cached_calibration(path: Path, key: str) -> Calibration | None:
    """The calibration cached for `key`, or None (absent, or an entry that does not check out: measured again)."""
    payload = read_entry(path, key)
    if payload is None:
        return None
    try:
        found = Calibration.from_doc(json.loads(payload), str(path))
    except (CkptError, ValueError):
        return None
    return found if found.key == key else None


def read_cost_file(path: str | Path, source: str | Path | None = None, target: str | None = None
                   ) -> CostModel:
    """A `--costs FILE`: a calibration (measured cycles per node) or per-op-type coefficients. A calibration is of
    one model's lowered graph for one target: given the model and target it is for, one of another model or
    target is refused (its nodes are not this graph's)."""
    doc = read_json_input(path, "cost file", COST_FILE_FORM + ", or give a calibration `ckpt calibrate -o` wrote")
    if not is_calibration(doc):
        return CostModel.from_doc(doc, str(path))
    found = Calibration.from_doc(doc, str(path))
    if target is not None and found.target != target:
        raise CkptError(f"'{path}' is a calibration for target {found.target}, not {target}",
                        f"solve with --target {found.target}, or give per-op-type costs")
    given = open_model(source).sha256 if source is not None else None
    if given is not None and found.model_sha256 != given:
        raise CkptError(f"'{path}' is a calibration of another model (sha256 {found.model_sha256[:12]}..., "
                        f"this one {given[:12]}...)",
                        f"calibrate this one (`ckpt calibrate {source} -o FILE`), or pass --costs gvsoc")
    return found.cost_model()


COSTS_CHOICES = ("auto", "estimate", "gvsoc")   # or a cost file's path


def resolve_costs(costs: str, source: str | Path, target: str, setup: DeeploySetup, gvsoc: Path | None = None,
                  deeploy_root: Path | None = None, progress: Callable[[str], None] = lambda m: None,
                  timeout: float | None = None, loaded: LoadedModel | None = None, draws: int = 1
                  ) -> CostModel | None:
    """The op costs `--costs` names: None for the built-in estimate, a cost file's, or the model's calibration
    (`gvsoc`: measured now if not cached, its gvsoc run held to `timeout` where given, from `draws` starting states;
    `auto`: the calibration when gvsoc is at hand, else the estimate, said through `progress`). `loaded`: the model
    as the caller loaded it for `setup`'s home (measured_costs)."""
    return costs_and_why(costs, source, target, setup, gvsoc, deeploy_root, progress, timeout, loaded, draws)[0]


def costs_and_why(costs: str, source: str | Path, target: str, setup: DeeploySetup, gvsoc: Path | None = None,
                  deeploy_root: Path | None = None, progress: Callable[[str], None] = lambda m: None,
                  timeout: float | None = None, loaded: LoadedModel | None = None, draws: int = 1
                  ) -> tuple[CostModel | None, str]:
    """`resolve_costs`, with why the costs are ckpt's estimate where they are (what leaves a table's predicted
    cycles empty); "" where they are measured or a cost file's."""
    if costs == "estimate":
        return None, "the op costs are ckpt's estimate (--costs estimate)"
    if costs not in COSTS_CHOICES:
        return read_cost_file(costs, source, target), ""
    if costs == "auto":
        if target not in SIMULATED_TARGETS:
            return None, f"the op costs are ckpt's estimate: {simulation_gap(target)}"
        try:
            return measured_costs(source, target, setup, gvsoc, deeploy_root, progress, timeout, loaded, draws), ""
        except CkptError as err:
            progress(f"op costs: the built-in estimate ({err})")
            return None, f"the op costs are ckpt's estimate: {err.problem}"
    return measured_costs(source, target, setup, gvsoc, deeploy_root, progress, timeout, loaded, draws), ""


def measured_costs(source: str | Path, target: str, setup: DeeploySetup, gvsoc: Path | None = None,
                   deeploy_root: Path | None = None, progress: Callable[[str], None] = lambda m: None,
                   timeout: float | None = None, loaded: LoadedModel | None = None, draws: int = 1) -> CostModel:
    """The op costs of the model's calibration for `setup` (from `draws` starting states); for a split home whose
    graph order overflows the chip (no calibration of it can run), the calibration with every tensor off chip,
    priced per tensor level (pipeline.split_costs) on `loaded` (the model as the caller loaded it for the split
    home; else loaded here)."""
    if setup.home == SPLIT_HOME:
        loaded = loaded or load_split(source, target, setup)
        overflow = graph_order_overflow(loaded, setup)
        if overflow is not None:
            progress(f"op costs: {overflow}; the calibration with every tensor off chip, priced by each tensor's "
                     "level")
            off_chip = setup_for(target, TARGET_TABLE[target].off_chip, allocator=setup.allocator,
                                 weights=setup.weights)
            found = calibrate(source, target, off_chip, gvsoc, deeploy_root, progress, timeout, draws=draws)
            return priced_for_split(found.cost_model(), loaded)
    return calibrate(source, target, setup, gvsoc, deeploy_root, progress, timeout, loaded, draws).cost_model()


def step_code_bytes(source: str | Path, target: str, setup: DeeploySetup, gvsoc: Path | None = None,
                    deeploy_root: Path | None = None, progress: Callable[[str], None] = lambda m: None,
                    loaded: LoadedModel | None = None) -> int:
    """The step's own code and data on chip (a level total there counts them), from the model's calibration. A
    graph order that does not fit on chip is calibrated with its tensors off chip (home the outermost level),
    whose code (two levels of tiling) is the larger: the count then errs on the safe side."""
    return step_calibration(source, target, setup, gvsoc, deeploy_root, progress, loaded).code_bytes


def step_calibration(source: str | Path, target: str, setup: DeeploySetup, gvsoc: Path | None = None,
                     deeploy_root: Path | None = None, progress: Callable[[str], None] = lambda m: None,
                     loaded: LoadedModel | None = None) -> Calibration:
    """The calibration `step_code_bytes` counts the step's code from (at `setup`, else with every tensor off
    chip); CkptError, in a level total's words, where there is none."""
    check_code_measurable(target, setup.default_mem_level)
    try:
        try:
            return calibrate(source, target, setup, gvsoc, deeploy_root, progress, loaded=loaded)
        except CkptError:
            if setup.default_mem_level == TARGET_TABLE[target].off_chip:
                raise
        off_chip = setup_for(target, TARGET_TABLE[target].off_chip, allocator=setup.allocator, weights=setup.weights)
        return calibrate(source, target, off_chip, gvsoc, deeploy_root, progress)
    except FailedOnGvsoc as err:         # gvsoc is here and ran: installing it is no way out
        raise FailedOnGvsoc(f"a total of {setup.default_mem_level} counts the step's own code, which ckpt measures "
                            f"on gvsoc, and {err.problem.removeprefix('cannot calibrate: ')}",
                            f"{err.way_out.split(', or ')[0]}, or hold a live budget there instead (--budget)"
                            ) from None
    except CkptError as err:
        raise CkptError(f"a total of {setup.default_mem_level} counts the step's own code, which ckpt measures on "
                        f"gvsoc, and it could not ({err.problem})", _CODE_WAY_OUT) from None


def calibration_pending(source: str | Path, target: str, setup: DeeploySetup, gvsoc: Path | None = None,
                        deeploy_root: Path | None = None) -> bool:
    """True where `calibrate` would measure now (gvsoc and the kernels at hand, nothing cached): minutes of Deeploy
    and gvsoc; False where its calibration is cached or cannot run (refused in seconds then)."""
    kit, sources = find_kit(gvsoc), find_sources(deeploy_root)
    if isinstance(kit, NoKit) or isinstance(sources, NoSources):
        return False
    key = _key(open_model(source).sha256, target, setup, sources.fingerprint, kit.identity)
    return _cached_calibration(cache_root() / "calibration" / f"{key[:32]}.entry", key) is None


def code_count_notice(costs: str, source: str | Path, target: str, setup: DeeploySetup,
                      loaded: LoadedModel | None = None, gvsoc: Path | None = None,
                      deeploy_root: Path | None = None, why: str | None = None,
                      skip: str | None = "hold a live budget there instead (--budget)",
                      counts_off_chip: bool = True) -> str | None:
    """What a count of the step's code (step_code_bytes, measured_code_bytes) says before it calibrates where the op
    costs asked for need no gvsoc (`costs` the estimate or a cost file): a calibration runs for the code alone, `why`
    the code is counted (default: a level total's), and the way to `skip` it if there is one; None where the op
    costs calibrate anyway, or the calibration it reads is cached or cannot run. A split home whose graph order
    overflows the chip is counted with every tensor off chip, unless not `counts_off_chip` (measured_code_bytes
    off its safe side): then nothing is calibrated."""
    if costs in ("auto", "gvsoc") or isinstance(find_kit(gvsoc), NoKit) or \
            isinstance(find_sources(deeploy_root), NoSources):   # nothing long runs for the code alone
        return None
    measured, how = setup, ""
    if setup.home == SPLIT_HOME and graph_order_overflow(loaded or load_split(source, target, setup), setup):
        if not counts_off_chip:
            return None
        measured = setup_for(target, TARGET_TABLE[target].off_chip, allocator=setup.allocator, weights=setup.weights)
        how = " with every tensor off chip (split, its activations overflow the chip)"
    if not calibration_pending(source, target, measured, gvsoc, deeploy_root):
        return None
    given = "--costs estimate" if costs == "estimate" else "the cost file"
    why = why or f"a total of {setup.default_mem_level} counts the step's own code"
    return (f"{why}, which ckpt measures by calibrating: the graph order's step deployed{how} and run on gvsoc now "
            f"(minutes; once per model, then cached), though {given} needs no gvsoc for the op costs"
            + (f"; to skip it, {skip}" if skip else ""))


def measured_tiler_tables(source: str | Path, target: str, setup: DeeploySetup,
                          progress: Callable[[str], None] = lambda m: None, loaded: LoadedModel | None = None
                          ) -> TilerTables | None:
    """For a split home: the tiler's tables per layer of the calibration split+ counts the step's code from
    (`measured_code_bytes` on the safe side: its layers tile from off chip at least what the split home's do), from
    which the tables of a split step's code are predicted (replay.predict.predicted_tiler_tables); None where there
    is no such calibration (said through `progress`) or the home is not split."""
    if setup.home != SPLIT_HOME:
        return None
    try:
        return step_calibration(source, target, setup, progress=progress, loaded=loaded).tiler_tables()
    except CkptError as err:
        progress(f"the tiler's tables on chip are not counted: {err.problem}")
        return None


_CODE_WAY_OUT = "make gvsoc available ($GVSOC_INSTALL), or hold a live budget there instead (--budget)"


def check_code_measurable(target: str, level: str) -> None:
    """Refuse, before any work, a level total whose step code ckpt cannot measure: no gvsoc model of the target."""
    if target not in SIMULATED_TARGETS:
        raise CkptError(f"a total of {level} counts the step's own code, which ckpt measures on gvsoc's model of "
                        f"{', '.join(SIMULATED_TARGETS)}, not {target}",
                        f"hold a live budget there instead (--budget), or a total of "
                        f"{TARGET_TABLE[target].off_chip} (--budget-total {TARGET_TABLE[target].off_chip}=SIZE "
                        "without --home)")


def measured_code_bytes(source: str | Path, target: str, setup: DeeploySetup,
                        progress: Callable[[str], None] = lambda m: None, loaded: LoadedModel | None = None,
                        safe_side: bool = False) -> int | None:
    """The step's own code and data on chip where ckpt can measure them (step_code_bytes), None where it cannot
    (no gvsoc model of the target, no gvsoc, no kernels, or the graph order's step did not run): said through
    `progress`. A split home whose graph order overflows the chip has no split code to measure: only the code with
    every tensor off chip, which tiles every layer from off chip and is larger. That is no proof that a step cannot
    fit (None then), but a room that must not overflow (`safe_side`: split+'s, which fills the level up to it)
    counts it: not counted, the code found no room left and the step did not link. `loaded`: the model as the caller
    loaded it for the split home (else loaded here)."""
    if setup.home == SPLIT_HOME:
        overflow = graph_order_overflow(loaded or load_split(source, target, setup), setup)
        if overflow is not None and not safe_side:   # only the all-off-chip code is measurable: more than the split's
            progress(f"the step's code on chip is not counted: {overflow}, so its split code is not measured (the "
                     "code with every tensor off chip, which tiles every layer from L3, is larger)")
            return None
        if overflow is not None:
            progress(f"{overflow}: the step's code on chip is counted at the code with every tensor off chip (larger "
                     "than the split step's: the room errs on the safe side)")
    try:
        return step_code_bytes(source, target, setup, progress=progress, loaded=loaded)
    except CkptError as err:
        progress(f"the step's code on chip is not counted: {err.problem}")
        return None
