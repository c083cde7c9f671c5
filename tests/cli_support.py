"""The CLI as a user runs it: `python -m ckpt ...` in a subprocess of its own, output captured."""
from __future__ import annotations

import os
import signal
import subprocess
import sys


def ckpt(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckpt", *args], capture_output=True, text=True, cwd=cwd, env=env)


def interrupted_at(args: list[str], hook_variable: str, at: str) -> subprocess.CompletedProcess:
    """`args` run with a real SIGINT sent once a progress line starts with `at`. Ctrl-C is restored in the
    child first: a test run started in the background (`cmd &` in a script) inherits SIGINT ignored, and
    Python then never raises KeyboardInterrupt."""
    return subprocess.run(args, capture_output=True, text=True, env={**os.environ, hook_variable: at},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
