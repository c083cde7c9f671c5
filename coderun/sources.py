"""Where Deeploy's C kernels come from: a checkout of the Deeploy that is installed.

The wheel carries only Deeploy's Python compiler; the code it generates calls kernels in a checkout's
TargetLibraries. ckpt builds against those files as they are (never a copy of its own), so it checks they belong
to the installed Deeploy: the sha256 over their paths and bytes must be the one recorded below for it. A checkout
of another version (or with edits) is refused in one line. Which kernels a checkout holds depends on the Deeploy:
- the release (PyPI's deeploy-pulp, tag v<version>): TargetLibraries/{PULPOpen,Generic};
- the training branch (pull request 169, head a0e1e531; ckpt.deeploy_identity tells it apart): the same two
  libraries and the pulp-trainlib sources its PULPOpen CMake list names for the ConvGrad kernels (its submodule
  TargetLibraries/PULPOpen/third_party/pulp-trainlib, compiled with the flags that list gives them).

The checkout is the first of: $CKPT_DEEPLOY_ROOT, the --deeploy-root a user gave, and the checkout beside the shared
models (../shared beside the repository, or $CKPT_SHARED_MODELS's parent): deeploy-v<version> for the release,
deeploy-train for the training branch, where tests and CI find them.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label, deeploy_version
from ckpt.errors import CkptError
from ckpt.paths import shared_folder

ENV = "CKPT_DEEPLOY_ROOT"
LIBRARIES = ("TargetLibraries/PULPOpen", "TargetLibraries/Generic")
KERNEL_DIRS = tuple(f"{lib}/{part}" for lib in LIBRARIES for part in ("inc", "src"))
TRAINLIB = "TargetLibraries/PULPOpen/third_party/pulp-trainlib/lib"


@dataclass(frozen=True)
class KernelTree:
    """What of a checkout the generated code is built with, and where that checkout lies beside the shared models."""

    folders: tuple[str, ...]                 # every file under these is kernel source or header
    include_dirs: tuple[str, ...]
    sources: tuple[str, ...]                 # the C files of the kernel library, beyond the libraries' src/
    source_flags: tuple[str, ...]            # the flags those files are compiled with
    shared_name: str                         # the checkout's folder beside the shared models
    how: str                                 # how a user gets such a checkout

    def files(self, root: Path) -> list[Path]:
        """Every file the fingerprint covers, in a fixed order."""
        found = [p for rel in self.folders for p in sorted(q for q in (root / rel).rglob("*") if q.is_file())]
        return found + [root / rel for rel in self.sources]

    def missing(self, root: Path) -> str | None:
        """The first part of the tree `root` lacks, or None."""
        needed = [*self.folders, *self.include_dirs]
        return next((rel for rel in needed if not (root / rel).is_dir()), None) or \
            next((rel for rel in self.sources if not (root / rel).is_file()), None)


_TRAINLIB_SOURCES = tuple(f"{TRAINLIB}/sources/{name}.c" for name in (
    "pulp_conv2d_fp32", "pulp_im2col_fp32", "pulp_conv_dw_fp32", "pulp_conv_pw_fp32", "pulp_matmul_fp32",
    "pulp_train_utils_fp32", "pulp_conv_naive_fp32"))

TREES = {
    Flavour.RELEASE: KernelTree(KERNEL_DIRS, tuple(f"{lib}/inc" for lib in LIBRARIES), (), (),
                                "deeploy-v{version}", "a Deeploy checkout at tag v{version}, unmodified"),
    Flavour.TRAINING_BRANCH: KernelTree(
        (*KERNEL_DIRS, f"{TRAINLIB}/include"), (*(f"{lib}/inc" for lib in LIBRARIES), f"{TRAINLIB}/include"),
        _TRAINLIB_SOURCES, ("-UUSE_DMA", "-Dfloat16alt=float"), "deeploy-train",
        "a checkout of Deeploy's pull request 169 at a0e1e531 with its pulp-trainlib submodule, unmodified"),
}

# sha256 of the kernel tree of the checkout each installed Deeploy was released with
FINGERPRINTS = {
    ("0.2.1", Flavour.RELEASE): "e376b401665d5b5751d81d037782d023df09ee3cf399e68360c23e90e68fc02f",
    ("0.2.1", Flavour.TRAINING_BRANCH): "4ab01e013be3bb5310848a440fd74826f45cd6595a1a1f031cb00f2839d1fdf7",
}


@dataclass(frozen=True)
class KernelSources:
    """A checkout whose kernels are those of the installed Deeploy."""

    root: Path
    version: str
    fingerprint: str
    flavour: Flavour = Flavour.RELEASE

    @property
    def tree(self) -> KernelTree:
        return TREES[self.flavour]

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        return tuple(self.root / rel for rel in self.tree.include_dirs)

    def kernel_units(self) -> list[tuple[Path, tuple[str, ...]]]:
        """Every kernel C file with the flags of its own it is compiled with, in a fixed order."""
        units = [(p, ()) for lib in LIBRARIES for p in sorted((self.root / lib / "src").glob("*.c"))]
        return units + [(self.root / rel, self.tree.source_flags) for rel in self.tree.sources]


@dataclass(frozen=True)
class NoSources:
    """Why the generated code cannot be built here (no checkout found)."""

    reason: str


def kernel_fingerprint(root: Path, tree: KernelTree = TREES[Flavour.RELEASE]) -> str:
    """sha256 over the relative path and bytes of every file of `tree` in `root`."""
    digest = hashlib.sha256()
    for path in tree.files(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def checkout_name() -> str:
    """The folder name of the installed Deeploy's checkout beside the shared models."""
    return TREES[deeploy_flavour()].shared_name.format(version=deeploy_version())


def _candidates(deeploy_root: Path | None, shared_name: str) -> list[tuple[Path, str]]:
    found = []
    if os.environ.get(ENV):
        found.append((Path(os.environ[ENV]), f"${ENV}"))
    if deeploy_root is not None:
        found.append((Path(deeploy_root), "--deeploy-root"))
    found.append((shared_folder() / shared_name, "the shared folder"))
    return found


def find_sources(deeploy_root: Path | None = None) -> KernelSources | NoSources:
    """The first checkout named (see the module doc) whose kernels are the installed Deeploy's; a named checkout
    of another Deeploy is refused (CkptError), and no checkout at all is a `NoSources` reason."""
    version, flavour = deeploy_version(), deeploy_flavour()
    tree = TREES[flavour]
    how = tree.how.format(version=version)
    for root, named_by in _candidates(deeploy_root, checkout_name()):
        missing = tree.missing(root)
        if missing:
            if named_by == "the shared folder":
                continue
            raise CkptError(f"{named_by} '{root}' holds no {missing}: not the kernels of Deeploy {deeploy_label()}",
                            f"point it at {how}")
        fingerprint = kernel_fingerprint(root, tree)
        expected = FINGERPRINTS.get((version, flavour))
        if expected is None:
            raise CkptError(f"ckpt knows no kernel fingerprint for Deeploy {deeploy_label()}",
                            "install the deeploy-pulp version ckpt pins, or Deeploy's training branch at a0e1e531")
        if fingerprint != expected:
            raise CkptError(f"the Deeploy kernels in {named_by} '{root}' are not those of Deeploy {deeploy_label()} "
                            f"(fingerprint {fingerprint[:12]}, expected {expected[:12]})", f"point it at {how}")
        return KernelSources(root.resolve(), version, fingerprint, flavour)
    return NoSources(f"no checkout of Deeploy {deeploy_label()} for its C kernels ({how}): set ${ENV} or pass "
                     "--deeploy-root")
