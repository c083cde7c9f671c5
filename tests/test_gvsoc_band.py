"""The layout band (bench/layout_band.py, taken by bench/gvsoc.py and bench/zoo.py) perturbs the graph order's
step two ways: its network moved by a few bytes, and a few no-ops run once at its init (history_moved), before the
harness starts its timer. The second must change nothing a layer runs or where it sits, only the state the step
starts from."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from bench_support import bench_module
from cli_support import ckpt

from ckpt import deeploy_bridge
from ckpt.coderun.manifest import CodeManifest
from ckpt.coderun.sources import NoSources, find_sources
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.gvsoc.harness import write_harness_data
from ckpt.gvsoc.kernels import device_kernels
from ckpt.gvsoc.kit import NoKit, find_kit
from ckpt.gvsoc.sdk import sdk_library
from ckpt.gvsoc.step import build_step

band_bench = bench_module("layout_band")

RELEASE_INIT = ("void InitNetwork(__attribute__((unused)) uint32_t core_id, __attribute__((unused)) uint32_t "
                "numThreads) {")
BRANCH_INIT = "void InitTrainingNetwork() {"


@pytest.mark.parametrize("init", [RELEASE_INIT, BRANCH_INIT])
def test_the_no_ops_run_first_in_the_init_and_nothing_else_changes(init):
    source = f"int a;\nvoid RunNetwork() {{\n  a = 1;\n}}\n{init}\n  a = 2;\n}}\n"
    moved = band_bench.history_moved(source, 3)
    head, tail = moved.split(init + "\n")
    assert head == source.split(init)[0]                           # what comes before the init is untouched
    assert tail.startswith('__asm__ volatile(".option push\\n.option norvc\\n.rept 3\\n nop\\n')
    assert tail.split("\n", 1)[1] == "  a = 2;\n}\n"                 # then the init's own body, as it was


def test_a_network_without_an_init_is_refused():
    with pytest.raises(ValueError, match="no Init"):
        band_bench.history_moved("void RunNetwork() {\n}\n", 1)


def _nm(kit, path: Path) -> dict[str, tuple[int, str]]:
    nm = kit.compiler.cc.with_name(kit.compiler.cc.name.replace("gcc", "nm"))
    done = subprocess.run([str(nm), "--defined-only", str(path)], capture_output=True, text=True, check=True)
    return {n: (int(a, 16), t) for a, t, n in (line.split() for line in done.stdout.splitlines())}


@pytest.mark.deeploy
@pytest.mark.gvsoc
@pytest.mark.slow
def test_no_ops_at_init_move_no_function_and_no_heap(tmp_path, lowering_cache):
    """The built-in MLP's graph-order step built as it is and with 5 no-ops at its init: every function (kernels,
    runtime, harness, probes, each layer's) and every L1 symbol sits where it sat, and the heaps start where they
    started; only the init function grows (and the linker's labels after it, such as where the L1 data's image
    starts in L2, which boot copies to the same L1 addresses)."""
    kit, sources = find_kit(), find_sources()
    if isinstance(kit, NoKit) or isinstance(sources, NoSources):
        pytest.skip((kit if isinstance(kit, NoKit) else sources).reason)
    assert ckpt("example", "mlp", "-o", "model", cwd=tmp_path).returncode == 0
    lowered = deeploy_bridge.lower(str(tmp_path / "model"), "siracusa")
    code = tmp_path / "code"
    deeploy_bridge.deploy(lowered.model, [n.name for n in lowered.model.graph.node], "siracusa", tiled=True,
                          setup=setup_for("siracusa"), code_dir=code)
    moved = band_bench._history_code(code, "Network.c", 5, tmp_path / "moved")
    sdk = sdk_library(kit, sources)
    symbols = []
    for folder in (code, moved):
        manifest = CodeManifest.read(folder)
        zeros = {p.name: np.zeros(p.elements, p.dtype) for p in (*manifest.inputs, *manifest.outputs)}
        out = tmp_path / "build" / folder.name
        data = write_harness_data(manifest, folder, zeros, zeros, out / "data")
        step = build_step(folder, manifest, data, sources, kit, sdk, device_kernels(sources, kit, sdk, manifest.cores),
                          out)
        symbols.append(_nm(kit, step.elf))
        scripted = set(re.findall(r"(\w+)\s*=", (out / "link.ld").read_text()))     # the linker's labels
    before, after = symbols
    functions = {n for n, (_, t) in before.items() if t in "tT"} - scripted - {"InitNetwork"}
    assert functions and {n: before[n] for n in functions} == {n: after[n] for n in functions}
    l1 = {n for n, (a, _) in before.items() if a < 0x1C000000}
    assert {n: before[n] for n in l1} == {n: after[n] for n in l1}
    for heap in ("__l1_heap_start", "__l2_shared_end"):
        assert before[heap] == after[heap]
