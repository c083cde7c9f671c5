"""Build one generated training step for Siracusa: Deeploy's Network.c with per-layer probes, Deeploy's own
Siracusa harness (deeploytest.c and CycleCounter.c of the checkout), its kernels and pulp-sdk's runtime.

The step is linked twice: once to learn which kernel objects it uses, then with those first, so the kernels sit
at the same addresses whatever the generated code's size (a recompute adds code; the kernels then do not move).
The harness is compiled as it is, with one header forced in (device/ckpt_harness_hooks.h) that prints the probes
once the harness has stopped its timer, and with its own NOFLASH switch when the step loads no file (there is
then no readfs image to mount).
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ckpt.coderun.build import TRAIN_HARNESS, TRAIN_HARNESS_DIR
from ckpt.coderun.manifest import CodeManifest
from ckpt.coderun.sources import KernelSources
from ckpt.files import atomic_write
from ckpt.gvsoc.harness import HarnessData
from ckpt.gvsoc.kernels import DEVICE, OPTIMISE, DeviceKernels, include_flags
from ckpt.gvsoc.kit import GvsocKit
from ckpt.gvsoc.probes import instrument
from ckpt.gvsoc.sdk import SdkLibrary

HARNESS_DIR = "DeeployTest/Platforms/Siracusa"
HARNESS_FILES = ("src/deeploytest.c", "src/CycleCounter.c")
LINKER_SCRIPT = "chips/siracusa/link.ld"
L2_BASE = 0x1C000000


class StepBuildError(Exception):
    """The step did not compile or link; the message is the first error."""


class L2Overflow(StepBuildError):
    """The step's code and data alone do not fit Siracusa's L2 (the linker's count)."""

    def __init__(self, overflow: int) -> None:
        super().__init__(f"its code and data overflow L2 by {overflow:,} B")
        self.overflow = overflow


_OVERFLOW = re.compile(r"region `L2' overflowed by (\d+) bytes")


@dataclass(frozen=True)
class DeviceStep:
    elf: Path
    layers: tuple[str, ...]           # the probed layers, in run order
    l2_static_end: int                # the first L2 address after everything the ELF places in L2 (code, data)

    @property
    def l2_static_bytes(self) -> int:
        return self.l2_static_end - L2_BASE


def harness_missing(sources: KernelSources) -> str | None:
    """Why the checkout cannot give the harness, or None."""
    folder = sources.root / HARNESS_DIR
    missing = [f for f in HARNESS_FILES if not (folder / f).is_file()]
    return f"the Deeploy checkout {sources.root} has no {HARNESS_DIR}/{missing[0]}" if missing else None


def _first_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "error" in line.lower()] or stderr.splitlines() or ["?"]
    return lines[0].strip()


def _run(command: list[str], what: str) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        overflow = _OVERFLOW.search(done.stderr)
        if overflow:
            raise L2Overflow(int(overflow.group(1)))
        raise StepBuildError(f"{what}: {_first_error(done.stderr)}")
    return done


def build_step(code_dir: Path, manifest: CodeManifest, data: HarnessData, sources: KernelSources, kit: GvsocKit,
               sdk: SdkLibrary, kernels: DeviceKernels, out: Path, pad: int = 0) -> DeviceStep:
    """Compile and link the step in `out` (see the module doc); StepBuildError when it does not build. `pad`:
    bytes of code and of data put before the step's own (0: none), to measure how much its layout moves its
    cycles (bench/gvsoc.py)."""
    probed = instrument((Path(code_dir) / "Network.c").read_text())
    atomic_write(out / "Network.c", probed.source)
    harness = sources.root / HARNESS_DIR
    flags = [*sdk.compile_flags(kit), *OPTIMISE, f"-DNUM_CORES={manifest.cores}",
             f"-DCKPT_PROBE_COUNT={len(probed.layers)}",
             *include_flags(sources, data.folder, Path(code_dir), harness / "inc", kernels.folder)]
    units = [(out / "Network.c", ["-include", str(kernels.prelude), "-include", str(DEVICE / "ckpt_probes.h")]),
             (harness / HARNESS_FILES[0], ["-include", str(DEVICE / "ckpt_harness_hooks.h"),
                                           *([] if data.flash_files else ["-DNOFLASH"])]),
             (harness / HARNESS_FILES[1], []),
             (DEVICE / "ckpt_probes.c", [])]
    return _compile_and_link(units, flags, probed.layers, kit, sdk, kernels, out, pad)


NETWORKS = (("TrainingNetwork", "RunTrainingNetwork"), ("OptimizerNetwork", "RunOptimizerNetwork"))


def build_training_step(code_dir: Path, cores: int, data_dir: Path, flash: bool, timer_stops: int,
                        sources: KernelSources, kit: GvsocKit, sdk: SdkLibrary, kernels: DeviceKernels, out: Path
                        ) -> DeviceStep:
    """Compile and link a split step (its two networks, each layer probed; the training branch's harness as it is,
    with its data in `data_dir`) in `out`; StepBuildError when it does not build. The probes sum each layer's
    cycles over the run (the train network runs once per mini-batch, the optimizer once per update); when the
    harness stops its timer for the `timer_stops`-th time, the train network's inputs are hashed (ckpt_state.c)."""
    layers: list[str] = []
    probed_files = []
    for stem, run in NETWORKS:
        source = Path(code_dir) / f"{stem}.c"
        if source.is_file():
            probed = instrument(source.read_text(), run, len(layers))
            atomic_write(out / source.name, probed.source)
            probed_files.append(out / source.name)
            layers += probed.layers
    harness = sources.root / TRAIN_HARNESS_DIR
    flags = [*sdk.compile_flags(kit), *OPTIMISE, f"-DNUM_CORES={cores}", f"-DCKPT_PROBE_COUNT={len(layers)}",
             "-DCKPT_PROBE_SUM", *include_flags(sources, data_dir, Path(code_dir), harness / "inc", kernels.folder)]
    units = [(f, ["-include", str(kernels.prelude), "-include", str(DEVICE / "ckpt_probes.h")]) for f in probed_files]
    units += [(harness / TRAIN_HARNESS[0], ["-include", str(DEVICE / "ckpt_harness_hooks.h"),
                                            f"-DCKPT_STATE_AFTER={timer_stops}", *([] if flash else ["-DNOFLASH"])]),
              (harness / TRAIN_HARNESS[1], []),
              (DEVICE / "ckpt_probes.c", []),
              (DEVICE / "ckpt_state.c", ["-include", str(kernels.prelude)])]
    return _compile_and_link(units, flags, tuple(layers), kit, sdk, kernels, out, 0)


def _compile_and_link(units: list[tuple[Path, list[str]]], flags: list[str], layers: tuple[str, ...], kit: GvsocKit,
                      sdk: SdkLibrary, kernels: DeviceKernels, out: Path, pad: int) -> DeviceStep:
    cc = str(kit.compiler.cc)
    if pad:
        nops = f'__asm__ volatile(".rept {pad // 4}\\n nop\\n .endr");'
        atomic_write(out / "ckpt_pad.c", f"char ckpt_pad_data[{pad}] = {{1}};\nvoid ckpt_pad_code(void) {{ {nops} }}\n")
        units.insert(0, (out / "ckpt_pad.c", []))
    objects = []
    for source, extra in units:
        obj = out / f"{source.stem}.o"
        _run([cc, *flags, *extra, "-c", str(source), "-o", str(obj)], f"{source.name} does not compile")
        objects.append(str(obj))
    kernel_objects = [str(kernels.folder / name) for name in kernels.objects]
    libs = ["-lgcc", str(kit.compiler.libc), "-lgcc"]
    link = [cc, *sdk.compile_flags(kit), "-nostartfiles", "-nostdlib", "-Wl,--gc-sections", f"-L{sdk.link_dir}",
            f"-T{LINKER_SCRIPT}", *(["-Wl,-u,ckpt_pad_data", "-Wl,-u,ckpt_pad_code"] if pad else [])]
    sdk_archive = ["-Wl,--whole-archive", str(sdk.archive), "-Wl,--no-whole-archive"]
    elf, probe_map = out / "step.elf", out / "first-link.map"
    archive = out / "kernels.a"
    _run([str(kit.compiler.ar), "rcsD", str(archive), *kernel_objects], "ar failed")
    _run([*link, "-o", str(elf), *objects, *sdk_archive, str(archive), *libs, f"-Wl,-Map={probe_map}"],
         "the step does not link")
    used = _members(probe_map.read_text(), archive.name)
    first = [obj for obj in kernel_objects if Path(obj).name in used]
    _run([*link, "-o", str(elf), *first, *objects, *sdk_archive, *libs, f"-Wl,-Map={out / 'step.map'}"],
         "the step does not link")
    archive.unlink()
    probe_map.unlink()
    return DeviceStep(elf, layers, _symbol(kit, elf, "__l2_shared_end"))


def _members(link_map: str, archive: str) -> set[str]:
    """The archive members a link pulled in, from its map file."""
    return set(re.findall(rf"^\S*{re.escape(archive)}\(([^)]+)\)", link_map, re.MULTILINE))


def _symbol(kit: GvsocKit, elf: Path, name: str) -> int:
    nm = kit.compiler.cc.with_name(kit.compiler.cc.name.replace("gcc", "nm"))
    done = _run([str(nm), str(elf)], "nm failed")
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise StepBuildError(f"the step has no symbol {name} (not pulp-sdk's Siracusa linker script?)")
