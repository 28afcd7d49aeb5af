"""The pure parts of the Security-Compliant Join (paper 1, section 5.4, Fig. 12).

Two decisions of SCJoin do not depend on Spark and are defined here, on Python ints,
so that property tests can pin them down before the engine compiles them:

* **Compatibility** of two label classes for a set of consumers: a joined pair is
  visible to a consumer with effective roles ``q`` iff one effective role reads both
  tuples and the join attribute on both sides, ``(q & rL_0 & rR_0 & rL_key & rR_key) != 0``
  in some word, and no effective role is denied on either tuple or key. It is the
  paper's coarse filtering (line 13, tuple policies intersect) and its join attribute
  filtering (line 16) in one test, strengthened to one role for all four objects: a
  role that reads only one side must never see the pair.
* The **cardinality heuristic** that picks filter-and-probe (FP) or probe-and-filter
  (PF) per pair of policies. The paper picks randomly in the middle band; we keep the
  pair's last choice instead, so that a replayed batch makes the same choice.

Output labels follow DESIGN.md rule 3 for joins: readers intersect, denied sets unite.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from streamshield.policy.bitset import Words, intersect, union
from streamshield.policy.encoding import EncodedAccess

FP_ABOVE = (1, 2)
"""FP when the larger relative sub-window share exceeds 1/2 (paper: 0.5)."""
PF_BELOW = (1, 5)
"""PF when it is below 1/5 (paper, section 5.4: 0.2; Fig. 12 prints 0.1)."""


class Strategy(Enum):
    PF = "PF"  # probe-and-filter: join on the key, then check the labels of each result
    FP = "FP"  # filter-and-probe: keep compatible label classes only, then join


DEFAULT_STRATEGY = Strategy.PF
"""The choice in the middle band for a pair never seen before: the plain join."""


@dataclass(frozen=True)
class JoinClass:
    """What decides a tuple's part in a join: its tuple label and its key's label."""

    tuple_access: EncodedAccess
    key_access: EncodedAccess


def pair_visible(query: Words, left: JoinClass, right: JoinClass) -> bool:
    """Whether a consumer with effective roles ``query`` may see a joined pair."""
    reads = any(
        q & a & b & c & d
        for q, a, b, c, d in zip(
            query,
            left.tuple_access.readers,
            right.tuple_access.readers,
            left.key_access.readers,
            right.key_access.readers,
            strict=True,
        )
    )
    denied = _union_all(
        (
            left.tuple_access.denied,
            right.tuple_access.denied,
            left.key_access.denied,
            right.key_access.denied,
        )
    )
    return reads and not any(q & d for q, d in zip(query, denied, strict=True))


def compatible_pairs(
    left: Sequence[JoinClass], right: Sequence[JoinClass], queries: Iterable[Words]
) -> set[tuple[int, int]]:
    """Indices ``(i, j)`` of class pairs that some consumer may see (FP's class filter).

    Per batch this runs over the distinct classes of the two windows, which are few
    (classes come from policies), never over tuples.
    """
    queries = list(queries)
    return {
        (i, j)
        for i, lc in enumerate(left)
        for j, rc in enumerate(right)
        if any(pair_visible(q, lc, rc) for q in queries)
    }


def joined_tuple_access(left: EncodedAccess, right: EncodedAccess) -> EncodedAccess:
    """The label of a joined tuple: both sides must allow a reader, either may deny."""
    return EncodedAccess(intersect(left.readers, right.readers), union(left.denied, right.denied))


def joined_attribute_access(own: EncodedAccess, other_tuple: EncodedAccess) -> EncodedAccess:
    """An attribute of one side in a joined tuple: its label narrowed by the other tuple's."""
    return joined_tuple_access(own, other_tuple)


def attribute_visible(query: Words, own: EncodedAccess, other_tuple: EncodedAccess) -> bool:
    """Whether a consumer receives an attribute of a visible pair (else it gets NULL)."""
    return joined_attribute_access(own, other_tuple).allows(query)


def choose(
    left_count: int,
    left_total: int,
    right_count: int,
    right_total: int,
    last: Strategy | None = None,
) -> Strategy:
    """The cardinality heuristic for sub-windows ``|P_i|`` of ``|W_L|`` and ``|P_j|`` of ``|W_R|``.

    The larger relative share decides: FP above 1/2 (a big sub-window is cheap to rule
    out as a whole), PF below 1/5 (few tuples: probing first is cheaper), otherwise the
    pair's last choice (or PF). Exact integer arithmetic, so no float rounding moves a
    share across a threshold.
    """
    if left_total <= 0 or right_total <= 0:
        return last or DEFAULT_STRATEGY
    # left share > right share  <=>  lc * rt > rc * lt
    if left_count * right_total > right_count * left_total:
        count, total = left_count, left_total
    else:
        count, total = right_count, right_total
    if count * FP_ABOVE[1] > FP_ABOVE[0] * total:
        return Strategy.FP
    if count * PF_BELOW[1] < PF_BELOW[0] * total:
        return Strategy.PF
    return last or DEFAULT_STRATEGY


def plan(
    left_counts: Mapping[str, int],
    right_counts: Mapping[str, int],
    last: Mapping[tuple[str, str], Strategy] | None = None,
) -> dict[tuple[str, str], Strategy]:
    """A strategy for every pair of policies with tuples in both windows."""
    last = last or {}
    left_total, right_total = sum(left_counts.values()), sum(right_counts.values())
    return {
        (pl, pr): choose(cl, left_total, cr, right_total, last.get((pl, pr)))
        for pl, cl in left_counts.items()
        if cl > 0
        for pr, cr in right_counts.items()
        if cr > 0
    }


def _union_all(parts: Sequence[Words]) -> Words:
    result = parts[0]
    for part in parts[1:]:
        result = union(result, part)
    return result
