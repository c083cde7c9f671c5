"""The gvsoc path's parts on their own: probes put in and read back, the harness data, the kit's reasons, pulp-sdk's
lists from Deeploy's CMake, links restored, the L2 count, and the records a replay keeps (fast: nothing is built or
simulated here; test_gvsoc_run.py runs real steps)."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckpt.coderun.manifest import CodeManifest, Port
from ckpt.coderun.sources import NoSources, find_sources
from ckpt.errors import CkptError
from ckpt.gvsoc.harness import write_harness_data
from ckpt.gvsoc.kit import NoKit, find_compiler, find_kit
from ckpt.gvsoc.probes import c_name, instrument, layer_cycles
from ckpt.gvsoc.run import L2_CAPACITY, OnChipNeed, _does_not_fit, build_to_fit, runtime_heap
from ckpt.gvsoc.sdk import SdkLibrary, read_cmake_lists, restore_links
from ckpt.gvsoc.step import L2_BASE, DeviceStep, L2Overflow, StepBuildError, check_runtime_reach, linker_script
from ckpt.replay.gvsoc import node_cycles, simulate_flow
from ckpt.replay.report import GvsocRecord, ReplayReport, SimStatus, record_from_json

NETWORK_C = """\
static void _conv_closure(void* args){
// _conv_tiling_closure CLOSURE CALL
_conv_tiling_closure(args);
}
void RunNetwork(__attribute__((unused)) uint32_t core_id, __attribute__((unused)) uint32_t numThreads) {
float32_t* x;
// _conv_closure_L3 CLOSURE CALL
_conv_closure_L3(&DeeployNetwork__conv_closure_L3_args);
// Reshape (Name: flat, Op: Reshape)
y = x;
// _node_2_Gemm_closure_L3 CLOSURE CALL
_node_2_Gemm_closure_L3(&args2);
// _conv_closure_L3 CLOSURE CALL
_conv_closure_L3(&DeeployNetwork__conv_closure_L3_args);
}
void InitNetwork(uint32_t core_id, uint32_t numThreads) {
// _init_closure CLOSURE CALL
_init_closure(0);
}
"""


def test_probes_go_around_each_layer_call_of_run_network_only():
    probed = instrument(NETWORK_C)
    assert probed.layers == ("conv", "node_2_Gemm", "conv")
    lines = probed.source.split("\n")
    call = lines.index("_node_2_Gemm_closure_L3(&args2);")
    assert lines[call - 1] == "CKPT_PROBE_BEGIN(1);" and lines[call + 1] == "CKPT_PROBE_END(1);"
    assert probed.source.count("CKPT_PROBE_BEGIN") == 3          # not inside closures, not in InitNetwork
    assert re.sub(r"CKPT_PROBE_(BEGIN|END)\(\d+\);\n", "", probed.source) == NETWORK_C


def test_code_without_run_network_or_layers_is_refused():
    with pytest.raises(CkptError, match="no RunNetwork"):
        instrument("int main(void) { return 0; }\n")
    with pytest.raises(CkptError, match="no layer calls"):
        instrument("void RunNetwork(uint32_t a, uint32_t b) {\n}\n")


def _log(probes: list[tuple[int, int]], count: int | None = None) -> str:
    lines = ["Runtime: 99 cycles", f"ckpt-probes {len(probes) if count is None else count}"]
    lines += [f"ckpt-probe {k} {b} {e}" for k, (b, e) in enumerate(probes)]
    return "\n".join(lines) + "\nErrors: 0 out of 4 \n"


def test_layer_cycles_sum_a_repeated_layer_and_wrap_the_32_bit_timer():
    layers = ("conv", "node_2_Gemm", "conv")
    found = layer_cycles(_log([(10, 30), (31, 131), (2**32 - 5, 5)]), layers)
    assert found == {"conv": 20 + 10, "node_2_Gemm": 100}


def test_layer_cycles_of_an_incomplete_report_are_none():
    layers = ("a", "b")
    assert layer_cycles(_log([(1, 2)]), layers) is None                 # one probe printed of two
    assert layer_cycles(_log([(1, 2), (3, 4)], count=3), layers) is None
    assert layer_cycles("Errors: 0 out of 1\n", layers) is None


@given(st.text(alphabet="ab/._-0:", min_size=1, max_size=12))
def test_c_names_are_identifiers_and_node_cycles_find_their_node(name):
    assert re.fullmatch(r"\w+", c_name(name))
    assert node_cycles({c_name(name): 7, "deeploy_only": 3}, [name]) == {name: 7, "deeploy_only": 3}


def _manifest(outputs=("float32_t",)) -> CodeManifest:
    return CodeManifest("tiled", 8, 1 << 20,
                        (Port("input_0", "float32_t", 4, "0.hex"), Port("input_1", "uint8_t", 1)),
                        tuple(Port(f"output_{i}", t, 2) for i, t in enumerate(outputs)))


def test_harness_data_pulls_each_array_in_and_lists_the_flash_files(tmp_path):
    code = tmp_path / "code"
    (code / "hex").mkdir(parents=True)
    (code / "hex" / "2.hex").write_bytes(b"\0" * 8)
    feeds = {"input_0": np.arange(4, dtype=np.float64), "input_1": np.array([3])}
    data = write_harness_data(_manifest(), code, feeds, {"output_0": np.array([1.5, 2.5])}, tmp_path / "data")
    assert [p.name for p in data.flash_files] == ["2.hex", "0.hex"]
    assert np.frombuffer((tmp_path / "data" / "0.hex").read_bytes(), np.float32).tolist() == [0, 1, 2, 3]
    assert (tmp_path / "data" / "input_1.bin").read_bytes() == b"\x03"
    outputs = (tmp_path / "data" / "testoutputs.h").read_text()
    assert "#define OUTPUTTYPE float32_t" in outputs and "#define ISOUTPUTFLOAT 1" in outputs
    assert f'.incbin \\"{tmp_path / "data" / "expected_0.bin"}\\"' in outputs
    assert "void *testInputVector[2]" in (tmp_path / "data" / "testinputs.h").read_text()


def test_harness_data_refuses_what_the_harness_cannot_compare(tmp_path):
    feeds = {"input_0": np.zeros(4), "input_1": np.zeros(1)}
    with pytest.raises(ValueError, match="one type"):
        write_harness_data(_manifest(("float32_t", "int32_t")), tmp_path, feeds,
                           {"output_0": np.zeros(2), "output_1": np.zeros(2)}, tmp_path / "d")
    with pytest.raises(ValueError, match="3 elements"):
        write_harness_data(_manifest(), tmp_path, feeds, {"output_0": np.zeros(3)}, tmp_path / "e")


def test_a_named_gvsoc_that_is_not_one_is_refused_and_missing_pieces_are_reasons(tmp_path, monkeypatch):
    with pytest.raises(CkptError, match="not a gvsoc install"):
        find_kit(tmp_path)
    monkeypatch.setenv("GVSOC_INSTALL", str(tmp_path / "nowhere"))
    with pytest.raises(CkptError, match=r"\$GVSOC_INSTALL"):
        find_kit()
    monkeypatch.setenv("CKPT_RISCV_CC", "no-such-riscv-gcc")
    assert "no RISC-V compiler (no-such-riscv-gcc)" in find_compiler().reason
    monkeypatch.delenv("GVSOC_INSTALL")
    monkeypatch.setenv("CKPT_SHARED_MODELS", str(tmp_path / "models"))
    assert isinstance(find_kit(), NoKit) and "no gvsoc" in find_kit().reason


def test_links_kept_as_text_files_are_made_links_again(tmp_path):
    (tmp_path / "chips" / "gap").mkdir(parents=True)
    (tmp_path / "chips" / "pulp.h").write_text("#define X 1\n")
    (tmp_path / "chips" / "pulp_archi.h").write_text("pulp.h")
    (tmp_path / "chips" / "gap8").write_text("gap")
    (tmp_path / "chips" / "note.txt").write_text("pulp.h is a header")
    assert restore_links(tmp_path) == 2
    assert (tmp_path / "chips" / "pulp_archi.h").is_symlink() and (tmp_path / "chips" / "gap8").is_dir()
    assert not (tmp_path / "chips" / "note.txt").is_symlink()


def test_pulp_sdk_lists_come_from_deeploys_cmake():
    sources = find_sources()
    if isinstance(sources, NoSources):
        pytest.skip(sources.reason)
    lists = read_cmake_lists(sources)
    assert "rtos/pulpos/common/kernel/init.c" in lists.c_sources
    assert "rtos/pulpos/pulp/kernel/chips/siracusa/soc.c" in lists.c_sources
    assert "rtos/pulpos/pulp/drivers/cluster/pe-eu-v3.S" in lists.asm_sources
    assert "-DUSE_HYPERRAM" in lists.flags and "-DCONFIG_SIRACUSA" in lists.flags
    assert all(not s.startswith("${") for s in lists.c_sources + lists.includes)


def test_the_on_chip_need_counts_code_data_and_heap():
    need = OnChipNeed(static=1_000_000, heap=1_000_000, capacity=2_097_152, test_data=300_000, readback=97_152)
    assert need.total == 2_097_152 and need.fits and need.step == 1_700_000
    assert not OnChipNeed(1_000_000, 1_097_153, 2_097_152).fits


def test_the_on_chip_need_counts_what_the_runtime_allocates_for_itself_and_each_file_init_opens():
    """MobileNetV1's split step at budget 0.2 (its ELF's L2 up to 0x1C0BD400, a train arena of 1,251,940 B, 420 readfs
    files loaded by Init) fitted by the count without the runtime's allocations, and stopped on gvsoc in Init, at
    the 229th file (in a build 1 KiB larger): dory_mem.c never closes a file, each keeps 264 B of L2. Measured with
    pi_l2_malloc wrapped: 480 B of drivers and mount, a 6,224-B readfs header for 316 files (8,304 B for 420), then
    264 B a file."""
    names = [f"{i}.hex" for i in range(316)]
    assert runtime_heap(names) == 480 + 6_224 + 264 * 316
    assert runtime_heap([f"{i}.hex" for i in range(420)]) == 480 + 8_304 + 264 * 420
    files = [f"{i}.hex" for i in range(420)]
    without = OnChipNeed(0x1C0BD400 - L2_BASE, 1_251_940, L2_CAPACITY)
    need = replace(without, runtime=runtime_heap(files))
    assert without.fits and need.runtime == 119_664 and not need.fits
    assert need.total - need.capacity == 49_620 and need.step == without.step + 119_664
    assert "119,664 B by the runtime for itself" in _does_not_fit(need)


def _builds(static_of: dict, probes: int = 0):
    """A step builder whose static L2 bytes are `static_of[compact]` (None: the link overflows L2 by 1,000 B), less
    `probes` bytes when built without probes, and the compact values it was asked for (with `probes`: the
    (compact, probed) pairs)."""
    asked = []

    def build(compact: bool, probed: bool) -> DeviceStep:
        asked.append((compact, probed) if probes else compact)
        if static_of[compact] is None:
            raise L2Overflow(1000)
        return DeviceStep(Path("step.elf"), (), L2_BASE + static_of[compact] - (0 if probed else probes),
                          compact=compact, probed=probed)
    return build, asked


@pytest.mark.parametrize("o2", [1_700_000, None])
def test_a_step_whose_code_leaves_no_room_is_built_again_with_its_code_compiled_for_size(o2):
    need_of = lambda static: OnChipNeed(static, 500_000, L2_CAPACITY)    # noqa: E731
    build, asked = _builds({False: 1_000_000, True: 900_000})
    step = build_to_fit(build, need_of)
    assert asked == [False] and not step.compact            # it fits as the kernels are compiled: built once
    build, asked = _builds({False: o2, True: 1_400_000})
    step = build_to_fit(build, need_of)
    assert asked == [False, True] and isinstance(step, DeviceStep) and step.compact
    build, asked = _builds({False: o2, True: 1_700_000})
    need = build_to_fit(build, need_of)
    assert isinstance(need, OnChipNeed) and need.compact and need.static == 1_700_000
    assert "its generated code compiled for size (-Os -msave-restore)" in _does_not_fit(need)
    assert "compiled for size" not in _does_not_fit(need_of(1_700_000))


def test_a_step_that_fits_only_without_its_probes_is_built_so_where_its_layers_are_not_needed():
    """A replay needs the step's cycles, a calibration each layer's: only the first drops the probes to fit."""
    need_of = lambda static: OnChipNeed(static, 500_000, L2_CAPACITY)    # noqa: E731
    build, asked = _builds({False: 1_700_000, True: 1_620_000}, probes=40_000)
    need = build_to_fit(build, need_of)
    assert asked == [(False, True), (True, True)] and isinstance(need, OnChipNeed) and need.probed
    assert "without its per-layer probes" not in _does_not_fit(need)
    build, asked = _builds({False: 1_700_000, True: 1_620_000}, probes=40_000)
    step = build_to_fit(build, need_of, layers_needed=False)
    assert asked == [(False, True), (True, True), (True, False)] and isinstance(step, DeviceStep)
    assert step.compact and not step.probed
    build, asked = _builds({False: 1_700_000, True: 1_400_000}, probes=40_000)
    step = build_to_fit(build, need_of, layers_needed=False)      # it fits with them: they stay
    assert asked == [(False, True), (True, True)] and step.probed
    build, asked = _builds({False: 1_700_000, True: 1_700_000}, probes=40_000)
    need = build_to_fit(build, need_of, layers_needed=False)
    assert isinstance(need, OnChipNeed) and not need.probed and need.static == 1_660_000
    assert "compiled for size (-Os -msave-restore) and built without its per-layer probes" in _does_not_fit(need)
    args = ("tiled", SimStatus.MEASURED, None, 0, 1, 1234, {}, "the host")
    assert "without its per-layer probes" in GvsocRecord(*args, OnChipNeed(100, 200, 2_097_152, compact=True,
                                                                          probed=False)).line
    assert "probes" not in GvsocRecord(*args, OnChipNeed(100, 200, 2_097_152, compact=True)).line


def test_a_record_says_when_its_code_was_compiled_for_size():
    args = ("tiled", SimStatus.MEASURED, None, 0, 1, 1234, {}, "the host", OnChipNeed(100, 200, 2_097_152))
    assert "compiled for size" not in GvsocRecord(*args).line
    compact = GvsocRecord(*args[:-1], OnChipNeed(100, 200, 2_097_152, compact=True), optimizer_cycles=5,
                          batches=1, updates=1)
    assert "its generated code compiled for size (-Os -msave-restore)" in compact.line
    doc = json.loads(json.dumps(compact.__dict__ | {"on_chip": compact.on_chip.__dict__}))
    back = record_from_json(GvsocRecord, doc)
    assert back.on_chip.compact


@pytest.mark.gvsoc
def test_every_reason_not_to_simulate_is_a_record_without_figures(tmp_path):
    args = dict(code_dir=tmp_path, code_run=None, feeds={}, golden=None, host_outputs={}, nodes=[],
                log=tmp_path / "gvsoc.log", record_time=False, progress=lambda m: None)
    found = simulate_flow("tiled", target="gap9", sources=NoSources("x"), kit=NoKit("y"), **args)
    assert found.status is SimStatus.NOT_SIMULATED and found.cycles is None
    assert found.reason == "GAP9's gvsoc model ships only with GreenWaves' SDK"
    assert simulate_flow("tiled", target="siracusa", sources=NoSources("x"), kit=NoKit("no gvsoc here"),
                         **args).reason == "no gvsoc here"
    assert "did not run on this host" in simulate_flow("tiled", target="siracusa", sources=find_sources_or_skip(),
                                                       kit=_a_kit(), **args).reason
    assert not (tmp_path / "gvsoc.log").exists()


def find_sources_or_skip():
    sources = find_sources()
    if isinstance(sources, NoSources):
        pytest.skip(sources.reason)
    return sources


def _a_kit():
    kit = find_kit()
    if isinstance(kit, NoKit):
        pytest.skip(kit.reason)
    return kit


def test_gvsoc_records_round_trip_through_report_json():
    record = GvsocRecord("tiled", SimStatus.MEASURED, None, 0, 10, 1234, {"a": 1000, "b": 234}, "outputs.npz",
                         OnChipNeed(100, 200, 2_097_152), "gvsoc-tiled.log", None)
    back = record_from_json(GvsocRecord, json.loads(json.dumps(record.__dict__ | {"on_chip": record.on_chip.__dict__})))
    assert back == record and back.status is SimStatus.MEASURED and isinstance(back.on_chip, OnChipNeed)
    assert "Errors: 0 out of 10" in back.line and "1,234 cycles" in back.line
    assert ReplayReport.__dataclass_fields__["gvsoc"].type == "dict[str, GvsocRecord]"


def test_the_device_files_ckpt_ships_are_installed_with_it():
    from ckpt.gvsoc.kernels import DEVICE
    assert {p.name for p in Path(DEVICE).iterdir()} >= {"ckpt_probes.h", "ckpt_probes.c", "ckpt_harness_hooks.h",
                                                       "pulp_nn_kernels.h"}


def _sdk_script_library(tmp_path: Path, monkeypatch):
    """pulp-sdk's sources beside the shared gvsoc as an SdkLibrary (its linker script), or a skip saying why not."""
    monkeypatch.delenv("GVSOC_INSTALL", raising=False)
    kit = find_kit()
    if isinstance(kit, NoKit):
        pytest.skip(kit.reason)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "pulp-sdk").symlink_to(kit.sdk)
    return SdkLibrary(tmp_path / "lib")


def test_the_generated_code_is_linked_after_the_runtimes_code_and_data(tmp_path, monkeypatch):
    sdk = _sdk_script_library(tmp_path, monkeypatch)
    original = (sdk.link_dir / "chips/siracusa/link.ld").read_text()
    assert linker_script(sdk, []) == original
    script = linker_script(sdk, ["TrainingNetwork.o", "OptimizerNetwork.o"])
    text = script[script.index(".text :"):script.index("_etext")]
    assert "*(EXCLUDE_FILE(*/TrainingNetwork.o */OptimizerNetwork.o) .text.*)" in text
    own = script.index(".ckpt_generated_text.0 :")
    assert script.index("__cluster_text_end") < own < script.index("_l1_preload_start_inL2")
    assert "*/TrainingNetwork.o(.text .text.*)" in script[own:script.index("_l1_preload_start_inL2")]


def test_each_generated_object_starts_on_a_kib_and_the_heaps_too(tmp_path, monkeypatch):
    sdk = _sdk_script_library(tmp_path, monkeypatch)
    script = linker_script(sdk, ["OptimizerNetwork.o", "deeploytraintest.o", "ckpt_pad.o", "TrainingNetwork.o"],
                           "ckpt_pad.o")
    own = script[script.index(".ckpt_generated_text.0 :"):script.index("_l1_preload_start_inL2")]
    sections = re.findall(r"\.ckpt_generated_text\.\d+ : ALIGN\(1024\)\s*\{([^}]*)\} > L2", own)
    assert [re.findall(r"\*/(\w+\.o)\(\.text \.text\.\*\)", body) for body in sections] == [
        ["OptimizerNetwork.o"], ["deeploytraintest.o"], ["ckpt_pad.o", "TrainingNetwork.o"]]  # the pad moves it
    assert "ALIGN(1024);" not in own      # no padding between objects of a section: ld's relaxation misses it
    assert sections[-1].rstrip().endswith(". = ALIGN(4);")   # the L1 data loaded after it starts on a word
    assert "__l1_heap_start = ALIGN(1024);" in script
    assert "__l2_shared_end = ALIGN(LOADADDR(.bss_l1) + SIZEOF(.bss_l1), 1024);" in script


def test_a_linker_script_laid_out_otherwise_is_refused(tmp_path):
    (tmp_path / "lib" / "pulp-sdk" / "rtos/pulpos/pulp/kernel/chips/siracusa").mkdir(parents=True)
    (tmp_path / "lib" / "pulp-sdk" / "rtos/pulpos/pulp/kernel/chips/siracusa/link.ld").write_text(
        "SECTIONS { .text : { *(.text*) } > L2 }\n")
    with pytest.raises(StepBuildError, match="cannot keep the runtime's jumps in reach"):
        linker_script(SdkLibrary(tmp_path / "lib"), ["Network.o"])


def test_a_runtime_beyond_a_jumps_reach_is_refused():
    check_runtime_reach({"__irq_vector_base": 0x1C008000, "__cluster_text_end": 0x1C008000 + (1 << 20) - 4})
    with pytest.raises(StepBuildError, match="beyond the 1,048,576 B its jumps reach"):
        check_runtime_reach({"__irq_vector_base": 0x1C008000, "__cluster_text_end": 0x1C11E700})
