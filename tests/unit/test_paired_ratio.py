"""bench.paired_ratio: the pooled overhead of paired samples, its bootstrap interval, and
the verdict against a target (met only when the whole interval is under it)."""

from __future__ import annotations

import random

import pytest
from bench.paired_ratio import MET, NOT_MET, UNRESOLVED, Overhead, overhead


def test_equal_pairs_have_no_overhead_and_a_point_interval() -> None:
    o = overhead([2.0, 3.0, 4.0], [2.0, 3.0, 4.0])
    assert (o.pct, o.low, o.high, o.pairs) == (0.0, 0.0, 0.0, 3)


def test_a_constant_ratio_is_recovered_whatever_the_round_did() -> None:
    base = [1.0, 5.0, 0.5, 2.0]  # rounds as different as a loaded machine makes them
    o = overhead([1.1 * b for b in base], base)
    assert o.pct == pytest.approx(10.0) and o.low == pytest.approx(10.0)


def test_the_interval_covers_the_truth_and_narrows_with_more_pairs() -> None:
    rng = random.Random(7)

    def sample(n: int) -> Overhead:
        base = [rng.uniform(1, 3) for _ in range(n)]
        arm = [b * 1.02 * rng.lognormvariate(0, 0.05) for b in base]
        return overhead(arm, base, resamples=500, seed=rng.randrange(1000))

    few = [sample(10) for _ in range(40)]
    covered = sum(o.low < 2.0 < o.high for o in few)
    assert covered >= 32  # a 95% interval (percentile bootstrap: a little less at n = 10)
    many = sample(200)
    assert many.low < 2.0 < many.high
    assert many.high - many.low < min(o.high - o.low for o in few)


def test_strata_keep_their_weight() -> None:
    """Pooling sizes: every resample draws each size's own number of pairs, so a size
    with an overhead of 0% and one of 10% never resample to 10% alone."""
    arm = [1.0] * 10 + [1.1] * 10
    o = overhead(arm, [1.0] * 20, strata=["2M"] * 10 + ["10M"] * 10)
    assert o.low == pytest.approx(o.high) == pytest.approx(o.pct)
    assert 4.8 < o.pct < 4.9  # the geometric mean of 1.0 and 1.1
    loose = overhead(arm, [1.0] * 20)
    assert loose.low < o.low <= o.high < loose.high


def test_verdicts() -> None:
    assert Overhead(0.5, -1.0, 1.9, 10).verdict(2) == MET
    assert Overhead(3.0, 2.1, 4.0, 10).verdict(2) == NOT_MET
    assert Overhead(1.0, -1.0, 3.0, 10).verdict(2) == UNRESOLVED
    assert Overhead(1.0, -1.0, 3.0, 10).verdict(5) == MET


@pytest.mark.parametrize(
    ("arm", "base", "strata"),
    [([1.0], [1.0, 2.0], None), ([], [], None), ([0.0], [1.0], None), ([1.0], [1.0], [1, 2])],
)
def test_bad_samples_are_refused(arm, base, strata) -> None:
    with pytest.raises(ValueError):
        overhead(arm, base, strata)
