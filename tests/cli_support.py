"""The CLI as a user runs it: `python -m ckpt ...` in a subprocess of its own, output captured."""
from __future__ import annotations

import subprocess
import sys


def ckpt(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckpt", *args], capture_output=True, text=True, cwd=cwd, env=env)
