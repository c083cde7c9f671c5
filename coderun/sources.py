"""Where Deeploy's C kernels come from: a Deeploy checkout at the tag of the installed deeploy-pulp.

The wheel carries only Deeploy's Python compiler; the code it generates calls kernels in the checkout's
TargetLibraries/{PULPOpen,Generic}. ckpt builds against those files as they are (never a copy of its own), so it
checks they are the release's: the sha256 over their paths and bytes must be the one recorded below for the
installed version. A checkout of another version (or with edits) is refused in one line.

The checkout is the first of: $CKPT_DEEPLOY_ROOT, the --deeploy-root a user gave for gvsoc, and
deeploy-v<version> beside the shared models (../shared beside the repository, or $CKPT_SHARED_MODELS's parent),
where tests and CI find v0.2.1.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ckpt.errors import CkptError
from ckpt.paths import shared_folder

ENV = "CKPT_DEEPLOY_ROOT"
LIBRARIES = ("TargetLibraries/PULPOpen", "TargetLibraries/Generic")
KERNEL_DIRS = tuple(f"{lib}/{part}" for lib in LIBRARIES for part in ("inc", "src"))

# sha256 of kernel_fingerprint() over a checkout of the release's tag, per deeploy-pulp version
RELEASE_FINGERPRINTS = {
    "0.2.1": "e376b401665d5b5751d81d037782d023df09ee3cf399e68360c23e90e68fc02f",
}


@dataclass(frozen=True)
class KernelSources:
    """A checkout whose kernels are those of the installed deeploy-pulp."""

    root: Path
    version: str
    fingerprint: str

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        return tuple(self.root / lib / "inc" for lib in LIBRARIES)

    def kernel_files(self) -> list[Path]:
        """Every kernel C file, in a fixed order."""
        return sorted(p for lib in LIBRARIES for p in (self.root / lib / "src").glob("*.c"))


@dataclass(frozen=True)
class NoSources:
    """Why the generated code cannot be built here (no checkout found)."""

    reason: str


def installed_version() -> str:
    try:
        return metadata.version("deeploy-pulp")
    except metadata.PackageNotFoundError:
        return "none"


def kernel_fingerprint(root: Path) -> str:
    """sha256 over the relative path and bytes of every file under the kernel folders of `root`."""
    digest = hashlib.sha256()
    for rel in KERNEL_DIRS:
        folder = root / rel
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _candidates(deeploy_root: Path | None, version: str) -> list[tuple[Path, str]]:
    found = []
    if os.environ.get(ENV):
        found.append((Path(os.environ[ENV]), f"${ENV}"))
    if deeploy_root is not None:
        found.append((Path(deeploy_root), "--deeploy-root"))
    found.append((shared_folder() / f"deeploy-v{version}", "the shared folder"))
    return found


def find_sources(deeploy_root: Path | None = None) -> KernelSources | NoSources:
    """The first checkout named (see the module doc) whose kernels are the release's; a named checkout of
    another version is refused (CkptError), and no checkout at all is a `NoSources` reason."""
    version = installed_version()
    for root, named_by in _candidates(deeploy_root, version):
        if not all((root / rel).is_dir() for rel in KERNEL_DIRS):
            if named_by == "the shared folder":
                continue
            raise CkptError(f"{named_by} '{root}' holds no Deeploy kernels ({KERNEL_DIRS[0]} and the others)",
                            f"point it at a Deeploy checkout at tag v{version}")
        fingerprint = kernel_fingerprint(root)
        expected = RELEASE_FINGERPRINTS.get(version)
        if expected is None:
            raise CkptError(f"ckpt knows no kernel fingerprint for deeploy-pulp {version}",
                            "install the deeploy-pulp version ckpt pins")
        if fingerprint != expected:
            raise CkptError(f"the Deeploy kernels in {named_by} '{root}' are not those of deeploy-pulp {version} "
                            f"(fingerprint {fingerprint[:12]}, expected {expected[:12]})",
                            f"check out tag v{version} there, unmodified")
        return KernelSources(root.resolve(), version, fingerprint)
    return NoSources(f"no Deeploy v{version} checkout for its C kernels: set ${ENV} or pass --deeploy-root")
