"""`--gvsoc DIR --target gap9`: a gvsoc with GAP9's model and GreenWaves' SDK recognised, what is missing named in
one line before any work, and the launch formed (gvsoc.gap9). Nothing here runs a GAP9 model: none is public."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_errors import one_line, run

from ckpt.errors import CkptError
from ckpt.examples import write_example
from ckpt.gvsoc import gap9
from ckpt.gvsoc.kit import shared_gvsoc

NEVER_RUN = "#!/bin/sh\necho 'a test ran gvsoc' >&2\nexit 99\n"


def _install(root: Path, model: bool = True) -> Path:
    """An install's layout as GreenWaves' SDK puts it (SDK/install/workstation): a launcher that must never run
    here, and GAP9's target module where gvsoc's launcher imports it from."""
    install = root / "sdk" / gap9.SDK_INSTALL
    (install / "bin").mkdir(parents=True)
    (install / "bin" / "gvsoc").write_text(NEVER_RUN)
    (install / "bin" / "gvsoc").chmod(0o755)
    if model:
        (install / gap9.TARGET_MODULE).parent.mkdir(parents=True)
        (install / gap9.TARGET_MODULE).write_text("")
    return install


def _sdk(root: Path, *pieces: Path) -> Path:
    sdk = root / "sdk"
    for piece in pieces:
        (sdk / piece).parent.mkdir(parents=True, exist_ok=True)
        (sdk / piece).write_text("efuse" if piece == gap9.SDK_EFUSE else "")
    return sdk


def test_the_shared_gvsoc_is_refused_for_gap9_naming_its_missing_model():
    install = shared_gvsoc() / "install"
    if not (install / "bin" / "gvsoc").is_file():
        pytest.skip(f"no gvsoc at {install}")
    with pytest.raises(CkptError) as info:
        gap9.find_gap9_gvsoc(install)
    assert "has no GAP9 model: gvsoc's target gap9.evk (generators/gap9/evk.py)" in str(info.value)
    assert "GreenWaves' GAP9 SDK" in str(info.value)


def test_an_install_with_gap9s_model_and_its_sdk_is_recognised_and_the_launch_formed(tmp_path, monkeypatch):
    monkeypatch.delenv(gap9.SDK_ENV, raising=False)
    install = _install(tmp_path)
    sdk = _sdk(tmp_path, gap9.SDK_BUILD, gap9.SDK_EFUSE)
    found = gap9.find_gap9_gvsoc(install)               # the SDK found as the folder the install sits in
    assert found == gap9.Gap9Gvsoc(install.resolve(), sdk.resolve())
    elf, work = tmp_path / "step.elf", tmp_path / "work"
    assert gap9.gap9_command(found, elf, work) == [str(install.resolve() / "bin" / "gvsoc"), "--target=gap9.evk",
                                                   f"--work-dir={work}", f"--binary={elf}", "image", "flash", "run"]
    assert (gap9.prepare_work_dir(found, work) / "chip.efuse_preload.data").read_text() == "efuse"


@pytest.mark.parametrize("missing, says", [
    ("launcher", "is not a gvsoc install (no executable bin/gvsoc)"),
    ("model", "has no GAP9 model: gvsoc's target gap9.evk"),
    ("sdk", "GreenWaves' GAP9 SDK is not found ($GAP_SDK_HOME unset)"),
    ("build", "lacks utils/cmake/setup.cmake"),
    ("efuse", "lacks utils/efuse/GAP9/efuse_hyper_preload.data")])
def test_each_missing_piece_is_named(tmp_path, monkeypatch, missing, says):
    monkeypatch.delenv(gap9.SDK_ENV, raising=False)
    install = _install(tmp_path, model=missing != "model")
    if missing == "launcher":
        (install / "bin" / "gvsoc").unlink()
    pieces = [p for name, p in (("build", gap9.SDK_BUILD), ("efuse", gap9.SDK_EFUSE)) if name != missing]
    _sdk(tmp_path, *pieces)
    if missing == "sdk":                                # an install outside any SDK, and $GAP_SDK_HOME unset
        moved = tmp_path / "elsewhere"
        install.rename(moved)
        install = moved
    with pytest.raises(CkptError) as info:
        gap9.find_gap9_gvsoc(install)
    assert says in str(info.value)


@pytest.mark.parametrize("command", [["sweep", "0.9:0.9", "--model", "{mlp}", "--target", "gap9", "-o", "{tmp}/sw"],
                                     ["replay", "{tmp}/s.json", "--model", "{mlp}", "--target", "gap9", "-o",
                                      "{tmp}/r"]])
def test_the_cli_refuses_gvsoc_for_gap9_before_any_work_naming_what_is_missing(tmp_path, monkeypatch, command):
    monkeypatch.delenv(gap9.SDK_ENV, raising=False)
    mlp = tmp_path / "mlp"
    write_example("mlp", mlp, layers=2, width=8)
    assert run("solve", str(mlp), "--target", "none", "--budget", "1.0", "-o", str(tmp_path / "s.json"))[0] == 0
    args = [a.format(mlp=mlp, tmp=tmp_path) for a in command]
    code, _, err = run(*args, "--gvsoc", str(_install(tmp_path, model=False)))
    assert code == 1 and "has no GAP9 model" in one_line(err)
    _install(tmp_path / "full")
    _sdk(tmp_path / "full", gap9.SDK_BUILD, gap9.SDK_EFUSE)
    code, _, err = run(*args, "--gvsoc", str(tmp_path / "full" / "sdk" / gap9.SDK_INSTALL))
    line = one_line(err)
    assert code == 1 and "has GAP9's model and GreenWaves' SDK is at" in line and "a test ran gvsoc" not in err
    assert not (tmp_path / "sw").exists() and not (tmp_path / "r").exists()
