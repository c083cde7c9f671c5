"""The optimizer network's deployment, kept across points (deeploy_bridge.deploy_cache): a second deployment takes
the same files and figures from the cache without running Deeploy; any input that changes the deployment is
another key; an entry that does not check out is deployed again."""
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.deeploy


@pytest.fixture
def step(shared_models, monkeypatch, tmp_path):
    from ckpt import deeploy_bridge
    from ckpt.deeploy_identity import Flavour, deeploy_flavour

    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip("split steps (an optimizer network) need the training branch (pip install ../shared/deeploy-train)")
    from ckpt.replay.split_run import split_step
    from ckpt.solver.graph.onnx_loader import read_model

    monkeypatch.setenv("CKPT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_models / "simplemlp_train"
    lowered = deeploy_bridge.lower(folder, "siracusa")
    return lowered, split_step(folder, read_model(folder), lowered.io_names, None, lowered.model)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _without_time(figures):
    return replace(figures, timings=None, code_dir=None)


def test_the_second_deployment_comes_from_the_cache_with_the_same_code(step, tmp_path, monkeypatch):
    from ckpt import deeploy_bridge
    from ckpt.deeploy_bridge.setup import setup_for
    from ckpt.replay.split_run import deploy_split

    lowered, split = step
    order = [n.name for n in lowered.model.graph.node]
    first = deploy_split(lowered.model, order, split, "siracusa", True, setup_for("siracusa"), tmp_path / "a")
    runs = []
    real = deeploy_bridge.deploy

    def counted(model, *args, **kwargs):
        runs.append(kwargs.get("role"))
        return real(model, *args, **kwargs)

    monkeypatch.setattr(deeploy_bridge, "deploy", counted)
    second = deploy_split(lowered.model, order, split, "siracusa", True, setup_for("siracusa"), tmp_path / "b")
    assert len(runs) == 1                                   # only the train network ran Deeploy again
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert _without_time(first[1]) == _without_time(second[1])
    assert second[1].code_dir == tmp_path / "b" and second[1].timings.cache_load > 0
    assert first[0].arena == second[0].arena


def test_what_changes_the_deployment_changes_the_key(step):
    import onnx

    from ckpt.deeploy_bridge.deploy_cache import deploy_key
    from ckpt.deeploy_bridge.setup import WeightUpdate, setup_for
    from ckpt.deeploy_bridge.split_step import optimizer_role

    _, split = step
    role = optimizer_role(split.io, split.optimizer, split.elements)
    setup = replace(setup_for("siracusa"), weights=WeightUpdate.OUT_OF_PLACE)
    base = deploy_key(split.optimizer, "siracusa", True, setup, role)
    assert base == deploy_key(split.optimizer, "siracusa", True, setup, role)
    other = onnx.ModelProto()
    other.CopyFrom(split.optimizer)
    other.graph.node[0].name += "_renamed"
    changed = [deploy_key(other, "siracusa", True, setup, role),
               deploy_key(split.optimizer, "siracusa", False, setup, role),
               deploy_key(split.optimizer, "gap9", True, setup, role),
               deploy_key(split.optimizer, "siracusa", True, replace(setup, n_cores=4), role),
               deploy_key(split.optimizer, "siracusa", True, setup, replace(role, borrowed=()))]
    assert base not in changed and len(set(changed)) == len(changed)


def test_a_spoilt_entry_is_deployed_again(step, tmp_path):
    from ckpt.deeploy_bridge.setup import setup_for
    from ckpt.paths import cache_root
    from ckpt.replay.split_run import deploy_split

    lowered, split = step
    order = [n.name for n in lowered.model.graph.node]
    deploy_split(lowered.model, order, split, "siracusa", True, setup_for("siracusa"), tmp_path / "a")
    [entry] = (cache_root() / "deployed").iterdir()
    spoilt = next(p for p in (entry / "code").rglob("*.c"))
    spoilt.write_text(spoilt.read_text() + "\n/* changed */\n")
    again = deploy_split(lowered.model, order, split, "siracusa", True, setup_for("siracusa"), tmp_path / "b")
    assert again[1].timings.cache_load == 0                # Deeploy ran
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert "changed" not in next((entry / "code").rglob("*.c")).read_text()
