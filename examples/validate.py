"""Structural checks for generated training graphs (also usable on cct2_ft2-style files).

onnx.checker rejects these graphs as they stand, exactly as it rejects cct2_ft2: SGD and GeluGrad
sit in the default domain without an ONNX schema, and backward nodes carry cct2_ft2's non-standard
``description`` attribute. ``checkable`` returns a copy without those two quirks so the checker can
validate everything else (standard op attributes, topological order, defined inputs).
"""

from __future__ import annotations

import onnx
from onnx import defs

from .builder import BACKWARD_DESCRIPTION

#: Private domain that training-only default-domain ops are moved to for onnx.checker.
CHECK_DOMAIN = "ckpt.training"


def checkable(model: onnx.ModelProto) -> onnx.ModelProto:
    """Copy with schema-less default-domain ops re-domained and ``description`` moved to doc_string."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    moved = False
    for node in m.graph.node:
        keep = [a for a in node.attribute if a.name != "description"]
        if len(keep) != len(node.attribute):
            node.doc_string = BACKWARD_DESCRIPTION
            del node.attribute[:]
            node.attribute.extend(keep)
        if node.domain in ("", "ai.onnx") and not defs.has(node.op_type):
            node.domain = CHECK_DOMAIN
            moved = True
    if moved:
        m.opset_import.append(onnx.helper.make_opsetid(CHECK_DOMAIN, 1))
    return m


def graph_problems(model: onnx.ModelProto) -> list[str]:
    """Problems that would break tools relying on value_info and node order; empty when fine.

    Checks: nodes in topological order, every tensor typed with a fully static shape (value_info,
    graph input/output or initializer), unique node names, single producer per tensor.
    """
    g = model.graph
    problems: list[str] = []
    typed: dict[str, onnx.ValueInfoProto] = {}
    for vi in [*g.input, *g.output, *g.value_info]:
        typed[vi.name] = vi
    for vi in typed.values():
        tt = vi.type.tensor_type
        if tt.elem_type == 0 or not all(d.HasField("dim_value") and d.dim_value > 0 for d in tt.shape.dim):
            problems.append(f"value_info of {vi.name} lacks a dtype or a static shape")
    available = {i.name for i in g.input} | {i.name for i in g.initializer}
    names: set[str] = set()
    for node in g.node:
        if node.name in names:
            problems.append(f"duplicate node name {node.name}")
        names.add(node.name)
        for t in node.input:
            if t and t not in available:
                problems.append(f"{node.name} consumes {t} before it is produced")
        for t in node.output:
            if t in available:
                problems.append(f"{t} produced twice")
            available.add(t)
            if t not in typed:
                problems.append(f"{t} (output of {node.name}) has no value_info")
    for o in g.output:
        if o.name not in available:
            problems.append(f"graph output {o.name} is never produced")
    return problems
