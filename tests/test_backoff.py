"""The one backoff (controller/backoff.py): capped doubling, jitter from its own generator, and the
time left before the next attempt on a virtual clock."""

from __future__ import annotations

import random

import pytest

from controller.backoff import Backoff, BackoffPolicy
from sim.clock import VirtualClock


def test_without_jitter_the_delay_doubles_from_initial_up_to_the_cap() -> None:
    backoff = Backoff(BackoffPolicy(initial_s=0.5, max_s=3.0, jitter=0.0), clock=VirtualClock())
    assert [backoff.failed() for _ in range(6)] == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    backoff.succeeded()
    assert backoff.failures == 0
    assert backoff.failed() == 0.5


def test_jitter_stays_within_its_fraction_of_the_delay() -> None:
    policy = BackoffPolicy(initial_s=1.0, max_s=1.0, jitter=0.25)
    backoff = Backoff(policy, clock=VirtualClock(), rng=random.Random(3))
    delays = [backoff.failed() for _ in range(500)]
    assert all(0.75 <= d <= 1.25 for d in delays)
    assert len(set(delays)) > 400  # jittered, not one value: tables do not reconnect in step


def test_a_seeded_generator_gives_the_same_delays_whatever_the_global_random_does() -> None:
    policy = BackoffPolicy(initial_s=0.2, max_s=10.0, jitter=0.25)
    first = Backoff(policy, clock=VirtualClock(), rng=random.Random(42))
    expected = [first.failed() for _ in range(8)]
    random.seed(1)
    second = Backoff(policy, clock=VirtualClock(), rng=random.Random(42))
    random.random()  # the global generator moving changes nothing here
    assert [second.failed() for _ in range(8)] == expected


def test_two_backoffs_do_not_share_a_generator() -> None:
    policy = BackoffPolicy(initial_s=1.0, max_s=1.0, jitter=0.5)
    a, b = Backoff(policy, clock=VirtualClock()), Backoff(policy, clock=VirtualClock())
    # Unseeded, each has its own state: draws from one do not advance the other.
    assert a._rng is not b._rng
    assert a._rng is not random._inst  # type: ignore[attr-defined]


def test_wait_left_counts_down_on_the_clock_and_is_zero_after_success() -> None:
    clock = VirtualClock(start=100.0)
    backoff = Backoff(BackoffPolicy(initial_s=2.0, max_s=10.0, jitter=0.0), clock=clock)
    assert backoff.wait_left() == 0.0
    assert backoff.failed() == 2.0
    assert backoff.wait_left() == 2.0
    clock.advance(1.5)
    assert backoff.wait_left() == pytest.approx(0.5)
    clock.advance(0.5)
    assert backoff.wait_left() == 0.0
    assert backoff.failed() == 4.0
    backoff.succeeded()
    assert backoff.wait_left() == 0.0


def test_policy_delay_counts_failures_from_one() -> None:
    policy = BackoffPolicy(initial_s=0.2, max_s=10.0, jitter=0.25)
    assert policy.delay(1, 0.5) == pytest.approx(0.2)  # unit_random 0.5 is the middle: no jitter
    assert policy.delay(0, 0.5) == pytest.approx(0.2)
    assert policy.delay(3, 0.0) == pytest.approx(0.8 * 0.75)
    assert policy.delay(30, 0.999) <= 10.0 * 1.25
