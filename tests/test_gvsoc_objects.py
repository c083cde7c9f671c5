"""A step's objects kept by what they are compiled from (gvsoc.objects): the same preprocessed text compiled the
same way is compiled once, in any folder; a change of the source, of a header it includes, of a macro or of a
code-generation flag is another object."""
import shutil
from pathlib import Path

import pytest

from ckpt.gvsoc import objects, step

CC = shutil.which("riscv64-unknown-elf-gcc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler on this host")


def test_only_code_generation_flags_are_kept():
    flags = ["-O2", "-march=rv32imafc", "-I/tmp/a", "-I", "/tmp/b", "-isystem", "/x", "-include", "/y.h",
             "-DNUM_CORES=8", "-D", "X=1", "-UFOO", "-ffunction-sections", "-fstack-usage"]
    assert objects.code_flags(flags) == ["-O2", "-march=rv32imafc", "-ffunction-sections", "-fstack-usage"]


def _source(folder: Path, body: str, header: str = "#define SCALE 2\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scale.h").write_text(header)
    (folder / "unit.c").write_text('#include "scale.h"\n' + body)
    return folder / "unit.c"


BODY = "int twice(int x) { return SCALE * x; }\n"


@needs_cc
def test_the_key_follows_the_text_not_the_folder(tmp_path):
    def key(folder, body=BODY, header="#define SCALE 2\n", flags=("-O2",)):
        source = _source(tmp_path / folder, body, header)
        return objects.object_key(CC, "v", [*flags, f"-I{source.parent}"], source)

    same = key("a")
    assert same == key("b")                                              # another folder, the same text
    assert same != key("c", body=BODY + "int once(int x) { return x; }\n")
    assert same != key("d", header="#define SCALE 3\n")                  # a header it includes
    assert same == key("e", flags=("-O2", "-DUNUSED=1"))                 # a macro the text does not use
    assert same != key("h", flags=("-O2", "-DSCALE=5"), header="#ifndef SCALE\n#define SCALE 2\n#endif\n")
    assert same != key("f", body="#define SCALE 4\n" + BODY.replace("SCALE", "(SCALE)"))
    assert same != key("g", flags=("-O1",))                              # a code-generation flag
    assert objects.object_key(CC, "v", ["-O2"], tmp_path / "missing.c") is None


@needs_cc
def test_a_unit_is_compiled_once_and_the_same_object_comes_back(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPT_CACHE_DIR", str(tmp_path / "cache"))
    runs = []
    real = step._run

    def counted(command, what):
        runs.append(command)
        return real(command, what)

    monkeypatch.setattr(step, "_run", counted)
    built = []
    for folder in ("first", "second"):
        source = _source(tmp_path / folder, BODY)
        out = tmp_path / folder / "out"
        out.mkdir()
        obj = step._compile(CC, "v", ["-O2", "-fstack-usage", f"-I{source.parent}"], source, out)
        built.append((Path(obj).read_bytes(), step.stack_frames(Path(obj).with_suffix(".su").read_text())))
    assert len(runs) == 1
    assert built[0] == built[1] and built[0][1] == {"twice": built[0][1]["twice"]}
    source = _source(tmp_path / "third", BODY.replace("SCALE * x", "SCALE + x"))
    (tmp_path / "third" / "out").mkdir()
    step._compile(CC, "v", ["-O2", f"-I{source.parent}"], source, tmp_path / "third" / "out")
    assert len(runs) == 2


@needs_cc
def test_a_spoilt_entry_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPT_CACHE_DIR", str(tmp_path / "cache"))
    source = _source(tmp_path / "a", BODY)
    key = objects.object_key(CC, "v", ["-O2"], source)
    obj = tmp_path / "a" / "unit.o"
    step._compile(CC, "v", ["-O2"], source, tmp_path / "a")
    entry = objects._entry(key)
    entry.write_bytes(entry.read_bytes()[:-3])
    assert not objects.restore(key, tmp_path / "other.o")
    step._compile(CC, "v", ["-O2"], source, tmp_path / "a")
    assert objects.restore(key, tmp_path / "other.o") and (tmp_path / "other.o").read_bytes() == obj.read_bytes()


@needs_cc
def test_the_networks_quiet_flag_silences_warnings_and_changes_no_code(tmp_path):
    """A call that passes a pointer as an address (as the generated DMA calls do) warns; with step.QUIET it does
    not, and the object is the same bytes."""
    import subprocess

    source = _source(tmp_path, "void load(unsigned addr);\nvoid step(float *p) { load(p); }\n" + BODY)
    built = []
    for extra in ([], list(step.QUIET)):
        obj = tmp_path / f"unit{len(built)}.o"
        done = subprocess.run([CC, "-O2", "-Wno-error", *extra, f"-I{tmp_path}", "-c", str(source), "-o", str(obj)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        built.append((obj.read_bytes(), "warning" in done.stderr))
    assert built[0][1] and not built[1][1]
    assert built[0][0] == built[1][0]
