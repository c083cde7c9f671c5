"""Build Deeploy's generated code for the host: the kernels once (cached), the step per code folder.

The kernel library holds every kernel C file of the checkout that compiles here (those needing PULP-NN, which
the fp32 training kernels never call, do not; dory_mem.c is the device's RAM driver, which ckpt's runtime
replaces) and ckpt's runtime (runtime/host_runtime.c), optimised (-O1). It is cached under
$CKPT_CACHE_DIR/coderun, keyed by everything that changes its objects: the kernels' fingerprint, the runtime's
files, the compiler, the flags, the core count and the L3 size; sealed with its files' hashes (ckpt.cached), and
built again when it does not check out.

The generated code is compiled with the prototypes of every kernel function (gcc -aux-info of the kernel files)
in front of it: v0.2.1's headers do not declare some kernels the code calls, and an implicit declaration
would pass float arguments as doubles. Implicit declarations and pointer/integer truncations are errors. The
generated code itself is glue around the kernels and is built without optimisation (-O0), which halves its build
time; no flag here changes float semantics (no fast-math, no FMA contraction), so the results are the same bits.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ckpt.cached import discard, folder_checks_out, stored_folder
from ckpt.coderun.sources import KernelSources
from ckpt.files import atomic_write
from ckpt.paths import cache_root

RUNTIME = Path(__file__).resolve().parent / "runtime"
COMMON = ("-std=gnu11", "-ffp-contract=off", "-fno-common")
OPTIMISE = ("-O1", *COMMON)
GLUE = ("-O0", *COMMON)
DEVICE_ONLY = ("dory_mem.c",)   # the device's RAM and flash driver: host_runtime.c stands in for it
STRICT = ("-Werror=implicit-function-declaration", "-Werror=int-conversion", "-Werror=pointer-to-int-cast",
          "-Werror=int-to-pointer-cast")
LIBRARY_FORMAT = 2   # bump when the library folder's layout changes (2: sealed)


class Sanitizer(Enum):
    NONE = "none"
    ADDRESS = "address"     # AddressSanitizer with UndefinedBehaviorSanitizer
    THREAD = "thread"       # ThreadSanitizer: the cluster cores are threads

    @property
    def flags(self) -> tuple[str, ...]:
        return {Sanitizer.NONE: (),
                Sanitizer.ADDRESS: ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"),
                Sanitizer.THREAD: ("-fsanitize=thread", "-g")}[self]


@dataclass(frozen=True)
class BuildConfig:
    """What the build is for: the cluster's core count and L3 size the code was generated for."""

    cores: int
    l3_bytes: int
    sanitizer: Sanitizer = Sanitizer.NONE

    def defines(self) -> tuple[str, ...]:
        return (f"-DNUM_CORES={self.cores}", f"-DCKPT_L3_BYTES={self.l3_bytes}u")


@dataclass(frozen=True)
class Toolchain:
    cc: str
    version: str


@dataclass(frozen=True)
class KernelLibrary:
    folder: Path
    skipped: tuple[str, ...]       # kernel files that do not compile here, with gcc's first error

    @property
    def archive(self) -> Path:
        return self.folder / "libckptkernels.a"

    @property
    def prelude(self) -> Path:
        return self.folder / "prelude.h"


class BuildError(Exception):
    """The code or the kernels did not compile; the message is the compiler's first error."""


def find_toolchain() -> Toolchain | None:
    """The host C compiler ($CC, else gcc, else cc) with `ar`, or None."""
    for cc in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["gcc", "cc"]:
        path = shutil.which(cc)
        if path and shutil.which("ar"):
            done = subprocess.run([path, "--version"], capture_output=True, text=True, errors="replace")
            if done.returncode == 0:
                return Toolchain(path, done.stdout.splitlines()[0].strip())
    return None


def _runtime_files() -> list[Path]:
    return sorted(p for p in RUNTIME.rglob("*") if p.is_file() and p.suffix in (".c", ".h"))


def runtime_fingerprint() -> str:
    """sha256 over ckpt's runtime files: a change there can change what a run computes."""
    runtime = {str(p.relative_to(RUNTIME)): hashlib.sha256(p.read_bytes()).hexdigest() for p in _runtime_files()}
    return hashlib.sha256(json.dumps(runtime, sort_keys=True).encode()).hexdigest()


def _library_key(sources: KernelSources, toolchain: Toolchain, config: BuildConfig) -> str:
    blob = json.dumps({"format": LIBRARY_FORMAT, "kernels": sources.fingerprint, "runtime": runtime_fingerprint(),
                       "cc": toolchain.version, "flags": OPTIMISE + config.sanitizer.flags + config.defines()},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _includes(sources: KernelSources, *extra: Path) -> list[str]:
    return [f"-I{d}" for d in (*extra, RUNTIME, *sources.include_dirs)]


def _first_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "error" in line] or stderr.splitlines() or ["(no output)"]
    return lines[0].strip()


_AUX = re.compile(r"^/\* (?P<path>.+):\d+:(?P<kind>..) \*/ (?P<decl>[^;]+;)")


def defined_prototypes(aux_file: Path, source: Path) -> list[str]:
    """The prototypes of the non-static functions `source` defines, from gcc's -aux-info output."""
    found = []
    for line in aux_file.read_text(errors="replace").splitlines():
        match = _AUX.match(line)
        if match and match["kind"] == "NF" and Path(match["path"]) == source and not match["decl"].startswith("static"):
            found.append(match["decl"])
    return found


def kernel_library(sources: KernelSources, toolchain: Toolchain, config: BuildConfig) -> KernelLibrary:
    """The cached kernel library for this configuration, built first if absent (see the module doc)."""
    key = _library_key(sources, toolchain, config)
    folder = cache_root() / "coderun" / f"kernels-{key}"
    manifest = folder / "library.json"
    if not folder_checks_out(folder, key):
        discard(folder)                      # a library that is not what was built (cut short, corrupted): again
        with stored_folder(folder, key, ".kernels.") as staging:
            skipped, prototypes = _build_library(sources, toolchain, config, staging)
            atomic_write(staging / "kernel_prototypes.h",
                         "/* Prototypes of the Deeploy kernel functions, from gcc -aux-info of their files. */\n"
                         + "\n".join(prototypes) + "\n")
            atomic_write(staging / "prelude.h",
                         '#include "pmsis.h"\n#include "DeeployPULPMath.h"\n#include "kernel_prototypes.h"\n')
            atomic_write(staging / "library.json", json.dumps({"skipped": skipped, "cc": toolchain.version},
                                                              indent=1))
    return KernelLibrary(folder, tuple(json.loads(manifest.read_text())["skipped"]))


def _build_library(sources: KernelSources, toolchain: Toolchain, config: BuildConfig, out: Path
                   ) -> tuple[list[str], list[str]]:
    flags = [*OPTIMISE, *config.sanitizer.flags, *config.defines(), *_includes(sources)]
    units = [(f, own) for f, own in sources.kernel_units() if f.name not in DEVICE_ONLY]
    files = [f for f, _ in units]

    def compile_one(index: int, unit: tuple[Path, tuple[str, ...]]) -> tuple[Path, subprocess.CompletedProcess]:
        source, own = unit
        obj = out / f"k{index:03d}_{source.stem}.o"
        done = subprocess.run([toolchain.cc, *flags, *own, "-c", str(source), "-o", str(obj),
                               "-aux-info", str(obj.with_suffix(".aux"))],
                               capture_output=True, text=True, errors="replace")
        return obj, done

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        built = list(pool.map(compile_one, range(len(units)), units))
    skipped, objects, prototypes = [], [], []
    for source, (obj, done) in zip(files, built):
        if done.returncode != 0:
            skipped.append(f"{source.relative_to(sources.root)}: {_first_error(done.stderr).split(': ', 1)[-1]}")
            continue
        objects.append(obj)
        prototypes.extend(p for p in defined_prototypes(obj.with_suffix(".aux"), source) if p not in prototypes)
    runtime = out / "host_runtime.o"
    done = subprocess.run([toolchain.cc, *flags, *STRICT, "-c", str(RUNTIME / "host_runtime.c"), "-o", str(runtime)],
                          capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        raise BuildError(f"ckpt's host runtime does not compile: {_first_error(done.stderr)}")
    done = subprocess.run(["ar", "rcsD", str(out / "libckptkernels.a"), *map(str, objects + [runtime])],
                          capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        raise BuildError(f"ar failed: {_first_error(done.stderr)}")
    for leftover in out.glob("*.o"):
        leftover.unlink()
    for leftover in out.glob("*.aux"):
        leftover.unlink()
    return skipped, prototypes


def build_step(code_dir: Path, sources: KernelSources, toolchain: Toolchain, config: BuildConfig,
               library: KernelLibrary, out: Path) -> Path:
    """Compile `code_dir`'s Network.c with ckpt's harness into the executable `out`; BuildError if it fails."""
    flags = [*GLUE, *config.sanitizer.flags, *config.defines(), *STRICT,
             *_includes(sources, code_dir, library.folder), "-include", str(library.prelude)]
    command = [toolchain.cc, *flags, str(code_dir / "Network.c"), str(RUNTIME / "host_main.c"),
               str(library.archive), "-lm", "-pthread", "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        raise BuildError(f"the generated code does not build: {_first_error(done.stderr)}")
    return out


TRAIN_HARNESS_DIR = "DeeployTest/Platforms/Siracusa"
TRAIN_HARNESS = ("src/deeploytraintest.c", "src/CycleCounter.c")
HARNESS_AS_IS = ("-Wno-pointer-to-int-cast", "-Wno-int-to-pointer-cast")   # it tells L3 pointers by their value


def training_harness_missing(sources: KernelSources) -> str | None:
    """Why the checkout cannot give the training harness, or None."""
    folder = sources.root / TRAIN_HARNESS_DIR
    missing = [f for f in TRAIN_HARNESS if not (folder / f).is_file()]
    return f"the Deeploy checkout {sources.root} has no {TRAIN_HARNESS_DIR}/{missing[0]} (the training branch's " \
        "harness)" if missing else None


def build_training_step(code_dir: Path, data_dir: Path, sources: KernelSources, toolchain: Toolchain,
                        config: BuildConfig, library: KernelLibrary, out: Path) -> Path:
    """Compile a split step's two networks (TrainingNetwork.c, OptimizerNetwork.c) with the training branch's
    harness as it is (deeploytraintest.c, CycleCounter.c, its data in `data_dir`) and ckpt's host side of it
    (runtime/host_train.c) into the executable `out`; BuildError if it fails."""
    harness = sources.root / TRAIN_HARNESS_DIR
    common = [*config.sanitizer.flags, *config.defines(),
              *_includes(sources, code_dir, data_dir, harness / "inc", library.folder)]
    networks = [code_dir / name for name in ("TrainingNetwork.c", "OptimizerNetwork.c") if (code_dir / name).is_file()]
    units = [(source, [*GLUE, *STRICT, "-include", str(library.prelude)]) for source in networks]
    units += [(harness / f, [*GLUE, *HARNESS_AS_IS]) for f in TRAIN_HARNESS]
    units += [(RUNTIME / "host_train.c", [*GLUE, *STRICT])]
    objects = []
    for source, flags in units:
        obj = out.parent / f"{source.stem}.o"
        done = subprocess.run([toolchain.cc, *flags, *common, "-c", str(source), "-o", str(obj)],
                              capture_output=True, text=True, errors="replace")
        if done.returncode != 0:
            raise BuildError(f"{source.name} does not build: {_first_error(done.stderr)}")
        objects.append(str(obj))
    done = subprocess.run([toolchain.cc, *config.sanitizer.flags, *objects, str(library.archive), "-lm", "-pthread",
                           "-o", str(out)], capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        raise BuildError(f"the training step does not link: {_first_error(done.stderr)}")
    return out
