"""Deeploy's kernels compiled for Siracusa's cluster cores, once per checkout, runtime, compiler and core count.

Each kernel file of the checkout's TargetLibraries/{PULPOpen,Generic}/src is compiled on its own (a file that
does not compile, such as gemv.c, which needs PULP-NN, is skipped with gcc's first error). The objects are kept
apart, not archived, so a step's link can put the ones it uses first, at addresses that do not move when the
generated code grows (see gvsoc.step). The prototypes of every kernel function come with them: v0.2.1's
headers do not declare some kernels the generated code calls, and an implicit declaration would pass floats as
doubles.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ckpt.cached import discard, folder_checks_out, stored_folder
from ckpt.coderun.build import defined_prototypes
from ckpt.coderun.sources import KernelSources
from ckpt.files import atomic_write
from ckpt.gvsoc.kit import GvsocKit
from ckpt.gvsoc.sdk import SdkLibrary
from ckpt.paths import cache_root

KERNELS_FORMAT = 2      # 2: sealed (ckpt.cached)
DEVICE = Path(__file__).resolve().parent / "device"     # ckpt's device-side files (stand-ins, probes, hooks)
# Deeploy's own builds let the compiler fuse multiply-adds, and so does this one: the device's numbers are held to
# the goldens by the harness's tolerance, not to the host's bits
OPTIMISE = ("-O2", "-ffunction-sections", "-fdata-sections")


@dataclass(frozen=True)
class DeviceKernels:
    folder: Path
    objects: tuple[str, ...]            # object file names, in a fixed order
    skipped: tuple[str, ...]            # kernel files that do not compile, with gcc's first error

    @property
    def prelude(self) -> Path:
        return self.folder / "prelude.h"


def include_flags(sources: KernelSources, *extra: Path) -> list[str]:
    return [f"-I{d}" for d in (*extra, DEVICE, *sources.include_dirs)]


# Every module of this folder is in exactly one of these (a test checks it): those whose code decides what a step
# computes or how it is measured key the cached kernels, runs and calibrations; the others may change freely.
MEASURING_MODULES = ("harness.py", "kernels.py", "objects.py", "open_files.py", "probes.py", "run.py", "sdk.py",
                     "step.py", "train_run.py")
NON_MEASURING_MODULES = ("__init__.py", "diagnosis.py",  # what a failed run said, after the run
                         "draws.py",                      # the no-ops of a draw: its run's key hashes the moved code
                         "gap9.py",                       # GAP9's launch, never a Siracusa run
                         "kit.py")                        # where the pieces are; their identity is keyed apart


def device_fingerprint(folder: Path = DEVICE.parent) -> str:
    """sha256 over ckpt's device-side files and the modules that build, run and read a step: a change there can change
    what a run computes or measures; a change elsewhere (GAP9's launch, a failure's diagnosis) keeps every cached
    calibration valid."""
    device = folder / DEVICE.name
    paths = [*sorted(p for p in device.glob("*") if p.is_file()), *(folder / m for m in MEASURING_MODULES)]
    files = {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def _key(sources: KernelSources, kit: GvsocKit, sdk: SdkLibrary, cores: int) -> str:
    blob = json.dumps({"format": KERNELS_FORMAT, "kernels": sources.fingerprint, "sdk": sdk.folder.name,
                       "device": device_fingerprint(), "cc": kit.compiler.version, "flags": list(OPTIMISE),
                       "cores": cores}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def device_kernels(sources: KernelSources, kit: GvsocKit, sdk: SdkLibrary, cores: int) -> DeviceKernels:
    """The cached kernel objects for this configuration, compiled first if absent."""
    key = _key(sources, kit, sdk, cores)
    folder = cache_root() / "gvsoc" / f"kernels-{key}"
    manifest = folder / "kernels.json"
    if not folder_checks_out(folder, key):
        discard(folder)                       # not what was built (cut short, corrupted): built again
        with stored_folder(folder, key, ".kernels.") as staging:
            _build(sources, kit, sdk, cores, staging)
    doc = json.loads(manifest.read_text())
    return DeviceKernels(folder, tuple(doc["objects"]), tuple(doc["skipped"]))


def _build(sources: KernelSources, kit: GvsocKit, sdk: SdkLibrary, cores: int, out: Path) -> None:
    flags = [*sdk.compile_flags(kit), *OPTIMISE, f"-DNUM_CORES={cores}", *include_flags(sources)]
    units = sources.kernel_units()
    files = [f for f, _ in units]

    def compile_one(index: int, unit: tuple[Path, tuple[str, ...]]) -> tuple[Path, subprocess.CompletedProcess]:
        source, own = unit
        obj = out / f"k{index:03d}_{source.parent.parent.name}_{source.stem}.o"
        done = subprocess.run([str(kit.compiler.cc), *flags, *own, "-c", str(source), "-o", str(obj),
                               "-aux-info", str(obj.with_suffix(".aux"))],
                               capture_output=True, text=True, errors="replace")
        return obj, done

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        built = list(pool.map(compile_one, range(len(units)), units))
    objects, skipped, prototypes = [], [], []
    for source, (obj, done) in zip(files, built):
        if done.returncode != 0:
            first = next((line for line in done.stderr.splitlines() if "error" in line), "(no output)")
            skipped.append(f"{source.relative_to(sources.root)}: {first.strip().split(': ', 1)[-1]}")
            continue
        objects.append(obj.name)
        prototypes.extend(p for p in defined_prototypes(obj.with_suffix(".aux"), source) if p not in prototypes)
    for aux in out.glob("*.aux"):
        aux.unlink()
    atomic_write(out / "kernel_prototypes.h",
                 "/* Prototypes of the Deeploy kernel functions, from gcc -aux-info of their files. */\n"
                 + "\n".join(prototypes) + "\n")
    atomic_write(out / "prelude.h",
                 '#include "pmsis.h"\n#include "DeeployPULPMath.h"\n#include "kernel_prototypes.h"\n')
    atomic_write(out / "kernels.json", json.dumps({"objects": objects, "skipped": skipped}, indent=1))
