"""The smart-building CEP example (``streamshield cep-example``).

Three roles watch one building's event bus (temperatures, smoke detectors, door badges)
under the four operators of paper 4:

- ``facility`` (the building's technicians): xi on temperatures and smoke, psi on who
  opened a door (``Door.person``) -- it sees doors open, not by whom;
- ``desk`` (the security desk): xi on smoke and on doors' rooms and times, Phi on
  ``Door.person`` only for the server room (``room = 'S1'``): no other door event
  reaches it at all (Fig. 3 (d)); no rule on temperatures, so no temperature reaches
  it (Fig. 3 (b));
- ``auditor`` (insurance statistics): Omega on ``Temperature.celsius`` (count, avg,
  max) with the k rule, xi on rooms and times, psi on smoke and doors.

Each role registers patterns; the refused ones show the registration check's message.
Everything here is pure Python (the oracle); ``--spark`` runs the same patterns on
local Spark through each role's protection engine and checks that the rows agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from streamshield.cep import oracle
from streamshield.cep.oracle import Event
from streamshield.cep.pattern import compile_pattern
from streamshield.cep.protection import K_DEFAULT, detectors, protect
from streamshield.cep.validation import PatternRefused, validate
from streamshield.policy.cep_rules_text import loads
from streamshield.policy.roles import RoleHierarchy

TYPES = {
    "Temperature": {"ts": "timestamp", "room": "string", "celsius": "double"},
    "Smoke": {"ts": "timestamp", "room": "string", "level": "long"},
    "Door": {"ts": "timestamp", "room": "string", "person": "string"},
}
RULES = {
    "event_types": TYPES,
    "roles": {
        "facility": {
            "Temperature": [{"operator": "xi", "attributes": "*"}],
            "Smoke": [{"operator": "xi", "attributes": "*"}],
            "Door": [
                {"operator": "xi", "attributes": ["ts", "room"]},
                {"operator": "psi", "attributes": ["person"]},
            ],
        },
        "desk": {
            "Door": [
                {"operator": "xi", "attributes": ["ts", "room"]},
                {"operator": "phi", "attributes": ["person"], "condition": [["room", "=", "S1"]]},
            ],
            "Smoke": [{"operator": "xi", "attributes": "*"}],
        },
        "auditor": {
            "Temperature": [
                {"operator": "xi", "attributes": ["ts", "room"]},
                {
                    "operator": "omega",
                    "attributes": ["celsius"],
                    "functions": ["count", "avg", "max"],
                },
            ],
            "Smoke": [{"operator": "psi", "attributes": "*"}],
            "Door": [{"operator": "psi", "attributes": "*"}],
        },
    },
}
HIERARCHY = RoleHierarchy.build(["facility", "desk", "auditor"])
ACCESS = loads(json.dumps(RULES), HIERARCHY)
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DELAY = timedelta(seconds=30)

# (role, pattern name, text): the accepted ones run, the refused ones show why.
PATTERNS = [
    (
        "facility",
        "fire",
        "PATTERN SEQ(Temperature t, Smoke s) WHERE t.room = s.room AND t.celsius > 50 "
        "WITHIN 2 MINUTES RETURN t.room, t.celsius, s.level",
    ),
    (
        "facility",
        "unchecked",  # smoke, then the room cools down with no door opened in between
        "PATTERN SEQ(Smoke s, NOT Door d, Temperature t) WHERE d.room = s.room "
        "AND t.room = s.room AND t.celsius < 30 WITHIN 2 MINUTES RETURN s.room, t.ts",
    ),
    ("facility", "who", "PATTERN OR(Door d, Smoke s) WITHIN 1 MINUTE RETURN d.person"),
    (
        "desk",
        "vault_after_smoke",
        "PATTERN SEQ(Smoke s, Door d) WHERE d.room = s.room WITHIN 5 MINUTES "
        "RETURN d.room, d.person",
    ),
    (
        "auditor",
        "heat",
        "PATTERN SEQ(Temperature a, Temperature b) WHERE a.room = b.room WITHIN 10 MINUTES "
        "RETURN a.room, count(*), max(b.celsius) AS top GROUP BY a.room",
    ),
    (
        "auditor",
        "peek",
        "PATTERN OR(Temperature a, Temperature b) WITHIN 1 MINUTE RETURN a.celsius",
    ),
    (
        "auditor",
        "min_peek",
        "PATTERN OR(Temperature a, Temperature b) WITHIN 1 MINUTE RETURN min(a.celsius)",
    ),
]


def events() -> list[list[Event]]:
    """Two micro-batches of a morning: a fire in the server room S1 and one in office O2."""
    serial = iter(range(1, 1000))

    def at(type_: str, second: int, **values) -> Event:
        return Event(type_, {**values, "ts": START + timedelta(seconds=second)}, next(serial))

    first = [
        at("Temperature", 0, room="S1", celsius=24.0),
        at("Temperature", 10, room="O2", celsius=22.5),
        at("Temperature", 20, room="S1", celsius=58.0),
        at("Temperature", 25, room="S1", celsius=61.0),
        at("Smoke", 30, room="S1", level=4),
        at("Door", 45, room="S1", person="Ada"),
        at("Temperature", 50, room="O2", celsius=55.0),
        at("Smoke", 60, room="O2", level=2),
        at("Smoke", 70, room="K3", level=1),
    ]
    second = [
        at("Door", 90, room="O2", person="Ben"),
        at("Temperature", 100, room="O2", celsius=23.0),
        at("Temperature", 110, room="K3", celsius=21.0),  # K3 cooled down, nobody went in
        # An hour later: past every window. The door is in S1 so that it reaches the
        # desk too (its Phi keeps every other door out): ``--spark`` runs all patterns in
        # one query, whose watermark is the least over every role's copy of every type.
        at("Door", 3600, room="S1", person="Cy"),
        at("Smoke", 3600, room="L1", level=0),
        at("Temperature", 3600, room="L1", celsius=20.0),
    ]
    return [first, second]


def run_role(role: str, text: str) -> list[tuple]:
    """The rows the oracle finds for ``text`` run by ``role`` (PatternRefused if illegal)."""
    pattern = compile_pattern(text, TYPES)
    clearance = validate(pattern, ACCESS, HIERARCHY, {role})
    trees = detectors(ACCESS, HIERARCHY, {role})
    copies = [protect(trees, batch) for batch in events()]
    kept = oracle.admitted(copies, TYPES, DELAY, drops=oracle.stateful(pattern))
    found = oracle.matches(pattern, kept)
    return oracle.results(pattern, found, min_group=K_DEFAULT if clearance.statistics else 1)


def report() -> Iterator[str]:
    yield "smart building: 3 event types, roles facility / desk / auditor (docs/cep.md)"
    for role in ("facility", "desk", "auditor"):
        trees = detectors(ACCESS, HIERARCHY, {role})
        for type_ in TYPES:
            tree = trees.get(type_)
            shown = (
                ", ".join(f"{a}:{r.operator}" for a, r in tree.released.items())
                if tree
                else "nothing (psi)"
            )
            if tree and () not in tree.condition:
                shown += " (only events meeting the Phi condition)"
            yield f"  {role:9} receives {type_}: {shown}"
    for role, name, text in PATTERNS:
        yield f"{role} registers {name}: {text}"
        try:
            rows = run_role(role, text)
        except PatternRefused as refused:
            yield f"  refused: {refused}"
            continue
        for row in sorted(rows, key=repr):
            yield "  " + ", ".join(_show(v) for v in row)
        if not rows:
            yield "  (no rows)"


def _show(value: object) -> str:
    if isinstance(value, datetime):
        return value.strftime("%H:%M:%S")
    return "NULL" if value is None else str(value)
