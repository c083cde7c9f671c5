"""Relate original node/tensor names to the lowered graph's names.

Deeploy's front end (``NetworkDeployer.frontEnd``) removes Identity nodes, suffixes every tensor with
``_tensor``, suffixes duplicated node names with ``_<i>``, renames graph I/O to ``input_i``/``output_i``
by position, strips characters outside [A-Za-z0-9_] from node and tensor names, then lowering adds or
splits nodes. We mirror the renaming rules (own code) to tell renamed nodes from added/removed ones.
"""
from __future__ import annotations

import re
from collections import Counter

import onnx

from ckpt.solver.graph.onnx_loader import data_inputs

from .errors import BridgeError

_ILLEGAL = re.compile(r"[^a-zA-Z0-9_]")


def sanitize(name: str) -> str:
    return _ILLEGAL.sub("", name)


def expected_node_names(original: onnx.GraphProto) -> dict[str, str]:
    """Original node name -> the name Deeploy's preprocessing gives it (before lowering)."""
    nodes = [n for n in original.node if n.op_type != "Identity"]
    counts = Counter(n.name for n in nodes)
    seen: Counter = Counter()
    mapping = {}
    for node in nodes:
        name = node.name
        if counts[name] > 1:
            name = f"{name}_{seen[node.name]}"
            seen[node.name] += 1
        mapping[node.name] = sanitize(name)
    return mapping


_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_c_names(original: onnx.GraphProto) -> None:
    """Refuse, before Deeploy runs, a node whose name Deeploy's code cannot use: it names C variables after each
    node (`<node>_core_id`, ...) once it has dropped every character but letters, digits and `_`, so what is left
    must start with a letter or `_`."""
    for name, sanitized in expected_node_names(original).items():
        if not _C_IDENTIFIER.fullmatch(sanitized):
            what = f"is '{sanitized}', which starts with a digit," if sanitized else "keeps no letter, digit or '_'"
            raise BridgeError(f"node '{name}' {what} in Deeploy's C code, which names variables after nodes: "
                              "rename it to start with a letter or '_' (Deeploy keeps letters, digits and '_')")


def io_mapping(original: onnx.GraphProto) -> dict[str, str]:
    """Original graph input/output name -> input_i / output_i (initializers are not inputs)."""
    inputs = [i.name for i in data_inputs(original)]
    mapping = {name: f"input_{i}" for i, name in enumerate(inputs)}
    mapping.update({o.name: f"output_{i}" for i, o in enumerate(original.output)})
    return mapping


def node_diff(original: onnx.GraphProto, lowered: onnx.GraphProto) -> tuple[dict[str, str], list[str], list[str]]:
    """(kept original -> lowered name, added lowered names, removed original names)."""
    expected = expected_node_names(original)
    lowered_names = [n.name for n in lowered.node]
    present = set(lowered_names)
    kept = {orig: new for orig, new in expected.items() if new in present}
    removed = [n.name for n in original.node if n.name not in kept]
    claimed = set(kept.values())
    added = [name for name in lowered_names if name not in claimed]
    return kept, added, removed
