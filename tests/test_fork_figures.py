"""The fork's published points counted on ckpt's graphs (bench/fork_figures.py): the budget a point is solved at is
the fork's reduction of the same figure, what persists included where the fork counts it."""
from __future__ import annotations

from bench_support import bench_module
from hypothesis import given
from hypothesis import strategies as st

fork = bench_module("fork_figures")


def test_the_published_points_and_their_reductions():
    assert [(p.label, p.figure, p.overhead_pct) for p in fork.FORK_POINTS] == [
        ("cct-34.6", "activations", 8.32), ("resnet8-23.8", "peak", 13.6), ("resnet8-26.2", "peak", 39.8)]


@given(peak=st.integers(1_000, 10**7), persistent=st.integers(0, 10**7))
def test_a_point_at_its_live_budget_has_the_forks_reduction_of_the_forks_figure(peak, persistent):
    """At exactly its live budget, ckpt's figure is (1 - reduction) x the graph order's (to a byte): for the
    activations figure what persists plays no part; for the peak it is counted on both sides."""
    for point in fork.FORK_POINTS:
        budget = fork.live_budget(point, peak, persistent)
        before, after = (fork.ckpt_figure(point, b, persistent) for b in (peak, budget))
        assert abs(after - (1 - point.reduction) * before) <= 1
        if point.figure == fork.ACTIVATIONS:
            assert budget == fork.live_budget(point, peak, 0)


def test_counting_what_persists_asks_more_of_the_activations():
    """ResNet-8's -23.8% of the peak, with 642,038 B persisting beside an 869,504 B live peak, is -41.4% of the
    live activations: a live budget of 509,757 B."""
    point = fork.FORK_POINTS[1]
    assert fork.live_budget(point, 869_504, 642_038) == 509_757
