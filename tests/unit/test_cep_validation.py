"""Pattern registration against the role's operators: every way to read more is refused."""

from __future__ import annotations

import json

import pytest

from streamshield.cep.pattern import PatternError, compile_pattern
from streamshield.cep.validation import PatternRefused, validate
from streamshield.policy.cep_rules import Comparison
from streamshield.policy.cep_rules_text import loads
from streamshield.policy.roles import RoleHierarchy

TYPES = {
    "Temperature": {"ts": "timestamp", "room": "string", "celsius": "double", "badge": "long"},
    "Smoke": {"ts": "timestamp", "room": "string", "level": "long"},
    "Badge": {"ts": "timestamp", "person": "string"},
}
RULES = {
    "event_types": TYPES,
    "roles": {
        "guard": {
            "Temperature": [
                {"operator": "xi", "attributes": ["room", "ts"]},
                {"operator": "psi", "attributes": ["badge"]},
                {"operator": "omega", "attributes": ["celsius"], "functions": ["avg", "count"]},
            ],
            "Smoke": [
                {"operator": "xi", "attributes": ["ts"]},
                {
                    "operator": "phi",
                    "attributes": ["room", "level"],
                    "condition": [["room", "=", "L7-secret"], ["level", ">", 2]],
                },
            ],
            "Badge": [{"operator": "psi", "attributes": "*"}],
        },
        "chief": {"Temperature": [{"operator": "xi", "attributes": "*"}]},
    },
}
HIERARCHY = RoleHierarchy.build(["guard", "chief"], [("chief", "guard")])
ACCESS = loads(json.dumps(RULES), HIERARCHY)


def _check(text: str, roles=("guard",)):
    return validate(compile_pattern(text, TYPES), ACCESS, HIERARCHY, roles)


HEAD = "PATTERN SEQ(Temperature a, Smoke b) "


@pytest.mark.parametrize(
    ("text", "column", "problem"),
    [
        # psi through RETURN, WHERE, a correlation (join key), GROUP BY, an aggregate
        (
            HEAD + "WITHIN 1 MINUTE RETURN a.badge",
            60,
            "Temperature.badge (read as a.badge) is denied",
        ),
        (
            HEAD + "WHERE a.badge > 3 WITHIN 1 MINUTE RETURN a.room",
            43,
            "badge (read as a.badge) is denied",
        ),
        (HEAD + "WHERE a.badge = b.level WITHIN 1 MINUTE RETURN a.room", 43, "is denied"),
        (HEAD + "WITHIN 1 MINUTE RETURN a.badge, count(*) GROUP BY a.badge", 60, "is denied"),
        (HEAD + "WITHIN 1 MINUTE RETURN max(a.badge)", 64, "is denied"),
        (HEAD + "WITHIN 1 MINUTE RETURN count(a.badge)", 66, "is denied"),
        # psi through the condition of a NOT
        (
            "PATTERN SEQ(Temperature a, NOT Temperature n, Smoke b) WHERE n.badge = 1 "
            "WITHIN 1 MINUTE RETURN a.room",
            62,
            "is denied",
        ),
        # a type denied on every attribute
        (
            "PATTERN SEQ(Temperature a, Badge c) WITHIN 1 MINUTE RETURN a.room",
            28,
            "Badge is denied",
        ),
        # Omega raw in RETURN, WHERE, GROUP BY; a function it does not allow
        (HEAD + "WITHIN 1 MINUTE RETURN a.celsius", 60, "statistics only (Omega: avg, count)"),
        (HEAD + "WHERE a.celsius > 50 WITHIN 1 MINUTE RETURN a.room", 43, "statistics only"),
        (HEAD + "WITHIN 1 MINUTE RETURN a.celsius, count(*) GROUP BY a.celsius", 60, "statistics"),
        (
            HEAD + "WITHIN 1 MINUTE RETURN max(a.celsius)",
            64,
            "allows only avg, count (Omega), not max",
        ),
        # an attribute with no rule at all is denied (deny by default)
        (HEAD + "WITHIN 1 MINUTE RETURN b.room, a.room, b.level, b.ts, a.ts", None, None),
    ],
)
def test_reads_beyond_the_rules_are_refused_naming_attribute_and_rule(text, column, problem):
    if problem is None:  # the control: everything read here is released
        _check(text)
        return
    with pytest.raises(PatternRefused) as caught:
        _check(text)
    assert problem in str(caught.value)
    assert caught.value.column == column
    assert "secret" not in str(caught.value) and "L7" not in str(caught.value)


def test_allowed_aggregates_pass_and_a_senior_inherits_where_it_has_no_rule() -> None:
    _check(HEAD + "WITHIN 1 MINUTE RETURN a.room, avg(a.celsius), count(*) GROUP BY a.room")
    # chief's own xi on all of Temperature shadows guard's psi on badge and Omega on
    # celsius; guard alone stays refused.
    _check(HEAD + "WITHIN 1 MINUTE RETURN a.celsius, a.badge", roles=("chief",))
    with pytest.raises(PatternRefused, match="badge"):
        _check(HEAD + "WITHIN 1 MINUTE RETURN a.badge")
    # chief has no rule on Smoke or Badge: it inherits guard's Phi and psi there.
    assert _check(HEAD + "WITHIN 1 MINUTE RETURN b.room", roles=("chief",)).conditions
    with pytest.raises(PatternRefused, match="Badge is denied"):
        text = "PATTERN SEQ(Temperature a, Badge c) WITHIN 1 MINUTE RETURN a.room"
        validate(compile_pattern(text, TYPES), ACCESS, HIERARCHY, ("chief",))


def test_phi_conditions_bind_every_event_of_their_type_read_or_not() -> None:
    """Fig. 3 (d): a Smoke event reaches the guard only inside the condition, whether the
    pattern reads a Phi attribute of it (b.room) or only its time."""
    condition = (Comparison("room", "=", "L7-secret"), Comparison("level", ">", 2))
    clearance = _check(HEAD + "WHERE b.level > 5 WITHIN 1 MINUTE RETURN b.room")
    assert clearance.conditions == {"b": (condition,)}
    assert _check(HEAD + "WITHIN 1 MINUTE RETURN a.room").conditions == {"b": (condition,)}
    assert (
        _check("PATTERN SEQ(Temperature a, Temperature b) WITHIN 1 MINUTE RETURN a.room").conditions
        == {}
    )


def test_order_by_is_no_way_to_a_denied_attribute() -> None:
    """The language has no ORDER BY (a pattern's rows are a stream, unordered): ordering
    by a denied attribute is a syntax error at ORDER that names nothing of it."""
    text = HEAD + "WITHIN 1 MINUTE RETURN a.room ORDER BY a.badge"
    with pytest.raises(PatternError) as caught:
        _check(text)
    assert not isinstance(caught.value, PatternRefused)
    assert (caught.value.line, caught.value.column) == (1, text.index("ORDER") + 1)
    assert "badge" not in str(caught.value)
