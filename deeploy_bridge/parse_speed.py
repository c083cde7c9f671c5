"""Deeploy's front-end parse made cheaper, with the same results: its per-layer deep copies of the context.

`NetworkContainer.parse` deep-copies the whole context before it parses each layer (the copy it backtracks to),
so the work grows with the square of the network; on a graph of a few hundred layers (MobileNetV1 of the training
branch) those copies were most of Deeploy's time. Nearly all of it is Python's generic `copy.deepcopy` taking
each buffer (`VariableBuffer` and its kinds) and each type instance (`BaseType`: the buffers' pointers, structs)
apart through pickling's reduce protocol: `__reduce_ex__`, `_reconstruct`, a deep copy of a fresh state dict,
one generic dispatch per attribute.

Here those two families get a `__deepcopy__` that does what that protocol does for them, step by step: a new
object of the same class registered in the memo first, the object's own `__getstate__`, each value deep-copied
through the same memo (values that deepcopy returns as they are, such as strings and numbers, are taken as they
are, and a set of those is rebuilt from its items in their order, as deepcopy rebuilds it), then the class's
`__setstate__` or, without one, the instance dict updated. A class whose copying is not that protocol (its own
`__deepcopy__`, `__reduce_ex__`, `__reduce__`, `__getnewargs__`, a copyreg entry, a list or dict subclass) keeps
Python's own path. Nothing else changes: the same objects, sharing what the originals shared. Importing this
module applies it once; `restore()` undoes it (for the tests' comparison).
"""
from __future__ import annotations

import copy
import copyreg
import types

from Deeploy.AbstractDataTypes import BaseType
from Deeploy.DeeployTypes import VariableBuffer

# what copy.deepcopy returns unchanged without touching the memo (its _deepcopy_atomic types)
_ATOMIC = frozenset({type(None), int, float, bool, complex, bytes, str, types.CodeType, type, range,
                     types.BuiltinFunctionType, types.FunctionType, type(Ellipsis), type(NotImplemented),
                     property})
_FAMILIES = (VariableBuffer, BaseType)
_NIL = object()
_plain: dict[type, bool] = {}


def _copies_by_reduce(cls: type) -> bool:
    """Whether copy.deepcopy copies an instance of `cls` through object's own reduce protocol (what this module
    replays), with the state its `__getstate__` returns."""
    known = _plain.get(cls)
    if known is None:
        known = (cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
                 and not hasattr(cls, "__getnewargs_ex__") and not hasattr(cls, "__getnewargs__")
                 and cls not in copyreg.dispatch_table and cls not in copy._deepcopy_dispatch
                 and not issubclass(cls, (list, dict, type)))
        _plain[cls] = known
    return known


def _deepcopy_by_state(self, memo: dict):
    cls = type(self)
    if not _copies_by_reduce(cls):                     # Python's own path, as deepcopy would take it
        return copy._reconstruct(self, memo, *self.__reduce_ex__(4))
    new = cls.__new__(cls)
    memo[id(self)] = new
    state = self.__getstate__()
    if state is None:
        return new
    if type(state) is dict:
        # the state dict is a fresh one (both families' __getstate__ build it): no other object can hold it, so
        # only its values are copied through the memo
        state = {key: _copied(value, memo) for key, value in state.items()}
    else:
        state = copy.deepcopy(state, memo)
    setstate = getattr(new, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return new
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        new.__dict__.update(state)
    if slots:
        for key, value in slots.items():
            setattr(new, key, value)
    return new


def _copied(value, memo: dict):
    """copy.deepcopy(value, memo), without its detour for a value deepcopy returns as it is or a set of such
    values (a buffer's aliases: deepcopy takes a set apart by its reduce protocol, recounting the set type's slots
    each time)."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is set:
        found = memo.get(id(value), _NIL)
        if found is not _NIL:
            return found
        items = list(value)                   # the order deepcopy's rebuilt set is filled in
        if all(type(item) in _ATOMIC for item in items):
            new = set(items)
            memo[id(value)] = new
            memo.setdefault(id(memo), []).append(value)      # kept alive, as deepcopy keeps what it copied
            return new
    return copy.deepcopy(value, memo)


_original = {family: family.__dict__.get("__deepcopy__") for family in _FAMILIES}


def apply() -> None:
    for family in _FAMILIES:
        family.__deepcopy__ = _deepcopy_by_state
    _plain.clear()


def restore() -> None:
    """Deeploy's own copying again."""
    for family, method in _original.items():
        if method is None:
            if "__deepcopy__" in family.__dict__:
                delattr(family, "__deepcopy__")
        else:
            family.__deepcopy__ = method
    _plain.clear()


if all(method is None for method in _original.values()):     # a Deeploy with its own copying keeps it
    apply()
