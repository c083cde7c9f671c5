"""Updated weights written back at the end of the step, where the update goes to a buffer of its own.

Deeploy 0.2.1's SGD writes each new weight into a new buffer (a graph output) and every reader of a constant has
a copy of its own (`<w>_DUPLICATE_FOR_<node>`): as Deeploy makes it, a second step reads the old weights, and the
code does not train. Where ckpt does not deploy the update in place (deeploy_bridge.in_place: the tiled flow with
weights in place), its code assembly ends the step by copying each update into every copy of its weight: the
one the SGD read, the copies with the same bytes under any shape, and the copies that repeat them (a bias a Gemm
reads broadcast to its rows) as many times as they do. The step computes what it computed before (every reader
ran on the old weights, whatever the order); the next step starts from the new ones, as the device's would.

A copy whose bytes Deeploy derived otherwise from the weight (the constant plan's `kept`) cannot take the update:
code for such a graph is refused, naming the copy, rather than written to train on stale weights.
"""
from __future__ import annotations

from dataclasses import dataclass

from ckpt.solver.graph.in_place import UPDATES_IN_PLACE

from .buffers import buffer_bytes
from .constants import base_name, constant_plan
from .errors import BridgeError

CHUNK = 256          # bytes of the bounce buffer a copy goes through (the cluster stack is small)


@dataclass(frozen=True)
class WriteBack:
    """SGD output (Deeploy's buffer name) -> each constant to write it into, and how many times it repeats."""

    targets: dict[str, tuple[tuple[str, int], ...]]


def write_back_plan(deployer) -> WriteBack:
    """What the end of the step copies, from a deployer after its front end (see the module doc)."""
    ctxt, graph = deployer.ctxt, deployer.graph
    plan = constant_plan(ctxt, graph)
    targets = {}
    for node in graph.nodes:
        if node.op not in UPDATES_IN_PLACE or not node.inputs or not node.outputs:
            continue
        weight, out = node.inputs[0].name, node.outputs[0].name
        stale = [copy for copy in plan.kept if base_name(copy) == base_name(weight)]
        if stale:
            raise BridgeError(f"the weight {base_name(weight)} that {node.name} updates has a copy Deeploy derived "
                              f"from it ({stale[0]}), which no update reaches: the code could not train; deploy "
                              "a graph whose readers read the weight as it is")
        copies = [(weight, 1)] + [(copy, 1) for copy, of in sorted(plan.shared().items()) if of == weight]
        copies += [(copy, times) for copy, (of, times) in sorted(plan.repeats.items()) if of == weight]
        targets[out] = tuple(copies)
    return WriteBack(targets)


def copy_code(ctxt, source: str, target: str, times: int, bounce: str, off_chip: str) -> list[str]:
    """C that copies buffer `source` into `target` `times` over: with memcpy where the cores address both, else
    through the bounce buffer `bounce` (CHUNK bytes) with the RAM driver on the side in `off_chip`, the level
    behind the chip."""
    src, dst = ctxt.lookup(source), ctxt.lookup(target)
    size = buffer_bytes(src)
    read = "cl_ram_read" if getattr(src, "_memoryLevel", None) == off_chip else "memcpy"
    write = "cl_ram_write" if getattr(dst, "_memoryLevel", None) == off_chip else "memcpy"
    a, b = ctxt._mangle(source), ctxt._mangle(target)
    if read == write == "memcpy":
        return [f"for (uint32_t ckpt_k = 0; ckpt_k < {times}; ckpt_k++) "
                f"memcpy((int8_t*){b} + ckpt_k * {size}, {a}, {size});"]
    return [f"for (uint32_t ckpt_at = 0; ckpt_at < {size}; ckpt_at += {CHUNK}) {{",
            f"  uint32_t ckpt_n = {size} - ckpt_at < {CHUNK} ? {size} - ckpt_at : {CHUNK};",
            f"  {read}({bounce}, (int8_t*){a} + ckpt_at, ckpt_n);",
            f"  for (uint32_t ckpt_k = 0; ckpt_k < {times}; ckpt_k++) "
            f"{write}((int8_t*){b} + ckpt_k * {size} + ckpt_at, {bounce}, ckpt_n);",
            "}"]


def write_back_code(ctxt, plan: WriteBack | None, off_chip: str) -> str:
    """C for the end of RunNetwork (empty when there is nothing to write back); `off_chip`: the deployment's level
    behind the chip."""
    if plan is None or not plan.targets:
        return ""
    lines = ["// ckpt: each update written into every copy of its weight, so the next step trains on it",
             f"int8_t ckpt_bounce[{CHUNK}];"]
    for out, copies in sorted(plan.targets.items()):
        for copy, times in copies:
            lines += copy_code(ctxt, out, copy, times, "ckpt_bounce", off_chip)
    return "\n".join(lines) + "\n"
