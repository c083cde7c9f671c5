"""The built-in example's generated code, run on this host: every point computes the goldens and the graph
order's code bit for bit, and a corrupted arena layout in that code is caught."""
from __future__ import annotations

import re
import shutil
from dataclasses import replace

import numpy as np
import pytest
from cli_support import ckpt_here

from ckpt.coderun.manifest import CodeManifest
from ckpt.coderun.run import NotRun, run_code
from ckpt.coderun.sources import NoSources, find_sources
from ckpt.deeploy_bridge import arena as arena_module
from ckpt.deeploy_bridge import non_tiled_arena
from ckpt.deeploy_bridge.code_memory import code_memory
from ckpt.deeploy_bridge.setup import WeightUpdate
from ckpt.examples.write import write_example
from ckpt.pipeline.deployed_solve import solve_model
from ckpt.replay.report import ReplayReport
from ckpt.replay.run import ReplayOptions, replay_schedule
from ckpt.replay.verification import step_data
from ckpt.schedule_file import write_schedule
from ckpt.solver.budget import parse_budget
from ckpt.solver.graph.onnx_loader import read_model
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

pytestmark = pytest.mark.deeploy
BUDGETS = ("0.9", "0.7")
SMALL = {"blocks": 1, "embed_dim": 32, "heads": 2, "image_size": 16, "conv_channels": 8}   # room to recompute, quick
TIME_LIMIT = SolveOptions(backend=BackendOptions("highs", 30.0))


def _elements(folder) -> int:
    with np.load(folder / "outputs.npz") as golden:
        return sum(golden[name].size for name in golden.files)


@pytest.fixture(scope="module")
def example(lowering_cache, tmp_path_factory):
    if isinstance(find_sources(), NoSources):
        pytest.skip(find_sources().reason)
    folder = tmp_path_factory.mktemp("example") / "cct"
    write_example("cct", folder, **SMALL)
    replays = {}
    for budget in BUDGETS:
        doc, _ = solve_model(folder, parse_budget(budget), "siracusa", TIME_LIMIT)
        path = folder.parent / f"seq_{budget}.json"
        write_schedule(path, doc)
        replays[budget] = replay_schedule(path, folder, folder.parent / f"replay_{budget}",
                                          ReplayOptions(target="siracusa"))
    return folder, replays


@pytest.mark.parametrize("budget", BUDGETS)
def test_each_points_code_computes_the_goldens_and_the_graph_orders_code(example, budget):
    report = example[1][budget].report
    assert report.ok and set(report.code_runs) == {"tiled", "non_tiled"}
    for run in report.code_runs.values():
        assert run.status == "ran", run.reason
        assert run.golden.line == f"Errors: 0 out of {_elements(example[0])}" and run.golden.errors_by_tensor == {}
        assert run.graph_order == "bit-identical" and run.differing == []
        assert run.host.over_tolerance == 0 and 0 < run.host.max_abs_diff < 1e-4
    tiled = report.code_runs["tiled"]
    # the code reserves in L3 exactly its constants plus the arena Deeploy's header declares
    arena = report.memory.levels["L3"].arena
    assert tiled.stats.levels["L3"].peak > arena and tiled.stats.dma_transfers > 0
    assert report.code_runs["non_tiled"].stats.levels["L3"].peak == 0


def test_the_tighter_point_has_clones_and_still_equals_the_graph_order(example):
    tight = example[1]["0.7"].report
    assert tight.replay.clones_kept > 0 and tight.memory.replayed_peak < example[1]["0.9"].report.memory.replayed_peak


def _corrupted_layout(real):
    """ckpt's layout with one bug: of the home level's blocks, the largest one written while a large block is
    alive and still to be read gets that block's offset (what a wrong lifetime or overlap test in an allocator
    would do)."""
    def lay_out(blocks, alignment=4):
        layout = real(blocks, alignment)
        if len(blocks) < 20:                      # the per-layer lists of L1/L2 stay as they are
            return layout
        for late in sorted(blocks, key=lambda b: (-b.size, b.name)):
            alive = [b for b in blocks if b.name != late.name and b.first < late.first < b.last and b.size >= 256]
            if alive:
                early = max(alive, key=lambda b: (b.size, b.name))
                return replace(layout, offsets={**layout.offsets, late.name: layout.offsets[early.name]})
        raise AssertionError("no two blocks to overlap")
    return lay_out


def test_a_corrupted_arena_layout_is_caught(example, tmp_path, monkeypatch):
    """The same schedule deployed with a broken allocator, in both flows (the tiled home arena, the non-tiled
    arena of locals): each flow's code computes other numbers than the graph order's code, or faults where the
    moved block runs past the arena (the check fails either way, as it must)."""
    folder, replays = example
    clean = replays["0.7"].report.code_runs
    assert clean["tiled"].graph_order == clean["non_tiled"].graph_order == "bit-identical"
    monkeypatch.setattr(arena_module, "lay_out", _corrupted_layout(arena_module.lay_out))
    monkeypatch.setattr(non_tiled_arena, "lay_out_anonymous", _corrupted_layout(non_tiled_arena.lay_out_anonymous))
    runs = replay_schedule(folder.parent / "seq_0.7.json", folder, tmp_path / "broken",
                           ReplayOptions(target="siracusa")).report.code_runs
    for broken in runs.values():
        assert not broken.ok
        if broken.status == "ran":
            assert broken.graph_order == "differs" and broken.differing
        else:
            assert broken.status == "failed" and "leave every L3 allocation" in broken.reason


def test_the_non_tiled_code_reserves_ckpts_arena_and_mallocs_nothing_else(example):
    """Every point's non-tiled code keeps its locals in one arena of the predicted size (RunNetwork mallocs and
    frees nothing); what it allocates in L2 is that arena with the graph's inputs and outputs."""
    folder, replays = example
    for result in replays.values():
        memory = result.report.memory
        assert memory.arena_code == memory.arena == memory.arena_live_max >= memory.replayed_peak
        code = code_memory(result.outdir / "code-non-tiled")
        assert code.blocks == () and code.foreign_frees == ()
        network_c = (result.outdir / "code-non-tiled" / "Network.c").read_text()
        assert f"DeeployNetwork_ckpt_arena = (void*) pi_l2_malloc(sizeof(void) * {memory.arena});" in network_c
        manifest = CodeManifest.read(result.outdir / "code-non-tiled")
        io_bytes = sum(port.nbytes for port in manifest.inputs + manifest.outputs)
        assert result.report.code_runs["non_tiled"].stats.levels["L2"].peak == memory.arena + io_bytes


def _offsets(network_c: str) -> dict[str, int]:
    """The graph inputs' offsets in the L3 arena, as InitNetwork assigns them."""
    return {name: int(offset) for name, offset in re.findall(
        r"DeeployNetwork_(input_\d+) = \(\w+\*\) \(\(char\*\)DeeployNetwork_MEMORYARENA_L3 \+ (\d+)\);",
        network_c)}


def _corrupted(replay_dir, tmp_path, edit):
    code = tmp_path / "code"
    shutil.copytree(replay_dir / "code", code)
    source = code / "Network.c"
    source.write_text(edit(source.read_text()))
    return code


def test_a_block_placed_past_the_arena_faults(example, tmp_path):
    """The image placed at the arena's end: InitNetwork's load of it runs past every L3 allocation."""
    folder, replays = example
    result = replays["0.7"]
    data = step_data(folder, read_model(folder), {"input": "input_0", "labels": "input_1"})
    network_c = (result.outdir / "code" / "Network.c").read_text()
    arena = replays["0.7"].report.memory.levels["L3"].arena
    offset = _offsets(network_c)["input_0"]

    def outside(text: str) -> str:
        line = "DeeployNetwork_input_0 = (float32_t*) ((char*)DeeployNetwork_MEMORYARENA_L3 + {});"
        assert line.format(offset) in text
        return text.replace(line.format(offset), line.format(arena))

    broken = run_code(_corrupted(result.outdir, tmp_path, outside), data.feeds, find_sources())
    assert isinstance(broken, NotRun) and broken.failed and "leave every L3 allocation" in broken.reason


def test_without_a_checkout_the_code_is_not_run_and_the_line_says_why(example, tmp_path, monkeypatch):
    folder, _ = example
    monkeypatch.delenv("CKPT_DEEPLOY_ROOT", raising=False)
    monkeypatch.setenv("CKPT_SHARED_MODELS", str(tmp_path / "nowhere" / "models"))
    run = ckpt_here("replay", str(folder.parent / "seq_0.9.json"), "--model", str(folder), "-o", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    report = ReplayReport.read(tmp_path / "out" / "report.json")
    assert report.ok and set(report.code_runs) == {"tiled", "non_tiled"}
    for code in report.code_runs.values():
        assert code.status == "not run" and code.golden is None
        assert "no checkout of Deeploy 0.2.1 (release)" in code.reason
    assert "generated tiled code on this host: not run (no checkout of Deeploy 0.2.1 (release)" in run.stdout
    assert report.verification.status == "bit-identical"          # the host check still ran


def test_replay_without_verification_ends_cleanly(example, tmp_path):
    folder, _ = example
    run = ckpt_here("replay", str(folder.parent / "seq_0.9.json"), "--model", str(folder), "-o", str(tmp_path / "out"),
                    "--no-verify")
    assert run.returncode == 0 and run.stderr.count("\n") == run.stderr.count("[ckpt]"), run.stderr
    report = ReplayReport.read(tmp_path / "out" / "report.json")
    assert report.verification.status == "skipped" and report.code_runs == {}
    assert "verify: skipped (--no-verify)" in run.stdout and (tmp_path / "out" / "code" / "Network.c").is_file()


@pytest.mark.parametrize("weights", ["in-place", "out-of-place"])
def test_three_steps_in_a_row_train_in_every_flow(example, tmp_path, weights):
    """Each flow's code runs three steps back to back; each step is held to the host's step from the weights the
    code's previous step wrote. In place the SGD writes the weight every reader shares; out of place (the
    non-tiled flow always, the tiled one with --weights out-of-place) the end of the step copies each update
    into every copy of its weight: every step matches, in every flow."""
    folder, _ = example
    schedule = folder.parent / ("seq_0.7.json" if weights == "in-place" else f"seq_0.7_{weights}.json")
    if not schedule.exists():
        doc, _ = solve_model(folder, parse_budget("0.7"), "siracusa", TIME_LIMIT,
                             weights=WeightUpdate(weights))
        write_schedule(schedule, doc)
    run = ckpt_here("replay", str(schedule), "--model", str(folder), "-o", str(tmp_path / "out"), "--steps", "3",
                    "--weights", weights)
    assert run.returncode == 0, run.stderr
    runs = ReplayReport.read(tmp_path / "out" / "report.json").code_runs
    assert runs["tiled"].weights == weights and runs["non_tiled"].weights == "out-of-place"
    for flow in ("tiled", "non_tiled"):
        assert runs[flow].trains and [step.errors for step in runs[flow].steps] == [0, 0, 0], flow
    assert run.stdout.count("3 steps in a row, Errors per step against the host's step from the code's weights: "
                            "0, 0, 0: it trains") == 2
