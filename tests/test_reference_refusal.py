"""Deeploy's refusal to make the graph order's code (a split graph order that overflows L2) is kept like its code:
the next point of the same model does not ask again (MobileNetV1 spent minutes per point on it)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import helper

from ckpt.coderun.sources import NoSources, find_sources
from ckpt.coderun.train_harness import TrainingRun
from ckpt.deeploy_bridge.errors import BridgeError
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP
from ckpt.replay import split_run


def _graph(name: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    return helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], name, [x], [y]))


def test_a_refusal_of_the_graph_orders_code_is_asked_once(monkeypatch, tmp_path):
    sources = find_sources()
    if isinstance(sources, NoSources):
        pytest.skip(sources.reason)
    monkeypatch.setenv("CKPT_CACHE_DIR", str(tmp_path / "cache"))
    asked = []

    def refuses(*args, **kwargs):
        asked.append(1)
        raise BridgeError("Some geometrical constraints are infeasible")

    monkeypatch.setattr(split_run, "deploy_split", refuses)
    run = TrainingRun(1, 1, ((np.zeros(1, np.float32),),), 1, 0, (0.5,), 1e-3)
    step = SimpleNamespace(optimizer=_graph("opt"), run=run, on_chip=(), data=SimpleNamespace(feeds={}))
    outcomes = [split_run.graph_order_outcome(_graph("train"), step, "siracusa", DEFAULT_SETUP, True, sources)
                for _ in range(2)]
    assert len(asked) == 1
    assert all("geometrical constraints" in o.reason for o in outcomes)
    other = split_run.graph_order_outcome(_graph("train"), step, "siracusa", DEFAULT_SETUP, False, sources)
    assert len(asked) == 2 and "geometrical" in other.reason          # another flow is another question
