"""The CLI as a user runs it: `ckpt ...` in a subprocess of its own, or by the console script's entry point in
this process, output captured either way."""
from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys

from ckpt.cli import main


def ckpt(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """`python -m ckpt ARGS` in a new interpreter: for what only a process shows (a fresh hash seed, the
    module entry point, signals)."""
    return subprocess.run([sys.executable, "-m", "ckpt", *args], capture_output=True, text=True, cwd=cwd, env=env)


def ckpt_here(*args: str) -> subprocess.CompletedProcess:
    """`ckpt ARGS` through the console script's own entry point, here: the same parsing, exit codes and output
    as a subprocess without an interpreter's start and imports per call (most of a refusal's time). An
    exception that escapes the CLI escapes this too, where a process would print a traceback."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as done:
            code = 0 if done.code is None else int(done.code)
    return subprocess.CompletedProcess(["ckpt", *args], code, out.getvalue(), err.getvalue())


def interrupted_at(args: list[str], hook_variable: str, at: str) -> subprocess.CompletedProcess:
    """`args` run with a real SIGINT sent once a progress line starts with `at`. Ctrl-C is restored in the
    child first: a test run started in the background (`cmd &` in a script) inherits SIGINT ignored, and
    Python then never raises KeyboardInterrupt."""
    return subprocess.run(args, capture_output=True, text=True, env={**os.environ, hook_variable: at},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
