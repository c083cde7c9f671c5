"""Deeploy's parse as ckpt speeds it up (deeploy_bridge.parse_speed) copies a context as Python's own deepcopy
does: the same classes, the same values, the same sharing between objects, and the originals untouched; and a
deployed network's generated code is byte-identical either way."""
import copy

import numpy as np
import pytest
from Deeploy.AbstractDataTypes import BaseType, PointerClass
from Deeploy.CommonExtensions.DataTypes import float32_t, int8_t
from Deeploy.DeeployTypes import (
    ConstantBuffer,
    NetworkContainer,
    NetworkContext,
    StructBuffer,
    TransientBuffer,
    VariableBuffer,
    _ReferenceBuffer,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.deeploy_bridge import parse_speed

ATOMS = (type(None), int, float, bool, str, bytes, type)


class _Deeploys:
    """Python's own deepcopy for the length of a with block."""

    def __enter__(self):
        parse_speed.restore()

    def __exit__(self, *exc):
        parse_speed.apply()


def shape_of(root) -> object:
    """Everything reachable from `root`, each object named by the order it is first met (so sharing shows)."""
    seen: dict[int, int] = {}
    keep = []

    def walk(obj):
        if type(obj) in ATOMS:
            return obj
        if id(obj) in seen:
            return ("ref", seen[id(obj)])
        seen[id(obj)] = len(seen)
        keep.append(obj)
        me = seen[id(obj)]
        if isinstance(obj, np.ndarray):
            return ("array", me, obj.dtype.str, obj.shape, obj.tobytes(), obj.flags.writeable)
        if isinstance(obj, (list, tuple)):
            return (type(obj).__name__, me, [walk(o) for o in obj])
        if isinstance(obj, (set, frozenset)):
            return (type(obj).__name__, me, [repr(o) for o in obj])         # in iteration order
        if isinstance(obj, dict):
            return (type(obj).__name__, me, [(walk(k), walk(v)) for k, v in obj.items()])
        fields = dict(getattr(obj, "__dict__", {}))
        for cls in type(obj).__mro__:
            for slot in cls.__dict__.get("__slots__", ()):
                if slot not in fields and hasattr(obj, slot):
                    fields[slot] = getattr(obj, slot)
        return (type(obj), me, [(k, walk(v)) for k, v in fields.items()])

    return walk(root)


def reachable(root) -> dict[int, object]:
    """Every non-atomic object reachable from `root`, by id."""
    found: dict[int, object] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if type(obj) in ATOMS or id(obj) in found:
            continue
        found[id(obj)] = obj
        if isinstance(obj, dict):
            stack += [*obj.keys(), *obj.values()]
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack += list(obj)
        elif not isinstance(obj, np.ndarray):
            stack += list(getattr(obj, "__dict__", {}).values())
            stack += [getattr(obj, s) for c in type(obj).__mro__ for s in c.__dict__.get("__slots__", ())
                      if hasattr(obj, s)]
    return found


def shared_with(copied, original) -> set[int]:
    """The objects a copy still shares with its original."""
    return set(reachable(copied)) & set(reachable(original))


def test_the_copy_is_applied_and_deeploy_had_none_of_its_own():
    assert VariableBuffer.__deepcopy__ is parse_speed._deepcopy_by_state
    assert BaseType.__deepcopy__ is parse_speed._deepcopy_by_state
    assert all(method is None for method in parse_speed._original.values())


def _context(spec: list) -> NetworkContext:
    """A context of every buffer kind the parse meets, sharing shapes, types and values as `spec` says."""
    ctxt = NetworkContext(variableBuffer=VariableBuffer, constantBuffer=ConstantBuffer, structBuffer=StructBuffer,
                          transientBuffer=TransientBuffer)
    shared_shape = [2, 3]
    shared_values = np.arange(6, dtype=np.float32).reshape(2, 3)
    for i, (kind, share, typed, users) in enumerate(spec):
        name = f"b{i}"
        shape = shared_shape if share else [2, 3]
        if kind == "variable":
            buffer = VariableBuffer(name, shape, aliases=[f"alias{i}_{j}" for j in range(9)] if share else None)
        elif kind == "constant":
            buffer = ConstantBuffer(name, shape, shared_values if share else np.ones(shape, np.int8))
        elif kind == "transient":
            buffer = TransientBuffer(name, 24)
        else:
            buffer = _ReferenceBuffer(name, VariableBuffer("ref", shape), shape, offset=4 if share else None)
        buffer._users = [f"n{j}" for j in range(users)]
        ctxt.globalObjects[name] = buffer
        if share:                           # one buffer under two names: one copy of it under both
            ctxt.localObjects[f"{name}_again"] = buffer
        if typed:
            pointer = PointerClass(float32_t if kind != "constant" else int8_t)
            buffer._type = pointer
            buffer._instance = pointer(name, ctxt=ctxt) if kind != "transient" else None
    return ctxt


SPEC = st.lists(st.tuples(st.sampled_from(["variable", "constant", "transient", "reference"]), st.booleans(),
                          st.booleans(), st.integers(0, 3)), min_size=1, max_size=8)


@settings(max_examples=property_examples(60), deadline=None)
@given(SPEC)
def test_a_context_is_copied_as_deepcopy_copies_it(spec):
    ctxt = _context(spec)
    before = shape_of(ctxt)
    fast = copy.deepcopy(ctxt)
    with _Deeploys():
        assert "__deepcopy__" not in VariableBuffer.__dict__
        slow = copy.deepcopy(ctxt)
    assert shape_of(fast) == shape_of(slow)
    assert shape_of(ctxt) == before                                      # the original untouched
    assert shared_with(fast, ctxt) == shared_with(slow, ctxt)            # what a copy still shares


def test_a_class_copied_another_way_keeps_pythons_path():
    class Reduced(VariableBuffer):
        def __reduce__(self):
            return (Reduced, (self.name + "!", [7]))

    original = Reduced("x", [1])
    copied = copy.deepcopy(original)
    assert (copied.name, copied.shape) == ("x!", [7])


@pytest.mark.deeploy
@pytest.mark.parametrize("model", ["simplemlp_train"])
def test_a_parsed_network_is_copied_and_deployed_as_deeploy_does(model, shared_models, tmp_path):
    """A real context after the parse copies the same either way, and both networks' generated code is
    byte-identical with and without ckpt's copy."""
    from ckpt import deeploy_bridge
    from ckpt.deeploy_bridge.setup import setup_for
    from ckpt.deeploy_identity import Flavour, deeploy_flavour

    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip("split steps need the training branch (pip install ../shared/deeploy-train)")
    from ckpt.replay.split_run import deploy_split, split_step
    from ckpt.solver.graph.onnx_loader import read_model

    folder = shared_models / model
    lowered = deeploy_bridge.lower(folder, "siracusa")
    step = split_step(folder, read_model(folder), lowered.io_names, None, lowered.model)
    order = [n.name for n in lowered.model.graph.node]
    captured = []
    original_parse = NetworkContainer.parse

    def parse_and_keep(self, *args, **kwargs):
        done = original_parse(self, *args, **kwargs)
        captured.append(self.ctxt)
        return done

    NetworkContainer.parse = parse_and_keep
    try:
        deploy_split(lowered.model, order, step, "siracusa", True, setup_for("siracusa"), tmp_path / "fast")
    finally:
        NetworkContainer.parse = original_parse
    fast_copies = [shape_of(copy.deepcopy(c)) for c in captured]
    with _Deeploys():
        slow_copies = [shape_of(copy.deepcopy(c)) for c in captured]
        deploy_split(lowered.model, order, step, "siracusa", True, setup_for("siracusa"), tmp_path / "slow")
    assert fast_copies == slow_copies
    written = sorted(p.relative_to(tmp_path / "fast") for p in (tmp_path / "fast").rglob("*") if p.is_file())
    assert written == sorted(p.relative_to(tmp_path / "slow") for p in (tmp_path / "slow").rglob("*") if p.is_file())
    for rel in written:
        assert (tmp_path / "fast" / rel).read_bytes() == (tmp_path / "slow" / rel).read_bytes(), rel
