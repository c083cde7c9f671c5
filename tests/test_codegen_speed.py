"""Deeploy's code generation as ckpt patches it (deeploy_bridge.codegen_speed) gives what Deeploy's own code gives:
the same order of a layer's buffer names, the same error for a name the context lacks, the same global text."""
from types import SimpleNamespace

import pytest
from Deeploy.CommonExtensions.CodeTransformationPasses.IntrospectiveCodeTransformation import (
    IntrospectiveCodeTransformationMixIn,
)
from Deeploy.DeeployTypes import (
    ConstantBuffer,
    NetworkContainer,
    NetworkContext,
    StructBuffer,
    TransientBuffer,
    VariableBuffer,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.deeploy_bridge import codegen_speed

NAMES = [f"b{i}" for i in range(10)]


def _context(global_names: list[str], local_names: list[str]) -> NetworkContext:
    ctxt = NetworkContext(variableBuffer=VariableBuffer, constantBuffer=ConstantBuffer, structBuffer=StructBuffer,
                          transientBuffer=TransientBuffer)
    for name in global_names:
        ctxt.globalObjects[name] = VariableBuffer(name, [1])
    for name in local_names:
        ctxt.localObjects[name] = VariableBuffer(name, [1])
    return ctxt


def test_the_patch_is_applied():
    assert IntrospectiveCodeTransformationMixIn._fixCtxtOrdering is codegen_speed._fix_ctxt_ordering
    assert NetworkContainer.generateGlobalDefinitionCode is codegen_speed._generate_global_definition_code


@settings(max_examples=property_examples(200), deadline=None)
@given(st.permutations(NAMES), st.integers(0, 10), st.lists(st.sampled_from(NAMES), max_size=12),
       st.lists(st.sampled_from(NAMES), max_size=3))
def test_buffer_names_are_ordered_as_deeploy_orders_them(order, split, wanted, twice):
    ctxt = _context(order[:split], order[split:] + twice)       # a name in both: its first place counts
    assert codegen_speed._fix_ctxt_ordering(ctxt, wanted) == codegen_speed._original["_fixCtxtOrdering"](ctxt, wanted)


def test_a_name_the_context_lacks_is_the_same_error():
    ctxt = _context(["a"], ["b"])
    for fix in (codegen_speed._fix_ctxt_ordering, codegen_speed._original["_fixCtxtOrdering"]):
        with pytest.raises(ValueError):
            fix(ctxt, ["b", "missing"])


def test_the_global_definitions_are_the_same_text():
    ctxt = _context(["x"], [])
    for i in range(5):
        ctxt.hoistGlobalDefinition(f"g{i}", f"int g{i} = {i};\n")
    container = SimpleNamespace(parsed=True, bound=True, ctxt=ctxt)
    text = codegen_speed._generate_global_definition_code(container)
    assert text == codegen_speed._original["generateGlobalDefinitionCode"](container)
    assert text.startswith("int g0 = 0;\nint g1 = 1;\n")
    with pytest.raises(RuntimeError, match="parse and bind"):
        codegen_speed._generate_global_definition_code(SimpleNamespace(parsed=False, bound=True, ctxt=ctxt))


def test_the_places_are_indexed_again_when_the_context_changes():
    ctxt = _context(["a", "b", "c"], ["d"])
    original = codegen_speed._original["_fixCtxtOrdering"]
    assert codegen_speed._fix_ctxt_ordering(ctxt, ["d", "c", "a"]) == original(ctxt, ["d", "c", "a"])
    ctxt.globalObjects["a"] = ctxt.globalObjects.pop("a")           # the same names, another order
    ctxt.localObjects["e"] = VariableBuffer("e", [1])
    for wanted in (["d", "c", "a"], ["e", "a", "b"]):
        assert codegen_speed._fix_ctxt_ordering(ctxt, wanted) == original(ctxt, wanted)
    del ctxt.localObjects["e"]
    with pytest.raises(ValueError):
        codegen_speed._fix_ctxt_ordering(ctxt, ["e"])


@settings(max_examples=property_examples(200), deadline=None)
@given(st.integers(0, 60), st.integers(0, 60), st.data())
def test_names_anywhere_in_a_large_context_are_ordered_as_deeploy_orders_them(n_global, n_local, data):
    names = [f"n{i}" for i in range(n_global + n_local)]
    both = data.draw(st.lists(st.sampled_from(names[:n_global] or ["n0"]), max_size=3))
    ctxt = _context(names[:n_global], names[n_global:] + [n for n in both if n in names[:n_global]])
    pool = names + ["missing"] if data.draw(st.booleans()) else names
    wanted = data.draw(st.lists(st.sampled_from(pool), max_size=8)) if pool else []
    original = codegen_speed._original["_fixCtxtOrdering"]
    try:
        expected = original(ctxt, wanted)
    except ValueError:
        with pytest.raises(ValueError):
            codegen_speed._fix_ctxt_ordering(ctxt, wanted)
        return
    assert codegen_speed._fix_ctxt_ordering(ctxt, wanted) == expected
