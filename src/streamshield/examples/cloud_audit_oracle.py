"""What each query of the cloud-auditing example returns at its level, and what each user
receives: the plain-Python oracle the server test checks the engine against, row by row.

Pure (no pyspark), built on the lattice (``policy/lattice.py``) and the query level
(``policy/query_level.py``), and written straight from the paper's rules, not from the
engine's encoding, so that it can disagree with the engine:

* a query at level ``C`` reads a tuple only if the tuple's level is dominated by ``C``
  (simple security); the windows ``[ROWS 100]`` then hold every readable tuple (the
  scenario stays below 100 tuples, and :func:`answers` refuses more rather than guess
  the eviction);
* a selection's output row is at its tuple's level; a join's pair and an aggregate's
  row are at the query's level ``C`` (write-equal: the paper's restricted star-property;
  only a stateless selection's rows are refined to their own tuples' levels,
  ``lang.output_level``), an aggregate over an empty window too (a row of NULLs);
* a user receives a row only if her session's level *at delivery* dominates the row's
  level (the recipient decides, DESIGN.md 5a).

Each query's Python form (``EVALUATORS`` below) is written from its SQL text in
``cloud_audit.QUERIES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streamshield.examples import cloud_audit as ca
from streamshield.policy.lattice import Lattice, Level
from streamshield.policy.query_level import QueryLevel

Values = dict[str, Any]  # JSON values, each attribute its own type
WINDOW = 100


@dataclass(frozen=True)
class Row:
    """One output row: its values (sorted by name) and its level."""

    values: tuple[tuple[str, object], ...]
    level: Level


@dataclass(frozen=True)
class Logged:
    """A tuple as the engine holds it: its values and the level ingest stamped."""

    values: Values
    level: Level
    phase: int


def logged(lattice: Lattice | None = None) -> list[Logged]:
    """Every tuple of the scenario with the level of its company's channel."""
    lattice = lattice or ca.lattice()
    return [
        Logged(e.values, lattice.parse(ca.channel_level(e.company)), e.phase) for e in ca.events()
    ]


def _row(level: Level, **values: object) -> Row:
    return Row(tuple(sorted(values.items())), level)


Evaluator = Callable[[Level, Sequence[Logged]], list[Row]]
"""A query's rows at its level ``C`` (the first argument) over the tuples it reads."""


def _select(where: Callable[[Values], bool]) -> Evaluator:
    def run(_at: Level, readable: Sequence[Logged]) -> list[Row]:
        return [_row(t.level, timestamp=t.values["timestamp"]) for t in readable if where(t.values)]

    return run


def _send_to_b(outcome: str) -> Callable[[Values], bool]:
    return lambda v: (
        v["msgType"] == "send" and v["receiver"] == "CompanyB" and v["outcome"] == outcome
    )


def _q4(v: Values) -> bool:
    return (
        v["msgType"] == "send"
        and v["outcome"] == "failure"
        and v["receiver"] in ("CompanyA", "CompanyB", "CompanyC")
    )


def _q5(at: Level, readable: Sequence[Logged]) -> list[Row]:
    group = [
        t for t in readable if t.values["outcome"] == "success" and t.values["serviceId"] == "5"
    ]
    stamps = [int(t.values["timestamp"]) for t in group]
    if not stamps:  # a global aggregate over an empty window: one row of NULLs, at C
        return [_row(at, first_ts=None, last_ts=None)]
    return [_row(at, first_ts=min(stamps), last_ts=max(stamps))]


def _sent_ok(v: Values) -> bool:
    return v["msgType"] == "send" and v["outcome"] == "success"


def _pairs(
    readable: Sequence[Logged],
    s_test: Callable[[Values], bool],
    pair_test: Callable[[Values, Values], bool],
) -> Iterable[tuple[Logged, Logged]]:
    """(S, R): S a send passing ``s_test``, R a successful receive of the same service."""
    for s in (t for t in readable if s_test(t.values)):
        for r in readable:
            v = r.values
            if (
                v["msgType"] == "receive"
                and v["outcome"] == "success"
                and v["serviceId"] == s.values["serviceId"]
                and pair_test(s.values, v)
            ):
                yield s, r


def _delay(s: Logged, r: Logged) -> int:
    return int(r.values["timestamp"]) - int(s.values["timestamp"])


def _q6(at: Level, readable: Sequence[Logged]) -> list[Row]:
    def s_test(v: Values) -> bool:
        return _sent_ok(v) and v["sender"] == "Company1" and v["receiver"] == "CompanyB"

    def pair(s: Values, r: Values) -> bool:
        return r["receiver"] == "Company1" and r["sender"] == "CompanyB"

    return [_row(at, delay=_delay(s, r)) for s, r in _pairs(readable, s_test, pair)]


def _q7(at: Level, readable: Sequence[Logged]) -> list[Row]:
    def pair(s: Values, r: Values) -> bool:
        same = r["sender"] == s["sender"] and r["receiver"] == s["receiver"]
        return same and 0 <= int(r["timestamp"]) - int(s["timestamp"]) <= 50

    return [
        _row(
            at,
            serviceId=s.values["serviceId"],
            sender=s.values["sender"],
            delay=_delay(s, r),
        )
        for s, r in _pairs(readable, _sent_ok, pair)
    ]


EVALUATORS: dict[str, Evaluator] = {
    "q1": _select(_send_to_b("success")),
    "q2": _select(_send_to_b("failure")),
    "q3": _select(_send_to_b("failure")),
    "q4": _select(_q4),
    "q5": _q5,
    "q6": _q6,
    "q7": _q7,
}


def readable(level: Level, tuples: Sequence[Logged], lattice: Lattice) -> list[Logged]:
    """The tuples a query at ``level`` reads (simple security)."""
    at = QueryLevel(lattice, level)
    return [t for t in tuples if at.dominates(t.level)]


def answers(query: ca.Query, tuples: Sequence[Logged] | None = None) -> list[Row]:
    """What ``query`` returns at its level over ``tuples`` (default: the whole scenario)."""
    lattice = ca.lattice()
    tuples = logged(lattice) if tuples is None else tuples
    at = lattice.parse(query.level)
    seen = readable(at, tuples, lattice)
    if query.kind != "select" and len(seen) > WINDOW:
        raise ValueError(f"{query.name}: {len(seen)} tuples exceed the [ROWS {WINDOW}] window")
    return EVALUATORS[query.name](at, seen)


def delivered(rows: Iterable[Row], recipient: Level) -> list[Row]:
    """The rows a recipient whose session is at ``recipient`` receives."""
    lattice = ca.lattice()
    return [row for row in rows if lattice.dominated(row.level, recipient)]


def received(query: ca.Query, recipient: str) -> list[Row]:
    """What user ``recipient`` receives from ``query`` over the two phases of the scenario,
    her session lowered before phase 2 if she is ``cloud_audit.LOWERED_USER``.

    A selection's rows are its tuples', so each phase delivers the rows of its own
    tuples; the lowered user subscribes to selections only (the test keeps it so)."""
    lattice = ca.lattice()
    before = lattice.parse(ca.user(recipient).level)
    after = lattice.parse(ca.LOWERED_TO) if recipient == ca.LOWERED_USER else before
    if after == before:
        return delivered(answers(query), before)
    if query.kind != "select":
        raise ValueError(f"{query.name}: the lowered user subscribes to selections only")
    tuples = logged(lattice)
    out: list[Row] = []
    for phase, level in ((1, before), (2, after)):
        out += delivered(answers(query, [t for t in tuples if t.phase == phase]), level)
    return out
