"""Weights updated in place, one copy of each constant: the tiled flow's generated code as ckpt deploys it.

Deeploy 0.2.1 writes each SGD's result into a new buffer (a graph output, in the arena from the SGD to the end of
the step) and gives every reader of a constant a copy of its own, so the update reaches no reader and a second
step reads the old weights. Deeploy has no in-place mechanism for compute ops, but its tiler already knows a
buffer that aliases a global one (the mechanism its Reshape views use: `_alias`) and gives it no arena block.
`apply_in_place` uses that, on a deployer after its front end and before binding:

1. the constant plan (deeploy_bridge.constants): merged copies become one buffer (readers' inputs, parser
   representations and users rewired to the canonical copy); views stay buffers of their own shape;
2. each SGD's output is declared an alias of the weight it reads (the canonical copy), so the tiler places
   nothing for it. The SGD's tiled code reads each tile of the weight before it writes the same tile back, one
   tile at a time (single buffering), so writing the result over the weight is safe;
3. at code generation (`InPlaceAllocation.generateBufferAllocationCode`) those outputs and the views get no
   allocation and no file; after the constants are allocated and loaded, each view points at its canonical
   bytes and each output (and `DeeployNetwork_outputs[k]`) at its weight. Constants on chip (a home level of L2
   or L1) are arrays with their values in the code: a view is declared a pointer at every level, so it can point
   at its canonical array there too;
4. at the end of the step (`refresh_code`, placed by ckpt's code assembly) every copy that repeats an updated
   weight's bytes is written again from it, so the next step's readers see the update.
The order is the schedule's: every reader of a weight must run before its update (solver.graph.in_place holds the
solver to that). The other deployments (the non-tiled flow, the tiled flow with weights out of place) keep
Deeploy's layout and write each update back at the end of the step (deeploy_bridge.write_back).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from Deeploy.DeeployTypes import NodeTemplate
from Deeploy.Targets.PULPOpen.Deployer import PULPDeployer

from ckpt.solver.graph.in_place import UPDATES_IN_PLACE

from .constants import ConstantPlan, constant_plan
from .write_back import CHUNK, copy_code


def view_declaration(off_chip: str) -> NodeTemplate:
    """A constant copy that reads another's bytes is a pointer at every level: Deeploy declares a constant in the
    off-chip level `off_chip` so, and an on-chip one as an array with its values."""
    return NodeTemplate(f"""
% if _memoryLevel == {off_chip!r}:
static PI_L2 ${{type.referencedType.typeName}}* ${{name}};
% else:
static ${{type.typeName}} ${{name}};
% endif
""")


@dataclass
class InPlaceCode:
    """What the generated code does differently (names are Deeploy's buffer names)."""

    plan: ConstantPlan
    off_chip: str                                              # the level behind the chip: the RAM driver's
    outputs: dict[str, str] = field(default_factory=dict)      # SGD output -> the weight it overwrites
    refresh: dict[str, tuple[str, int]] = field(default_factory=dict)   # repeat copy -> (updated weight, times)


class InPlaceAllocation:
    """A deployer's buffer allocation following `in_place` where it is set (by apply_in_place); mixed in before a
    platform's deployer (Siracusa's below, GAP9's in deeploy_bridge.targets)."""

    in_place: InPlaceCode | None = None

    def generateBufferAllocationCode(self) -> str:
        code = self.in_place
        if code is None:
            return super().generateBufferAllocationCode()
        ctxt = self.ctxt
        hidden = {name: ctxt.lookup(name)._users for name in code.plan.views}
        for name in hidden:
            ctxt.lookup(name)._users = []          # no malloc, no file: the bytes are the canonical copy's
        for name in code.outputs:
            ctxt.lookup(name).allocTemplate = NodeTemplate("")
        try:
            text = super().generateBufferAllocationCode()
        finally:
            for name, users in hidden.items():
                ctxt.lookup(name)._users = users
        mangle = ctxt._mangle
        outputs = [t.name for t in self.graph.outputs]
        lines = ["", "// ckpt: constant copies with the canonical copy's bytes read them (one copy per constant)"]
        lines += [f"{mangle(view)} = {mangle(canonical)};" for view, canonical in sorted(code.plan.views.items())]
        lines += ["// ckpt: each SGD writes its weight in place: its output is the weight's buffer"]
        lines += [f"{mangle(out)} = {mangle(weight)}; "
                  f"{mangle('outputs')}[{outputs.index(out)}] = (void*) {mangle(out)};"
                  for out, weight in sorted(code.outputs.items())]
        return text + "\n".join(lines) + "\n"


class InPlacePULPDeployer(InPlaceAllocation, PULPDeployer):
    """Siracusa's deployer with ckpt's in-place allocation."""


def apply_in_place(deployer, off_chip: str) -> InPlaceCode:
    """Steps 1 and 2 of the module doc on a deployer after its front end; the deployer's code generation then
    does step 3. `off_chip`: the deployment's level behind the chip. Returns what the code will do differently."""
    ctxt, graph = deployer.ctxt, deployer.graph
    plan = constant_plan(ctxt, graph)
    _merge(deployer, plan.merged)
    declaration = view_declaration(off_chip)
    for view in plan.views:
        ctxt.lookup(view).initTemplate = declaration
    outputs = {}
    for node in graph.nodes:
        if node.op in UPDATES_IN_PLACE and node.outputs and node.inputs:
            weight, out = node.inputs[0].name, node.outputs[0].name
            ctxt.lookup(out)._alias = weight
            outputs[out] = weight
    refresh = {copy: (canonical, times) for copy, (canonical, times) in plan.repeats.items()
               if canonical in outputs.values()}
    code = InPlaceCode(plan, off_chip, outputs, refresh)
    deployer.in_place = code           # the wrappers pass attribute writes to the PULP deployer inside
    return code


def _merge(deployer, merged: dict[str, str]) -> None:
    """Make every merged copy's readers read the canonical buffer, and drop the copy."""
    ctxt, tensors = deployer.ctxt, deployer.graph.tensors()
    for copy, canonical in sorted(merged.items()):
        kept = ctxt.lookup(canonical)
        for user in list(ctxt.lookup(copy)._users):
            layer = deployer.layerBinding[user]
            for k, tensor in enumerate(layer.node.inputs):
                if tensor.name == copy:
                    layer.node.inputs[k] = tensors[canonical]
            representation = layer.mapper.parser.operatorRepresentation
            for key, value in list(representation.items()):
                if isinstance(value, str) and value == copy:
                    representation[key] = canonical
            if user not in kept._users:
                kept._users.append(user)
        del ctxt.globalObjects[copy]


def refresh_code(deployer) -> str:
    """Step 4 of the module doc: C for the end of RunNetwork (empty when nothing repeats an updated weight)."""
    code = getattr(deployer, "in_place", None)
    if code is None or not code.refresh:
        return ""
    lines = ["// ckpt: copies that repeat an updated weight's bytes take the update, for the next step",
             f"int8_t ckpt_refresh[{CHUNK}];"]
    for copy, (weight, times) in sorted(code.refresh.items()):
        lines += copy_code(deployer.ctxt, weight, copy, times, "ckpt_refresh", code.off_chip)
    return "\n".join(lines) + "\n"
