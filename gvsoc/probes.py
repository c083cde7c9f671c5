"""Cycle probes around each layer of Deeploy's generated step, and the per-layer cycles they print.

Deeploy's Siracusa code runs each layer (a node of the deployed graph) as one call to its closure, preceded by
a comment `// _<layer>_closure_<level> CLOSURE CALL`; views (Reshape-like layers) are pointer assignments and
take no call. `instrument` puts CKPT_PROBE_BEGIN(k)/CKPT_PROBE_END(k) (device/ckpt_probes.h) around the k-th
call, leaving every other line as Deeploy wrote it. The layer names are Deeploy's, which are the deployed
graph's node names with every character that is not a C identifier's replaced by `_`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ckpt.errors import CkptError

_CALL_COMMENT = re.compile(r"^// _(?P<layer>\w+?)_closure(?:_\w+)? CLOSURE CALL$")
_PROBE_LINE = re.compile(r"^ckpt-probe (\d+) (\d+) (\d+)\s*$", re.MULTILINE)
_PROBE_COUNT = re.compile(r"^ckpt-probes (\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Instrumented:
    source: str                  # Network.c with the probes
    layers: tuple[str, ...]      # the probed layers, in run order (Deeploy's names)


def c_name(node: str) -> str:
    """A node's name as Deeploy's generated code spells it."""
    return re.sub(r"\W", "_", node)


def _run_network(lines: list[str], run: str) -> tuple[int, int]:
    """The line range of the run entry's body: the layers of a step (closures nest inside their definitions)."""
    start = next((i for i, line in enumerate(lines) if line.startswith(f"void {run}(")), None)
    end, depth = None, 0
    for i in range(start if start is not None else len(lines), len(lines)):   # braces balance at its end
        depth += lines[i].count("{") - lines[i].count("}")
        if depth == 0 and lines[i] == "}":
            end = i
            break
    if start is None or end is None:
        raise CkptError(f"the generated code has no {run} ckpt can read",
                        "generate it with the Deeploy version ckpt pins")
    return start, end


def instrument(network_c: str, run: str = "RunNetwork", first: int = 0) -> Instrumented:
    """`network_c` with a probe around each layer's call in its run entry `run` (see the module doc), numbered
    from `first` (a split step's two networks share one set of probes)."""
    lines = network_c.split("\n")
    start, end = _run_network(lines, run)
    out: list[str] = lines[:start]
    layers: list[str] = []
    index = start
    while index < end:
        line = lines[index]
        match = _CALL_COMMENT.match(line)
        if match and index + 1 < len(lines) and lines[index + 1].startswith(f"_{match['layer']}_closure"):
            k = first + len(layers)
            out += [line, f"CKPT_PROBE_BEGIN({k});", lines[index + 1], f"CKPT_PROBE_END({k});"]
            layers.append(match["layer"])
            index += 2
            continue
        out.append(line)
        index += 1
    out += lines[end:]
    if not layers:
        raise CkptError("the generated code has no layer calls ckpt can probe",
                        "generate it with the Deeploy version ckpt pins")
    return Instrumented("\n".join(out), tuple(layers))


def layer_cycles(log: str, layers: tuple[str, ...]) -> dict[str, int] | None:
    """Cycles per probed layer from the run's output, a repeated layer summed; None when the probes are missing
    or incomplete (the step did not reach the report)."""
    count = _PROBE_COUNT.findall(log)
    probes = {int(k): (int(b), int(e)) for k, b, e in _PROBE_LINE.findall(log)}
    if not count or int(count[-1]) != len(layers) or set(probes) != set(range(len(layers))):
        return None
    found: dict[str, int] = {}
    for k, layer in enumerate(layers):
        begin, end = probes[k]
        found[layer] = found.get(layer, 0) + ((end - begin) & 0xFFFFFFFF)
    return found
