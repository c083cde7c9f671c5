"""Shared pytest setup: solver test graphs importable as `graphs`, shared models found next to the repo."""
import sys
from pathlib import Path

import pytest

from ckpt import paths

sys.path.insert(0, str(Path(__file__).parent))

SHARED_MODELS = paths.shared_models()


@pytest.fixture(scope="session")
def shared_models() -> Path:
    if not (SHARED_MODELS / "cct2_ft2" / "network.onnx").is_file():
        pytest.skip(f"shared models not found at {SHARED_MODELS} (set CKPT_SHARED_MODELS)")
    return SHARED_MODELS
