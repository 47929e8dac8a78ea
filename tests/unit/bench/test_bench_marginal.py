"""The marginal method's arithmetic (bench/marginal.py): what both runs pay once cancels, the
rate and CPU per event come from the difference, and a difference lost in noise is named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.marginal import Timing, marginal, ratio, small_backlog


def test_start_up_and_the_final_commit_cancel() -> None:
    # 4 s of start-up and commit in both runs; 10k events/s and 50 µs/event in between
    # (of the 50 µs, 15 in librdkafka's threads)
    small = Timing(25_000, 4 + 2.5, 3 + 1.25, broker_cpu_s=1 + 0.5, client_cpu_s=1 + 0.375)
    large = Timing(100_000, 4 + 10.0, 3 + 5.0, broker_cpu_s=1 + 2.0, client_cpu_s=1 + 1.5)
    figures = marginal(small, large)
    assert figures.events_per_s == 10_000
    assert figures.cpu_us_per_event == 50.0
    assert figures.broker_cpu_us_per_event == 20.0
    assert figures.client_cpu_us_per_event == 15.0
    assert figures.problem is None


@given(
    fixed_wall=st.floats(0, 60),
    fixed_cpu=st.floats(0, 60),
    rate=st.floats(100, 1e6),
    cpu_us=st.floats(1, 1000),
    small=st.integers(1, 10_000),
    added=st.integers(1, 1_000_000),
)
def test_any_fixed_cost_cancels(
    fixed_wall: float, fixed_cpu: float, rate: float, cpu_us: float, small: int, added: int
) -> None:
    large = small + added

    def run(events: int) -> Timing:
        return Timing(events, fixed_wall + events / rate, fixed_cpu + events * cpu_us / 1e6)

    figures = marginal(run(small), run(large))
    assert figures.events_per_s == pytest.approx(rate, rel=1e-6, abs=1)
    assert figures.cpu_us_per_event == pytest.approx(cpu_us, rel=1e-6, abs=0.1)


def test_a_difference_lost_in_noise_gives_no_rate_and_says_why() -> None:
    figures = marginal(Timing(1_000, 5.0, 2.0), Timing(2_000, 4.9, 2.1))
    assert figures.events_per_s is None and figures.cpu_us_per_event is None
    assert figures.problem is not None and "more --events" in figures.problem
    assert figures.broker_cpu_us_per_event is None  # no broker sampled
    assert figures.client_cpu_us_per_event is None  # nor client threads


def test_the_large_backlog_must_be_larger() -> None:
    with pytest.raises(ValueError):
        marginal(Timing(1_000, 1.0, 1.0), Timing(1_000, 2.0, 2.0))


def test_the_small_backlog_is_a_quarter_yet_holds_every_key() -> None:
    assert small_backlog(100_000, 10_000) == 25_000
    assert small_backlog(20_000, 10_000) == 10_000
    with pytest.raises(ValueError, match="more --events"):
        small_backlog(10_000, 10_000)


def test_a_ratio_needs_both_figures() -> None:
    assert ratio(26_000, 13_000) == 2.0
    assert ratio(None, 13_000) is None
    assert ratio(26_000, None) is None
    assert ratio(26_000, 0) is None
