"""The benches' shared reset draws (``sim.bench.RandomResets``)."""

import random

import pytest

from specgen.sim.bench import RandomResets


def test_every_run_of_every_cycles_sees_a_reset():
    # 5,000 seeds: a bench of ``every`` cycles that asserts a reset happened never fails
    # for want of one (the geometric draw alone misses in exp(-1) = 37 % of them).
    for s in range(5000):
        resets = RandomResets(random.Random(s), 120)
        assert any(resets() for _ in range(120)), f"seed {s}: no reset in 120 cycles"


def test_rate_is_one_in_every():
    resets = RandomResets(random.Random(1), 50)
    n = 200_000
    hits = sum(resets() for _ in range(n))
    # Binomial(n, 1/50): mean 4,000, sd 62.6; six sd either side.
    assert abs(hits - n / 50) < 6 * (n / 50 * (1 - 1 / 50)) ** 0.5, hits


def test_none_never_resets_and_leaves_the_stream_alone():
    rng, ref = random.Random(7), random.Random(7)
    resets = RandomResets(rng, None)
    assert not any(resets() for _ in range(1000))
    assert rng.random() == ref.random()


@pytest.mark.parametrize("every", [0, -3])
def test_bad_every_names_the_field(every):
    with pytest.raises(ValueError, match=r"every must be None or >= 1, got"):
        RandomResets(random.Random(0), every)
