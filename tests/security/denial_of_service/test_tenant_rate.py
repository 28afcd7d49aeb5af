"""Threat: one tenant's sps slow down every other tenant's ingest.

Ingest labels all streams in one micro-batch: every tuple is matched against the tuple
patterns of its channel's policy, in Spark by the regex :func:`glob_regex` builds. So a
provider whose sp carries a backtracking glob, and whose tuples carry ids made to feed
it, would stall the batch for every tenant. This test labels a batch the way the Spark
plan does (the exact regex text Spark gets, read by a backtracking engine) with and
without tenant A's adversarial sps and tuples, and checks tenant B's rate holds.
"""

from __future__ import annotations

import re
import time

from streamshield.engine.views.labels import glob_regex
from streamshield.lang.cql import parse_pattern
from streamshield.policy.sp_patterns import Glob, Pattern
from tests.security.denial_of_service.deadline import within

A_PATTERNS = ["*a*a*a*a*a*b", "a*a*a*a*a*a*a*c", "*?*?*?*?*?*-"]
A_TID = "a" * 5_000
B_PATTERNS = ["[100, 200]", "{7, 8, 9}", "ward-?-*"]
B_TIDS = [str(i) for i in range(2_000)] + [f"ward-{i % 10}-{i}" for i in range(2_000)]
DEADLINE = 30.0  # seconds; today's fixed code needs well under one


def _matcher(text: str):
    """How the Spark plan matches a pattern: a Java regex for globs, comparisons else."""
    pattern: Pattern = parse_pattern(text)
    if isinstance(pattern, Glob):
        regex = re.compile(glob_regex(pattern.pattern).replace(r"\z", r"\Z"))
        return lambda tid: regex.match(tid) is not None
    return pattern.matches


def _label(batch: list[tuple[list, str]]) -> int:
    return sum(any(match(tid) for match in rules) for rules, tid in batch)


def _measure() -> tuple[float, float, int, int]:
    a_rules = [_matcher(p) for p in A_PATTERNS]
    b_rules = [_matcher(p) for p in B_PATTERNS]
    b_batch = [(b_rules, tid) for tid in B_TIDS]
    mixed_batch = b_batch + [(a_rules, A_TID + str(i)) for i in range(50)]

    def best_of_three(batch: list) -> tuple[float, int]:
        times, passed = [], 0
        for _ in range(3):
            started = time.perf_counter()
            passed = _label(batch)
            times.append(time.perf_counter() - started)
        return min(times), passed

    (alone, passed_alone), (mixed, passed_mixed) = (
        best_of_three(b_batch),
        best_of_three(mixed_batch),
    )
    return alone, mixed, passed_alone, passed_mixed


def test_adversarial_sps_of_one_tenant_do_not_slow_another() -> None:
    alone, mixed, passed_alone, passed_mixed = within(DEADLINE, _measure)
    assert passed_alone == passed_mixed  # A's tuples match none of A's patterns
    rate_alone, rate_mixed = len(B_TIDS) / alone, len(B_TIDS) / mixed
    assert rate_mixed > rate_alone / 3, (rate_alone, rate_mixed)
