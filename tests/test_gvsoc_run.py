"""Real steps on gvsoc's Siracusa model: a small CCT example calibrated, solved with its measured costs, replayed
and run (both flows), through the console script. Skipped, with the reason, without gvsoc or its compiler."""
from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_support import ckpt
from gvsoc_support import gvsoc_example

from ckpt import deeploy_bridge
from ckpt.coderun.manifest import CodeManifest
from ckpt.coderun.sources import find_sources
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.gvsoc.harness import write_harness_data
from ckpt.gvsoc.kernels import device_kernels
from ckpt.gvsoc.kit import find_kit
from ckpt.gvsoc.sdk import sdk_library
from ckpt.gvsoc.step import CODE_PERIOD, HEAP_PERIOD, build_step

pytestmark = [pytest.mark.deeploy, pytest.mark.gvsoc, pytest.mark.slow]

SMALL = ["--blocks", "1", "--embed-dim", "32", "--heads", "2", "--image-size", "16", "--conv-channels", "8"]


@pytest.fixture(scope="module")
def small(tmp_path_factory, lowering_cache):
    """The small example, calibrated and solved at 0.8 with its measured costs, and its replay."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("GVSOC_INSTALL", raising=False)
        done = gvsoc_example(tmp_path_factory.mktemp("gvsoc"), SMALL, solve=["--costs", "gvsoc"],
                             replay=["--simulate-non-tiled"])
        again = ckpt("replay", "seq.json", "--model", "model", "-o", "again", "--simulate-non-tiled", cwd=done.work)
        yield done.work, done.calibrated, done.replayed, again


def test_calibration_measures_each_layer_of_the_graph_order(small):
    work, calibrated, _, _ = small
    doc = json.loads((work / "costs.json").read_text())
    assert doc["kind"] == "ckpt calibration" and doc["errors"] == 0 and doc["step_cycles"] > 0
    assert 0 < sum(doc["node_cycles"].values()) <= doc["step_cycles"]
    assert "Errors: 0 out of" in calibrated.stdout


def test_both_flows_run_on_gvsoc_with_no_error(small):
    work, _, replayed, _ = small
    report = json.loads((work / "replay" / "report.json").read_text())
    for flow in ("tiled", "non_tiled"):
        run = report["gvsoc"][flow]
        assert run["status"] == "measured" and run["errors"] == 0 and run["cycles"] > 0, run
        assert run["total"] == report["code_runs"][flow]["golden"]["compared"]
        assert (work / "replay" / run["log"]).is_file()
    assert "gvsoc (tiled): Errors: 0 out of" in replayed.stdout


def test_each_layer_is_measured_under_its_node_recomputes_included(small):
    work, _, _, _ = small
    report = json.loads((work / "replay" / "report.json").read_text())
    order = json.loads((work / "replay" / "order.json").read_text())
    layers = report["gvsoc"]["tiled"]["layer_cycles"]
    assert set(layers) <= set(order["order"])                 # every probed layer is one the replay ran
    assert {name for name in order["clones"] if name in layers}    # the recomputes ran and were measured
    assert sum(layers.values()) < report["gvsoc"]["tiled"]["cycles"]


def test_measured_costs_predict_the_step(small):
    work, _, _, _ = small
    schedule = json.loads((work / "seq.json").read_text())
    predicted = schedule["predicted"]["step_cycles"]
    measured = json.loads((work / "replay" / "report.json").read_text())["gvsoc"]["tiled"]["cycles"]
    assert schedule["solver"]["costs"].startswith("gvsoc calibration")
    assert abs(measured - predicted) <= 0.05 * measured, (predicted, measured)


def test_the_same_step_gives_the_same_report(small):
    work, _, _, again = small
    first = json.loads((work / "replay" / "report.json").read_text())
    second = json.loads((work / "again" / "report.json").read_text())
    assert first["gvsoc"] == second["gvsoc"]
    assert (work / "replay" / "code" / "Network.c").read_bytes() == (work / "again" / "code" / "Network.c").read_bytes()


def _nm(kit, path: Path) -> list[tuple[int, str, str]]:
    """(address, type, name) of each symbol `path` defines."""
    nm = kit.compiler.cc.with_name(kit.compiler.cc.name.replace("gcc", "nm"))
    done = subprocess.run([str(nm), "--defined-only", str(path)], capture_output=True, text=True, check=True)
    return [(int(a, 16), t, n) for a, t, n in (line.split() for line in done.stdout.splitlines())]


def test_nothing_the_schedule_does_not_decide_moves_between_two_schedules_steps(small):
    """The graph order's step and the 0.8 schedule's (recomputes: more layers, code and L1 tables), built: the
    kernels, the runtime, the harness and ckpt's probes sit where they sat, and the heaps and the schedule's network
    start on a KiB (gvsoc.step's module doc)."""
    work = small[0]
    kit, sources = find_kit(), find_sources()
    lowered = deeploy_bridge.lower(str(work / "model"), "siracusa")
    deeploy_bridge.deploy(lowered.model, [n.name for n in lowered.model.graph.node], "siracusa", tiled=True,
                          setup=setup_for("siracusa"), code_dir=work / "graph-order")
    sdk = sdk_library(kit, sources)
    built = []
    for code in (work / "graph-order", work / "replay" / "code"):
        manifest = CodeManifest.read(code)
        zeros = {p.name: np.zeros(p.elements, p.dtype) for p in (*manifest.inputs, *manifest.outputs)}
        out = work / "layout" / code.parent.name
        data = write_harness_data(manifest, code, zeros, zeros, out / "data")
        built.append((build_step(code, manifest, data, sources, kit, sdk,
                                 device_kernels(sources, kit, sdk, manifest.cores), out), out))
    assert built[0][0].layers != built[1][0].layers                # the schedules differ
    ours = {n for _, out in built for _, _, n in _nm(kit, out / "Network.o")}
    ours |= {n for _, out in built for n in re.findall(r"(\w+)\s*=", (out / "link.ld").read_text())}
    functions = [{n: a for a, t, n in _nm(kit, step.elf) if t in "tT" and n not in ours} for step, _ in built]
    assert functions[0] == functions[1]
    for step, out in built:
        symbols = _nm(kit, step.elf)
        named = {n: a for a, _, n in symbols}
        assert named["__l1_heap_start"] % HEAP_PERIOD == 0 and named["__l2_shared_end"] % HEAP_PERIOD == 0
        network = {n for _, t, n in _nm(kit, out / "Network.o") if t in "tT"}
        assert min(a for a, t, n in symbols if t in "tT" and n in network) % CODE_PERIOD == 0


def test_a_compact_step_compiles_its_generated_code_for_size_and_only_that(small):
    """The replay's step built as it is and compact (gvsoc.step.COMPACT): the compact network's code is smaller
    and calls gcc's shared prologues (-msave-restore); the kernels sit where they sat, compiled as they were."""
    work = small[0]
    kit, sources = find_kit(), find_sources()
    sdk = sdk_library(kit, sources)
    code = work / "replay" / "code"
    manifest = CodeManifest.read(code)
    zeros = {p.name: np.zeros(p.elements, p.dtype) for p in (*manifest.inputs, *manifest.outputs)}
    kernels = device_kernels(sources, kit, sdk, manifest.cores)
    built = []
    for compact in (False, True):
        out = work / "compact" / str(compact)
        data = write_harness_data(manifest, code, zeros, zeros, out / "data")
        built.append((build_step(code, manifest, data, sources, kit, sdk, kernels, out, compact=compact), out))
    (plain, plain_out), (small_code, compact_out) = built
    assert not plain.compact and small_code.compact
    calls = {out: {n for _, t, n in _nm_undefined(kit, out / "Network.o")} for _, out in built}
    assert any(n.startswith("__riscv_save_") for n in calls[compact_out])
    assert not any(n.startswith("__riscv_save_") for n in calls[plain_out])
    assert small_code.l2_static_end < plain.l2_static_end
    kernel_names = {n for name in kernels.objects for _, t, n in _nm(kit, kernels.folder / name) if t in "tT"}
    placed = [{n: a for a, t, n in _nm(kit, step.elf) if n in kernel_names} for step, _ in built]
    assert placed[0] == placed[1] and placed[0]


def _nm_undefined(kit, path: Path) -> list[tuple[int, str, str]]:
    """(0, "U", name) of each symbol `path` uses and does not define."""
    nm = kit.compiler.cc.with_name(kit.compiler.cc.name.replace("gcc", "nm"))
    done = subprocess.run([str(nm), "--undefined-only", str(path)], capture_output=True, text=True, check=True)
    return [(0, "U", line.split()[-1]) for line in done.stdout.splitlines() if line.strip()]


class _Linked(Exception):
    """Raised in place of gvsoc's run: the step was built and linked."""


def _load_addresses(elf: Path) -> list[int]:
    """Where each loaded segment of a 32-bit little-endian ELF is loaded from (its physical address)."""
    data = elf.read_bytes()
    offset, size, count = struct.unpack_from("<I", data, 0x1C)[0], *struct.unpack_from("<HH", data, 0x2A)
    headers = [struct.unpack_from("<8I", data, offset + k * size) for k in range(count)]
    return [header[3] for header in headers if header[0] == 1]      # PT_LOAD


def test_a_ds_cnn_step_links_and_loads_from_words(shared_models, monkeypatch):
    """DS-CNN's graph-order step (its optimizer network calls a static DMA wait from more than a KiB away) links:
    with each generated object behind an `. = ALIGN(1024)` of one output section, ld's relaxation shortened that
    call and the padding then put its target out of reach (`relocation truncated to fit: R_RISCV_RVC_JUMP`), so
    its calibration refused to run. And every segment loads from a word: the runtime copies the L1 data that
    follows the generated code word by word (from a half-word, a step computed wrong numbers)."""
    from ckpt.deeploy_identity import Flavour, deeploy_flavour
    from ckpt.gvsoc import train_run
    from ckpt.pipeline import calibrate

    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip("DS-CNN's training step needs Deeploy's training branch")
    monkeypatch.delenv("GVSOC_INSTALL", raising=False)
    monkeypatch.setattr(calibrate, "_cached_calibration", lambda *a: None)     # built here, never a cached run
    monkeypatch.setattr(train_run, "_cached", lambda key: None)
    loads = []

    def linked(command, *args):
        elf = next(Path(a.split("=", 1)[1]) for a in command if a.startswith("--binary="))
        loads.extend(_load_addresses(elf))
        raise _Linked
    monkeypatch.setattr(train_run, "_simulate", linked)
    with pytest.raises(_Linked):
        calibrate.measured_costs(shared_models / "dscnn_train", "siracusa", setup_for("siracusa"))
    assert loads and all(address % 4 == 0 for address in loads), [hex(a) for a in loads]
