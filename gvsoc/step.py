"""Build one generated training step for Siracusa: Deeploy's Network.c with per-layer probes, Deeploy's own
Siracusa harness (deeploytest.c and CycleCounter.c of the checkout), its kernels and pulp-sdk's runtime.

The step is linked twice: once to learn which kernel objects it uses, then with those first, so the kernels sit
at the same addresses whatever the generated code's size (a recompute adds code; the kernels then do not move).

Nothing a schedule does not decide moves with it (`linker_script`, LAYOUT). gvsoc's Siracusa cluster fetches
through a small two-level instruction cache (per core 512 B, the master core 2 KiB; shared 4 KiB in 8 banks of
16-byte lines, so an address's set repeats every KiB) whose ways are replaced by an LFSR, and its L1 data memory
is word-interleaved over banks that repeat every 64 B: a hot loop that moves by a few bytes crosses other lines
and sets, and a buffer that moves lands on other banks. Moving code by a few bytes changes the cycles of layers whose
code did not move. So `.text` holds only what is the same at every point (the kernels, the
runtime, the C libraries); the harness, ckpt's probes and the generated networks go after the runtime's code and
data, each object from a KiB boundary, what is the same at every point (the optimizer network of a split step,
the harness) before the network the schedule generates; the L1 heap (the cluster's stacks, then Deeploy's L1
arena) and the L2 heap start at a KiB boundary, and the master core's added stack is a whole number of 256 B, so
a tile lands on the same banks at every point. What still moves is the schedule's own network, whose layout is
the schedule's code; the cache's state that one layer leaves to the next is the schedule's too.

The generated code itself goes after the runtime's code and data (`linker_script`): pulp-sdk's runtime jumps with
a `jal`, whose offset reaches 1 MiB, from the fabric controller's vector table to the interrupt handlers at the end
of .text (pulpos writes those jumps at run time: irq.c, pos_irq_set_handler) and from its start-up code there to
the cluster's entry in .l2_data, so a MiB of generated code in .text (MobileNetV1's) made the first interrupt jump
2 MiB back, below L2. A link whose runtime still spans more than a jal reaches is refused.
The harness is compiled as it is, with one header forced in (device/ckpt_harness_hooks.h) that prints the probes
once the harness has stopped its timer, and with its own NOFLASH switch when the step loads no file (there is
then no readfs image to mount).

The header also gives the cluster's master core the stack the step needs. Deeploy's harness gives it a fixed
MAINSTACKSIZE (8000 B, deeploytest.c and deeploytraintest.c), whatever the network; but the generated network's
own functions keep a frame that grows with the graph (every layer adds locals that stay live, and two
address-taken tile counters, Deeploy's TilingHoistingMixIn._hoistTileNumAndIdxPtr), and the kernels run below
that frame. A network whose frame takes most of those 8000 B overflows the stack into the cluster's L1 data
below it (the tiling tables), and the step then reads RAM at addresses no buffer has, or never ends. The network
code is compiled first with -fstack-usage; its largest frame is added to the harness's master stack
(CKPT_NETWORK_FRAME), so what the harness left for the kernels and the runtime stays theirs.

The generated networks are compiled like the kernels (OPTIMISE), or, with `compact`, for size (COMPACT): Deeploy
writes every layer its own tiling functions (a closure per memory level and a cluster fork), so a large split
step's code is mostly those: compiled for size, and with gcc's RISC-V prologues and epilogues shared as library
routines rather than repeated in each function, it takes much less of L2. The kernels, the runtime and
the harness keep OPTIMISE either way; gvsoc.run builds a step compact only where its code at OPTIMISE leaves it no
room in L2 (its record says so).
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from ckpt.coderun.build import TRAIN_HARNESS, TRAIN_HARNESS_DIR
from ckpt.coderun.manifest import CodeManifest
from ckpt.coderun.sources import KernelSources
from ckpt.files import atomic_write
from ckpt.gvsoc.harness import HarnessData
from ckpt.gvsoc.kernels import DEVICE, OPTIMISE, DeviceKernels, include_flags
from ckpt.gvsoc.kit import GvsocKit
from ckpt.gvsoc.objects import keep, object_key, restore
from ckpt.gvsoc.open_files import LINK_FLAGS as CLOSING_FLAGS
from ckpt.gvsoc.open_files import UNIT as CLOSING_UNIT
from ckpt.gvsoc.probes import instrument
from ckpt.gvsoc.sdk import SdkLibrary

HARNESS_DIR = "DeeployTest/Platforms/Siracusa"
HARNESS_FILES = ("src/deeploytest.c", "src/CycleCounter.c")
LINKER_SCRIPT = "chips/siracusa/link.ld"
L2_BASE = 0x1C000000
JAL_REACH = 1 << 20             # a jal's offset: 21 bits, signed
GENERATED_TEXT = ".ckpt_generated_text"     # the output sections of the generated code, after .l2_data: .0, .1, ...
LAYOUT = 3                # what the placement below is (in the run caches' keys): 2, nothing the schedule does not
                          # decide moves with it; 3, each object's KiB is its output section's own alignment
CODE_PERIOD = 1024        # the shared instruction cache's sets repeat every KiB: each object here starts on one
HEAP_PERIOD = 1024        # where the L1 and L2 heaps start
FRAME_QUANTUM = 256       # the master core's added stack, rounded up to this (a whole number of L1 bank periods)
_L1_HEAP = re.compile(r"__l1_heap_start\s*=\s*ALIGN\(\d+\);")
_L2_END = re.compile(r"__l2_shared_end\s*=\s*(LOADADDR\(\.bss_l1\)\s*\+\s*SIZEOF\(\.bss_l1\));")
# the generated networks are compiled without warnings: gcc warns once per DMA call of the generated code (an L3
# address passed as a pointer, -Wint-conversion), and printing those took most of its front end; -w changes
# nothing gcc generates
QUIET = ("-w",)
COMPACT = ("-Os", "-msave-restore")     # the generated networks' flags where their code must take less of L2
_TEXT = re.compile(r"\.text\s*:\s*\{[^}]*\}")
_TEXT_INPUTS = re.compile(r"\*\((\.text|\.text\.\*)\)")
_L2_DATA = re.compile(r"\.l2_data\b[^{]*\{[^}]*\}\s*>\s*L2\n")


class StepBuildError(Exception):
    """The step did not compile or link; the message is the first error."""


class L2Overflow(StepBuildError):
    """The step's code and data alone do not fit Siracusa's L2 (the linker's count)."""

    def __init__(self, overflow: int) -> None:
        super().__init__(f"its code and data overflow L2 by {overflow:,} B")
        self.overflow = overflow


_OVERFLOW = re.compile(r"region `L2' overflowed by (\d+) bytes")
# ld's relaxation can shorten a call to a compressed jump and then move its target out of the jump's reach
# (padding inside one output section did: linker_script gives each object its own); where it still happens, the
# link fails with this and the step links again without relaxation, which its record says
_TRUNCATED = "relocation truncated to fit"


@dataclass(frozen=True)
class DeviceStep:
    elf: Path
    layers: tuple[str, ...]           # the probed layers, in run order
    l2_static_end: int                # the first L2 address after everything the ELF places in L2 (code, data)
    network_frame: int = 0            # the largest stack frame of the generated network's functions (bytes)
    relaxed: bool = True              # linked with ld's relaxation (False: only without it did it link)
    compact: bool = False             # the generated networks were compiled COMPACT
    probed: bool = True               # each layer probed (False: built without probes, `layers` empty)
    closes_files: bool = False        # linked with ckpt's workaround of Deeploy's files kept open (gvsoc.open_files)

    @property
    def l2_static_bytes(self) -> int:
        return self.l2_static_end - L2_BASE


def harness_missing(sources: KernelSources) -> str | None:
    """Why the checkout cannot give the harness, or None."""
    folder = sources.root / HARNESS_DIR
    missing = [f for f in HARNESS_FILES if not (folder / f).is_file()]
    return f"the Deeploy checkout {sources.root} has no {HARNESS_DIR}/{missing[0]}" if missing else None


def _first_error(stderr: str) -> str:
    """The compiler's or the linker's first diagnostic: a line saying error but collect2's (which only says ld
    failed), else the first line ld wrote that is no warning and no "in function" heading, else the first line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = [line for line in lines if "error" in line.lower() and not line.startswith("collect2:")]
    ld = [line for line in lines if not line.startswith("collect2:") and "warning:" not in line
          and not line.endswith("':")]
    return (said or ld or lines or ["?"])[0]


def _run(command: list[str], what: str) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        overflow = _OVERFLOW.search(done.stderr)
        if overflow:
            raise L2Overflow(int(overflow.group(1)))
        raise StepBuildError(f"{what}: {_first_error(done.stderr)}")
    return done


def build_step(code_dir: Path, manifest: CodeManifest, data: HarnessData, sources: KernelSources, kit: GvsocKit,
               sdk: SdkLibrary, kernels: DeviceKernels, out: Path, pad: int = 0, compact: bool = False,
               closes_files: bool = False) -> DeviceStep:
    """Compile and link the step in `out` (see the module doc); StepBuildError when it does not build. `pad`:
    bytes of code and of data put just before the schedule's network (0: none), to measure how much the placement
    of the schedule's own code moves its cycles (bench/gvsoc.py); `compact`: the network compiled COMPACT;
    `closes_files`: linked with ckpt's workaround of the data files Deeploy's dory_mem.c keeps open
    (gvsoc.open_files)."""
    probed = instrument((Path(code_dir) / "Network.c").read_text())
    atomic_write(out / "Network.c", probed.source)
    harness = sources.root / HARNESS_DIR
    flags = [*sdk.compile_flags(kit), *OPTIMISE, f"-DNUM_CORES={manifest.cores}",
             f"-DCKPT_PROBE_COUNT={len(probed.layers)}",
             *include_flags(sources, data.folder, Path(code_dir), harness / "inc", kernels.folder)]
    networks = [(out / "Network.c", ["-include", str(kernels.prelude), "-include", str(DEVICE / "ckpt_probes.h"),
                                     *(COMPACT if compact else ())])]
    units = [(harness / HARNESS_FILES[0], ["-include", str(DEVICE / "ckpt_harness_hooks.h"),
                                           *([] if data.flash_files else ["-DNOFLASH"])]),
             (harness / HARNESS_FILES[1], []),
             (DEVICE / "ckpt_probes.c", [])]
    return _compile_and_link([], networks, units, flags, probed.layers, kit, sdk, kernels, out, pad, compact,
                             closes_files)


NETWORKS = (("TrainingNetwork", "RunTrainingNetwork"), ("OptimizerNetwork", "RunOptimizerNetwork"))


def build_training_step(code_dir: Path, cores: int, data_dir: Path, flash: bool, timer_stops: int,
                        sources: KernelSources, kit: GvsocKit, sdk: SdkLibrary, kernels: DeviceKernels, out: Path,
                        pad: int = 0, compact: bool = False, probed: bool = True, closes_files: bool = False
                        ) -> DeviceStep:
    """Compile and link a split step (its two networks, each layer probed; the training branch's harness as it is,
    with its data in `data_dir`) in `out`; StepBuildError when it does not build. The probes sum each layer's
    cycles over the run (the train network runs once per mini-batch, the optimizer once per update); when the
    harness stops its timer for the `timer_stops`-th time, the train network's inputs are hashed (ckpt_state.c).
    `pad`, `compact`, `closes_files`: as build_step's; `probed` False: the networks as Deeploy wrote them, no layer
    probed (their counters and the code reading them take L2; the step's own cycles are still timed by the
    harness)."""
    layers: list[str] = []
    probed_files = []
    for stem, run in NETWORKS:
        source = Path(code_dir) / f"{stem}.c"
        if source.is_file():
            if probed:
                instrumented = instrument(source.read_text(), run, len(layers))
                atomic_write(out / source.name, instrumented.source)
                layers += instrumented.layers
            else:
                atomic_write(out / source.name, source.read_text())
            probed_files.append(out / source.name)
    harness = sources.root / TRAIN_HARNESS_DIR
    flags = [*sdk.compile_flags(kit), *OPTIMISE, f"-DNUM_CORES={cores}", f"-DCKPT_PROBE_COUNT={len(layers)}",
             "-DCKPT_PROBE_SUM", *include_flags(sources, data_dir, Path(code_dir), harness / "inc", kernels.folder)]
    network_flags = ["-include", str(kernels.prelude), "-include", str(DEVICE / "ckpt_probes.h"),
                     *(COMPACT if compact else ())]
    stable = [(f, network_flags) for f in probed_files if f.stem == NETWORKS[1][0]]    # the same at every point
    networks = [(f, network_flags) for f in probed_files if f.stem != NETWORKS[1][0]]
    units = [(harness / TRAIN_HARNESS[0], ["-include", str(DEVICE / "ckpt_harness_hooks.h"),
                                            f"-DCKPT_STATE_AFTER={timer_stops}", *([] if flash else ["-DNOFLASH"])]),
              (harness / TRAIN_HARNESS[1], []),
              (DEVICE / "ckpt_probes.c", []),
              (DEVICE / "ckpt_state.c", ["-include", str(kernels.prelude)])]
    step = _compile_and_link(stable, networks, units, flags, tuple(layers), kit, sdk, kernels, out, pad, compact,
                             closes_files)
    return replace(step, probed=probed)


def linker_script(sdk: SdkLibrary, generated: list[str], pad: str | None = None) -> str:
    """pulp-sdk's Siracusa linker script with the code of the objects named `generated` (file names) taken out of
    .text and put, in that order, after .l2_data, each in an output section of its own aligned to CODE_PERIOD (but
    the one after `pad`, which shares the pad's section: the pad moves it), and the L1 heap and the L2 heap started
    at a HEAP_PERIOD boundary (see the module doc); StepBuildError where the script is not laid out so.
    The KiB is each output section's own alignment, not an `. = ALIGN()` between objects of one section: ld's
    RISC-V relaxation shortens a call by the distance it sees, allowing for the alignment of the output sections
    only, so padding from an ALIGN inside a section can grow a relaxed call's distance past its reach after the
    fact (a DS-CNN step did not link: `relocation truncated to fit: R_RISCV_RVC_JUMP`)."""
    script = (sdk.link_dir / LINKER_SCRIPT).read_text()
    text, l2_data = _TEXT.search(script), _L2_DATA.search(script)
    if not generated:
        return script
    if (text is None or l2_data is None or len(_TEXT_INPUTS.findall(text.group(0))) != 2
            or len(_L1_HEAP.findall(script)) != 1 or len(_L2_END.findall(script)) != 1):
        raise StepBuildError(f"pulp-sdk's {LINKER_SCRIPT} has no .text with *(.text) and *(.text.*) followed by "
                             ".l2_data, or not one L1 heap start and L2 end: ckpt cannot keep the runtime's jumps in "
                             "reach of their targets and the step's layout apart from the schedule")
    files = " ".join(f"*/{name}" for name in generated)
    body = _TEXT_INPUTS.sub(lambda m: f"*(EXCLUDE_FILE({files}) {m.group(1)})", text.group(0))
    sections: list[list[str]] = []
    for before, name in zip([None, *generated], generated):
        if pad is not None and before == pad:
            sections[-1].append(name)
        else:
            sections.append([name])
    own = "".join(f"\n  {GENERATED_TEXT}.{k} : ALIGN({CODE_PERIOD})\n  {{\n"
                  + "".join(f"    */{name}(.text .text.*)\n" for name in names)
                  + ("    . = ALIGN(4);\n" if k == len(sections) - 1 else "") + "  } > L2\n"
                  for k, names in enumerate(sections))    # the L1 data the runtime copies word by word follows
    script = script[:text.start()] + body + script[text.end():l2_data.end()] + own + script[l2_data.end():]
    script = _L1_HEAP.sub(f"__l1_heap_start = ALIGN({HEAP_PERIOD});", script)
    return _L2_END.sub(lambda m: f"__l2_shared_end = ALIGN({m.group(1)}, {HEAP_PERIOD});", script)


Unit = tuple[Path, list[str]]          # a C file and the flags it alone is compiled with


def _compile_and_link(stable: list[Unit], networks: list[Unit], units: list[Unit], flags: list[str],
                      layers: tuple[str, ...], kit: GvsocKit, sdk: SdkLibrary, kernels: DeviceKernels, out: Path,
                      pad: int, compact: bool = False, closes_files: bool = False) -> DeviceStep:
    """Compile the generated networks, `stable` (the same at every point) and the schedule's `networks` (their
    frames measured), then the other `units` told the largest frame, rounded up to FRAME_QUANTUM (see the module
    doc), and link them with the kernels: the kernels first, then the runtime, the units and the networks, whose
    code goes after the runtime's in that order, the schedule's networks last. `closes_files`: ckpt's unit that closes
    each data file at the next open goes with the kernels (it is the same at every point), pi_fs_open wrapped."""
    cc = str(kit.compiler.cc)
    generated = [*stable, *networks]
    if pad:                    # just before the schedule's networks: it moves them alone
        nops = f'__asm__ volatile(".rept {pad // 4}\\n nop\\n .endr");'
        atomic_write(out / "ckpt_pad.c", f"char ckpt_pad_data[{pad}] = {{1}};\nvoid ckpt_pad_code(void) {{ {nops} }}\n")
        generated = [*stable, (out / "ckpt_pad.c", []), *networks]
    network_objects = []
    for source, extra in generated:
        network_objects.append(_compile(cc, kit.compiler.version, [*flags, *extra, "-fstack-usage", *QUIET], source,
                                        out))
    frame = max((size for obj in network_objects
                 for size in stack_frames(Path(obj).with_suffix(".su").read_text()).values()), default=0)
    added = -(-frame // FRAME_QUANTUM) * FRAME_QUANTUM
    unit_objects = [_compile(cc, kit.compiler.version, [*flags, f"-DCKPT_NETWORK_FRAME={added}", *extra], source,
                             out) for source, extra in units]
    kernel_objects = [str(kernels.folder / name) for name in kernels.objects]
    closing = [_compile(cc, kit.compiler.version, flags, CLOSING_UNIT, out)] if closes_files else []
    libs = ["-lgcc", str(kit.compiler.libc), "-lgcc"]
    script = out / "link.ld"
    own = [*(Path(o).name for o in network_objects[:len(stable)]), *(Path(o).name for o in unit_objects),
           *(Path(o).name for o in network_objects[len(stable):])]
    atomic_write(script, linker_script(sdk, own, "ckpt_pad.o" if pad else None))
    link = [cc, *sdk.compile_flags(kit), "-nostartfiles", "-nostdlib", "-Wl,--gc-sections", f"-L{sdk.link_dir}",
            f"-T{script}", *(["-Wl,-u,ckpt_pad_data", "-Wl,-u,ckpt_pad_code"] if pad else []),
            *(CLOSING_FLAGS if closes_files else ())]
    sdk_archive = ["-Wl,--whole-archive", str(sdk.archive), "-Wl,--no-whole-archive"]
    elf, probe_map = out / "step.elf", out / "first-link.map"
    archive = out / "kernels.a"
    _run([str(kit.compiler.ar), "rcsD", str(archive), *kernel_objects], "ar failed")
    relaxed = _link([*link, "-o", str(elf), *closing, *sdk_archive, *unit_objects, *network_objects, str(archive),
                     *libs, f"-Wl,-Map={probe_map}"], relax=True)
    used = _members(probe_map.read_text(), archive.name)
    first = [obj for obj in kernel_objects if Path(obj).name in used]
    relaxed = _link([*link, "-o", str(elf), *first, *closing, *sdk_archive, *unit_objects, *network_objects, *libs,
                     f"-Wl,-Map={out / 'step.map'}"], relax=relaxed)
    archive.unlink()
    probe_map.unlink()
    symbols = elf_symbols(kit, elf)
    check_runtime_reach(symbols)
    return DeviceStep(elf, layers, _symbol(symbols, "__l2_shared_end"), frame, relaxed=relaxed, compact=compact,
                      closes_files=closes_files)



def _link(command: list[str], relax: bool) -> bool:
    """Link; where ld's relaxation truncates a relocation, link again without it. Whether it linked relaxed."""
    if not relax:
        _run([*command, "-Wl,--no-relax"], "the step does not link")
        return False
    try:
        _run(command, "the step does not link")
        return True
    except StepBuildError as exc:
        if _TRUNCATED not in str(exc) or isinstance(exc, L2Overflow):
            raise
    _run([*command, "-Wl,--no-relax"], "the step does not link")
    return False


def check_runtime_reach(symbols: dict[str, int]) -> None:
    """StepBuildError where the runtime's code, from the vector table to the cluster's entry code, spans more than a
    jal reaches (see the module doc)."""
    start, end = _symbol(symbols, "__irq_vector_base"), _symbol(symbols, "__cluster_text_end")
    if end - start >= JAL_REACH:
        raise StepBuildError(f"the runtime's code spans {end - start:,} B from the vector table to the cluster's "
                             f"entry, beyond the {JAL_REACH:,} B its jumps reach")


_STACK_USAGE = re.compile(r"^.*:([A-Za-z_][\w.]*)\t(\d+)\t([\w,]+)$", re.MULTILINE)


def stack_frames(stack_usage: str) -> dict[str, int]:
    """Each function's frame in bytes, from what gcc -fstack-usage wrote (`file:line:col:function<TAB>bytes<TAB>
    static|dynamic[,bounded]`). A frame that grows at run time (dynamic, unbounded) has no size to plan for: the
    step is not built (StepBuildError, naming the function)."""
    frames = {}
    for name, size, kind in _STACK_USAGE.findall(stack_usage):
        if kind == "dynamic":
            raise StepBuildError(f"the generated {name} keeps a stack frame whose size is only known at run time: "
                                 "its stack cannot be planned")
        frames[name] = max(frames.get(name, 0), int(size))
    return frames


def _compile(cc: str, version: str, flags: list[str], source: Path, out: Path) -> str:
    """`source`'s object in `out`: the kept one where the same text was compiled the same way before
    (gvsoc.objects), else compiled now (and kept)."""
    obj = out / f"{source.stem}.o"
    key = object_key(cc, version, flags, source)
    if key is not None and restore(key, obj):
        return str(obj)
    _run([cc, *flags, "-c", str(source), "-o", str(obj)], f"{source.name} does not compile")
    if key is not None:
        keep(key, obj)
    return str(obj)


def _members(link_map: str, archive: str) -> set[str]:
    """The archive members a link pulled in, from its map file."""
    return set(re.findall(rf"^\S*{re.escape(archive)}\(([^)]+)\)", link_map, re.MULTILINE))


def elf_symbols(kit: GvsocKit, elf: Path) -> dict[str, int]:
    """Each symbol of the ELF with its address."""
    nm = kit.compiler.cc.with_name(kit.compiler.cc.name.replace("gcc", "nm"))
    done = _run([str(nm), str(elf)], "nm failed")
    return {parts[2]: int(parts[0], 16) for parts in (line.split() for line in done.stdout.splitlines())
            if len(parts) == 3}


def _symbol(symbols: dict[str, int], name: str) -> int:
    if name not in symbols:
        raise StepBuildError(f"the step has no symbol {name} (not pulp-sdk's Siracusa linker script?)")
    return symbols[name]
