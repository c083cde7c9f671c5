"""A failed gvsoc run said in one line (gvsoc.diagnosis, gvsoc.run): the first error, the L3 buffer its address is
in, a run stopped once it prints nothing, and the network's stack frames the harness is told (fast: no gvsoc)."""
from __future__ import annotations

import time

import pytest

from ckpt.gvsoc.diagnosis import diagnosis, first_error, name_address, ram_layout
from ckpt.gvsoc.run import _simulate, failed_reason, hung_reason
from ckpt.gvsoc.step import StepBuildError, _first_error, stack_frames

# gvsoc's output as it was when CCT2_LoRA2's step overflowed the master core's stack (colours and all)
LOG = ("HELLO WORLD:\nIntializing\nInitialized\nInput copied\n"
       "1463354585948: 0: [\x1b[31m/ram/trace                                           \x1b[0m] "
       "Received out-of-bound request (addr: 0x{addr:x}, ram_size: 0x800000)\n"
       "Input error: Platform returned an error (exitcode: 1)\n")

NETWORK_C = """
void InitNetwork(__attribute__((unused)) uint32_t core_id, __attribute__((unused)) uint32_t numThreads) {
DeeployNetwork_MEMORYARENA_L2 = (int8_t*) pi_l2_malloc(sizeof(int8_t) * 128000);
DeeployNetwork_MEMORYARENA_L3 = (int8_t*) cl_ram_malloc(sizeof(int8_t) * 524292);
DeeployNetwork_conv_weight_tensor = cl_ram_malloc(6912);
load_file_to_ram(DeeployNetwork_conv_weight_tensor, "2.hex");
DeeployNetwork_fc_bias_tensor = cl_ram_malloc(10);
}
"""


def test_the_first_error_is_the_simulators_not_its_last_line():
    line = first_error(LOG.format(addr=0x4F29FAB))
    assert line == "/ram/trace Received out-of-bound request (addr: 0x4f29fab, ram_size: 0x800000)"
    assert first_error("HELLO\nErrors: 0 out of 12\n") is None          # the harness's verdict is no error
    assert first_error("ERROR: Cannot open file 3.hex! Exiting...") == "ERROR: Cannot open file 3.hex! Exiting..."


def test_a_link_that_fails_is_said_by_what_ld_found_not_by_collect2():
    stderr = ("/usr/bin/ld: warning: /tmp/x/step.elf has a LOAD segment with RWX permissions\n"
              "/tmp/x/OptimizerNetwork.o: in function `.L445':\n"
              "OptimizerNetwork.c:(.text._sgd_closure+0x1cc): relocation truncated to fit: R_RISCV_RVC_JUMP against "
              "`mchan_channel_wait'\n"
              "collect2: error: ld returned 1 exit status\n")
    assert _first_error(stderr) == ("OptimizerNetwork.c:(.text._sgd_closure+0x1cc): relocation truncated to fit: "
                                    "R_RISCV_RVC_JUMP against `mchan_channel_wait'")
    compiled = "a.c:3:1: error: expected ';'"
    assert _first_error(f"{compiled}\ncollect2: error: ld returned 1\n") == compiled
    assert _first_error("collect2: error: ld returned 1 exit status\n") == "collect2: error: ld returned 1 exit status"


def test_l3_buffers_lie_from_the_end_of_the_ram_down_in_allocation_order():
    layout = ram_layout(NETWORK_C)
    assert [b.name for b in layout] == ["DeeployNetwork_MEMORYARENA_L3", "DeeployNetwork_conv_weight_tensor",
                                        "DeeployNetwork_fc_bias_tensor"]
    arena, conv, bias = layout
    assert arena.start == 0x800000 - 524296 and conv.start == arena.start - 6912 and bias.start == conv.start - 16
    assert name_address(conv.start + 100, layout) == "DeeployNetwork_conv_weight_tensor at offset 100 of its 6,912 B"
    assert name_address(arena.start + 8, layout).startswith("the L3 arena (DeeployNetwork_MEMORYARENA_L3) at offset 8")
    assert "none of the step's L3 buffers" in name_address(8, layout)


def test_an_address_is_named_with_its_buffer_and_one_beyond_the_ram_as_none():
    conv = ram_layout(NETWORK_C)[1]
    said = diagnosis(LOG.format(addr=conv.start + 4), NETWORK_C)
    assert said.startswith("/ram/trace Received out-of-bound request") and \
        said.endswith("DeeployNetwork_conv_weight_tensor at offset 4 of its 6,912 B")
    beyond = diagnosis(LOG.format(addr=0x4F29FAB), NETWORK_C)
    assert "beyond the 8,192 KiB RAM" in beyond and "\n" not in beyond


def test_the_failed_runs_reason_is_one_line_naming_the_error(tmp_path):
    (tmp_path / "Network.c").write_text(NETWORK_C)
    reason = failed_reason(1, LOG.format(addr=0x4F29FAB), [tmp_path / "Network.c"])
    assert reason.startswith("the step did not finish on gvsoc (exit code 1): /ram/trace Received out-of-bound")
    assert "\n" not in reason
    assert failed_reason(1, "booting\nit stopped\n", []) == "the step did not finish on gvsoc (exit code 1): it stopped"


def test_a_run_that_prints_nothing_for_its_timeout_is_stopped_and_keeps_what_it_printed(tmp_path):
    start = time.perf_counter()
    code, log, finished = _simulate(["sh", "-c", "echo Input copied; sleep 60"], tmp_path, {"PATH": "/usr/bin:/bin"},
                                    1.0)
    assert not finished and log.strip() == "Input copied" and time.perf_counter() - start < 30
    assert hung_reason(1.0, log) == ("gvsoc printed nothing for 1 s after its last line: Input copied; stopped as "
                                     "hung (give it more time with --gvsoc-timeout)")


def test_a_run_that_keeps_printing_runs_past_its_timeout(tmp_path):
    script = "for i in 1 2 3 4 5 6; do echo $i; sleep 0.4; done"
    code, log, finished = _simulate(["sh", "-c", script], tmp_path, {"PATH": "/usr/bin:/bin"}, 1.5)
    assert finished and code == 0 and log.split() == ["1", "2", "3", "4", "5", "6"]


def test_stack_frames_are_read_from_gcc_stack_usage():
    usage = ("/x/Network.c:56711:6:RunNetwork\t8736\tstatic\n/x/Network.c:62150:6:InitNetwork\t80\tstatic\n"
             "/x/Network.c:19822:13:_node_228_closure_L3\t576\tstatic\n/x/Network.c:3:1:helper\t64\tdynamic,bounded\n")
    assert stack_frames(usage) == {"RunNetwork": 8736, "InitNetwork": 80, "_node_228_closure_L3": 576, "helper": 64}
    with pytest.raises(StepBuildError, match="only known at run time"):
        stack_frames("/x/Network.c:1:1:RunNetwork\t16\tdynamic\n")



def test_a_step_that_exits_with_a_code_deeploys_runtime_gives_is_said_by_what_the_code_means():
    """MobileNetV1's split step at 0.23 ended in its Init with exit code 252 and no other line: dory_mem.c's
    "Cannot open file" is printed without a newline."""
    log = "Initializing TrainingNetwork...\nInput error: Platform returned an error (exitcode: 252)\n"
    said = diagnosis(log, None)
    assert said.startswith("Platform returned an error (exitcode: 252): pmsis_exit(-4)") and "dory_mem.c" in said
    assert diagnosis("Input error: Platform returned an error (exitcode: 1)\n", None) is None


def test_a_step_whose_l3_buffers_overflow_the_ram_is_said_to_before_it_is_built(tmp_path, monkeypatch):
    """Deeploy is given its CI's L3 size, so it lays out a step whose L3 buffers need more than gvsoc's 8 MiB
    HyperRAM; pulp-sdk's allocator then gives the last of them no memory and the step reads zeros (a 6 x 256 MLP at
    batch 512 took minutes to fail so). Counted as the allocator gives them (each rounded up to 8 B, the first 8 B
    never given), it is refused before anything is built, gvsoc or none."""
    from ckpt.gvsoc.diagnosis import RAM_SIZE, ram_need, ram_overflow
    from ckpt.gvsoc.run import NotSimulated, simulate_step
    assert ram_need(NETWORK_C) == 8 + 524296 + 6912 + 16
    assert ram_overflow(NETWORK_C) is None
    fills = NETWORK_C.replace("cl_ram_malloc(10)", f"cl_ram_malloc({RAM_SIZE - ram_need(NETWORK_C) + 16})")
    assert ram_need(fills) == RAM_SIZE and ram_overflow(fills) is None             # exactly full still fits
    over = fills.replace("cl_ram_malloc(6912)", "cl_ram_malloc(6913)")
    said = ram_overflow(over)
    assert said is not None and f"need {RAM_SIZE + 8:,} B of the HyperRAM, 8 B more than the {RAM_SIZE:,} B" in said
    code = tmp_path / "code"
    code.mkdir()
    (code / "Network.c").write_text(over)
    (code / "Network.h").write_text("")
    (code / "io.json").write_text('{"cores": 8, "flow": "tiled", "inputs": [], "outputs": [], "l3_bytes": 64000000}')
    from ckpt.coderun.sources import find_sources
    from ckpt.gvsoc.kit import find_kit
    from ckpt.gvsoc.step import harness_missing
    monkeypatch.delenv("GVSOC_INSTALL", raising=False)     # found, not run: nothing is built or simulated
    sources, kit = find_sources(), find_kit()
    if not hasattr(sources, "fingerprint") or not hasattr(kit, "identity") or harness_missing(sources):
        pytest.skip("no Deeploy checkout or gvsoc here: simulate_step stops before the RAM is counted")
    run = simulate_step(code, {}, {}, sources, kit, 0, timeout=1)
    assert isinstance(run, NotSimulated) and run.reason == said and not run.failed and run.log is None
