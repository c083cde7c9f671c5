"""Shared pytest setup: solver test graphs importable as `graphs`, shared models found next to the repo."""
import os
import shutil
import sys
from pathlib import Path

import pytest
import strength
from _pytest.mark.expression import Expression
from hypothesis import settings

from ckpt import paths
from ckpt.coderun.sources import NoSources, find_sources
from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label
from ckpt.errors import CkptError

sys.path.insert(0, str(Path(__file__).parent))

SHARED_MODELS = paths.shared_models()

# Property tests draw the same examples on every run (a run's time and verdict do not depend on the draw);
# HYPOTHESIS_PROFILE=explore draws new ones.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


def pytest_configure(config):
    """A run whose marker filter keeps unmarked tests and leaves the slow ones out is the fast tier: its property
    tests draw fewer examples (tests/strength.py). Decided before any test module is imported, in every xdist
    worker alike."""
    markexpr = config.getoption("markexpr")
    if markexpr:
        selects = Expression.compile(markexpr).evaluate
        strength.QUICK = selects(lambda mark: False) and not selects(lambda mark: mark == "slow")


# The modules that take longest on two workers (`pytest --durations=0`), longest first. They are collected first,
# and the README's command (`-n 2 --dist loadscope --no-loadscope-reorder`) hands whole modules to the workers in
# collection order, so the long ones start first and both workers finish together. Only the order depends on it.
LONGEST_FIRST = ("test_arena_deeploy", "test_bench_smoke", "test_bounds", "test_sweep_dask", "test_coderun_deeploy",
                 "test_cli_errors_more", "test_replay_cct", "test_level_total_deeploy", "test_sweep_deeploy",
                 "test_cli_errors_round3", "test_sweep", "test_bridge", "test_examples", "test_gvsoc_run",
                 "test_cache_entries", "test_schedule_validity", "test_small_example_code")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))      # stable: each module keeps its order


@pytest.fixture(autouse=True)
def gvsoc_only_where_asked(request, monkeypatch):
    """Steps run on gvsoc only in tests marked `gvsoc` (a minute or more each); the others see it switched off,
    as a user does with $GVSOC_INSTALL=none."""
    if request.node.get_closest_marker("gvsoc") is None:
        monkeypatch.setenv("GVSOC_INSTALL", "none")


@pytest.fixture(scope="module")
def branch():
    """Split steps are the training branch's: without it installed, the test is skipped saying how to get it."""
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip(f"the installed Deeploy is {deeploy_label()}: split steps need the training branch "
                    "(pip install ../shared/deeploy-train)")


@pytest.fixture(scope="session")
def shared_models() -> Path:
    if not (SHARED_MODELS / "cct2_ft2" / "network.onnx").is_file():
        pytest.skip(f"shared models not found at {SHARED_MODELS} (set CKPT_SHARED_MODELS)")
    return SHARED_MODELS


@pytest.fixture
def split(shared_models: Path, tmp_path) -> Path:
    """Deeploy's training branch's SimpleMLP step, copied: <tmp>/simplemlp_train with its sibling optimizer."""
    for name in ("simplemlp_train", "simplemlp_optimizer"):
        if not (shared_models / name).is_dir():
            pytest.skip(f"{name} is not among the shared models")
        shutil.copytree(shared_models / name, tmp_path / name)
    return tmp_path / "simplemlp_train"


@pytest.fixture(scope="session")
def lowering_cache(tmp_path_factory):
    """CKPT_CACHE_DIR for the session, in its base temp dir: lower(), solve_model() and CLI subprocesses all share
    it, so Deeploy's front end runs once per model per session. Under pytest-xdist the workers share one (the
    run's temp dir): ckpt's cache entries are keyed and written by rename, so two workers making one entry at
    once write the same bytes."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = shared / "ckpt-lowering-cache"
    path.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CKPT_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def deeploy_checkout():
    """The Deeploy checkout the generated code is built against; tests that run that code skip without it."""
    try:
        found = find_sources()
    except CkptError as err:                  # $CKPT_DEEPLOY_ROOT names no checkout
        pytest.skip(str(err))
    if isinstance(found, NoSources):
        pytest.skip(found.reason)
    return found
