"""The overhead of one arm over another from paired, interleaved samples, with its interval.

A bench that alternates two plans (``vanilla``, ``level``) round by round gets one pair
of times per round. Each pair shares whatever the machine did in that round, so the
ratio within the pair is the unit of evidence; its log is roughly symmetric, so the
overhead is the geometric mean of the pairs' ratios, ``exp(mean(log(a / b))) - 1``.
The interval is a percentile bootstrap over the pairs (resampling within each stratum,
e.g. each data size, when pairs from several sizes are pooled), so a target is judged
on what the samples can resolve, not on a median that swings with one noisy round.
Pure Python: no Spark, deterministic for a given seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

MET, NOT_MET, UNRESOLVED = "met", "not met", "not resolved"


@dataclass(frozen=True)
class Overhead:
    """``pct``: the pooled overhead in percent; ``low``, ``high``: its interval."""

    pct: float
    low: float
    high: float
    pairs: int
    confidence: float = 0.95

    def verdict(self, target_pct: float) -> str:
        """:data:`MET` when the whole interval is at or under the target, :data:`NOT_MET`
        when it is all above, :data:`UNRESOLVED` when it straddles the target."""
        if self.high <= target_pct:
            return MET
        if self.low > target_pct:
            return NOT_MET
        return UNRESOLVED

    def as_dict(self) -> dict:
        return {
            "pct": round(self.pct, 2),
            "low": round(self.low, 2),
            "high": round(self.high, 2),
            "pairs": self.pairs,
            "confidence": self.confidence,
        }


def _logs(arm: Sequence[float], base: Sequence[float]) -> list[float]:
    if len(arm) != len(base) or not arm:
        raise ValueError(f"pairs: {len(arm)} arm and {len(base)} base samples")
    if any(x <= 0 for x in (*arm, *base)):
        raise ValueError("pairs: every sample must be a positive time")
    return [math.log(a / b) for a, b in zip(arm, base, strict=True)]


def _pct(mean_log: float) -> float:
    return 100 * (math.exp(mean_log) - 1)


def overhead(
    arm: Sequence[float],
    base: Sequence[float],
    strata: Sequence[object] | None = None,
    confidence: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
) -> Overhead:
    """The pooled overhead of ``arm`` over ``base`` (paired by position). ``strata``:
    one label per pair; the bootstrap resamples within each label, so every stratum
    keeps its weight (its number of pairs) in every resample."""
    logs = _logs(arm, base)
    labels = list(strata) if strata is not None else [0] * len(logs)
    if len(labels) != len(logs):
        raise ValueError(f"strata: {len(labels)} labels for {len(logs)} pairs")
    groups: dict[object, list[float]] = {}
    for label, x in zip(labels, logs, strict=True):
        groups.setdefault(label, []).append(x)
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        total = 0.0
        for xs in groups.values():
            total += sum(xs[rng.randrange(len(xs))] for _ in xs)
        means.append(total / len(logs))
    means.sort()
    tail = (1 - confidence) / 2
    low = means[min(len(means) - 1, int(tail * len(means)))]
    high = means[min(len(means) - 1, int((1 - tail) * len(means)))]
    return Overhead(_pct(sum(logs) / len(logs)), _pct(low), _pct(high), len(logs), confidence)
