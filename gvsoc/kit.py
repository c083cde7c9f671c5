"""Where the pieces of a gvsoc run come from: the simulator, its Python packages, the RISC-V compiler and pulp-sdk.

- gvsoc: `--gvsoc DIR` (an install: DIR/bin/gvsoc), else $GVSOC_INSTALL, else the prebuilt install beside the shared
  models (../shared/gvsoc/install); $GVSOC_INSTALL=none switches simulation off. Its launcher is Python: it runs on
  this interpreter, which needs the packages of ckpt's `gvsoc` extra.
- the compiler: Debian's `riscv64-unknown-elf-gcc` (or $CKPT_RISCV_CC) with picolibc's rv32imafc/ilp32f libc.
- pulp-sdk, whose pmsis API Deeploy's Siracusa code and harness call: $PULP_SDK_HOME, else the sources beside the
  shared gvsoc (../shared/gvsoc/src/pulp-sdk), with the GCC port that comes with them (../shared/gvsoc/sdk/port).

Anything missing is a `NoKit` with the reason, so a replay says `not simulated (why)` and never makes up a figure.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ckpt.errors import CkptError
from ckpt.paths import shared_folder

GVSOC_ENV = "GVSOC_INSTALL"
SDK_ENV = "PULP_SDK_HOME"
CC_ENV = "CKPT_RISCV_CC"
DEFAULT_CC = "riscv64-unknown-elf-gcc"
# the modules gvsoc's launcher imports for the Siracusa target (ckpt's `gvsoc` extra installs them)
LAUNCHER_MODULES = ("prettytable", "rich", "typing_extensions", "elftools", "psutil", "six", "pexpect")
PICOLIBC = Path("/usr/lib/picolibc/riscv64-unknown-elf")
MULTILIB = "rv32imafc/ilp32f"
ARCH_FLAGS = ("-march=rv32imafc", "-mabi=ilp32f", "-misa-spec=2.2")   # 2.2: binutils 2.40 takes CSR ops then


@dataclass(frozen=True)
class Compiler:
    cc: Path
    version: str
    libc: Path               # picolibc's libc.a for the cluster cores' multilib
    libc_include: Path

    @property
    def ar(self) -> Path:
        return self.cc.with_name(self.cc.name.replace("gcc", "ar"))

    @property
    def size(self) -> Path:
        return self.cc.with_name(self.cc.name.replace("gcc", "size"))


@dataclass(frozen=True)
class GvsocKit:
    """Everything a step needs to be built for Siracusa and run on gvsoc's model of it."""

    install: Path            # gvsoc's install: bin/gvsoc, python/
    sdk: Path                # pulp-sdk sources (rtos/...)
    port: Path               # the GCC port of pulp-sdk: a patch and a header of builtins
    compiler: Compiler

    @property
    def identity(self) -> str:
        """sha256 over everything of the kit that can change a step's bytes or cycles: the simulator's files, the
        pulp-sdk sources, the port and the compiler."""
        return _identity(self.install, self.sdk, self.port, self.compiler.version)

    def environment(self) -> dict[str, str]:
        """The environment gvsoc's launcher runs in."""
        env = dict(os.environ)
        env["PATH"] = f"{self.install / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.install / "python"), env.get("PYTHONPATH")) if p)
        return env


@dataclass(frozen=True)
class NoKit:
    """Why nothing can be simulated here."""

    reason: str


@functools.cache
def _identity(install: Path, sdk: Path, port: Path, compiler: str) -> str:
    digest = hashlib.sha256(compiler.encode())
    for root in (install, sdk, port):
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def shared_gvsoc() -> Path:
    return shared_folder() / "gvsoc"


def _install(gvsoc: Path | None) -> tuple[Path, str] | NoKit:
    if gvsoc is not None:
        return Path(gvsoc), "--gvsoc"
    if os.environ.get(GVSOC_ENV) == "none":
        return NoKit(f"gvsoc switched off (${GVSOC_ENV}=none)")
    if os.environ.get(GVSOC_ENV):
        return Path(os.environ[GVSOC_ENV]), f"${GVSOC_ENV}"
    default = shared_gvsoc() / "install"
    if not default.is_dir():
        return NoKit(f"no gvsoc: pass --gvsoc DIR or set ${GVSOC_ENV} (none at {default})")
    return default, "the shared folder"


def find_compiler() -> Compiler | NoKit:
    name = os.environ.get(CC_ENV, DEFAULT_CC)
    found = shutil.which(name)
    if found is None:
        return NoKit(f"no RISC-V compiler ({name}): apt-get install gcc-riscv64-unknown-elf "
                     "picolibc-riscv64-unknown-elf")
    libc = PICOLIBC / "lib" / MULTILIB / "libc.a"
    if not libc.is_file():
        return NoKit(f"no picolibc for {MULTILIB} ({libc}): apt-get install picolibc-riscv64-unknown-elf")
    done = subprocess.run([found, "--version"], capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        return NoKit(f"{found} --version failed")
    return Compiler(Path(found), done.stdout.splitlines()[0].strip(), libc, PICOLIBC / "include")


def missing_launcher_modules() -> list[str]:
    return [m for m in LAUNCHER_MODULES if importlib.util.find_spec(m) is None]


def find_kit(gvsoc: Path | None = None) -> GvsocKit | NoKit:
    """The kit, or why there is none (see the module doc). A gvsoc the user named that is not one is refused."""
    found = _install(gvsoc)
    if isinstance(found, NoKit):
        return found
    install, named_by = found
    launcher = install / "bin" / "gvsoc"
    if not launcher.is_file():
        if named_by == "the shared folder":
            return NoKit(f"no gvsoc at {install}")
        raise CkptError(f"{named_by} '{install}' is not a gvsoc install (no bin/gvsoc)",
                        "point it at the folder gvsoc's build installed (with bin/ and python/)")
    if not os.access(launcher, os.X_OK):
        if named_by == "the shared folder":
            return NoKit(f"{launcher} is not executable")
        raise CkptError(f"{named_by} '{install}': bin/gvsoc is not executable",
                        f"make it so (chmod +x {launcher}), or point {named_by} at a working gvsoc install")
    missing = missing_launcher_modules()
    if missing:
        return NoKit(f"gvsoc's launcher needs Python packages not installed here ({', '.join(missing)}): "
                     "pip install 'ckpt[gvsoc]'")
    sdk = Path(os.environ[SDK_ENV]) if os.environ.get(SDK_ENV) else shared_gvsoc() / "src" / "pulp-sdk"
    if not (sdk / "rtos" / "pmsis").is_dir():
        return NoKit(f"no pulp-sdk sources at {sdk}: set ${SDK_ENV}")
    port = shared_gvsoc() / "sdk" / "port"
    if not (port / "pulp_builtins_shim.h").is_file():
        return NoKit(f"no GCC port of pulp-sdk at {port}")
    compiler = find_compiler()
    if isinstance(compiler, NoKit):
        return compiler
    return GvsocKit(install.resolve(), sdk.resolve(), port.resolve(), compiler)
