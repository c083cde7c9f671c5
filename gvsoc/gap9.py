"""A GAP9-capable gvsoc: what `--gvsoc DIR --target gap9` needs, recognised before any work, and the launch.

gvsoc's public sources (../shared/gvsoc) model Siracusa, not GAP9: a chip is a target module that the launcher
imports from its install's target folder (`bin/gvsoc` passes `--target-dir=DIR/generators`), and GAP9's, the
module `gap9.evk` that Deeploy's GAP9 flow launches (cmake/gap9/gap9_gvsoc.cmake of the training branch), ships
only with GreenWaves' GAP9 SDK, in its `install/workstation` (generators/ and models/). The SDK also gives what a
run needs beside the model: the cmake setup GAP9 programs are built with (pmsis and the BSP for GAP9) and the
efuse image gvsoc preloads into the chip (`chip.efuse_preload.data` in the work folder), both read from
$GAP_SDK_HOME. Anything missing is refused in one line naming it; ckpt never makes up a GAP9 figure.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ckpt.errors import CkptError
from ckpt.targets import TARGET_TABLE

GAP9_GVSOC_TARGET = TARGET_TABLE["gap9"].gvsoc_target  # gvsoc's GAP9 board, as Deeploy's GAP9 flow names it
TARGET_MODULE = Path("generators", "gap9", "evk.py")   # where the launcher imports it from, in an install
SDK_ENV = "GAP_SDK_HOME"
SDK_BUILD = Path("utils", "cmake", "setup.cmake")        # how GAP9 programs are built (pmsis, the BSP)
SDK_EFUSE = Path("utils", "efuse", "GAP9", "efuse_hyper_preload.data")   # the chip's efuse image
EFUSE_IN_WORK_DIR = "chip.efuse_preload.data"
SDK_INSTALL = Path("install", "workstation")            # where the SDK installs its gvsoc (DIR for --gvsoc)


@dataclass(frozen=True)
class Gap9Gvsoc:
    """A gvsoc install with GAP9's model, and the GreenWaves SDK beside it."""

    install: Path            # bin/gvsoc, generators/gap9/evk.py, models/
    sdk: Path                # $GAP_SDK_HOME

    @property
    def efuse(self) -> Path:
        return self.sdk / SDK_EFUSE


def _sdk_home(install: Path) -> Path | None:
    """$GAP_SDK_HOME, else the SDK the install sits in (SDK/install/workstation), else None."""
    if os.environ.get(SDK_ENV):
        return Path(os.environ[SDK_ENV])
    parts = install.resolve().parts
    return install.resolve().parents[1] if parts[-2:] == SDK_INSTALL.parts else None


def find_gap9_gvsoc(install: Path) -> Gap9Gvsoc:
    """The GAP9-capable gvsoc at `install` (what --gvsoc names) with its SDK, or CkptError naming the first piece
    missing."""
    way_out = (f"install GreenWaves' GAP9 SDK and give --gvsoc $GAP_SDK_HOME/{SDK_INSTALL} (its gvsoc), or drop "
               "--gvsoc (the step is then checked on this host only)")
    launcher = install / "bin" / "gvsoc"
    if not launcher.is_file() or not os.access(launcher, os.X_OK):
        raise CkptError(f"--gvsoc '{install}' is not a gvsoc install (no executable bin/gvsoc)", way_out)
    if not (install / TARGET_MODULE).is_file():
        raise CkptError(f"--gvsoc '{install}' has no GAP9 model: gvsoc's target {GAP9_GVSOC_TARGET} "
                        f"({TARGET_MODULE}) is not there; it ships only with GreenWaves' GAP9 SDK", way_out)
    sdk = _sdk_home(install)
    if sdk is None:
        raise CkptError(f"--gvsoc '{install}' has GAP9's model, but GreenWaves' GAP9 SDK is not found "
                        f"(${SDK_ENV} unset): a GAP9 step is built with it",
                        f"set ${SDK_ENV} to the SDK's folder")
    for piece, what in ((SDK_BUILD, "the cmake setup GAP9 programs are built with"),
                        (SDK_EFUSE, "the efuse image gvsoc preloads into GAP9")):
        if not (sdk / piece).is_file():
            raise CkptError(f"GreenWaves' GAP9 SDK at '{sdk}' lacks {piece} ({what})",
                            f"set ${SDK_ENV} to a complete GAP9 SDK")
    return Gap9Gvsoc(install.resolve(), sdk.resolve())


def gap9_command(found: Gap9Gvsoc, elf: Path, work_dir: Path) -> list[str]:
    """gvsoc's command line that runs `elf` on GAP9's model (L2 boot: no flash layout), as Deeploy's flow does."""
    return [str(found.install / "bin" / "gvsoc"), f"--target={GAP9_GVSOC_TARGET}", f"--work-dir={work_dir}",
            f"--binary={elf}", "image", "flash", "run"]


def prepare_work_dir(found: Gap9Gvsoc, work_dir: Path) -> Path:
    """The work folder of one run, with the efuse image the model reads at boot."""
    work_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(found.efuse, work_dir / EFUSE_IN_WORK_DIR)
    return work_dir
