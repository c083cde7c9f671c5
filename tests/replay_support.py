"""Shared names for the CCT replay and verify tests: the shared models and the mark that skips without them.
(The session's lowering cache is the `lowering_cache` fixture in conftest.py.)"""
from __future__ import annotations

import pytest
from conftest import SHARED_MODELS

FT2 = SHARED_MODELS / "cct2_ft2"
LP = SHARED_MODELS / "cct2_lp"
needs_models = pytest.mark.skipif(not (FT2 / "network.onnx").is_file(), reason="shared CCT models not available")
