"""The replay's generated code, run on this host: the Errors line the device harness would print (ckpt.coderun).

Each flow's code (tiled in code/, non-tiled in code-non-tiled/) is built against Deeploy's kernels and run on
the step's inputs. Its outputs are held to three things:
- outputs.npz, by deeploytest.c's rule: `Errors: N out of M`, in total and per output;
- the graph order's code of the same flow (no recompute, Deeploy's own order), bit for bit: what a schedule
  can get wrong (a clone read too late, an arena block reused while alive) shows here even when the numbers
  stay inside the tolerance;
- ckpt's host executor on the same schedule: how far the C kernels are from the reference, and where.
The graph order's outputs are computed once per graph, Deeploy setup, kernels, runtime and compiler, and cached
under $CKPT_CACHE_DIR/coderun/reference; where that very code already ran (a calibration's host run, the replay of
the graph order itself), its outputs are the entry, and the code is not generated again. Asked for several steps
in a row, the code runs them back to back and
each step is held, by the same rule, to the host executor's step from the weights the code's step before updated
(`HostStepper`: each step checked on its own, so float rounding does not add up over steps): every flow's code
must match every step (its weights are updated in place, or written back at the end of the step).
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import json
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from ckpt import deeploy_bridge
from ckpt.cached import read_entry, write_entry
from ckpt.coderun.build import find_toolchain, runtime_fingerprint
from ckpt.coderun.run import CodeRun, NotRun, run_code
from ckpt.coderun.sources import KernelSources, NoSources, find_sources
from ckpt.deeploy_bridge.errors import BridgeError
from ckpt.deeploy_bridge.records import ConstantPlan
from ckpt.deeploy_bridge.setup import DeeploySetup
from ckpt.deeploy_bridge.versions import bridge_fingerprint, deeploy_fingerprint
from ckpt.hostexec.compare import bit_identical, compare_outputs
from ckpt.hostexec.executor import HostExecutor
from ckpt.paths import cache_root
from ckpt.replay.report import CodeRunRecord, CodeStatus, HostDiffRecord
from ckpt.replay.verification import StepData, compare_golden

REFERENCE_FORMAT = 1


def code_sources(deeploy_root: Path | None) -> KernelSources | NoSources:
    """The kernel sources the code builds against (a checkout of another release is refused: CkptError)."""
    return find_sources(deeploy_root)


def _reference_key(base: onnx.ModelProto, target: str, setup: DeeploySetup, tiled: bool, sources: KernelSources,
                   feeds: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    digest.update(hashlib.sha256(base.SerializeToString()).digest())
    toolchain = find_toolchain()
    digest.update(json.dumps({"format": REFERENCE_FORMAT, "target": target, "setup": setup.as_dict(), "tiled": tiled,
                              "kernels": sources.fingerprint, "runtime": runtime_fingerprint(),
                              "assembly": bridge_fingerprint(), "deeploy": deeploy_fingerprint(),
                              "cc": toolchain.version if toolchain else None},
                             sort_keys=True).encode())
    for name in sorted(feeds):
        digest.update(name.encode() + np.ascontiguousarray(feeds[name]).tobytes())
    return digest.hexdigest()


def _stored_outputs(payload: bytes | None) -> dict[str, np.ndarray] | None:
    """The outputs a checked reference entry holds, or None."""
    if payload is None:
        return None
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None


def graph_order_outputs(base: onnx.ModelProto, target: str, setup: DeeploySetup, tiled: bool,
                        sources: KernelSources | NoSources, feeds: dict[str, np.ndarray], progress=lambda m: None,
                        ran: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray] | NotRun:
    """What the graph order's generated code (this flow) computes on `feeds`: cached (a checked entry), else
    generated and run. `ran`: what that very code computed where the caller ran it (the graph order's own replay,
    a calibration): kept as the entry instead of generating the code again."""
    if isinstance(sources, NoSources):
        return NotRun(sources.reason)
    key = _reference_key(base, target, setup, tiled, sources, feeds)
    path = cache_root() / "coderun" / "reference" / f"{key[:24]}.entry"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)         # sweep points in parallel processes make it once, not each
        stored = _stored_outputs(read_entry(path, key))
        if stored is not None:
            return stored
        if ran is not None:
            _store_reference(path, key, ran)
            return dict(ran)
        return _make_reference(base, target, setup, tiled, sources, feeds, path, key, progress)


def is_graph_order(base: onnx.ModelProto, order: list[str]) -> bool:
    """Whether `order` runs the graph's nodes as they stand, once each: its code is the graph order's code."""
    return order == [n.name for n in base.graph.node]


def _store_reference(path: Path, key: str, outputs: dict[str, np.ndarray]) -> None:
    payload = io.BytesIO()
    np.savez(payload, **outputs)
    write_entry(path, key, payload.getvalue())


def _make_reference(base: onnx.ModelProto, target: str, setup: DeeploySetup, tiled: bool, sources: KernelSources,
                    feeds: dict[str, np.ndarray], path: Path, key: str, progress) -> dict[str, np.ndarray] | NotRun:
    flow = "tiled" if tiled else "non-tiled"
    progress(f"generating and running the graph order's {flow} code once (the reference; cached)")
    with tempfile.TemporaryDirectory(prefix="ckpt_reference_") as scratch:
        code = Path(scratch) / "code"
        try:
            deeploy_bridge.deploy(base, [n.name for n in base.graph.node], target, tiled=tiled, setup=setup,
                                  code_dir=code)
        except BridgeError as err:           # e.g. the graph order does not fit where a schedule does (home L2)
            return NotRun(f"Deeploy makes no code for the graph order here: {err}")
        outcome = run_code(code, feeds, sources)
    if isinstance(outcome, NotRun):
        return NotRun(f"the graph order's code: {outcome.reason}", outcome.failed)
    _store_reference(path, key, outcome.outputs)
    return dict(outcome.outputs)


def _shaped(outputs: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    return {name: value.reshape(shapes[name]) if name in shapes else value for name, value in outputs.items()}


def _host_diff(code: dict[str, np.ndarray], host: dict[str, np.ndarray], data: StepData) -> HostDiffRecord | None:
    common = {k: v for k, v in host.items() if k in code}
    if not common:
        return None
    back = lambda d: {data.back.get(k, k): v for k, v in d.items()}  # noqa: E731 - names users know
    found = compare_outputs(back(code), back(common))
    worst = found.worst
    return HostDiffRecord(max_abs_diff=worst.abs_diff if worst else 0.0,
                          worst=worst,
                          over_tolerance=found.errors)


def feedback_targets(model: onnx.ModelProto, plan: ConstantPlan | None) -> dict[str, list[str]]:
    """Each SGD's output -> the constants that hold its weight: the weight itself and, on a lowered graph, every
    copy of it that the constant plan says reads or repeats its bytes. A device that trains feeds the update to
    all of them before the next step."""
    plan = plan or ConstantPlan()
    found = {}
    for node in model.graph.node:
        if node.op_type == "SGD" and node.input and node.output:
            weight = node.input[0]
            copies = [weight] + [c for c, w in sorted(plan.shared().items()) if w == weight]
            copies += [c for c, (w, _) in sorted(plan.repeats.items()) if w == weight]
            found[node.output[0]] = copies
    return found


@dataclass
class HostStepper:
    """The host executor's training step from given weights: `after(outputs)` runs one step with the weights a
    step that produced `outputs` updated (fed to every copy `feedback` names, repeated where a copy holds the
    weight's values repeated)."""

    executor: HostExecutor
    order: list[str]
    feeds: dict[str, np.ndarray]
    feedback: dict[str, list[str]]

    def after(self, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for output, copies in self.feedback.items():
            new = np.asarray(outputs[output]).reshape(-1)
            for name in copies:
                old = self.executor.initializers[name]
                self.executor.initializers[name] = np.tile(new, old.size // new.size).astype(old.dtype).reshape(
                    old.shape)
        return self.executor.run(self.feeds, self.order)


def code_run_record(flow: str, outcome: CodeRun | NotRun, data: StepData, host: dict[str, np.ndarray],
                    stepper: HostStepper | None, reference: dict[str, np.ndarray] | NotRun, record_time: bool,
                    weights: str) -> CodeRunRecord:
    """What one flow's code run found (see the module doc); `host`: the host executor's step, `stepper` its later
    steps (when the code ran several)."""
    if isinstance(outcome, NotRun):
        return CodeRunRecord(flow, CodeStatus.FAILED if outcome.failed else CodeStatus.NOT_RUN, outcome.reason, weights)
    shapes = {k: np.shape(v) for k, v in {**host, **(data.golden or {})}.items()}
    outputs = _shaped(outcome.steps[0], shapes)
    if isinstance(reference, NotRun):
        graph_order, differing = f"not compared ({reference.reason})", []
    else:
        differing = [data.back.get(k, k) for k in bit_identical(outputs, _shaped(reference, shapes))]
        graph_order = "differs" if differing else "bit-identical"
    stats = outcome.stats
    back = lambda d: {data.back.get(k, k): v for k, v in d.items()}  # noqa: E731 - names users know
    steps = []
    if len(outcome.steps) > 1 and stepper is not None:
        expected = [host] + [stepper.after(_shaped(code, shapes)) for code in outcome.steps[:-1]]
        steps = [(compare_outputs(back(_shaped(code, shapes)), back(want)))
                 for code, want in zip(outcome.steps, expected)]
    return CodeRunRecord(
        flow=flow, status=CodeStatus.RAN, weights=weights, golden=compare_golden(outputs, data),
        graph_order=graph_order, differing=differing, host=_host_diff(outputs, host, data), steps=steps,
        stats=stats,
        skipped_kernels=list(outcome.skipped_kernels),
        seconds={k: round(v, 3) for k, v in outcome.seconds.items()} if record_time else None)
