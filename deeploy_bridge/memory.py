"""Deeploy's memory figures for a given schedule, and its generated C code, from one Deeploy run.

What the numbers mean (Deeploy 0.2.1):

* ``dynamic_peak`` is ``NetworkContext._maxDynamicSize``, filled during ``backEnd`` by
  ``MemoryManagementGeneration`` / ``MemoryPassthroughGeneration``
  (``CommonExtensions/CodeTransformationPasses/MemoryAllocation.py``) walking layers in schedule order;
  non-tiled, this *is* ``deployer.worstCaseBufferSize`` (key "None": buffers without memory level).
* Tiled, ``deployer.worstCaseBufferSize`` is the tiler's arena size per level
  (``Tiler._convertCtxtToStaticSchedule``: max end address of the static memory map), which we also
  report as ``arena``; ``static`` is ``outerMemoryScheduler.getConstantTensorOffset`` per level.
* Non-tiled ``static`` is the byte sum of global buffers (constants, graph I/O) Deeploy's own memory
  summary adds on top of the dynamic peak.

Non-tiled lifetime rule (verified to the byte on CCT2_FT2: 1,114,368). Per layer, in schedule order:
counted buffers are *local* ones only (not graph inputs/outputs, not constants), size
prod(shape)*typeWidth/8, no alignment. (1) every output of the layer (+ its TransientBuffers) is
added; (2) the peak is taken; (3) transients and the inputs whose last reader is this layer are
subtracted. Reshape-like layers (Reshape/Squeeze/Unsqueeze/Flatten, ``MemoryPassthroughGeneration``)
count their output as a new buffer and always subtract their dying input. Any other layer skips the
subtraction of a dying input if a buffer alias-linked to it (``VariableBuffer.has_live_aliases``) is
still live; that size is then never subtracted (16x32 KiB + 256 B on CCT2_FT2).

That counter is *not* what the generated code uses: the code never mallocs a Reshape output (``out = in;``)
and frees each alias group's block exactly once, when its last member dies (through whichever pointer
dies last). ``code_memory`` replays the code itself; on CCT2_FT2 (graph order) it gives 819,972 B, which is
ckpt's prediction to the byte, against Deeploy's 1,114,368.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from Deeploy.DeeployTypes import ConstantBuffer, StructBuffer, VariableBuffer, _NoVerbosity

from ckpt.coderun.manifest import CodeManifest, Port
from ckpt.files import atomic_write
from ckpt.targets import uses_deeploy

from . import workarounds
from .buffers import buffer_bytes
from .deeploy_run import DeeployRun, DeployOptions, back_end, front_end, mid_end, quiet_deeploy, start
from .errors import BridgeError
from .home_split import buffer_levels
from .in_place import apply_in_place, refresh_code
from .input_types import infer_input_types
from .lowering import prepare_graph
from .non_tiled_arena import NON_TILED_LEVEL, ArenaPlan, arena_code, place_locals
from .records import MemoryFigures
from .reentrant import restore_code
from .scheduler import Order, make_scheduler
from .scratch_sizes import fit_scratch_sizes, tile_scratch_sizes
from .setup import DEFAULT_SETUP, DeeploySetup, WeightUpdate
from .sources import ModelLike, load_source
from .split_step import (
    OptimizerRole,
    Role,
    mirror_code,
    raise_arena_floor,
    rename_files,
    repeat_code,
    share_buffers,
    shared_allocation,
)
from .tiled_lifetimes import capture_memory_map, lifetime_peaks
from .versions import deeploy_label
from .write_back import WriteBack, write_back_code, write_back_plan


def _static_bytes(run: DeeployRun, levels) -> dict[str, int]:
    deployer, ctxt = run.deployer, run.deployer.ctxt
    if run.options.tiled:
        scheduler = deployer.tiler.outerMemoryScheduler
        static = {lvl: int(scheduler.getConstantTensorOffset(ctxt, lvl)) for lvl in levels}
        code = getattr(deployer, "in_place", None)
        for view in (code.plan.views if code else {}):     # Deeploy counts them; they read another copy's bytes
            buf = ctxt.lookup(view)
            level = getattr(buf, "_memoryLevel", None)
            if level in static:
                static[level] -= buffer_bytes(buf)
        return static
    total = 0
    for buf in ctxt.globalObjects.values():
        if isinstance(buf, StructBuffer) or not isinstance(buf, VariableBuffer) or not hasattr(buf, "_type"):
            continue
        if isinstance(buf, ConstantBuffer) or buf._deploy:
            total += buffer_bytes(buf)
    return {"None": total}


def _write_code(run: DeeployRun, out_dir: Path, write_back: WriteBack | None, arena: ArenaPlan | None) -> list[str]:
    """Assemble <stem>.h / <stem>.c (Network, or one of a split step's two networks: split_step) from the deployer's
    generators, plus L3 constant hex files; `write_back`: the updates the end of the step copies into their weights
    (deeploy_bridge.write_back); `arena`: the non-tiled flow's locals in ckpt's arena
    (deeploy_bridge.non_tiled_arena)."""
    d = run.deployer
    net = run.options.network
    arena_declaration, arena_allocation = arena_code(d.ctxt, arena) if arena is not None else ("", "")
    out_dir.mkdir(parents=True, exist_ok=True)
    guard = f"__CKPT_{net.stem.upper()}_HEADER__"
    header = "\n".join([
        f"#ifndef {guard}",
        f"#define {guard}",
        "#include <stdint.h>",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        d.generateIncludeString(),
        *net.declarations(),
        d.generateIOBufferInitializationCode(),
        "#endif",
        "",
    ])
    body = d.generateFunction(_NoVerbosity)  # generates layer code; memory accounting already done
    definitions = d.generateGlobalDefinitionCode()   # the layers' closures, tiling loops included
    again = restore_code(definitions + body)  # so that a second step runs as the first (deeploy_bridge.reentrant)
    off_chip = run.options.setup.outermost
    with shared_allocation(d.ctxt, run.options.role, _arena_name(run)):
        allocation = rename_files(d.generateBufferAllocationCode(), d.ctxt, net)  # also assigns extName to L3 globals
    io = [t.name for t in d.graph.inputs], [t.name for t in d.graph.outputs]
    mirrors = mirror_code(d.ctxt, run.options.role, off_chip, *io)
    source = "\n".join([
        "#include <math.h>",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        d.generateIncludeString(),
        f'#include "{net.stem}.h"',
        *(['#include "TrainingNetwork.h"'] if isinstance(run.options.role, OptimizerRole) else []),   # what it shares
        d.generateBufferInitializationCode(),
        arena_declaration,
        definitions,
        again.declarations,
        mirrors.declarations,
        net.definition(net.run),
        d.generateInferenceInitializationCode(),
        again.restore,
        mirrors.prologue,
        body,
        mirrors.epilogue,
        refresh_code(d),                      # in-place updates reach every copy (deeploy_bridge.in_place)
        write_back_code(d.ctxt, write_back, off_chip),  # updates out of place reach their weights (write_back)
        repeat_code(d.ctxt, run.options.role, off_chip),  # a weight the train network repeats, every copy updated
        "}",
        net.definition(net.init),
        d.generateEngineInitializationCode(),
        allocation,
        arena_allocation,
        mirrors.init,
        again.save,
        "}",
        "",
    ])
    files = {f"{net.stem}.h": header, f"{net.stem}.c": source}
    for name, text in files.items():
        atomic_write(out_dir / name, text)
    written = list(files)
    manifest = _manifest(run)
    manifest.write(out_dir)
    written.append(manifest.file_name)
    hex_dir = out_dir / "hex"
    for buf in d.ctxt.globalObjects.values():
        if isinstance(buf, ConstantBuffer) and hasattr(buf, "extName"):
            hex_dir.mkdir(exist_ok=True)
            values = np.asarray(buf.values).reshape(-1)
            ref = buf._type.referencedType
            dtype = np.float32 if ref.typeName.startswith("float") else np.dtype(
                f"{'i' if ref.typeMin < 0 else 'u'}{max(1, ref.typeWidth // 8)}")
            pad = (-values.size) % max(1, 32 // ref.typeWidth)
            atomic_write(hex_dir / f"{buf.extName}.hex", np.pad(values, (0, pad)).astype(dtype).tobytes())
            written.append(f"hex/{buf.extName}.hex")
    return written


def _arena_name(run: DeeployRun) -> str:
    """The name Deeploy's tiler gives its arenas (`<name>_<level>`); the non-tiled flow has none."""
    return getattr(getattr(run.deployer, "tiler", None), "arenaName", "MEMORYARENA")


def _manifest(run: DeeployRun) -> CodeManifest:
    """io.json: the graph inputs and outputs of the generated code, in Deeploy's order (input_<i>, output_<i>),
    with the file InitNetwork loads an input from (inputs kept in L3; assigned by generateBufferAllocationCode)."""
    ctxt, setup = run.deployer.ctxt, run.options.setup

    def ports(prefix: str) -> tuple[Port, ...]:
        found = []
        while f"{prefix}_{len(found)}" in ctxt.globalObjects:
            buf = ctxt.globalObjects[f"{prefix}_{len(found)}"]
            extname = getattr(buf, "extName", None)
            found.append(Port(buf.name, buf._type.referencedType.typeName, int(np.prod(buf.shape)),
                              f"{extname}.hex" if extname is not None else None))
        return tuple(found)

    return CodeManifest(flow="tiled" if run.options.tiled else "non-tiled", cores=setup.n_cores,
                        l3_bytes=setup.size(setup.outermost), inputs=ports("input"), outputs=ports("output"),
                        network=run.options.network.stem)


def deploy(model: ModelLike,
           order: Order = None,
           target: str = "siracusa",
           *,
           tiled: bool = True,
           setup: DeeploySetup = DEFAULT_SETUP,
           code_dir: str | Path | None = None,
           inputs=None,
           already_lowered: bool | None = None,
           role: Role | None = None) -> MemoryFigures:
    """One full Deeploy run for ``order``: memory figures, and code written to ``code_dir`` if given.

    ``model``: model folder / .onnx path / ModelProto. A graph produced by ``lower`` (or a rewired copy
    that kept its metadata_props, or whose I/O is still named input_i/output_i) is recognised as already
    lowered: its lowering passes are skipped so node names stay those of ``order`` (new tensors should
    end in ``_tensor`` to keep their names). Force either way with ``already_lowered``.
    """
    if not uses_deeploy(target):
        raise BridgeError("target 'none' has no Deeploy memory figures; use siracusa")
    source = load_source(model, inputs)
    prior = source.lowered_meta
    lowered = source.looks_lowered if already_lowered is None else already_lowered
    input_types = infer_input_types(source.model.graph, source.inputs, (prior or {}).get("input_types"))
    opts = DeployOptions(target=target, setup=setup, tiled=tiled, relower=not lowered, role=role)
    run = start(prepare_graph(source, opts.relower), input_types, make_scheduler(order), opts)
    kept = capture_memory_map(run.deployer.tiler) if tiled else {}
    try:
        front_end(run)
        write_back = None
        if isinstance(role, OptimizerRole):
            share_buffers(run.deployer, role, setup.persistent_level, setup.default_mem_level,   # it updates the
                          setup.on_chip_persistent)                                      # train's weights
        elif tiled and setup.weights is WeightUpdate.IN_PLACE:
            apply_in_place(run.deployer, setup.outermost)
        elif code_dir is not None:
            write_back = write_back_plan(run.deployer)
        mid_end(run)
        if tiled:
            fit_scratch_sizes(run.deployer, tile_scratch_sizes(run.deployer.ctxt, kept.get("solution"),
                                                               setup.innermost))
        raise_arena_floor(run.deployer.ctxt, role, _arena_name(run))
        back_end(run)
        arena = None if tiled or not setup.allocator.non_tiled_arena else place_locals(run.deployer)
        figures = _figures(run, target, tiled, setup, kept, arena)
        if code_dir is not None:
            t0 = time.perf_counter()
            with quiet_deeploy():
                figures.code_files = _write_code(run, Path(code_dir), write_back, arena)
            figures.code_dir = Path(code_dir)
            run.timings.codegen = time.perf_counter() - t0
    finally:
        run.close()
    return figures


def _figures(run: DeeployRun, target: str, tiled: bool, setup: DeeploySetup, kept: dict,
             arena: ArenaPlan | None) -> MemoryFigures:
    """Deeploy's own memory figures after its back end, with what ckpt's tiler hooks saw of the layout (tiled) or
    the arena ckpt laid out the locals in (non-tiled, `arena`; keyed by the level the code allocates it in)."""
    d = run.deployer
    home, live, calls, placed_by, laid_out, grown = {}, {}, 0, {}, {}, []
    if "map" in kept:
        peaks = lifetime_peaks(d.ctxt, kept["map"], setup.default_mem_level)
        home = {"all": peaks.all_buffers, "local": peaks.local, "io": peaks.io_bytes}
        live = {setup.default_mem_level: peaks.all_buffers}
    log = getattr(d.tiler, "layout_log", None) if tiled else None
    if log is not None and log.layouts:
        live = {level: layout.live_max for level, layout in log.layouts.items()}
        placed_by = {level: layout.allocator for level, layout in log.layouts.items()}
        laid_out = {level: tuple(blocks) for level, blocks in (log.blocks or {}).items()}
        calls = log.calls
        grown = list(log.grown)
    if arena is not None:
        level = NON_TILED_LEVEL
        live, placed_by = {level: arena.layout.live_max}, {level: arena.layout.allocator}
        laid_out = {level: arena.blocks}
    dynamic = {k: int(v) for k, v in d.ctxt._maxDynamicSize.items()}
    worst = {k: int(v) for k, v in d.worstCaseBufferSize.items()}
    return MemoryFigures(target=target, deeploy_version=deeploy_label(), tiled=tiled,
                         order=list(d.layerBinding.keys()), layers=len(d.layerBinding), worst_case=worst,
                         dynamic_peak=dynamic,
                         arena=dict(worst) if tiled else {NON_TILED_LEVEL: arena.layout.size} if arena else {},
                         static=_static_bytes(run, worst.keys() if tiled else ()),
                         home_live=home, live_max=live, allocator_calls=calls, grown=grown, placed_by=placed_by,
                         laid_out=laid_out, setup=setup, timings=run.timings,
                         buffer_levels=buffer_levels(d.ctxt) if tiled else {},
                         home_arena=dict(log.home) if log is not None else {},
                         workarounds=workarounds.bound(d.layerBinding))


def deeploy_memory(model_dir_or_path: ModelLike, order_or_scheduler: Order = None, target: str = "siracusa",
                   **options) -> MemoryFigures:
    """Deeploy's memory figures for one schedule (no code written); options as for ``deploy``."""
    if "code_dir" in options:
        raise TypeError("deeploy_memory writes no code: use generate_code or deploy(code_dir=...)")
    return deploy(model_dir_or_path, order_or_scheduler, target, **options)


def generate_code(model: ModelLike, order: Order, out_dir: str | Path, target: str = "siracusa",
                  **kwargs) -> MemoryFigures:
    """Run Deeploy's back end for ``order`` and write Network.c / Network.h (+ hex/) into ``out_dir``.

    Returns the same figures as ``deeploy_memory`` from the same run (Deeploy runs once).
    """
    return deploy(model, order, target, code_dir=out_dir, **kwargs)
