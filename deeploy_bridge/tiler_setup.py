"""Deeploy's tiler setup made linear in the network's size, with the same results.

Before it solves anything, Deeploy's tiler builds one memory constraint per layer that lists every tensor the
layer touches plus every global buffer of the network, and lays out each level from them. Three steps of that
grow with the square (or cube) of the network, which on a graph of a few hundred layers (MobileNetV1 of the
training branch) takes minutes:
- `NodeMemoryConstraint.addTensorConstraint` asks whether a tensor is there by merging the constraint's three
  dicts into a new one, for every tensor added;
- `NodeMemoryConstraint.__add__` deep-copies each constraint's tensors with Python's generic `copy.deepcopy`,
  which takes a `TensorMemoryConstraint` apart through pickling's reduce protocol;
- `MemoryScheduler._buildAdjacencyMatrix` finds each buffer's row by searching a fresh list of all names, for
  every edge of the interference graph.
Here the first looks in the three dicts, the second copies a tensor constraint slot by slot through the same
memo (shared objects stay shared, as deepcopy keeps them), and the third indexes the names once. Each gives what
Deeploy's own gives: the same objects, in the same order, or the same error. Importing this module applies it
once.
"""
from __future__ import annotations

import copy

import numpy as np
from Deeploy.TilingExtension.MemoryConstraints import NodeMemoryConstraint, TensorMemoryConstraint
from Deeploy.TilingExtension.MemoryScheduler import MemoryScheduler

_original = {
    "addTensorConstraint": NodeMemoryConstraint.addTensorConstraint,
    "_amendTensorConstraint": NodeMemoryConstraint._amendTensorConstraint,
    "__deepcopy__": getattr(TensorMemoryConstraint, "__deepcopy__", None),
    "_buildAdjacencyMatrix": MemoryScheduler._buildAdjacencyMatrix,
}


def _held(node: NodeMemoryConstraint, name: str) -> TensorMemoryConstraint | None:
    """The tensor constraint `node.tensorMemoryConstraints[name]` gives (outputs over intermediates over inputs,
    as that merged dict orders them), or None: without building the merged dict."""
    for held in (node.outputTensorMemoryConstraints, node.intermediateTensorMemoryConstraints,
                 node.inputTensorMemoryConstraints):
        found = held.get(name)
        if found is not None or name in held:
            return found
    return None


def _holds(node: NodeMemoryConstraint, name: str) -> bool:
    return (name in node.inputTensorMemoryConstraints or name in node.intermediateTensorMemoryConstraints
            or name in node.outputTensorMemoryConstraints)


def _amend_tensor_constraint(self: NodeMemoryConstraint, tensorMemoryConstraint: TensorMemoryConstraint) -> None:
    name = tensorMemoryConstraint.tensorName
    if _holds(self, name):
        _held(self, name)._amendMemoryConstraints(tensorMemoryConstraint.memoryConstraints)


def _add_tensor_constraint(self: NodeMemoryConstraint, tensorMemoryConstraint: TensorMemoryConstraint,
                           io: str) -> None:
    name = tensorMemoryConstraint.tensorName
    if _holds(self, name):
        self._amendTensorConstraint(tensorMemoryConstraint)
        return
    if io == "input":
        held = self.inputTensorMemoryConstraints
    elif io == "output":
        held = self.outputTensorMemoryConstraints
    else:
        held = self.intermediateTensorMemoryConstraints
    held[name] = tensorMemoryConstraint


def _deepcopy_tensor_constraint(self: TensorMemoryConstraint, memo: dict) -> TensorMemoryConstraint:
    """What copy.deepcopy makes of a tensor constraint (a new object, its slots deep-copied through `memo`)."""
    new = type(self).__new__(type(self))
    memo[id(self)] = new
    for slot in TensorMemoryConstraint.__slots__:
        try:
            value = getattr(self, slot)
        except AttributeError:
            continue
        setattr(new, slot, copy.deepcopy(value, memo))
    return new


def _build_adjacency_matrix(self: MemoryScheduler, graph: dict, tensorMap: dict) -> np.ndarray:
    size = len(graph)
    matrix = np.zeros((size, size), dtype=int)
    index = {name: i for i, name in enumerate(tensorMap.keys())}

    def row(name: str) -> int:
        if name not in index:
            raise ValueError(f"{name!r} is not in list")
        return index[name]

    for node, neighbors in graph.items():
        at = row(node)
        for neighbor in neighbors:
            matrix[at, row(neighbor)] = 1
    return matrix


NodeMemoryConstraint.addTensorConstraint = _add_tensor_constraint
NodeMemoryConstraint._amendTensorConstraint = _amend_tensor_constraint
TensorMemoryConstraint.__deepcopy__ = _deepcopy_tensor_constraint
MemoryScheduler._buildAdjacencyMatrix = _build_adjacency_matrix
