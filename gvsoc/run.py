"""Run one generated training step on gvsoc's Siracusa model and read what Deeploy's harness printed.

The step (gvsoc.step) boots on the fabric controller, which opens the cluster, runs InitNetwork and RunNetwork
on it as cluster tasks and compares the outputs on a cluster core, as DeeployTest's Siracusa harness does; the
constants and the inputs the code keeps in L3 are readfs files on the hyperflash, loaded into the HyperRAM behind
the uDMA by InitNetwork (as Deeploy's own simulation flow passes its .hex files). Read back: `Errors: N out of M`
(deeploytest.c's rule), `Runtime: N cycles` (the cluster timer around RunNetwork) and each probed layer's cycles.

gvsoc is deterministic: the same step on the same kit gives the same figures, so a finished run is kept under
$CKPT_CACHE_DIR/gvsoc/runs, keyed by the step's files, its data, the kit and ckpt's device files, and served from
there when asked again (a sweep's baseline is the calibration's run); an entry that does not check out (its key or
content hash, ckpt.cached) runs again.

A run that fails says why in one line (gvsoc.diagnosis): the first error gvsoc or the harness printed, and, for an
L3 address, which of the step's buffers holds it. gvsoc's output is read as it comes (its launcher's output is
line-buffered, so what it printed is there even when it is stopped), and a run that prints nothing for longer than
its timeout is taken as hung: stopped, its report saying how long it was silent and what it printed last.

Before anything runs, the step's L2 is counted: what the ELF places in L2 (code, data, the harness's expected
outputs), what the code allocates there at run time (its peak as the same code measured on the host), the
largest buffer the harness allocates to read an output back, and what the runtime allocates there for itself
(runtime_heap: its drivers, the readfs mount, and a record and cache block per data file Init loads, which
Deeploy's dory_mem.c never closes, so they stay allocated for the whole run). A step whose generated code,
compiled like the kernels, leaves it no room is built again with that code compiled for size (gvsoc.step,
COMPACT; its record says so: its cycles are of that code). A step that cannot fit either way is not run, and
says by how much.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from ckpt.cached import read_entry, write_entry
from ckpt.coderun.manifest import CodeManifest
from ckpt.coderun.sources import KernelSources
from ckpt.files import atomic_write
from ckpt.gvsoc.diagnosis import diagnosis, ram_overflow
from ckpt.gvsoc.draws import each_draw, median_count, median_layers, summed_seconds, worst_draw
from ckpt.gvsoc.harness import write_harness_data
from ckpt.gvsoc.kernels import device_fingerprint, device_kernels
from ckpt.gvsoc.kit import GvsocKit
from ckpt.gvsoc.open_files import closes_files
from ckpt.gvsoc.probes import layer_cycles
from ckpt.gvsoc.sdk import SdkBuildError, sdk_library
from ckpt.gvsoc.step import (
    COMPACT,
    L2_BASE,
    LAYOUT,
    DeviceStep,
    L2Overflow,
    StepBuildError,
    build_step,
    harness_missing,
)
from ckpt.paths import cache_root

L2_END = 0x1C200000          # the end of Siracusa's shared L2 banks: pulpos's L2 heap runs up to it
L2_CAPACITY = L2_END - L2_BASE
# What pulp-sdk's runtime allocates in L2 for itself, from the same heap as the code (pi_l2_malloc), measured on the
# kit's Siracusa with pi_l2_malloc wrapped (MobileNetV1's split step, 2026-12-06): the drivers and the readfs mount
# take RUNTIME_FIXED, then the readfs header read whole (read_fs.c's mount: the 12-byte main header and, per file,
# 12 bytes and its NUL-terminated name, rounded up to 8); each file dory_mem.c's load_file_to_ram/_to_local opens
# keeps a 128-byte pi_read_fs_file_t and its 136-byte cache block (READ_FS_THRESHOLD_BLOCK_FULL) to the end, as
# they never call pi_fs_close: 420 files (MobileNetV1's Init) hold 110,880 B of L2, one where ckpt's workaround
# closes each at the next open (gvsoc.open_files).
RUNTIME_FIXED = 480
READFS_HEADER, READFS_FILE_HEADER = 12, 12
OPEN_FILE = 128 + 136
RUN_FORMAT = 3          # 3: one checked entry per run (ckpt.cached)
_ERRORS = re.compile(r"Errors:\s*(\d+)\s+out of\s+(\d+)")
_RUNTIME = re.compile(r"Runtime:\s*(\d+)\s+cycles")


@dataclass(frozen=True)
class OnChipNeed:
    """What the step needs of the chip's on-chip memory (Siracusa's L2) in bytes, as counted before it runs."""

    static: int                 # code and data the ELF places in L2 (from its base to __l2_shared_end)
    heap: int                   # what the code allocates in L2 at its peak
    capacity: int               # Siracusa's L2, base to the end of the shared banks
    test_data: int = 0          # of `static`: the harness's inputs and expected outputs (not part of a step)
    readback: int = 0           # the buffer the harness allocates to read an output back from L3
    compact: bool = False       # counted with the generated code compiled for size (gvsoc.step.COMPACT)
    probed: bool = True         # counted with every layer probed (False: built without probes to fit)
    runtime: int = 0            # what the runtime allocates in L2 for itself (runtime_heap; 0 in older records)
    closes_files: bool = False  # linked with ckpt's workaround of the data files Deeploy keeps open (gvsoc.open_files)

    @property
    def total(self) -> int:
        """What this run needs: the step and the harness's data."""
        return self.static + self.heap + self.readback + self.runtime

    @property
    def step(self) -> int:
        """What the step alone needs (code, its data, its L2 allocations and the runtime's), as deployed without a
        test harness."""
        return self.static - self.test_data + self.heap + self.runtime

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity


def runtime_heap(flash_files: Sequence[str | Path], closes_files: bool = False) -> int:
    """Bytes pulp-sdk's runtime allocates in L2 for itself while a step whose Init loads `flash_files` (readfs
    files, each opened once) runs: see RUNTIME_FIXED. `closes_files`: linked with ckpt's workaround, which closes
    each file at the next open, so one file at most is open (gvsoc.open_files)."""
    names = [Path(f).name for f in flash_files]
    header = READFS_HEADER + sum(READFS_FILE_HEADER + len(n.encode()) + 1 for n in names)
    kept_open = min(len(names), 1) if closes_files else len(names)
    return RUNTIME_FIXED + -(-header // 8) * 8 + OPEN_FILE * kept_open


@dataclass
class GvsocRun:
    """What the harness printed for one step."""

    errors: int
    total: int
    cycles: int                                 # the harness's Runtime: RunNetwork on the cluster
    layers: dict[str, int] | None               # probed cycles per layer (Deeploy's layer names)
    on_chip: OnChipNeed
    log: str                                    # everything gvsoc printed
    seconds: dict[str, float] = field(default_factory=dict)   # build, simulate
    cached: bool = False                        # served from the run cache: the same step ran before
    relaxed: bool = True                        # linked with ld's relaxation (gvsoc.step.DeviceStep)
    draws: list[int] = field(default_factory=list)   # several draws (gvsoc.draws): each one's step cycles, of
                                                     # which `cycles` is the median; empty: one draw


@dataclass(frozen=True)
class NotSimulated:
    reason: str
    failed: bool = False        # True: the step itself failed (did not build, did not fit, crashed, hung)
    on_chip: OnChipNeed | None = None
    log: str | None = None      # what gvsoc printed ("" when nothing), when it ran and failed (kept beside the
                                # report, empty too); None: it did not run


TIMEOUT_FLOOR = 120.0           # seconds any run may take: gvsoc's start, the harness's copies and checks
SLOWEST_RATE = 300_000          # simulated cycles per second below which a run is taken as hung


def seconds_text(seconds: float) -> str:
    """Seconds as a person gave them: 0.3 s stays 0.3 s (never "0 s"), 120 s stays 120 s."""
    return f"{seconds:.3g} s" if seconds < 10 else f"{seconds:.0f} s"


def host_load() -> float:
    """How many runnable processes each core of this host shares out, a run of gvsoc counted (1 at least): the
    larger of the last one and five minutes' load averages, plus the run, over the core count."""
    try:
        loads = os.getloadavg()[:2]
    except OSError:             # no load average here: taken as an idle host
        return 1.0
    return max(1.0, (max(loads) + 1) / (os.cpu_count() or 1))


def simulation_timeout(predicted_cycles: int | None, load: float | None = None) -> float:
    """Seconds a step of `predicted_cycles` may run on gvsoc before it is taken as hung: the floor plus its cycles
    at the slowest rate gvsoc simulates a cluster step on a core of its own, times the processes that share each
    core (`load`, default `host_load()`: gvsoc gets that share of one), so a slow run on a busy host finishes and
    a hang ends in minutes, not the half hour any step got before. A harness prints nothing while a network runs:
    MobileNetV1's 237 M-cycle mini-batch is one silent stretch."""
    load = host_load() if load is None else max(1.0, load)
    return TIMEOUT_FLOOR + max(0, predicted_cycles or 0) / SLOWEST_RATE * load


def simulate_step(code_dir: Path, feeds: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                  sources: KernelSources, kit: GvsocKit, heap_peak: int, *, timeout: float | None = None,
                  keep: Path | None = None, pad: int = 0, draws: int = 1) -> GvsocRun | NotSimulated:
    """Build `code_dir`'s step and run it on gvsoc (see the module doc). `heap_peak`: the most the code keeps
    allocated in L2 at once. `timeout`: seconds before each run is taken as hung (default: the floor of
    `simulation_timeout`). `keep`: a folder to keep the ELF, its map and gvsoc's log in (the first draw's). `pad`:
    see gvsoc.step.build_step. `draws`: runs from as many starting states (gvsoc.draws), their median kept and each
    draw's cycles beside it (`GvsocRun.draws`); the first that fails is the answer. A run that fails carries gvsoc's
    output (`NotSimulated.log`)."""
    timeout = simulation_timeout(None) if timeout is None else timeout
    missing = harness_missing(sources)
    if missing:
        return NotSimulated(missing)
    code_dir = Path(code_dir).resolve()        # gvsoc runs in another folder: every path it is given is absolute
    runs = each_draw(code_dir, "Network.c", draws,
                     lambda code, draw: _simulate_draw(code, feeds, expected, sources, kit, heap_peak, timeout,
                                                       keep if draw == 0 else None, pad, draw), NotSimulated)
    return runs[-1] if isinstance(runs[-1], NotSimulated) else median_run(runs)


def median_run(runs: list[GvsocRun]) -> GvsocRun:
    """One run of several draws of the same step: the median cycles (the step's and each layer's), the worst
    draw's Errors and its log, each draw's step cycles in `draws` (empty for one draw)."""
    if len(runs) == 1:
        return runs[0]
    worst = runs[worst_draw(runs)]
    return replace(runs[0], errors=worst.errors, total=worst.total, cycles=median_count([r.cycles for r in runs]),
                   layers=median_layers([r.layers for r in runs]), log=worst.log, seconds=summed_seconds(runs),
                   cached=all(r.cached for r in runs), relaxed=all(r.relaxed for r in runs),
                   draws=[r.cycles for r in runs])


def _simulate_draw(code_dir: Path, feeds: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                   sources: KernelSources, kit: GvsocKit, heap_peak: int, timeout: float, keep: Path | None,
                   pad: int, draw: int) -> GvsocRun | NotSimulated:
    """One draw of the step in `code_dir` (already moved to draw `draw`'s starting state), from the run cache where
    it ran before."""
    manifest = CodeManifest.read(code_dir)
    key = _run_key(code_dir, manifest, feeds, expected, sources, kit, heap_peak, pad, draw)
    cached = _cached_run(key)
    if cached is not None:
        return cached
    overflow = ram_overflow(network_sources([code_dir / "Network.c"]))
    if overflow is not None:                 # before minutes of building and simulating a step that cannot run
        return NotSimulated(overflow)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ckpt_gvsoc_") as scratch:
        work = Path(keep).resolve() if keep is not None else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        try:
            data = write_harness_data(manifest, Path(code_dir), feeds, expected, work / "data")
        except ValueError as exc:
            return NotSimulated(f"the harness cannot run this code: {exc}")
        readback = max((p.nbytes for p in manifest.outputs), default=0)
        closing = bool(data.flash_files) and closes_files(sources)
        runtime = runtime_heap(data.flash_files, closing)
        try:
            sdk = sdk_library(kit, sources)
            kernels = device_kernels(sources, kit, sdk, manifest.cores)
            step = build_to_fit(
                lambda compact, _: build_step(code_dir, manifest, data, sources, kit, sdk, kernels, work, pad,
                                              compact, closing),
                lambda static: OnChipNeed(static, heap_peak, L2_CAPACITY, data.nbytes, readback, runtime=runtime,
                                          closes_files=closing))
        except (SdkBuildError, StepBuildError) as exc:
            return NotSimulated(str(exc), failed=True)
        if isinstance(step, OnChipNeed):
            return NotSimulated(_does_not_fit(step), on_chip=step)
        need = OnChipNeed(step.l2_static_bytes, heap_peak, L2_CAPACITY, data.nbytes, readback, step.compact,
                          runtime=runtime, closes_files=closing)
        built = time.perf_counter()
        command = [*gvsoc_command(kit, step.elf, work / "gvsoc"),
                   *(f"--flash-property={f}@hyperflash:readfs:files" for f in data.flash_files), "image", "flash",
                   "run"]
        try:
            returncode, log, finished = _simulate(command, work, _environment(kit), timeout)
        except OSError as exc:
            return NotSimulated(f"gvsoc could not start ({command[0]}: {exc.strerror or exc})", failed=True,
                                on_chip=need)
        if keep is not None:
            atomic_write(work / "gvsoc.log", log)
        if not finished:
            return NotSimulated(hung_reason(timeout, log), failed=True, on_chip=need, log=log)
        ran = time.perf_counter()
    errors, runtime = _ERRORS.findall(log), _RUNTIME.findall(log)
    if not errors or not runtime:
        return NotSimulated(failed_reason(returncode, log, [code_dir / "Network.c"]), failed=True, on_chip=need,
                            log=log)
    run = GvsocRun(int(errors[-1][0]), int(errors[-1][1]), int(runtime[-1]), layer_cycles(log, step.layers), need,
                   log, {"build": built - start, "simulate": ran - built}, relaxed=step.relaxed)
    _store_run(key, run)
    return run


def _simulate(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, bool]:
    """(exit code, what it printed, whether it finished) of one gvsoc run, stopped once it has printed nothing for
    `timeout` seconds. gvsoc's launcher starts the simulator as a child of its own: the run gets a process group,
    which is killed whole when it stops printing or is interrupted, so no simulator is left running. Its output is
    line-buffered (coreutils' stdbuf, where there is one), so a run that is stopped has printed what it printed."""
    env = {**env, "PYTHONUNBUFFERED": "1"}
    stdbuf = shutil.which("stdbuf")
    process = subprocess.Popen([stdbuf, "-oL", "-eL", *command] if stdbuf else command, cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    chunks: list[bytes] = []
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                if not selector.select(timeout):
                    _kill_group(process)
                    process.wait()
                    return process.returncode, _text(chunks), False
                chunk = os.read(process.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        process.wait()
        return process.returncode, _text(chunks), True
    except BaseException:
        _kill_group(process)
        raise
    finally:
        process.stdout.close()


def _text(chunks: list[bytes]) -> str:
    return b"".join(chunks).decode(errors="replace")


def _last_line(log: str) -> str:
    """The last line gvsoc printed that says something."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "nothing"


def hung_reason(timeout: float, log: str) -> str:
    """Why a run that printed nothing for `timeout` seconds was stopped, in one line."""
    said = f"after its last line: {_last_line(log)}" if log.strip() else "and nothing before"
    return (f"gvsoc printed nothing for {seconds_text(timeout)} {said}; stopped as hung (give it more time with "
            "--gvsoc-timeout)")


def network_sources(sources: list[Path]) -> str:
    """The generated C of a step's networks, one text (their L3 buffers are made in this order)."""
    return "\n".join(p.read_text(errors="replace") for p in sources if p.is_file())


def failed_reason(returncode: int, log: str, sources: list[Path]) -> str:
    """Why a run that ended without the harness's verdict failed, in one line: the first error it printed (with the
    L3 buffer its address falls in, read from the generated `sources`), else its last line."""
    said = diagnosis(log, network_sources(sources) or None) or _last_line(log)
    return f"the step did not finish on gvsoc (exit code {returncode}): {said}"


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run_key(code_dir: Path, manifest: CodeManifest, feeds: Mapping[str, np.ndarray],
             expected: Mapping[str, np.ndarray], sources: KernelSources, kit: GvsocKit, heap_peak: int,
             pad: int, draw: int = 0) -> str:
    """The run cache's key of one draw: draw 0 (the step as generated) keeps the key runs had before draws."""
    digest = hashlib.sha256(json.dumps({"format": RUN_FORMAT, "kit": kit.identity, "kernels": sources.fingerprint,
                                        "device": device_fingerprint(), "layout": LAYOUT, "l2_heap": heap_peak,
                                        "pad": pad, **({"draw": draw} if draw else {}),
                                        **({"closes_files": True} if closes_files(sources) else {})}).encode())
    files = [code_dir / "Network.c", code_dir / "Network.h", code_dir / "io.json",
             *sorted((code_dir / "hex").glob("*.hex"))]
    for path in files:
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    for port in manifest.inputs:
        digest.update(np.ascontiguousarray(np.asarray(feeds[port.name]).astype(port.dtype)).tobytes())
    for port in manifest.outputs:
        digest.update(np.ascontiguousarray(np.asarray(expected[port.name]).astype(port.dtype)).tobytes())
    return digest.hexdigest()[:32]


def _runs() -> Path:
    return cache_root() / "gvsoc" / "runs"


def _cached_run(key: str) -> GvsocRun | None:
    """A finished run of the same step, or None (absent, or an entry that does not check out: it runs again)."""
    payload = read_entry(_runs() / f"{key}.entry", key)
    if payload is None:
        return None
    try:
        doc = json.loads(payload)
        return GvsocRun(int(doc["errors"]), int(doc["total"]), int(doc["cycles"]), doc["layers"],
                        OnChipNeed(**doc["l2"]), str(doc["log"]), doc["seconds"], cached=True,
                        relaxed=bool(doc.get("relaxed", True)))
    except (ValueError, KeyError, TypeError):
        return None


def _store_run(key: str, run: GvsocRun) -> None:
    """The run as its cache entry keeps it; the on-chip need stays under "l2", so runs cached before still serve."""
    write_entry(_runs() / f"{key}.entry", key, json.dumps(
        {"errors": run.errors, "total": run.total, "cycles": run.cycles, "layers": run.layers,
         "l2": asdict(run.on_chip), "seconds": run.seconds, "log": run.log, "relaxed": run.relaxed},
        indent=1).encode())


def _does_not_fit(need: OnChipNeed) -> str:
    code = f", its generated code compiled for size ({' '.join(COMPACT)})" if need.compact else ""
    code += " and built without its per-layer probes" if not need.probed else ""
    return (f"the step does not fit Siracusa's L2 with the harness's data{code}: it needs {need.total:,} B "
            f"({need.static:,} B code and data, of which {need.test_data:,} B inputs and expected outputs; "
            f"{need.heap + need.readback:,} B allocated, {need.runtime:,} B by the runtime for itself: drivers, file "
            f"system, open files{closed_text(need)}), {need.total - need.capacity:,} B more than the "
            f"{need.capacity:,} B there")


def closed_text(need: OnChipNeed) -> str:
    """What the record says of ckpt's workaround of the data files Deeploy keeps open, where the step has it."""
    return (", one at a time: ckpt closed each data file at the next open (Deeploy's readfs-files-kept-open worked "
            "around, CKPT_DEEPLOY_WORKAROUNDS=off turns it off)") if need.closes_files else ""


def build_to_fit(build: Callable[[bool, bool], DeviceStep], need_of: Callable[[int], OnChipNeed],
                 layers_needed: bool = True) -> DeviceStep | OnChipNeed:
    """The step `build(compact, probed)` gives, its generated code compiled like the kernels and every layer probed
    where the step then fits L2 (`need_of(its static L2 bytes)`), else compiled for size (COMPACT) where it then
    fits, else, unless its per-layer cycles are `layers_needed` (a calibration's, a bench's), compact and without
    probes (their counters and code) where it then fits; where none fits, what the last build tried needs.
    StepBuildError and SdkBuildError pass through."""
    for compact, probed in ((False, True), (True, True), *(() if layers_needed else ((True, False),))):
        try:
            step = build(compact, probed)
        except L2Overflow as exc:
            need = replace(need_of(L2_CAPACITY + exc.overflow), compact=compact, probed=probed)
            continue
        need = replace(need_of(step.l2_static_bytes), compact=compact, probed=probed)
        if need.fits:
            return step
    return need


def gvsoc_command(kit: GvsocKit, elf: Path, work_dir: Path) -> list[str]:
    return [str(kit.install / "bin" / "gvsoc"), "--target=siracusa", f"--work-dir={work_dir}", f"--binary={elf}"]


def _environment(kit: GvsocKit) -> dict[str, str]:
    """gvsoc's launcher on this interpreter (whose packages it imports), its install's tools and modules first."""
    env = kit.environment()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env
