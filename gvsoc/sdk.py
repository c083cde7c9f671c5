"""pulp-sdk's Siracusa runtime (pmsis, the HyperRAM/hyperflash/readfs bsp, pulpos), built once into ckpt's cache.

What is built, and with which includes and defines, is read from the Deeploy checkout's own CMake files
(TargetLibraries/PULPOpen/cmake/pulp-sdk-{base,siracusa}.cmake), so it is the runtime Deeploy's Siracusa
flow links. The sources are copied into the cache first: links a copy of the sources may hold as small text files
naming their target are made links again, and the GCC port is applied (Xpulp assembly rewritten in RV32, and
plain-C stand-ins for the `__builtin_pulp_*` calls left with -DRV_ISA_RV32). The library is keyed by everything
that changes its objects (the sources' and port's bytes, the CMake lists, the compiler and the flags).
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
from pathlib import Path

from ckpt.cached import discard, folder_checks_out, stored_folder
from ckpt.coderun.sources import KernelSources
from ckpt.files import atomic_write
from ckpt.gvsoc.kit import ARCH_FLAGS, GvsocKit
from ckpt.paths import cache_root

SDK_FORMAT = 2          # 2: sealed (ckpt.cached)
HERE = "@CKPT_SDK@"          # the library's folder in sdk.json (it is built in a staging folder, then moved)
PORT_PATCH = "pulp-sdk-gcc-asm.patch"
BUILTINS_SHIM = "pulp_builtins_shim.h"
CMAKE_DIR = "TargetLibraries/PULPOpen/cmake"
CMAKE_FILES = ("pulp-sdk-base.cmake", "pulp-sdk-siracusa.cmake")
# flags of the port and of Deeploy's pulp-sdk target beyond its CMake lists: optimised like Deeploy's build,
# without the loop-to-memset rewrite (pulpos's memset would call itself)
SDK_FLAGS = ("-O2", "-fdata-sections", "-ffunction-sections", "-fno-inline-functions",
             "-fno-tree-loop-distribute-patterns", "-w", "-Werror=implicit-function-declaration")
PORT_DEFINES = ("-DRV_ISA_RV32",)     # pulp-runtime's plain-C paths instead of the Xpulp builtins


class SdkBuildError(Exception):
    """pulp-sdk did not build; the message names the first failing file and the compiler's error."""


@dataclass(frozen=True)
class CmakeLists:
    """The lists Deeploy's CMake files give for the Siracusa runtime."""

    c_sources: tuple[str, ...]       # paths relative to the pulp-sdk root
    asm_sources: tuple[str, ...]
    includes: tuple[str, ...]
    flags: tuple[str, ...]           # defines and forced includes, ${PULP_SDK_HOME} left in place


@dataclass(frozen=True)
class SdkLibrary:
    folder: Path

    @property
    def archive(self) -> Path:
        return self.folder / "libpulpsdk.a"

    @property
    def root(self) -> Path:
        return self.folder / "pulp-sdk"

    @property
    def link_dir(self) -> Path:
        """Where the Siracusa linker script (chips/siracusa/link.ld) is found."""
        return self.root / "rtos" / "pulpos" / "pulp" / "kernel"

    def compile_flags(self, kit: GvsocKit) -> list[str]:
        """The flags anything compiled against this runtime needs (Deeploy's kernels, its harness, the step)."""
        doc = json.loads((self.folder / "sdk.json").read_text())
        return [*ARCH_FLAGS, *(f.replace(HERE, str(self.folder)) for f in doc["interface"]),
                "-isystem", str(kit.compiler.libc_include), "-include", str(self.folder / BUILTINS_SHIM)]


_SET = re.compile(r"set\(\s*(\w+)(.*?)\)", re.DOTALL)


def read_cmake_lists(sources: KernelSources) -> CmakeLists:
    """The Siracusa runtime's files, includes and flags from Deeploy's CMake files (see the module doc)."""
    sets: dict[str, list[str]] = {}
    for name in CMAKE_FILES:
        text = re.sub(r"#[^\n]*", "", (sources.root / CMAKE_DIR / name).read_text())
        for match in _SET.finditer(text):
            sets[match.group(1)] = match.group(2).split()

    def paths(key: str) -> tuple[str, ...]:
        return tuple(item.replace("${PULP_SDK_HOME}/", "") for item in sets.get(key, []))

    return CmakeLists(
        c_sources=paths("PULP_SDK_BASE_C_SOURCE") + paths("PULP_SDK_SIRACUSA_C_SOURCE"),
        asm_sources=paths("PULP_SDK_BASE_ASM_SOURCE") + paths("PULP_SDK_SIRACUSA_ASM_SOURCE"),
        includes=paths("SIRACUSA_INCLUDES") + paths("PULP_SDK_BASE_INCLUDE"),
        flags=tuple(sets.get("SIRACUSA_COMPILE_FLAGS", []) + sets.get("PULP_SDK_BASE_COMPILE_FLAGS", [])))


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink()):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(os.readlink(path).encode() if path.is_symlink() else hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _key(kit: GvsocKit, lists: CmakeLists) -> str:
    blob = json.dumps({"format": SDK_FORMAT, "sdk": _tree_digest(kit.sdk / "rtos"), "port": _tree_digest(kit.port),
                       "lists": [list(lists.c_sources), list(lists.asm_sources), list(lists.includes),
                                 list(lists.flags)],
                       "cc": kit.compiler.version, "flags": [*ARCH_FLAGS, *SDK_FLAGS, *PORT_DEFINES]}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def restore_links(root: Path) -> int:
    """Make small files that hold only the relative path of an existing sibling links again; how many were."""
    restored = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        if path.stat().st_size > 255:
            continue
        try:
            text = path.read_bytes().decode()
        except UnicodeDecodeError:
            continue
        if not text or text != text.strip() or "\n" in text or "\0" in text:
            continue
        target = path.parent / text
        if target.exists() and target.resolve() != path.resolve():
            path.unlink()
            path.symlink_to(text)
            restored += 1
    return restored


def _apply_port(root: Path, port: Path) -> None:
    patch = port / PORT_PATCH
    done = subprocess.run(["patch", "-p1", "-s", "-N", "-i", str(patch)], cwd=root,
                          capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        raise SdkBuildError(f"the GCC port ({patch}) does not apply to these pulp-sdk sources: "
                            f"{(done.stdout + done.stderr).strip().splitlines()[:1]}")


def sdk_library(kit: GvsocKit, sources: KernelSources) -> SdkLibrary:
    """The cached runtime library, built first if absent (about a minute)."""
    lists = read_cmake_lists(sources)
    key = _key(kit, lists)
    folder = cache_root() / "gvsoc" / f"sdk-{key}"
    if folder_checks_out(folder, key):
        return SdkLibrary(folder)
    discard(folder)                           # not what was built (cut short, corrupted): built again
    with stored_folder(folder, key, ".sdk.") as staging:
        _build(kit, lists, staging)
    return SdkLibrary(folder)


def _build(kit: GvsocKit, lists: CmakeLists, out: Path) -> None:
    root = out / "pulp-sdk"
    shutil.copytree(kit.sdk, root, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)
    restore_links(root)
    _apply_port(root, kit.port)
    shutil.copy(kit.port / BUILTINS_SHIM, out / BUILTINS_SHIM)
    flags = [f.replace("${PULP_SDK_HOME}", f"{HERE}/pulp-sdk") for f in lists.flags]
    flags += [f"-I{HERE}/pulp-sdk/{inc}" for inc in lists.includes]
    atomic_write(out / "sdk.json", json.dumps({"interface": [*PORT_DEFINES, *flags]}, indent=1))
    common = [*SDK_FLAGS, *SdkLibrary(out).compile_flags(kit)]
    objects = out / "obj"
    objects.mkdir()
    jobs = [(rel, []) for rel in lists.c_sources] + [(rel, ["-DLANGUAGE_ASSEMBLY"]) for rel in lists.asm_sources]

    def compile_one(job: tuple[str, list[str]]) -> tuple[str, subprocess.CompletedProcess]:
        rel, extra = job
        obj = objects / (rel.replace("/", "_") + ".o")
        return rel, subprocess.run([str(kit.compiler.cc), *common, *extra, "-c", str(root / rel), "-o", str(obj)],
                                   capture_output=True, text=True, errors="replace")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for rel, done in pool.map(compile_one, jobs):
            if done.returncode != 0:
                first = next((line for line in done.stderr.splitlines() if "error" in line.lower()), done.stderr)
                raise SdkBuildError(f"pulp-sdk's {rel} does not compile: {first.strip()}")
    done = subprocess.run([str(kit.compiler.ar), "rcsD", str(out / "libpulpsdk.a"),
                           *sorted(str(p) for p in objects.glob("*.o"))],
                           capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        raise SdkBuildError(f"ar failed: {done.stderr.strip()}")
    shutil.rmtree(objects)
