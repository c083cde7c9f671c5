"""ckpt's static layout (solver.memory.layout) and the minimalloc program behind Deeploy's MiniMalloc contract."""
from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.deeploy_bridge.minimalloc import main as minimalloc
from ckpt.solver.memory.layout import Block, aligned, lay_out, lay_out_anonymous, live_max, overlapping


@st.composite
def lifetimes(draw) -> list[Block]:
    steps = draw(st.integers(1, 40))
    count = draw(st.integers(0, 60))
    blocks = []
    for i in range(count):
        first = draw(st.integers(0, steps - 1))
        last = draw(st.integers(first, steps - 1))
        size = draw(st.one_of(st.integers(1, 64), st.integers(1, 4096), st.sampled_from([0, 32768, 65536])))
        blocks.append(Block(f"b{i}", first, last, size))
    return blocks


@settings(max_examples=property_examples(150), deadline=None)
@given(lifetimes(), st.sampled_from([1, 4, 8]))
def test_every_layout_is_valid_aligned_and_between_the_live_maximum_and_the_sum(blocks, alignment):
    layout = lay_out(blocks, alignment)
    sized = [Block(b.name, b.first, b.last, aligned(b.size, alignment)) for b in blocks if b.size]
    assert set(layout.offsets) == {b.name for b in sized}
    assert overlapping(sized, layout.offsets) is None
    assert all(offset % alignment == 0 for offset in layout.offsets.values())
    assert live_max(sized) == layout.live_max <= layout.size <= sum(b.size for b in sized)
    assert layout.size == max((layout.offsets[b.name] + b.size for b in sized), default=0)


@settings(max_examples=property_examples(20), deadline=None)   # a layout the greedies miss gets seconds of exact search
@given(lifetimes(), st.randoms(use_true_random=False))
def test_the_same_blocks_in_any_order_give_the_same_layout(blocks, shuffler):
    shuffled = list(blocks)
    shuffler.shuffle(shuffled)
    assert lay_out(blocks) == lay_out(shuffled)


@settings(max_examples=property_examples(40), deadline=None)
@given(lifetimes(), st.randoms(use_true_random=False))
def test_blocks_under_other_names_get_an_arena_of_the_same_size_and_their_counterparts_offsets(blocks, shuffler):
    """The prediction and the generated code name their blocks differently: the anonymous layout of one list is
    the other's, block for block, and valid."""
    names = [b.name for b in blocks]
    shuffler.shuffle(names)
    renamed = {b.name: f"other_{name}" for b, name in zip(blocks, names)}
    first = lay_out_anonymous(blocks)
    second = lay_out_anonymous([replace(b, name=renamed[b.name]) for b in blocks])
    assert (first.size, first.live_max) == (second.size, second.live_max)
    sized = [Block(b.name, b.first, b.last, aligned(b.size, 4)) for b in blocks if b.size]
    assert overlapping(sized, first.offsets) is None and set(first.offsets) == {b.name for b in sized}
    placed = lambda layout, name_of: sorted(((b.first, b.last, b.size), layout.offsets[name_of(b)])  # noqa: E731
                                            for b in sized)
    assert placed(first, lambda b: b.name) == placed(second, lambda b: renamed[b.name])


def test_a_chain_of_short_lives_reuses_one_place():
    blocks = [Block(f"x{i}", i, i + 1, 100) for i in range(10)]        # each overlaps only its neighbours
    layout = lay_out(blocks)
    assert layout.size == layout.live_max == 2 * 100


def test_the_checker_finds_an_overlap():
    blocks = [Block("a", 0, 3, 8), Block("b", 2, 5, 8)]
    assert overlapping(blocks, {"a": 0, "b": 4}) == ("a", "b")
    assert overlapping(blocks, {"a": 0, "b": 8}) is None
    assert overlapping([Block("a", 0, 1, 8), Block("b", 2, 3, 8)], {"a": 0, "b": 0}) is None


def test_minimalloc_program_follows_deeploys_contract(tmp_path):
    """Rows id,lower,upper(exclusive),size in; the same rows with the offset last out; exit 2 when over."""
    rng = random.Random(3)
    rows = ["id,lower,upper,size"]
    for i in range(40):
        lower = rng.randrange(30)
        rows.append(f"t{i}_tensor,{lower},{lower + rng.randrange(1, 8)},{rng.choice([4, 40, 4096, 32768])}")
    (tmp_path / "in.csv").write_text("\n".join(rows) + "\n")
    files = [f"--input={tmp_path / 'in.csv'}", f"--output={tmp_path / 'out.csv'}"]
    assert minimalloc(["--capacity=10000000", *files]) == 0
    out = (tmp_path / "out.csv").read_text().splitlines()
    assert out[0] == "id,lower,upper,size,offset" and len(out) == 41
    placed = [Block(r[0], int(r[1]), int(r[2]) - 1, int(r[3])) for r in (line.split(",") for line in out[1:])]
    offsets = {line.split(",")[0]: int(line.split(",")[-1]) for line in out[1:]}
    assert overlapping(placed, offsets) is None
    top = max(offsets[b.name] + b.size for b in placed)
    assert minimalloc([f"--capacity={top - 1}", f"--input={tmp_path / 'in.csv'}",
                       f"--output={tmp_path / 'over.csv'}"]) == 2 and not (tmp_path / "over.csv").exists()
    (tmp_path / "bad.csv").write_text("name,from,to\n")
    assert minimalloc(["--capacity=10", f"--input={tmp_path / 'bad.csv'}", f"--output={tmp_path / 'x.csv'}"]) == 1
