"""Shared set-up for the CCT replay and verify tests: one lowering cache per test session, in its temp dir.

The cache folder is derived from the session's base temp dir, so every module that imports `lowering_cache`
finds the graphs another module already lowered (Deeploy's front end runs once per model per session).
"""
from __future__ import annotations

import pytest

from conftest import SHARED_MODELS

FT2 = SHARED_MODELS / "cct2_ft2"
LP = SHARED_MODELS / "cct2_lp"
needs_models = pytest.mark.skipif(not (FT2 / "network.onnx").is_file(), reason="shared CCT models not available")


@pytest.fixture(scope="session")
def lowering_cache(tmp_path_factory):
    """CKPT_CACHE_DIR for the session: lower(), solve_model() and CLI subprocesses all share it."""
    path = tmp_path_factory.getbasetemp() / "ckpt-lowering-cache"
    path.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CKPT_CACHE_DIR", str(path))
        yield path
