"""A Deeploy branch installed in place of the release may report the release's version: the fingerprint the
lowering cache and the reference outputs are keyed by changes with any of its Python files."""
import importlib.util
from types import SimpleNamespace

from ckpt.deeploy_bridge import versions


def _fingerprint_of(folder, monkeypatch) -> str:
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: SimpleNamespace(submodule_search_locations=[str(folder)]))
    versions.deeploy_fingerprint.cache_clear()
    try:
        return versions.deeploy_fingerprint()
    finally:
        versions.deeploy_fingerprint.cache_clear()


def test_the_fingerprint_follows_every_python_file_and_keeps_the_version(tmp_path, monkeypatch):
    (tmp_path / "Targets").mkdir()
    kernel = tmp_path / "Targets" / "Bindings.py"
    kernel.write_text("ConvGrad = None\n")
    (tmp_path / "notes.txt").write_text("not code")
    first = _fingerprint_of(tmp_path, monkeypatch)
    (tmp_path / "notes.txt").write_text("changed, still not code")
    assert _fingerprint_of(tmp_path, monkeypatch) == first
    kernel.write_text("ConvGrad = 'mapped'\n")
    second = _fingerprint_of(tmp_path, monkeypatch)
    assert second != first and first.split("+")[0] == second.split("+")[0] == versions.deeploy_version()
