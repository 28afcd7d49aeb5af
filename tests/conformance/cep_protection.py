"""Conformance cases of the per-role protection engine (paper 4, section IV): one role's
rules, patterns and events that the pure oracle (``tests/unit/test_cep_protection.py``)
and Spark (``tests/spark/test_cep_protection.py``) must answer alike.

The role ``analyst`` (junior ``staff``) meets every operator and the inheritance rules:

- A: id, k xi; v Phi (k = 1); w Omega (count, avg) -- all inherited from ``staff``;
- B: id, v xi; k Phi (v > 2); ``analyst``'s own xi on id shadows ``staff``'s psi on
  it, and ``analyst`` inherits ``staff``'s psi on w (it has no rule on B.w);
- C: id and v Phi (v > 3), k and w psi.

Only the events that meet the condition of every Phi attribute of their type reach the
role (Fig. 3 (d)): A with k = 1, B with v > 2, C with v > 3, whether a pattern reads
the Phi attribute or not (``omega`` reads neither A.v nor C.v; ``not`` reads B.k only in
its NOT, and an invisible B does not kill a pair).

The role ``lead`` (pattern ``cross``) is the senior of two juniors with crossing Phi on
D: ``north`` has Phi (k = 1) on k, xi on v and w; ``south`` xi on k, Phi (v > 5) on v,
no rule on w. ``lead`` receives a D event only if one of them does (k = 1 or v > 5),
and w only on north's events (NULL on the others): never an event neither receives.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from streamshield.cep import oracle
from streamshield.cep.oracle import Event
from streamshield.cep.pattern import compile_pattern
from streamshield.cep.protection import K_DEFAULT, detectors, protect
from streamshield.cep.validation import validate
from streamshield.policy.cep_rules_text import loads
from streamshield.policy.roles import RoleHierarchy

ATTRS = {"ts": "timestamp", "id": "long", "k": "long", "v": "long", "w": "long"}
TYPES = {name: ATTRS for name in ("A", "B", "C", "D")}
DDL = "id bigint, k bigint, v bigint, w bigint, ts timestamp"
RULES = {
    "event_types": TYPES,
    "roles": {
        "staff": {
            "A": [
                {"operator": "xi", "attributes": ["id", "k", "ts"]},
                {"operator": "phi", "attributes": ["v"], "condition": [["k", "=", 1]]},
                {"operator": "omega", "attributes": ["w"], "functions": ["count", "avg"]},
            ],
            "B": [{"operator": "psi", "attributes": ["w", "id"]}],
        },
        "analyst": {
            "B": [
                {"operator": "xi", "attributes": ["id", "v", "ts"]},
                {"operator": "phi", "attributes": ["k"], "condition": [["v", ">", 2]]},
            ],
            "C": [
                {"operator": "phi", "attributes": ["id", "v"], "condition": [["v", ">", 3]]},
                {"operator": "psi", "attributes": ["k", "w"]},
            ],
        },
        "north": {
            "D": [
                {"operator": "xi", "attributes": ["id", "v", "w", "ts"]},
                {"operator": "phi", "attributes": ["k"], "condition": [["k", "=", 1]]},
            ]
        },
        "south": {
            "D": [
                {"operator": "xi", "attributes": ["id", "k", "ts"]},
                {"operator": "phi", "attributes": ["v"], "condition": [["v", ">", 5]]},
            ]
        },
    },
}
HIERARCHY = RoleHierarchy.build(
    ["staff", "analyst", "north", "south", "lead"],
    [("analyst", "staff"), ("lead", "north"), ("lead", "south")],
)
ACCESS = loads(json.dumps(RULES), HIERARCHY)
ROLES = frozenset({"analyst"})
DELAY = timedelta(seconds=4.25)
START = datetime(2026, 1, 1, tzinfo=UTC)

PATTERNS = {
    # Phi in a correlation (b.k) and in a per-event predicate and RETURN (a.v)
    "seq": "PATTERN SEQ(A a, B b) WHERE a.k = b.k AND a.v > 2 WITHIN 6 SECONDS "
    "RETURN a.id, b.id, a.v, b.k",
    # rows of an OR: A and C events outside their Phi do not exist (no NULL rows)
    "or": "PATTERN OR(A a, C c) WHERE a.k >= 0 OR c.v > 0 WITHIN 1 SECOND "
    "RETURN a.id, a.v, c.id, c.v",
    # Omega inside allowed aggregates: groups of fewer than k matches are withheld
    "omega": "PATTERN SEQ(C c, A a) WITHIN 8 SECONDS RETURN count(*), avg(a.w) AS aw, "
    "count(a.w) AS cw",
    # NOT over a Phi-filtered type: a B the role does not receive kills no pair
    "not": "PATTERN SEQ(A a, NOT B n, A a2) WHERE n.k = a.k WITHIN 6 SECONDS RETURN a.id, a2.id",
    # crossing Phi of lead's juniors: only their events, w only on north's
    "cross": "PATTERN SEQ(D d, D e) WITHIN 2 SECONDS RETURN d.id, e.id, d.w, e.k",
}
ROLES_OF = {"cross": frozenset({"lead"})}
"""The roles a pattern runs with, when not ``ROLES``."""
# A flush batch far ahead: moves every watermark past every window.
FLUSH = 1000.0


def event(type_: str, serial: int, second: float, k: int, v: int, w: int) -> Event:
    values = {"id": serial, "k": k, "v": v, "w": w, "ts": START + timedelta(seconds=second)}
    return Event(type_, values, serial)


def fixed_batches() -> list[list[Event]]:
    """Hand-made: every Phi passes some events and filters others."""
    return [
        [
            event("A", 1, 1.5, 1, 5, 10),  # v visible (k = 1)
            event("A", 2, 2.5, 0, 7, 20),  # k != 1: does not reach the role
            event("B", 3, 3.5, 1, 4, 0),  # v > 2: joins a@1, kills a@1 -> a@7
            event("B", 4, 6.0, 1, 1, 0),  # v <= 2: joins nothing, kills nothing
            event("C", 5, 0.5, 0, 9, 0),  # passes (v > 3)
            event("C", 6, 0.7, 0, 2, 0),  # does not reach the role
            event("A", 7, 5.5, 1, 3, 30),
            event("A", 8, 6.5, 1, 3, 50),
            event("D", 12, 1.0, 1, 0, 1),  # north's only
            event("D", 13, 1.5, 0, 9, 2),  # south's only: w NULL
            event("D", 14, 2.0, 0, 0, 3),  # neither's: does not reach lead
            event("D", 15, 2.5, 1, 9, 4),  # both
        ],
        [
            event("C", 9, 20.5, 1, 8, 0),
            event("A", 10, 21.5, 1, 1, 5),  # one match only in this window: withheld (k)
            event("B", 11, 7.0, 1, 9, 0),  # within the watermark: joins a@7 and a@1
        ],
    ]


def flush() -> list[Event]:
    return [event(t, -1, FLUSH, 1, 9, 0) for t in TYPES]  # passes every tree


def expected(batches: list[list[Event]]) -> dict[str, list[tuple]]:
    """The oracle's rows per pattern over the role's protected copy of the events."""
    found = {}
    for name, text in PATTERNS.items():
        roles = ROLES_OF.get(name, ROLES)
        trees = detectors(ACCESS, HIERARCHY, roles)
        copies = [protect(trees, batch) for batch in [*batches, flush()]]
        pattern = compile_pattern(text, TYPES)
        clearance = validate(pattern, ACCESS, HIERARCHY, roles)
        kept = oracle.admitted(copies, TYPES, DELAY, drops=oracle.stateful(pattern))
        found[name] = oracle.results(
            pattern,
            [m for m in oracle.matches(pattern, kept) if _real(m)],
            min_group=K_DEFAULT if clearance.statistics else 1,
        )
    return found


def _real(match) -> bool:
    """Matches among the flush events are not part of the case."""
    return all(e is None or e.serial >= 0 for e in match.values())


def unprotected(batches: list[list[Event]]) -> dict[str, list[tuple]]:
    """The same patterns over the raw events (to show that protection changes answers)."""
    every = [*batches, flush()]
    found = {}
    for name, text in PATTERNS.items():
        pattern = compile_pattern(text, TYPES)
        kept = oracle.admitted(every, TYPES, DELAY, drops=oracle.stateful(pattern))
        found[name] = oracle.results(
            pattern, [m for m in oracle.matches(pattern, kept) if _real(m)]
        )
    return found
