"""Hostile input, every command: each case runs `ckpt` (or `minimalloc`) as a user does, in a process of its own,
on files it spoils for itself, and is held to the rules for bad input: the documented exit code, one line on
stderr naming the problem (progress lines aside), no traceback, no file the user had changed or removed, nothing
left behind by a command that ended in an error, and, where a check names what it covered, that it says so.

The cases are grouped by class (budgets, cost files, calibrations, schedules, models and split steps, options a
mode ignores, output folders, sweep folders, gvsoc, minimalloc, ...); a table prints one row per case: its exit
code and the ones allowed, whether its error was one line, a traceback, a user file touched, something left behind,
and the verdict. Cases that lower for Siracusa need the installed Deeploy (the lowered graphs are cached, so a
second run is faster); gvsoc is switched off ($GVSOC_INSTALL=none) unless a case names its own.

Run: python bench/hostile.py [--only TEXT] [--jobs N] [--keep DIR] [--no-deeploy]
     [--smoke]   (a dozen cases of the fast classes)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx
from common import BenchParser, jobs, parse_args, run_bench

from ckpt.examples import write_example
from ckpt.paths import shared_models
from ckpt.solver.graph.model_file import open_model

SMOKE = {"smoke_cases": True, "no_deeploy": True}
BRANCH = importlib.util.find_spec("Deeploy") is not None and importlib.util.find_spec(
    "Deeploy.Targets.PULPOpen.TileConstraints.ConvGradConstraint") is not None   # the training branch installed
TIMEOUT = 900               # seconds a case may run before it counts as hung
Setup = Callable[[Path, "Fixtures"], None]


@dataclass(frozen=True)
class Case:
    name: str
    kind: str                               # its class
    args: tuple[str, ...]                   # after `ckpt`; {dir} is the case's folder, {<fixture>} a fixture's path
    codes: tuple[int, ...] = (1,)           # the exit codes it may end with (documented ones)
    setup: Setup | None = None              # writes the case's own files into its folder
    says: str | None = None                 # text its output must hold (what a check covered or left out)
    env: dict[str, str] = field(default_factory=dict)
    deeploy: bool = False                   # lowers with Deeploy
    program: str = "ckpt"                   # or minimalloc
    keeps: bool = False                     # a failed check whose report is its output (a replay): kept
    release: tuple[int, ...] | None = None  # the codes with Deeploy's release, where its training branch differs
    release_says: str | None = None         # what it says with Deeploy's release, where its training branch differs
    smoke: bool = False                     # among --smoke's cases
    reads: tuple[str, ...] = ()             # fixtures its setup reads (beside those its args name)


@dataclass
class Fixtures:
    root: Path
    paths: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)     # fixtures that could not be made here, and why

    def lacks(self, case: Case) -> str | None:
        """Why `case` cannot run here (a fixture it names could not be made), None when it can."""
        named = " ".join(case.args) + " " + " ".join("{" + name + "}" for name in case.reads)
        return next((why for name, why in self.missing.items() if "{" + name + "}" in named), None)

    def __getitem__(self, name: str) -> str:
        return self.paths[name]


# --------------------------------------------------------------------------- fixtures

SPLIT_FIXTURES = ("train", "optimizer", "other_optimizer", "lone", "split_seq")   # from the shared split steps


def _split_fixtures(fx: Fixtures, root: Path, shared: Path, names: tuple[str, ...]) -> None:
    """SimpleMLP's split step (and another model's optimizer graph) copied from the shared models, one copy
    without its optimizer graph, and a schedule solved on it."""
    split = root / "split"
    for name in names:
        shutil.copytree(shared / name, split / name)
    fx.paths["train"] = str(split / "simplemlp_train")
    fx.paths["optimizer"] = str(split / "simplemlp_optimizer")
    fx.paths["other_optimizer"] = str(split / "autoencoder_optimizer")
    lone = root / "lone" / "simplemlp_train"
    shutil.copytree(split / "simplemlp_train", lone)
    fx.paths["lone"] = str(lone)
    split_seq = root / "split_seq.json"
    done = _ckpt("solve", str(split / "simplemlp_train"), "--budget", "1MB", "-o", str(split_seq))
    assert done.returncode == 0, done.stderr
    fx.paths["split_seq"] = str(split_seq)



def _ckpt(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckpt", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def make_fixtures(root: Path, deeploy: bool) -> Fixtures:
    """The models and schedules the cases read (never write): an MLP, a small CCT for Siracusa, a split step of
    Deeploy's training branch, and schedules solved on each."""
    fx = Fixtures(root)
    mlp = root / "mlp"
    write_example("mlp", mlp, layers=3, width=32, batch=8)
    fx.paths["mlp"] = str(mlp)
    fx.paths["mlp_sha"] = open_model(mlp).sha256
    seq = root / "mlp_seq.json"
    done = _ckpt("solve", str(mlp), "--budget", "1MB", "-o", str(seq))
    assert done.returncode == 0, done.stderr
    fx.paths["mlp_seq"] = str(seq)
    shared = shared_models()
    names = ("simplemlp_train", "simplemlp_optimizer", "autoencoder_optimizer")
    if not all((shared / name).is_dir() for name in names):
        why = f"no split step of Deeploy's training branch at {shared} (set CKPT_SHARED_MODELS)"
        fx.missing.update({name: why for name in SPLIT_FIXTURES})
    else:
        _split_fixtures(fx, root, shared, names)
    fx.paths["level_seq"] = str(_level_schedule(root, seq))
    if deeploy:
        cct = root / "cct"
        write_example("cct", cct, blocks=1, image_size=8, embed_dim=16, heads=2)
        fx.paths["cct"] = str(cct)
        cct_seq = root / "cct_seq.json"
        done = _ckpt("solve", "--costs", "estimate", str(cct), "--target", "siracusa", "--budget", "1.0", "-o",
                     str(cct_seq))
        if done.returncode == 0:
            fx.paths["cct_seq"] = str(cct_seq)
        else:
            fx.missing["cct_seq"] = fx.missing["cct"] = done.stderr.strip().splitlines()[-1]
        big = root / "big"           # constants alone beyond Siracusa's L2
        write_example("mlp", big, layers=2, width=768, in_dim=768, batch=1)
        fx.paths["big"] = str(big)
        lowered = _ckpt("inspect", str(mlp), "--target", "siracusa")   # a Deeploy that lowers no MLP example
        if lowered.returncode != 0:
            fx.missing["big"] = fx.missing["mlp_lowered"] = lowered.stderr.strip().splitlines()[-1]
    return fx


def _level_schedule(root: Path, seq: Path) -> Path:
    """The MLP's schedule with a level total for its budget (what --budget-total writes)."""
    doc = json.loads(seq.read_text())
    doc["budget"] = {"text": "L3=15KB", "fraction": None, "bytes": 15360, "level": "L3"}
    path = root / "level_seq.json"
    path.write_text(json.dumps(doc))
    return path


# --------------------------------------------------------------------------- what a case writes for itself


def text(name: str, content: str | bytes) -> Setup:
    def write(folder: Path, fx: Fixtures) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    return write


def json_file(name: str, doc: object) -> Setup:
    return text(name, json.dumps(doc))


def nested(name: str, depth: int) -> Setup:
    return text(name, '{"Gemm": ' * 1 + "[" * depth + "]" * depth + "}")


def calibration(name: str, **changes: object) -> Setup:
    """A calibration of the fixture MLP for Siracusa, as ckpt writes one, with `changes` (None: the field gone)."""
    def write(folder: Path, fx: Fixtures) -> None:
        doc = {"kind": "ckpt calibration", "format": 3, "model_sha256": fx["mlp_sha"], "target": "siracusa",
               "setup": {}, "step_cycles": 1000, "node_cycles": {"fc0_Gemm": 10}, "errors": 0, "total": 10,
               "code_bytes": 100, "key": "k"}
        for key, value in changes.items():
            if value is None:
                doc.pop(key)
            else:
                doc[key] = value
        (folder / name).write_text(json.dumps(doc))
    return write


def raw(name: str, body: str) -> Setup:
    """A JSON text as it is (a key twice, NaN)."""
    return text(name, body)


def schedule(name: str, change: Callable[[dict], object]) -> Setup:
    def write(folder: Path, fx: Fixtures) -> None:
        doc = json.loads(Path(fx["mlp_seq"]).read_text())
        change(doc)
        (folder / name).write_text(json.dumps(doc))
    return write


def fifo(name: str) -> Setup:
    return lambda folder, fx: os.mkfifo(folder / name)


def folder_with(*names: str, under: str = "out") -> Setup:
    def write(folder: Path, fx: Fixtures) -> None:
        base = folder / under
        base.mkdir(parents=True, exist_ok=True)
        for name in names:
            if name.endswith("/"):
                (base / name).mkdir(parents=True, exist_ok=True)
                (base / name / "mine.txt").write_text("mine")
            else:
                (base / name).write_text("mine\n")
    return write


def model_copy(fixture: str, name: str = "model", change: Callable[[Path], None] | None = None) -> Setup:
    def write(folder: Path, fx: Fixtures) -> None:
        shutil.copytree(fx[fixture], folder / name)
        if change is not None:
            change(folder / name)
    return write


def split_pair(change: Callable[[onnx.ModelProto], None]) -> Setup:
    """The split step copied as <dir>/pair/simplemlp_{train,optimizer}, its optimizer graph changed."""
    def write(folder: Path, fx: Fixtures) -> None:
        base = folder / "pair"
        shutil.copytree(fx["train"], base / "simplemlp_train")
        shutil.copytree(fx["optimizer"], base / "simplemlp_optimizer")
        path = base / "simplemlp_optimizer" / "network.onnx"
        model = onnx.load(path)
        change(model)
        onnx.save(model, path)
    return write


def _reshape_input(model: onnx.ModelProto) -> None:
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[0].dim_value += 1


def _retype_input(model: onnx.ModelProto) -> None:
    model.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE


def _reshape_output(model: onnx.ModelProto) -> None:
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_value += 1


def _no_loss(folder: Path) -> None:
    with np.load(folder / "outputs.npz") as stored:
        kept = {k: stored[k] for k in stored.files if k != "loss"}
    np.savez(folder / "outputs.npz", **kept)


def _respell_npz(file: str, change: Callable[[dict], dict]) -> Callable[[Path], None]:
    def spoil(folder: Path) -> None:
        with np.load(folder / file) as stored:
            arrays = {k: stored[k] for k in stored.files}
        np.savez(folder / file, **change(arrays))
    return spoil


def gvsoc_install(executable: bool, script: str = "#!/bin/sh\necho 'the fake gvsoc starts'\nsleep 600\n") -> Setup:
    def write(folder: Path, fx: Fixtures) -> None:
        launcher = folder / "gv" / "bin" / "gvsoc"
        launcher.parent.mkdir(parents=True)
        launcher.write_text(script)
        launcher.chmod(0o755 if executable else 0o644)
    return write


def both(*setups: Setup) -> Setup:
    def write(folder: Path, fx: Fixtures) -> None:
        for setup in setups:
            setup(folder, fx)
    return write


def minimalloc_rows(*rows: str, header: str = "id,lower,upper,size") -> Setup:
    return text("in.csv", header + "\n" + "".join(f"{r}\n" for r in rows))


# --------------------------------------------------------------------------- the cases


def cases() -> list[Case]:
    found: list[Case] = []

    def add(name, kind, args, codes=(1,), **more):
        found.append(Case(name, kind, tuple(args), tuple(codes), **more))

    out = ["-o", "{dir}/s.json"]
    # budgets
    for budget in ("abc", "-1", "0", "1.5e", "1e400", "nan", "inf", "700XB", "", " ", "0x10", "716800.5", "0.0",
                   "1e-30", "-0.5", "12KiBB"):
        add(f"--budget {budget!r}", "budget", ["solve", "{mlp}", "--budget", budget, *out])
    add("--budget 1MB fits", "budget", ["solve", "{mlp}", "--budget", "1MB", *out], (0,))
    add("--budget 1.0 fits", "budget", ["solve", "{mlp}", "--budget", "1.0", *out], (0,))
    add("--budget 10GB (no such unit)", "budget", ["solve", "{mlp}", "--budget", "10GB", *out])
    add("--budget below the floor", "budget", ["solve", "{mlp}", "--budget", "0.05", *out], (2,))
    add("--budget-total without a Deeploy target", "budget", ["solve", "{mlp}", "--budget-total", "L3=1MB", *out])
    add("--budget and --budget-total", "budget", ["solve", "{mlp}", "--budget", "0.7", "--budget-total", "L3=1MB",
                                                   *out])
    for total in ("L3=abc", "L3=0.5", "L3=-5", "L3=", "=1MB", "L4=1MB", "L1=1MB", "L3=1e400", "L2=1MB", "3MB"):
        add(f"--budget-total {total}", "budget", ["solve", "{cct}", "--target", "siracusa", "--budget-total", total,
                                                  *out], deeploy=True)
    add("--budget-total L2 on gap9", "budget", ["solve", "{cct}", "--target", "gap9", "--home", "L2",
                                                "--budget-total", "L2=1MB", *out], deeploy=True)
    add("--budget-total L2 without gvsoc", "budget", ["solve", "{cct}", "--target", "siracusa", "--home", "L2",
                                                      "--budget-total", "L2=1MB", "--costs", "estimate", *out],
        deeploy=True)
    add("--objective peak with --budget", "budget", ["solve", "{mlp}", "--objective", "peak", "--budget", "0.5",
                                                     *out], smoke=True)
    add("--objective peak with --budget-total", "budget", ["solve", "{cct}", "--target", "siracusa", "--objective",
                                                           "peak", "--cost-cap", "0", "--budget-total", "L3=15KB",
                                                           *out], deeploy=True)
    add("--cost-cap without --objective peak", "budget", ["solve", "{mlp}", "--cost-cap", "5", *out])
    add("--cost-cap -1", "budget", ["solve", "{mlp}", "--objective", "peak", "--cost-cap", "-1", *out])
    add("--objective peak --cost-cap 0", "budget", ["solve", "{mlp}", "--objective", "peak", "--cost-cap", "0",
                                                    *out], (0,))
    add("home L2 beyond the floor", "budget", ["solve", "{big}", "--target", "siracusa", "--home", "L2",
                                                "--budget", "0.9", *out], (2,), deeploy=True,
        says="more than the 2,031,616 B L2 gives")
    # solver options
    for args in (["--time-limit", "0"], ["--time-limit", "-1"], ["--time-limit", "nan"], ["--time-limit", "inf"],
                 ["--gap", "1"], ["--gap", "-0.1"], ["--gap", "nan"], ["--threads", "0"], ["--threads", "x"],
                 ["--method", "greedy", "--solver", "cbc"], ["--method", "greedy", "--gap", "0.1"],
                 ["--method", "greedy", "--threads", "1"], ["--order", "sideways"], ["--views", "x"],
                 ["--flow", "tiled"], ["--weights", "in-place"], ["--home", "L2"], ["--home", "L1"],
                 ["--target", "mars"], ["--costs", "gvsoc"]):
        add("solve " + " ".join(args), "options", ["solve", "{mlp}", *args, *out],
            )
    add("solve --threads 1000 is capped", "options", ["solve", "{mlp}", "--threads", "1000", "--budget", "1MB",
                                                      *out], (0,))
    add("solve --costs gvsoc on gap9", "options", ["solve", "{cct}", "--target", "gap9", "--costs", "gvsoc", *out],
        deeploy=True)
    add("solve --flow non-tiled --weights in-place", "options", ["solve", "{cct}", "--target", "siracusa",
                                                                 "--flow", "non-tiled", "--weights", "in-place",
                                                                 *out], deeploy=True)
    # cost files
    costs = [("missing", None), ("empty", text("c.json", "")), ("list", json_file("c.json", [])),
             ("empty object", json_file("c.json", {})), ("nested 100000", nested("c.json", 100000)),
             ("nested 40", nested("c.json", 40)), ("key twice", raw("c.json", '{"Gemm": {"per_mac": 1}, "Gemm": '
                                                                            '{"per_mac": 2}}')),
             ("inner key twice", raw("c.json", '{"Gemm": {"per_mac": 1, "per_mac": 2}}')),
             ("negative", json_file("c.json", {"Gemm": {"per_mac": -1}})),
             ("a string", json_file("c.json", {"Gemm": {"per_mac": "1"}})),
             ("a boolean", json_file("c.json", {"Gemm": {"per_mac": True}})),
             ("NaN", raw("c.json", '{"Gemm": {"per_mac": NaN}}')),
             ("huge", json_file("c.json", {"Gemm": {"per_mac": 1e300}})),
             ("unknown key", json_file("c.json", {"Gemm": {"per_mc": 1}})),
             ("not an object", json_file("c.json", {"Gemm": [1, 2]})),
             ("not UTF-8", text("c.json", b'{"Gemm\xff": {}}')), ("a folder", lambda d, fx: (d / "c.json").mkdir()),
             ("a pipe", fifo("c.json"))]
    for name, setup in costs:
        add(f"cost file: {name}", "cost files", ["solve", "{mlp}", "--costs", "{dir}/c.json", *out], setup=setup,
            smoke=name == "nested 100000")
    add("cost file: fine", "cost files", ["solve", "{mlp}", "--costs", "{dir}/c.json", "--budget", "1MB", *out], (0,),
        setup=json_file("c.json", {"Gemm": {"per_mac": 2.0, "per_elem": 0.5}}))
    add("cost file: the output", "cost files", ["solve", "{mlp}", "--costs", "{dir}/c.json", "-o", "{dir}/c.json"],
        setup=json_file("c.json", {"Gemm": {"per_mac": 2.0}}))
    add("sweep cost file: nested", "cost files", ["sweep", "--model", "{mlp}", "--costs", "{dir}/c.json", "-o",
                                                  "{dir}/sw"], setup=nested("c.json", 100000))
    # calibrations
    calibrations = [("step_cycles a string", {"step_cycles": "x"}), ("node_cycles a list", {"node_cycles": [1]}),
                    ("a node's cycles negative", {"node_cycles": {"a": -1}}),
                    ("a node's cycles a boolean", {"node_cycles": {"a": True}}),
                    ("errors negative", {"errors": -1}), ("code_bytes a float", {"code_bytes": 1.5}),
                    ("setup a list", {"setup": []}), ("model_sha256 a number", {"model_sha256": 5}),
                    ("target gap9", {"target": "gap9"}), ("target a list", {"target": ["siracusa"]}),
                    ("format 2", {"format": 2}), ("no key", {"key": None}), ("no total", {"total": None}),
                    ("a field ckpt never writes", {"extra": 1}), ("step_cycles NaN", {"step_cycles": float("nan")})]
    for name, change in calibrations:
        add(f"calibration: {name}", "calibrations", ["solve", "{mlp}", "--target", "siracusa", "--costs",
                                                     "{dir}/cal.json", *out], setup=calibration("cal.json", **change),
            smoke=name == "node_cycles a list")
    add("calibration: a key twice", "calibrations", ["solve", "{mlp}", "--costs", "{dir}/cal.json", *out],
        setup=raw("cal.json", '{"kind": "ckpt calibration", "kind": "ckpt calibration"}'))
    add("calibration: another model", "calibrations", ["solve", "{mlp}", "--target", "siracusa", "--costs",
                                                       "{dir}/cal.json", *out],
        setup=calibration("cal.json", model_sha256="0" * 64))
    add("calibration: for siracusa, solved for none", "calibrations", ["solve", "{mlp}", "--costs",
                                                                       "{dir}/cal.json", *out],
        setup=calibration("cal.json"))
    # schedules
    spoilt = [("a key twice", raw("t.json", '{"seq": [["a", 0]], "seq": [["b", 0]]}')),
              ("nested", text("t.json", '{"seq": [], "x": ' + "[" * 100000 + "]" * 100000 + "}")),
              ("nested 40", text("t.json", '{"seq": [["a", 0]], "x": ' + "[" * 40 + "]" * 40 + "}")),
              ("no seq", json_file("t.json", {"graph": {}})), ("empty seq", json_file("t.json", {"seq": []})),
              ("an entry of three", json_file("t.json", {"seq": [["a", 0, 1]]})),
              ("a flag 2", json_file("t.json", {"seq": [["a", 2]]})),
              ("a recompute first", json_file("t.json", {"seq": [["a", 1]]})),
              ("budget.bytes negative", schedule("t.json", lambda d: d["budget"].update(bytes=-5))),
              ("graph.target mars", schedule("t.json", lambda d: d["graph"].update(target="mars"))),
              ("predicted.checked nonsense", schedule("t.json", lambda d: d["predicted"].update(checked="x"))),
              ("budget.level L9", schedule("t.json", lambda d: d["budget"].update(level="L9"))),
              ("a fragment", schedule("t.json", lambda d: d.update(seq=d["seq"][:3]))),
              ("names of no graph", schedule("t.json", lambda d: d.update(seq=[[f"x{k}", 0] for k in
                                                                                range(len(d["seq"]))]))),
              ("not JSON", text("t.json", "seq: []")), ("a pipe", fifo("t.json")), ("missing", None)]
    for name, setup in spoilt:
        add(f"replay schedule: {name}", "schedules", ["replay", "{dir}/t.json", "--model", "{mlp}", "-o",
                                                      "{dir}/r"], setup=setup, smoke=name == "a key twice")
        if name in ("a key twice", "nested", "budget.bytes negative", "a fragment"):
            add(f"verify schedule: {name}", "schedules", ["verify", "{mlp}", "--schedule", "{dir}/t.json"],
                setup=setup)
            add(f"warm start: {name}", "schedules", ["solve", "{mlp}", "--budget", "1MB", "--warm-start",
                                                      "{dir}/t.json", *out], setup=setup)
    # models
    models = [("missing", "{dir}/none"), ("a folder without network.onnx", "{dir}/empty"),
              ("a text file", "{dir}/m.onnx"), ("an empty file", "{dir}/z.onnx"), ("a pipe", "{dir}/p.onnx")]
    model_setups = {"a folder without network.onnx": lambda d, fx: (d / "empty").mkdir(),
                    "a text file": text("m.onnx", "not onnx"), "an empty file": text("z.onnx", b""),
                    "a pipe": fifo("p.onnx")}
    for name, path in models:
        for command in (["solve", path, *out], ["inspect", path], ["verify", path],
                        ["sweep", "--model", path, "-o", "{dir}/sw"]):
            add(f"{command[0]} model: {name}", "models", command, setup=model_setups.get(name),
                )
    npz = [("inputs: float64 input", "inputs.npz", lambda a: {**a, "input": a["input"].astype(np.float64)}),
           ("inputs: a label out of range", "inputs.npz", lambda a: {**a, "labels": a["labels"] + 100}),
           ("inputs: an array missing", "inputs.npz", lambda a: {k: v for k, v in a.items() if k != "labels"}),
           ("outputs: another shape", "outputs.npz", lambda a: {k: v[..., :1] for k, v in a.items()})]
    for name, file, change in npz:
        for command in (["verify", "{dir}/model"], ["solve", "{dir}/model", *out]):
            add(f"{command[0]} step data: {name}", "step data", command,
                setup=model_copy("mlp", change=_respell_npz(file, change)))
    add("verify step data: not an npz", "step data", ["verify", "{dir}/model"],
        setup=model_copy("mlp", change=lambda f: (f / "inputs.npz").write_text("x")))
    # split steps (Deeploy's training branch)
    for command in (["solve", "{dir}/pair/simplemlp_train", *out], ["inspect", "{dir}/pair/simplemlp_train"],
                    ["verify", "{dir}/pair/simplemlp_train"],
                    ["replay", "{split_seq}", "--model", "{dir}/pair/simplemlp_train", "-o", "{dir}/r"],
                    ["sweep", "--model", "{dir}/pair/simplemlp_train", "--target", "none", "-o", "{dir}/sw"]):
        for name, change in (("an input of another shape", _reshape_input), ("an input of another type",
                                                                              _retype_input),
                             ("an update of another shape", _reshape_output)):
            add(f"{command[0]} pair: {name}", "split steps", command, setup=split_pair(change),
                reads=("train", "optimizer"),
                smoke=command[0] == "verify" and change is _retype_input)
    for command in (["solve", "{train}", "--optimizer", "{other_optimizer}", *out],
                    ["inspect", "{train}", "--optimizer", "{other_optimizer}"],
                    ["verify", "{train}", "--optimizer", "{other_optimizer}"],
                    ["replay", "{split_seq}", "--model", "{train}", "--optimizer", "{other_optimizer}", "-o",
                     "{dir}/r"],
                    ["solve", "{mlp}", "--optimizer", "{optimizer}", *out],
                    ["verify", "{train}", "--optimizer", "{train}"],
                    ["verify", "{train}", "--optimizer", "{dir}/none.onnx"]):
        add(f"{command[0]} another model's optimizer", "split steps", command)
    add("verify without its optimizer graph", "split steps", ["verify", "{lone}"], smoke=True)
    add("replay without its optimizer graph", "split steps", ["replay", "{split_seq}", "--model", "{lone}", "-o",
                                                              "{dir}/r"])
    add("sweep without its optimizer graph", "split steps", ["sweep", "--model", "{lone}", "--target", "none", "-o",
                                                             "{dir}/sw"])
    add("replay --no-verify without its optimizer graph", "split steps",
        ["replay", "{split_seq}", "--model", "{lone}", "--no-verify", "-o", "{dir}/r"], (0,))
    add("verify with outputs.npz lacking loss", "split steps", ["verify", "{dir}/pair/simplemlp_train"], (0, 1),
        setup=both(split_pair(lambda m: None), lambda d, fx: _no_loss(d / "pair" / "simplemlp_train")),
        reads=("train", "optimizer"),
        says="not compared: 1 tensor(s) the step writes that outputs.npz does not hold (loss)")
    add("verify the whole split step", "split steps", ["verify", "{train}"], (0,), says="update(s) by the optimizer")
    add("verify a split step on siracusa", "split steps", ["verify", "{train}", "--target", "siracusa"], (0,),
        deeploy=True, release=(1,))
    # options a mode ignores
    replay = ["replay", "{mlp_seq}", "--model", "{mlp}", "-o", "{dir}/r"]
    for extra in (["--steps", "2"], ["--gvsoc", "{dir}"], ["--deeploy-root", "{dir}"], ["--gvsoc-timeout", "5"],
                  ["--allocator", "tetris"], ["--home", "L2"], ["--no-verify", "--optimizer", "{optimizer}"],
                  ["--steps", "0"], ["--steps", "101"], ["--gvsoc-timeout", "0"], ["--gvsoc-timeout", "nan"],
                  ["--target", "mars"], ["--weights", "sideways"]):
        add("replay " + " ".join(extra), "ignored options", [*replay, *extra], smoke=extra[0] == "--steps" and
            extra[1] == "2")
    add("replay --steps 2 --no-verify on siracusa", "ignored options",
        ["replay", "{cct_seq}", "--model", "{cct}", "--steps", "2", "--no-verify", "-o", "{dir}/r"], deeploy=True)
    add("replay --gvsoc --no-simulate on siracusa", "ignored options",
        ["replay", "{cct_seq}", "--model", "{cct}", "--gvsoc", "{dir}", "--no-simulate", "-o", "{dir}/r"],
        deeploy=True)
    add("verify --force without --schedule", "ignored options", ["verify", "{mlp}", "--force"])
    sweep = ["sweep", "0.9:0.9", "--model", "{mlp}", "-o", "{dir}/sw"]
    for extra in (["--scheduler", "tcp://127.0.0.1:1", "--jobs", "2"], ["--ci-test-name", "Models/X"],
                  ["--gvsoc", "{dir}", "--no-simulate"], ["--gvsoc-timeout", "9", "--target", "none"],
                  ["--deeploy-root", "{dir}", "--no-verify"], ["--method", "greedy", "--solver", "cbc"],
                  ["--costs", "gvsoc", "--target", "none"], ["--allocator", "tetris", "--target", "none"],
                  ["--home", "L2", "--target", "none"], ["--weights", "in-place", "--target", "none"],
                  ["--scheduler", "localhost"], ["--jobs", "-1"], ["--step", "0"], ["--points", "0"],
                  ["--points", "101"], ["--step", "0.1", "--points", "2"], ["--time-limit", "0"]):
        add("sweep " + " ".join(extra), "ignored options", [*sweep, *extra])
    add("sweep --ci-test-name for two models", "ignored options",
        ["sweep", "--model", "{mlp}", "--model", "{train}", "--emit-ci", "{dir}/e", "--ci-test-name", "X", "-o",
         "{dir}/sw"])
    for budgets in ("a:b", "0.9:0.6", "0:1", "0.5:1.5", "0.9", ":", "0.6:0.9:0.1", "nan:0.9"):
        add(f"sweep range {budgets}", "ignored options", ["sweep", budgets, "--model", "{mlp}", "-o", "{dir}/sw"])
    add("sweep step 0.001 (too many)", "ignored options", ["sweep", "0.1:0.9", "--step", "0.001", "--model",
                                                          "{mlp}", "-o", "{dir}/sw"])
    # output paths
    for name, path, setup in (("a folder", "{dir}/d", lambda d, fx: (d / "d").mkdir()),
                              ("below a file", "{dir}/f/s.json", text("f", "mine")),
                              ("empty", "", None), ("ends with /", "{dir}/new/", None),
                              ("/dev/full", "/dev/full", None), ("the model", "{dir}/m/network.onnx",
                                                                 model_copy("mlp", "m")),
                              ("a warm start", "{dir}/w.json", lambda d, fx: shutil.copy(fx["mlp_seq"], d / "w.json"))):
        args = ["solve", "{dir}/m" if name == "the model" else "{mlp}", "-o", path]
        if name == "a warm start":
            args += ["--warm-start", "{dir}/w.json"]
        add(f"solve -o {name}", "outputs", args, setup=setup)
    add("replay into a user's folder", "outputs", [*replay], setup=folder_with("notes.txt", under="r"))
    add("replay into a file", "outputs", [*replay], setup=text("r", "mine"))
    add("replay onto its own schedule", "outputs", ["replay", "{dir}/r/order.json", "--model", "{mlp}", "-o",
                                                    "{dir}/r", "--overwrite"],
        setup=lambda d, fx: (d / "r").mkdir() or shutil.copy(fx["mlp_seq"], d / "r" / "order.json"))
    add("calibrate -o a folder", "outputs", ["calibrate", "{mlp}", "-o", "{dir}"])
    add("calibrate -o the model", "outputs", ["calibrate", "{dir}/m", "-o", "{dir}/m/network.onnx"],
        setup=model_copy("mlp", "m"))
    add("example -o a file", "outputs", ["example", "mlp", "-o", "{dir}/f"], setup=text("f", "mine"))
    add("example over another model", "outputs", ["example", "mlp", "--layers", "2", "-o", "{dir}/m"],
        setup=model_copy("mlp", "m"))
    add("example --heads for an mlp", "outputs", ["example", "mlp", "--heads", "4", "-o", "{dir}/e"])
    add("example too big", "outputs", ["example", "mlp", "--width", "16384", "--layers", "256", "-o", "{dir}/e"])
    add("example --blocks -1", "outputs", ["example", "cct", "--blocks", "-1", "-o", "{dir}/e"])
    add("example of no kind", "outputs", ["example", "gan", "-o", "{dir}/e"])
    add("ci check into a user's folder", "outputs", ["ci", "check", "--outdir", "{dir}/o"],
        setup=folder_with("notes.txt", under="o"))
    add("inspect --top -1", "outputs", ["inspect", "{mlp}", "--top", "-1"])
    # sweep folders
    for names in (["sweep.md"], ["sweep.csv"], ["points/"], ["sweep.lock"], ["sweep.log"], ["sweep.json"],
                  ["pareto.png"], ["sweep.md", "points/", "sweep.lock"]):
        add("sweep into a folder holding " + ", ".join(names), "sweep folders",
            ["sweep", "0.9:0.9", "--model", "{mlp}", "--target", "none", "-o", "{dir}/out"],
            setup=folder_with(*names), smoke=names == ["sweep.lock"])
    add("sweep into a folder with a user's sweep.json of ckpt's shape", "sweep folders",
        ["sweep", "0.9:0.9", "--model", "{mlp}", "--target", "none", "-o", "{dir}/out"],
        setup=both(folder_with(), json_file("out/sweep.json", {"points": [], "target": "none"})))
    add("sweep refused after the lock: no folder left", "sweep folders",
        ["sweep", "0.9:0.9", "--model", "{mlp}", "--costs", "gvsoc", "-o", "{dir}/new"], deeploy=True)
    add("sweep into an emit-ci folder of the user's", "sweep folders",
        ["sweep", "0.9:0.9", "--model", "{mlp}", "--emit-ci", "{dir}/e", "-o", "{dir}/sw"], (0,),
        setup=folder_with("DeeployTest/", under="e"), deeploy=True, reads=("mlp_lowered",))
    add("sweep into a file", "sweep folders", ["sweep", "--model", "{mlp}", "-o", "{dir}/f"], setup=text("f", "x"))
    add("sweep --no-verify into a new folder", "sweep folders",
        ["sweep", "0.9:0.9", "--model", "{mlp}", "--target", "none", "--no-verify", "-o", "{dir}/new"], (0,),
        says="cycles: - for every point: not simulated")
    # gvsoc
    for command in (["replay", "{cct_seq}", "--model", "{cct}", "-o", "{dir}/r", "--gvsoc", "{dir}/gv"],
                    ["sweep", "0.9:0.9", "--model", "{cct}", "-o", "{dir}/sw", "--gvsoc", "{dir}/gv"],
                    ["calibrate", "{cct}", "--gvsoc", "{dir}/gv"]):
        add(f"{command[0]}: bin/gvsoc not executable", "gvsoc", command, setup=gvsoc_install(False), deeploy=True)
        add(f"{command[0]}: --gvsoc an empty folder", "gvsoc", command,
            setup=lambda d, fx: (d / "gv").mkdir(), deeploy=True)
    add("$GVSOC_INSTALL not a gvsoc", "gvsoc", ["sweep", "--model", "{mlp}", "-o", "{dir}/sw"],
        env={"GVSOC_INSTALL": "/nonexistent"})
    add("calibrate with gvsoc off", "gvsoc", ["calibrate", "{cct}"], deeploy=True)
    add("calibrate --gvsoc-timeout -1", "gvsoc", ["calibrate", "{mlp}", "--gvsoc-timeout", "-1"])
    add("a gvsoc that hangs", "gvsoc", ["replay", "{cct_seq}", "--model", "{cct}", "-o", "{dir}/r", "--gvsoc",
                                        "{dir}/gv", "--gvsoc-timeout", "3"], (1,), setup=gvsoc_install(True),
        deeploy=True, says="printed nothing for 3 s after its last line: the fake gvsoc starts", keeps=True)
    add("a gvsoc that fails", "gvsoc", ["replay", "{cct_seq}", "--model", "{cct}", "-o", "{dir}/r", "--gvsoc",
                                        "{dir}/gv"], (1,),
        setup=gvsoc_install(True, "#!/bin/sh\necho 'Platform returned an error (exitcode: 1)'\nexit 1\n"),
        deeploy=True, says="gvsoc's output is in gvsoc-tiled.log", keeps=True)
    # level totals replayed
    add("replay of a level total on target none", "budgets", ["replay", "{level_seq}", "--model", "{mlp}", "-o",
                                                              "{dir}/r"], (0,),
        says="budget: total_L3 replayed n/a against the schedule's 15,360 B: not checked")
    # minimalloc
    rows = [("a negative lower", ("a,-5,2,8",)), ("a negative size", ("a,0,2,-8",)),
            ("a 20-digit size", ("a,0,2,99999999999999999999",)), ("a 20-digit upper", ("a,0,99999999999999999999,8",)),
            ("a fractional size", ("a,0,2,8.5",)), ("size 1e30", ("a,0,2,1e30",)), ("size nan", ("a,0,2,nan",)),
            ("size inf", ("a,0,2,inf",)), ("three columns", ("a,0,2",)), ("an empty lifetime", ("a,2,2,8",)),
            ("a hex size", ("a,0,2,0x10",)), ("a block twice", ("a,0,2,8", "a,1,3,8")),
            ("upper before lower", ("a,5,2,8",)), ("a word", ("a,zero,2,8",))]
    for name, spoilt_rows in rows:
        add(f"minimalloc: {name}", "minimalloc", ["--capacity", "1000", "--input", "{dir}/in.csv", "--output",
                                                  "{dir}/out.csv"], setup=minimalloc_rows(*spoilt_rows),
            program="minimalloc")
    for name, args, setup in (("no header", ["--capacity", "9"], text("in.csv", "a,0,2,8\n")),
                              ("capacity negative", ["--capacity", "-1"], minimalloc_rows("a,0,2,8")),
                              ("capacity a word", ["--capacity", "x"], minimalloc_rows("a,0,2,8")),
                              ("alignment 0", ["--capacity", "9", "--alignment", "0"], minimalloc_rows("a,0,2,8")),
                              ("not UTF-8", ["--capacity", "9"], text("in.csv", b"id,lower,upper,size\n\xff,0,2,8\n")),
                              ("an empty file", ["--capacity", "9"], text("in.csv", ""))):
        add(f"minimalloc: {name}", "minimalloc", [*args, "--input", "{dir}/in.csv", "--output", "{dir}/out.csv"],
            setup=setup, program="minimalloc")
    add("minimalloc: does not fit", "minimalloc", ["--capacity", "4", "--input", "{dir}/in.csv", "--output",
                                                   "{dir}/out.csv"], (2,), setup=minimalloc_rows("a,0,2,8"),
        program="minimalloc")
    add("minimalloc: output is the input", "minimalloc", ["--capacity", "99", "--input", "{dir}/in.csv", "--output",
                                                          "{dir}/in.csv"], setup=minimalloc_rows("a,0,2,8"),
        program="minimalloc")
    # Deeploy's training branch (its conv nets lower only with the branch installed; the release refuses them)
    zoo = shared_models()
    r8, ds = str(zoo / "resnet8_train"), str(zoo / "dscnn_train")
    add("training branch: inspect resnet8 on siracusa", "training branch", ["inspect", r8, "--target", "siracusa"],
        (0,), deeploy=True, release=(1,))
    add("training branch: solve dscnn on siracusa", "training branch", ["solve", "--costs", "estimate", ds,
        "--target", "siracusa",
                                                                        "--budget", "0.8", *out], (0,),
        deeploy=True, release=(1,))
    add("training branch: verify dscnn on siracusa", "training branch", ["verify", ds, "--target", "siracusa"],
        (0,), deeploy=True, release=(1,))
    add("training branch: sweep dscnn on siracusa", "training branch",
        ["sweep", "0.9:0.9", "--model", ds, "-o", "{dir}/sw"], (0,), deeploy=True, release=(1,))
    add("training branch: replay dscnn's schedule on siracusa with a host check", "training branch",
        ["replay", "{dir}/s.json", "--model", ds, "-o", "{dir}/r"], (0,), deeploy=True, release=(1,),
        setup=lambda d, fx: _ckpt("solve", "--costs", "estimate", ds, "--target", "siracusa", "--budget", "0.8",
                                  "-o", str(d / "s.json")))
    add("training branch: replay --no-verify of dscnn on siracusa", "training branch",
        ["replay", "{dir}/s.json", "--model", ds, "--no-verify", "--target", "siracusa", "-o", "{dir}/r"], (0,),
        deeploy=True, release=(1,), setup=lambda d, fx: _ckpt("solve", "--costs", "estimate", ds, "--target",
                                                              "siracusa", "--budget", "0.8",
                                                               "-o", str(d / "s.json")))
    add("training branch: solve resnet8 with dscnn's optimizer", "training branch",
        ["solve", r8, "--target", "siracusa", "--optimizer", str(zoo / "dscnn_optimizer"), *out], deeploy=True)
    add("training branch: inspect cct_lora on siracusa, home L2 (Deeploy's failure in one line)", "training branch",
        ["inspect", str(zoo / "cct_lora_train"), "--target", "siracusa", "--home", "L2"], (0, 1), deeploy=True,
        release=(1,))
    add("training branch: solve cct_lora, home L2 (Deeploy's failure in one line)", "training branch",
        ["solve", "--costs", "estimate", str(zoo / "cct_lora_train"), "--target", "siracusa", "--home", "L2",
         "--budget", "0.7", *out],
        (0, 1, 2), deeploy=True, release=(1,))
    add("training branch: verify resnet8 with its optimizer", "training branch", ["verify", r8], (0,),
        says="Errors: 0 out of 78046")
    # the command line itself
    add("no command", "command line", [], (0,))
    add("an unknown command", "command line", ["solver"])
    add("an unknown option", "command line", ["solve", "--budgett", "0.7"])
    add("$CKPT_CACHE_DIR a file", "command line", ["inspect", "{mlp}"], env={"CKPT_CACHE_DIR": "{dir}/cache"},
        setup=text("cache", "x"))
    found += round_five_tracebacks() + round_five_silent_acceptance()
    return found


# --------------------------------------------------------------------------- round five: tracebacks


PAIR = "{dir}/pair/simplemlp_train"        # the split step a case copies for itself (split_pair, split_data)
SPLIT_READS = ("train", "optimizer")


def split_data(file: str, change: Callable[[dict], dict]) -> Setup:
    """The split step copied as <dir>/pair/simplemlp_{train,optimizer}, its inputs.npz or outputs.npz changed."""
    def write(folder: Path, fx: Fixtures) -> None:
        split_pair(lambda model: None)(folder, fx)
        _respell_npz(file, change)(folder / "pair" / "simplemlp_train")
    return write


def round_five_tracebacks() -> list[Case]:
    """Round five's tracebacks and their class: a folder the kernel refuses new files in (/sys, /proc: as root,
    os.access says yes), and the bench scripts' bad arguments, refused as the CLI refuses them."""
    found: list[Case] = []

    def add(name, args, codes=(1,), **more):
        found.append(Case(name, "round 5 tracebacks", tuple(args), tuple(codes), **more))

    for output in ("/sys/x.json", "/proc/x.json", "/sys/a/b/x.json", "/proc/self/x.json"):
        add(f"solve -o {output}", ["solve", "{mlp}", "--budget", "1.0", "-o", output], says="cannot be")
    add("sweep -o /sys/sw", ["sweep", "0.9:0.9", "--model", "{mlp}", "--target", "none", "-o", "/sys/sw"],
        says="refuses new files")
    add("example -o /proc/ex", ["example", "mlp", "-o", "/proc/ex"], says="refuses new files")
    add("replay -o /sys/r", ["replay", "{mlp_seq}", "--model", "{mlp}", "-o", "/sys/r"], says="refuses new files")
    add("calibrate -o /sys/c.json", ["calibrate", "{mlp}", "-o", "/sys/c.json"], says="refuses new files")
    add("$CKPT_CACHE_DIR under /sys", ["inspect", "{mlp}"], env={"CKPT_CACHE_DIR": "/sys/ckpt-cache"},
        says="refuses new files")
    add("$CKPT_CACHE_DIR under /proc", ["solve", "--budget", "0.9", "-o", "{dir}/s.json"],
        env={"CKPT_CACHE_DIR": "/proc/ckpt-cache"}, says="refuses new files")
    benches = [("peer_policies", ["--range", "abc"]), ("peer_policies", ["--range", "0.9:0.5"]),
               ("peer_policies", ["--model", "{dir}/nowhere"]), ("peer_policies", ["--model", "{mlp}"]),
               ("peer_policies", ["--time-limit", "-5"]), ("peer_policies", ["--home", "L1"]),
               ("zoo", ["--range", "2:3"]), ("zoo", ["--model", "{dir}/nowhere"]), ("zoo", ["--model", "{mlp}"]),
               ("zoo", ["--jobs", "-1"]), ("zoo", ["--time-limit", "0"]), ("zoo", ["--jobs", "x"]),
               ("sweep", ["--jobs", "-1"]), ("sweep", ["--range", "0.9:0.5"]), ("gvsoc", ["--time-limit", "nan"]),
               ("level_total", ["--budgets", "1:2"]), ("solvers", ["--budgets", "abc"]),
               ("solvers", ["--solvers", "gurobi"]), ("stages", ["--budgets", "0.9,x"]),
               ("fidelity", ["--methods", "foo"]), ("decisive", ["--fractions", "2"]),
               ("decisive", ["--time-limit", "-1"]), ("arena", ["--model", "{dir}/nowhere"]),
               ("coderun", ["--budgets", "0"]), ("scale", ["--solvers", "gurobi"]),
               ("first_command", ["--bogus"])]
    for script, args in benches:
        outdir = ["-o", "{dir}/out"] if script == "peer_policies" else \
            ["--outdir", "{dir}/out"] if script in ("zoo", "sweep", "gvsoc") else []
        add(f"bench/{script}.py {' '.join(args)}", [*args, *outdir], program=f"bench/{script}.py")
    return found


# --------------------------------------------------------------------------- round five: silent acceptance


def _update_only_the_first(model: onnx.ModelProto) -> None:
    dropped = model.graph.node[1]
    del model.graph.node[1]
    for kept in (model.graph.input, model.graph.output):
        values = [v for v in kept if v.name not in (*dropped.input, *dropped.output)]
        del kept[:]
        kept.extend(values)


def _read_another_weight(model: onnx.ModelProto) -> None:
    for info in model.graph.input:
        if info.name == "fc1_weight":
            info.name = "fc9_weight"
    for node in model.graph.node:
        node.input[:] = ["fc9_weight" if name == "fc1_weight" else name for name in node.input]


def _read_a_stranger(model: onnx.ModelProto) -> None:
    model.graph.input.append(onnx.helper.make_tensor_value_info("stranger", onnx.TensorProto.FLOAT, [8, 64]))
    model.graph.node.append(onnx.helper.make_node("Identity", ["stranger"], ["stranger_copy"], name="copy"))


SPOILT_SPLIT_DATA = [
    ("outputs.npz empty", "outputs.npz", lambda a: {}),
    ("outputs.npz positional", "outputs.npz", lambda a: {f"arr_{i:04d}": v for i, v in enumerate(a.values())}),
    ("a float64 golden", "outputs.npz", lambda a: {**a, "fc1_weight": a["fc1_weight"].astype(np.float64)}),
    ("a transposed golden", "outputs.npz", lambda a: {**a, "fc2_weight": a["fc2_weight"].T.copy()}),
    ("a loss of 3 values for 4 mini-batches", "outputs.npz", lambda a: {**a, "loss": a["loss"][:3]}),
    ("none of what the step writes", "outputs.npz", lambda a: {k: a[k] for k in ("fc1_bias", "fc2_bias")}),
    ("meta_n_batches 10, data and loss for 4", "inputs.npz",
     lambda a: {**a, "meta_n_batches": np.array([10], np.int32)}),
    ("meta_n_batches 0", "inputs.npz", lambda a: {**a, "meta_n_batches": np.array([0], np.int32)}),
    ("meta_n_batches -1", "inputs.npz", lambda a: {**a, "meta_n_batches": np.array([-1], np.int32)}),
    ("meta_n_batches 4.5", "inputs.npz", lambda a: {**a, "meta_n_batches": np.array([4.5])}),
    ("meta_n_accum 0", "inputs.npz", lambda a: {**a, "meta_n_accum": np.array([0], np.int32)}),
    ("meta_n_accum above meta_n_batches", "inputs.npz", lambda a: {**a, "meta_n_accum": np.array([8], np.int32)}),
    ("meta_data_size 0", "inputs.npz", lambda a: {**a, "meta_data_size": np.array([0], np.int32)}),
    ("mb2_arr_0000 missing", "inputs.npz", lambda a: {k: v for k, v in a.items() if k != "mb2_arr_0000"}),
    ("mb9_arr_0000 beyond meta_data_size", "inputs.npz", lambda a: {**a, "mb9_arr_0000": a["mb1_arr_0000"]}),
    ("a weight varied by mini-batch 2 alone", "inputs.npz", lambda a: {**a, "mb2_arr_0002": a["arr_0002"]}),
]


def round_five_silent_acceptance() -> list[Case]:
    """Round five's silent acceptance and its class: an optimizer graph that does not update the train graph's
    weights, a split step's goldens and mini-batch data held as strictly as a single graph's, options a mode
    ignores, a level total beyond what the level has, both ends of a range run, and the sweep's calibration held
    to --gvsoc-timeout."""
    found: list[Case] = []

    def add(name, args, codes=(1,), **more):
        found.append(Case(name, "round 5 silent acceptance", tuple(args), tuple(codes), **more))

    out = ["-o", "{dir}/s.json"]
    for what, change in (("updates one of two weights", _update_only_the_first),
                         ("computes an update from another weight", _read_another_weight),
                         ("reads a tensor neither graph holds", _read_a_stranger)):
        for command in (["verify"], ["inspect"], ["solve", "--budget", "1.0", *out]):
            add(f"{command[0]}: the optimizer graph {what}", [command[0], PAIR, *command[1:]],
                setup=split_pair(change), reads=SPLIT_READS)
    for what, file, change in SPOILT_SPLIT_DATA:
        add(f"verify: split step, {what}", ["verify", PAIR], setup=split_data(file, change), reads=SPLIT_READS)
    for what, file, change in SPOILT_SPLIT_DATA[:2] + SPOILT_SPLIT_DATA[6:7] + SPOILT_SPLIT_DATA[13:14]:
        add(f"solve: split step, {what}", ["solve", PAIR, "--budget", "1.0", *out], setup=split_data(file, change),
            reads=SPLIT_READS)
    add("replay --target none: split step, outputs.npz empty", ["replay", "{split_seq}", "--model", PAIR,
                                                                 "--target", "none", "-o", "{dir}/r"],
        setup=split_data("outputs.npz", lambda a: {}), reads=SPLIT_READS)
    add("replay --steps 2 on a split step", ["replay", "{dir}/s.json", "--model", PAIR, "--steps", "2", "-o",
                                             "{dir}/r"], deeploy=True, reads=SPLIT_READS,
        setup=both(split_pair(lambda model: None), lambda d, fx: _ckpt(
            "solve", "--costs", "estimate", str(d / "pair" / "simplemlp_train"), "--target", "siracusa", "--budget",
            "1.0", "-o",
            str(d / "s.json"))))     # with the release: refused too, saying the training branch is needed
    for target, home, total in (("siracusa", "L2", "L2=5MB"), ("siracusa", "L3", "L3=9MB"), ("gap9", "L2", "L2=1.6MB"),
                                ("siracusa", "L2", "L2=2031617")):
        add(f"--budget-total {total} on {target} beyond the level", ["solve", "{mlp}", "--target", target, "--home",
                                                                     home, "--budget-total", total, *out],
            says="gives data")
    add("--flow non-tiled with --budget-total", ["solve", "{mlp}", "--target", "siracusa", "--flow", "non-tiled",
                                                 "--budget-total", "L3=8KB", *out], says="--flow non-tiled")
    for option in (["--warm-start", "{mlp_seq}"], ["--method", "greedy"], ["--time-limit", "5"], ["--order", "graph"],
                   ["--views", "fixed"], ["--gap", "0.1"], ["--threads", "1"], ["--solver", "cbc"]):
        add(f"--policy top-k {option[0]}", ["solve", "{mlp}", "--policy", "top-k", "--k", "1", *option, *out],
            says=option[0])
    add("sweep 0.85:0.9 runs both ends", ["sweep", "0.85:0.9", "--model", "{mlp}", "--target", "none",
                                          "--no-verify", "-o", "{dir}/sw"], (0,), says="3 point(s) run")
    add("sweep 0.8:0.9 --step 0.06 runs 0.8", ["sweep", "0.8:0.9", "--step", "0.06", "--model", "{mlp}", "--target",
                                              "none", "--no-verify", "-o", "{dir}/sw"], (0,), says="4 point(s) run")
    add("sweep --step 1e-12 (too many budgets)", ["sweep", "0.1:0.9", "--step", "1e-12", "--model", "{mlp}",
                                                  "-o", "{dir}/sw"], says="more than 100")
    add("sweep --gvsoc-timeout 0.01 holds the calibration", ["sweep", "0.9:0.9", "--model", "{cct}", "--gvsoc-timeout",
                                                            "0.01", "-o", "{dir}/sw"], (0, 1), deeploy=True,
        env={"GVSOC_INSTALL": str(Path(__file__).resolve().parents[2] / "shared" / "gvsoc" / "install")},
        says="op costs: the built-in estimate", keeps=True)
    return found


# ------------------------------------------------------------------ round five: user files, messages, exit codes


def _linked(name: str, to: str) -> Setup:
    """A symlink `name` in the case's folder to `to` (a path in it)."""
    return lambda folder, fx: (folder / name).symlink_to(folder / to)


def _subfolder(model: str, name: str = "sub") -> Setup:
    """An empty folder inside the case's copy of a model: reached as MODEL/sub/.., a folder named '..'."""
    return lambda folder, fx: (folder / model / name).mkdir()


def _split_copy(name: str = "pair") -> Setup:
    """The split step copied as <dir>/<name>/simplemlp_{train,optimizer}."""
    def write(folder: Path, fx: Fixtures) -> None:
        shutil.copytree(fx["train"], folder / name / "simplemlp_train")
        shutil.copytree(fx["optimizer"], folder / name / "simplemlp_optimizer")
    return write


def _lone_copy(name: str) -> Setup:
    """The split step's train folder alone, under a name not ending in _train (its optimizer graph not found)."""
    return lambda folder, fx: shutil.copytree(fx["train"], folder / name)


def empty_step(folder: Path) -> Path:
    """A training step (a forward op and its gradient) whose every tensor has a dimension of 0: 0 B of activations,
    so a baseline peak of 0."""
    shape = [0, 8]
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)
    g = onnx.helper.make_tensor_value_info("g", onnx.TensorProto.FLOAT, shape)
    nodes = [onnx.helper.make_node("Relu", ["x"], ["a"], name="act"),
             onnx.helper.make_node("ReluGrad", ["a", "x"], ["g"], name="act_grad", domain="com.microsoft")]
    graph = onnx.helper.make_graph(nodes, "empty", [x], [g], value_info=[
        onnx.helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, shape)])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17),
                                                         onnx.helper.make_opsetid("com.microsoft", 1)])
    folder.mkdir(parents=True)
    onnx.save(model, folder / "network.onnx")
    np.savez(folder / "inputs.npz", x=np.ones(shape, np.float32))
    np.savez(folder / "outputs.npz", g=np.ones(shape, np.float32))
    return folder


def shapeless_mlp(folder: Path) -> Path:
    """The built-in MLP example with its value_info dropped: no tensor an op computes has a declared shape."""
    write_example("mlp", folder, layers=2, width=8)
    model = onnx.load(folder / "network.onnx")
    del model.graph.value_info[:]
    onnx.save(model, folder / "network.onnx")
    return folder


def _swap_sgd_inputs(model: onnx.ModelProto) -> None:
    node = model.graph.node[0]
    node.input[0], node.input[1] = node.input[1], node.input[0]


def round_five_cases() -> list[Case]:
    """Issue 54's defects 16 to 33 and more of their classes: no user file touched (an output folder that is an
    input's), nothing half-made left, the exit code a failure deserves, and messages that name what was given."""
    found: list[Case] = []

    def add(name, kind, args, codes=(1,), **more):
        found.append(Case(name, kind, tuple(args), tuple(codes), **more))

    out = ["-o", "{dir}/s.json"]
    files, said, ends = "r5 user files", "r5 messages", "r5 exit codes"
    # 16: an output folder that is an input's folder, with or without --overwrite
    for over in ([], ["--overwrite"]):
        flag = " --overwrite" if over else ""
        add(f"replay -o the model's folder{flag}", files,
            ["replay", "{mlp_seq}", "--model", "{dir}/model", "-o", "{dir}/model", *over], setup=model_copy("mlp"),
            says="is the folder of the model")
        add(f"replay -o a symlink to the model's folder{flag}", files,
            ["replay", "{mlp_seq}", "--model", "{dir}/model", "-o", "{dir}/link", *over],
            setup=both(model_copy("mlp"), _linked("link", "model")), says="is the folder of the model")
        add(f"replay --model network.onnx -o its folder{flag}", files,
            ["replay", "{mlp_seq}", "--model", "{dir}/model/network.onnx", "-o", "{dir}/model", *over],
            setup=model_copy("mlp"), says="is the folder of the model")
        add(f"replay -o the split step's train folder{flag}", files,
            ["replay", "{split_seq}", "--model", "{dir}/pair/simplemlp_train", "--target", "none", "-o",
             "{dir}/pair/simplemlp_train", *over], setup=_split_copy(), reads=("train", "optimizer"),
            says="is the folder of the model")
        add(f"replay -o the split step's optimizer folder{flag}", files,
            ["replay", "{split_seq}", "--model", "{dir}/pair/simplemlp_train", "--target", "none", "-o",
             "{dir}/pair/simplemlp_optimizer", *over], setup=_split_copy(), reads=("train", "optimizer"),
            says="is the folder of its optimizer graph")
        add(f"replay --optimizer -o that optimizer's folder{flag}", files,
            ["replay", "{split_seq}", "--model", "{dir}/pair/simplemlp_train", "--target", "none", "--optimizer",
             "{dir}/pair/simplemlp_optimizer", "-o", "{dir}/pair/simplemlp_optimizer", *over],
            setup=_split_copy(), reads=("train", "optimizer"), says="is the folder of its optimizer graph")
        add(f"sweep -o the model's folder{flag}", files,
            ["sweep", "0.9:0.9", "--model", "{dir}/model", "--target", "none", "-o", "{dir}/model", *over],
            setup=model_copy("mlp"), says="is the folder of the model")
        add(f"sweep -o a symlink to the model's folder{flag}", files,
            ["sweep", "0.9:0.9", "--model", "{dir}/model", "--target", "none", "-o", "{dir}/link", *over],
            setup=both(model_copy("mlp"), _linked("link", "model")), says="is the folder of the model")
        add(f"sweep -o the split step's optimizer folder{flag}", files,
            ["sweep", "0.9:0.9", "--model", "{dir}/pair/simplemlp_train", "--target", "none", "-o",
             "{dir}/pair/simplemlp_optimizer", *over], setup=_split_copy(), reads=("train", "optimizer"),
            says="is the folder of its optimizer graph")
    add("sweep of two models -o the folder holding one, --overwrite", files,
        ["sweep", "0.9:0.9", "--model", "{dir}/model", "--model", "{dir}/other", "--target", "none", "-o", "{dir}",
         "--overwrite"], setup=both(model_copy("mlp"), model_copy("mlp", "other")),
        says="is the folder of the model")
    add("sweep --model network.onnx -o its folder", files,
        ["sweep", "0.9:0.9", "--model", "{dir}/model/network.onnx", "--target", "none", "-o", "{dir}/model"],
        setup=model_copy("mlp"), says="is the folder of the model")
    # 31: a missing input is said missing (not "is not a schedule file (FileNotFoundError ...)")
    for name, args in (("replay of a missing schedule", ["replay", "{dir}/nope.json", "--model", "{mlp}"]),
                       ("verify --schedule missing", ["verify", "{mlp}", "--schedule", "{dir}/nope.json"]),
                       ("solve --warm-start missing", ["solve", "{mlp}", "--warm-start", "{dir}/nope.json", *out]),
                       ("sweep --costs missing", ["sweep", "--model", "{mlp}", "--costs", "{dir}/nope.json", "-o",
                                                  "{dir}/sw"]),
                       ("calibrate-free solve --costs missing", ["solve", "{mlp}", "--costs", "{dir}/nope.json",
                                                                 *out])):
        add(name, said, args, says="there is no such file")
    add("replay of a schedule symlinked to nothing", said, ["replay", "{dir}/link.json", "--model", "{mlp}"],
        setup=lambda d, fx: (d / "link.json").symlink_to(d / "gone.json"), says="a symlink to nothing")
    add("minimalloc --input missing", said, ["--capacity", "9", "--input", "{dir}/nope.csv", "--output",
                                             "{dir}/out.csv"], program="minimalloc", says="no --input at")
    # 30: an example option that does not apply lists only options that exist
    for kind, option, listed in (("mlp", "--blocks", "mlp takes: --layers, --width, --batch, --seed"),
                                 ("cct", "--layers", "cct takes: --blocks, --embed-dim"),
                                 ("resnet", "--width", "resnet takes: --blocks, --channels, --image-size"),
                                 ("mlp", "--heads", "mlp takes: --layers, --width, --batch, --seed"),
                                 ("resnet", "--train", "resnet takes: --blocks")):
        add(f"example {kind} {option}", said, ["example", kind, "-o", "{dir}/ex", option, "2"], says=listed)
    # 22: a conflict names only the options given
    for args, says in ((["--target", "none", "--flow", "tiled"], "--flow tiled holds a tiled Deeploy deployment"),
                       (["--target", "none", "--budget-total", "L3=1MB"], "--budget-total L3=1MB holds"),
                       (["--policy", "branch-rule", "--objective", "peak"], "--objective peak would be ignored"),
                       (["--policy", "top-k", "--objective", "peak"], "--policy top-k needs --k"),
                       (["--policy", "top-k", "--k", "1", "--objective", "peak"], "drop --objective peak"),
                       (["--policy", "top-k", "--k", "1", "--budget", "0.5"], "--budget 0.5 would be ignored"),
                       (["--k", "3"], "--k 3 does nothing without --policy top-k"),
                       (["--k", "3", "--budget", "0.5"], "add --policy top-k, or drop --k")):
        add("solve " + " ".join(args), said, ["solve", "{mlp}", *args, *out], says=says)
    add("solve --target siracusa --policy branch-rule --budget-total", said,
        ["solve", "{cct}", "--target", "siracusa", "--policy", "branch-rule", "--budget-total", "L3=1MB", *out],
        deeploy=True, says="drop --budget-total")
    # 20: top-k does what K says, or says why not
    add("top-k --k 2 on a graph with one candidate", said, ["solve", "{train}", "--target", "none", "--policy",
                                                            "top-k", "--k", "2", *out], says="give --k 1")
    add("top-k --k 1000", said, ["solve", "{mlp}", "--policy", "top-k", "--k", "1000", *out],
        says="forward node(s) of this graph free bytes when recomputed")
    add("top-k --k 1 fits", said, ["solve", "{mlp}", "--policy", "top-k", "--k", "1", *out], (0,))
    # 29: '.' and '..' are folders with a name; a split step whose optimizer is not found is said
    add("verify MODEL/sub/.. finds the sibling optimizer", said, ["verify", "pair/simplemlp_train/sub/.."], (0,),
        setup=both(_split_copy(), _subfolder("pair/simplemlp_train")), reads=("train", "optimizer"),
        says="Errors: 0 out of")
    add("solve MODEL/sub/.. keeps the optimizer", said, ["solve", "pair/simplemlp_train/sub/..", "--target", "none",
                                                        "--budget", "1.0", *out], (0,),
        setup=both(_split_copy(), _subfolder("pair/simplemlp_train")), reads=("train", "optimizer"),
        says="the optimizer graph (2 nodes) runs after this one")
    add("solve a split step not named *_train", said, ["solve", "{dir}/mlpstep", "--target", "none", "--budget",
                                                      "1.0", *out], (0,), setup=_lone_copy("mlpstep"),
        reads=("train",), says="is a split step whose optimizer graph is absent")
    add("inspect a split step not named *_train", said, ["inspect", "{dir}/mlpstep", "--target", "none"], (0,),
        setup=_lone_copy("mlpstep"), reads=("train",), says="is a split step whose optimizer graph is absent")
    add("verify a split step not named *_train", said, ["verify", "{dir}/mlpstep"], setup=_lone_copy("mlpstep"),
        reads=("train",), says="optimizer.onnx")
    # the leftovers of round five: a baseline peak of 0, a graph without value_info for Deeploy
    add("solve a step whose tensors are all empty", said, ["solve", "{dir}/empty", "--target", "none", "--budget",
                                                          "1.0", *out], (0,),
        setup=lambda folder, fx: empty_step(folder / "empty"), says="baseline 0 B: every tensor the step computes")
    add("solve a graph without value_info for siracusa", said, ["solve", "{dir}/bare", "--target", "siracusa",
                                                                "--budget", "0.9", "--costs", "estimate", *out],
        setup=lambda folder, fx: shapeless_mlp(folder / "bare"), deeploy=True,
        says="no shape in the model's value_info")
    # 33: a split step for gap9: the training branch runs it (with the kernels ckpt's bridge lends GAP9), so the
    # release's way out is to install the branch
    # release: that advice; branch: the fixture's schedule, solved for none, is not one of gap9's lowered graph
    add("replay a split step --target gap9", said, ["replay", "{split_seq}", "--model", "{train}", "--target",
                                                     "gap9", "-o", "{dir}/r"], deeploy=True,
        says="replay it with --target none", release_says="install the training branch")
    add("sweep a split step --target gap9", said, ["sweep", "0.9:0.9", "--model", "{train}", "--target", "gap9",
                                                   "--no-simulate", "-o", "{dir}/sw"], (0,), deeploy=True,
        release=(1,), says="not simulated", release_says="install the training branch")
    # 25, 17, 18, 26: interrupts, half-made points, gvsoc failures and their exit codes
    add("sweep interrupted before its first point", ends,
        ["sweep", "0.9:0.9", "--model", "{mlp}", "--target", "none", "-o", "{dir}/sw"], (130,),
        env={"CKPT_TEST_INTERRUPT_AT": "lowering"}, says="before its first point: its folder is removed")
    add("sweep into a folder of its own interrupted before its first point", ends,
        ["sweep", "0.9:0.9", "--model", "{mlp}", "--target", "none", "-o", "{dir}/sw", "--overwrite"], (130,),
        env={"CKPT_TEST_INTERRUPT_AT": "lowering"}, setup=folder_with("notes.txt", under="sw"),
        says="before its first point: nothing of it is left")
    add("a gvsoc that prints nothing and hangs, --gvsoc-timeout 0.3", ends,
        ["replay", "{cct_seq}", "--model", "{cct}", "-o", "{dir}/r", "--gvsoc", "{dir}/gv", "--gvsoc-timeout",
         "0.3"], (1,), setup=gvsoc_install(True, "#!/bin/sh\nsleep 600\n"), deeploy=True, keeps=True,
        says="printed nothing for 0.3 s")
    add("a gvsoc that crashes (139) in a sweep", ends,
        ["sweep", "0.9:0.9", "--model", "{cct}", "-o", "{dir}/sw", "--gvsoc", "{dir}/gv", "--costs", "estimate"],
        (1,), setup=gvsoc_install(True, "#!/bin/sh\necho 'Segmentation fault'\nexit 139\n"), deeploy=True,
        keeps=True, says="FAILED (gvsoc failed)")
    add("a gvsoc that hangs in a sweep, --gvsoc-timeout 0.05", ends,
        ["sweep", "0.9:0.9", "--model", "{cct}", "-o", "{dir}/sw", "--gvsoc", "{dir}/gv", "--costs", "estimate",
         "--gvsoc-timeout", "0.05"], (1,), setup=gvsoc_install(True), deeploy=True, keeps=True,
        says="printed nothing for 0.05 s")
    # 28: an update that reads its weight and gradient swapped
    for command in (["inspect", "{dir}/pair/simplemlp_train", "--target", "none"],
                    ["solve", "{dir}/pair/simplemlp_train", "--target", "none", "--budget", "1.0", *out],
                    ["verify", "{dir}/pair/simplemlp_train"],
                    ["replay", "{split_seq}", "--model", "{dir}/pair/simplemlp_train", "--target", "none", "-o",
                     "{dir}/r"],
                    ["sweep", "0.9:0.9", "--model", "{dir}/pair/simplemlp_train", "--target", "none", "-o",
                     "{dir}/sw"]):
        add(f"{command[0]}: an SGD update reading its inputs swapped", said, command,
            setup=split_pair(_swap_sgd_inputs), reads=("train", "optimizer"), says="in that order")
    # the new table
    add("sweep table: ten columns and Errors host, gvsoc", ends,
        ["sweep", "0.9:0.9", "--model", "{mlp}", "--target", "none", "--no-verify", "-o", "{dir}/sw"], (0,),
        says="Errors host, gvsoc")
    return found


# --------------------------------------------------------------------------- running and judging


@dataclass
class Outcome:
    case: Case
    code: int | None
    one_line: bool
    traceback: bool
    touched: list[str]
    left: list[str]
    says: bool
    seconds: float
    line: str

    @property
    def ok(self) -> bool:
        return (self.code in self.case.codes and self.one_line and not self.traceback and not self.touched
                and not self.left and self.says)


def _snapshot(*folders: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_symlink() or not path.exists():
                continue
            info = path.lstat()
            found[str(path)] = (info.st_size if path.is_file() else -1, info.st_mtime_ns if path.is_file() else 0)
    return found


def _argv(case: Case, folder: Path, fx: Fixtures) -> list[str]:
    values = {"dir": str(folder), **fx.paths}
    return [arg.format(**values) for arg in case.args]


def run_case(case: Case, index: int, work: Path, fx: Fixtures) -> Outcome:
    folder = work / f"case{index:03d}"
    folder.mkdir()
    if case.setup is not None:
        case.setup(folder, fx)
    before = _snapshot(folder, fx.root)
    argv = _argv(case, folder, fx)
    module = "ckpt" if case.program == "ckpt" else "ckpt.deeploy_bridge.minimalloc"
    command = [sys.executable, str(Path(__file__).parent / case.program.removeprefix("bench/"))] \
        if case.program.startswith("bench/") else [sys.executable, "-m", module]
    env = {**os.environ, "GVSOC_INSTALL": "none",
           **{k: v.format(dir=str(folder)) for k, v in case.env.items()}}
    if not BRANCH:
        case = replace(case, codes=case.release or case.codes, says=case.release_says or case.says)
    start = time.perf_counter()
    try:
        done = subprocess.run([*command, *argv], capture_output=True, text=True, env=env,
                              cwd=folder, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # Ctrl-C as typed,
                              # even when the bench runs in the background (which starts it with SIGINT ignored)
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as hung:
        code, out, err = None, str(hung.stdout or ""), f"hung: no answer in {TIMEOUT} s"
    seconds = time.perf_counter() - start
    after = _snapshot(folder, fx.root)
    touched = sorted(p for p, v in before.items() if after.get(p) != v)
    left = sorted(p for p in after if p not in before) if code not in (0, None) and not case.keeps else \
        sorted(p for p in after if p not in before and not p.startswith(str(folder)))
    said = [line for line in err.splitlines() if line.strip() and not line.startswith(("[ckpt]", "note:", "warning:"))]
    if case.program == "minimalloc":
        one = code == 0 or (len(said) == 1 and said[0].startswith("minimalloc:"))
    else:
        one = (not said) if code == 0 else (len(said) == 1 and said[0].startswith("error: "))
    line = said[-1] if said else (out.strip().splitlines() or [""])[-1]
    return Outcome(case, code, one, "Traceback (most recent call last)" in out + err,
                   [str(Path(p).relative_to(work.parent)) for p in touched],
                   [str(Path(p).relative_to(work.parent)) for p in left],
                   case.says is None or case.says in out + err, seconds, line)


def _shown(case: Case, fx: Fixtures) -> str:
    argv = [a.replace("{dir}/", "").replace("{dir}", ".") for a in case.args]
    text = " ".join((case.program if case.program != "ckpt" else "ckpt", *(a if a and " " not in a else repr(a)
                                                                             for a in argv)))
    return (text[:90] + "...") if len(text) > 93 else text


def _said(line: str, case: Case) -> str:
    """The error line, its case's paths shortened, cut to fit a table cell."""
    line = line.replace("|", "/").replace("`", "'")
    return line if len(line) <= 160 else line[:157] + "..."


def table(outcomes: list[Outcome], fx: Fixtures) -> str:
    head = ("| # | class | case | command | exit | allowed | one line | traceback | user file touched | left behind "
            "| says | verdict | what it said |")
    lines = [head, "|" + "---|" * 13]
    for n, o in enumerate(outcomes, start=1):
        yes = lambda flag: "yes" if flag else "no"  # noqa: E731
        lines.append(f"| {n} | {o.case.kind} | {o.case.name.replace('|', '/')} | `{_shown(o.case, fx)}` | "
                     f"{'hung' if o.code is None else o.code} | {','.join(map(str, o.case.codes))} | "
                     f"{yes(o.one_line)} | {yes(o.traceback)} | {', '.join(o.touched) or 'no'} | "
                     f"{', '.join(o.left[:2]) or 'no'} | {'-' if o.case.says is None else yes(o.says)} | "
                     f"{'ok' if o.ok else 'FAIL'} | {_said(o.line, o.case)} |")
    return "\n".join(lines)


def summary(outcomes: list[Outcome]) -> str:
    by_kind: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_kind.setdefault(o.case.kind, []).append(o)
    lines = ["| class | cases | ok | exit code off | not one line | traceback | user file touched | left behind | "
             "check unsaid |", "|" + "---|" * 9]
    for kind, found in [*by_kind.items(), ("all", outcomes)]:
        lines.append(f"| {kind} | {len(found)} | {sum(o.ok for o in found)} | "
                     f"{sum(o.code not in o.case.codes for o in found)} | {sum(not o.one_line for o in found)} | "
                     f"{sum(o.traceback for o in found)} | {sum(bool(o.touched) for o in found)} | "
                     f"{sum(bool(o.left) for o in found)} | {sum(not o.says for o in found)} |")
    return "\n".join(lines)


def main() -> int:
    parser = BenchParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="run the cases whose name or class holds this text")
    parser.add_argument("--jobs", type=jobs, default=1, help="cases run at once (each in a process of its own)")
    parser.add_argument("--keep", default=None, help="keep the cases' folders here (default: a temp folder)")
    parser.add_argument("--no-deeploy", action="store_true", help="leave out the cases that lower with Deeploy")
    parser.add_argument("--smoke-cases", action="store_true", help=argparse.SUPPRESS)
    args = parse_args(parser, SMOKE)
    chosen = [c for c in cases() + round_five_cases() if (not args.only or args.only in c.name or args.only in c.kind)
              and not (args.no_deeploy and c.deeploy) and (c.smoke or not args.smoke_cases)]
    with tempfile.TemporaryDirectory(prefix="ckpt-hostile-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        if "CKPT_CACHE_DIR" not in os.environ:
            os.environ["CKPT_CACHE_DIR"] = str(root / "cache")
        started = time.perf_counter()
        fx = make_fixtures(root / "fixtures", deeploy=any(c.deeploy for c in chosen))
        work = root / "cases"
        work.mkdir()
        print(f"{len(chosen)} cases; fixtures in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        skipped = [(c, fx.lacks(c)) for c in chosen if fx.lacks(c)]
        chosen = [c for c in chosen if not fx.lacks(c)]
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            outcomes = list(pool.map(lambda item: run_case(item[1], item[0], work, fx), enumerate(chosen)))
        print(table(outcomes, fx))
        print()
        print(summary(outcomes))
        print(f"\n{len(outcomes)} cases in {time.perf_counter() - started:.0f} s, "
              f"{sum(not o.ok for o in outcomes)} failing")
        for o in outcomes:
            if not o.ok:
                print(f"FAIL {o.case.name}: exit {o.code}: {o.line}")
        for case, why in skipped:
            print(f"skipped {case.name}: its fixture could not be made here ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
