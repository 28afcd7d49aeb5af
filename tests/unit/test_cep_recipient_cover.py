"""A recipient never receives raw values released to a pattern's roles beyond her own
operators (a narrower Phi must not see what a wider one released)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamshield.cep.validation import releases_at_least
from streamshield.policy.cep_rules import Comparison, Function, Operator, Rule

XI, PSI = Rule(Operator.READ), Rule(Operator.DENY)
OMEGA = Rule(Operator.STATISTICS, functions=frozenset({Function.AVG}))
conjunctions = st.lists(
    st.tuples(st.builds(Comparison, st.just("room"), st.just("="), st.sampled_from("ABCD"))),
    min_size=1,
    max_size=3,
    unique=True,
)


def phi(conditions) -> Rule:
    return Rule(Operator.CONDITIONAL, tuple(conditions))


@given(conjunctions, conjunctions)
def test_phi_covers_phi_exactly_when_it_holds_each_conjunction(mine, theirs) -> None:
    assert releases_at_least(phi(mine), phi(theirs)) == (set(theirs) <= set(mine))
    assert releases_at_least(phi(mine), phi(mine))


@given(conjunctions)
def test_xi_covers_all_and_nothing_narrower_covers_xi(conditions) -> None:
    for theirs in (XI, PSI, OMEGA, phi(conditions)):
        assert releases_at_least(XI, theirs)
    for mine in (PSI, OMEGA, phi(conditions)):
        assert not releases_at_least(mine, XI)
        assert releases_at_least(mine, OMEGA) and releases_at_least(mine, PSI)
    assert not releases_at_least(OMEGA, phi(conditions))


def test_a_recipient_with_a_narrower_phi_is_named_the_attribute() -> None:
    import json

    from streamshield.cep.pattern import compile_pattern
    from streamshield.cep.validation import narrower_for
    from streamshield.policy.cep_rules_text import loads
    from streamshield.policy.roles import RoleHierarchy

    types = {"Temp": {"ts": "timestamp", "room": "string", "celsius": "double"}}
    hierarchy = RoleHierarchy.build(["owner", "narrow", "same"])

    def role(condition: list) -> dict:
        return {
            "Temp": [
                {"operator": "xi", "attributes": ["ts", "room"]},
                {"operator": "phi", "attributes": ["celsius"], "condition": condition},
            ]
        }

    wide = [["room", "!=", "X"]]
    document = {
        "event_types": types,
        "roles": {"owner": role(wide), "same": role(wide), "narrow": role([["room", "=", "A"]])},
    }
    access = loads(json.dumps(document), hierarchy)
    pattern = compile_pattern(
        "PATTERN SEQ(Temp a, Temp b) WITHIN 1 MINUTE RETURN a.room, b.celsius", types
    )
    assert narrower_for(pattern, access, hierarchy, ["narrow"], ["owner"]) == "Temp.celsius"
    assert narrower_for(pattern, access, hierarchy, ["same"], ["owner"]) is None


def test_a_recipient_whose_phi_filters_more_events_is_refused_read_or_not() -> None:
    """A Phi filters a recipient's events on every attribute of the type (Fig. 3 (d)):
    matches made of events her own space would not receive are not hers, even when the
    pattern reads nothing under that Phi."""
    from streamshield.cep.pattern import compile_pattern
    from streamshield.cep.validation import narrower_for
    from streamshield.policy.cep_rules import AccessObject
    from streamshield.policy.roles import RoleHierarchy

    types = {"Temp": {"ts": "timestamp", "room": "string", "celsius": "double"}}
    cool = phi([(Comparison("celsius", "<", 40),)])
    cooler = phi([(Comparison("celsius", "<", 30),)])
    roles = ["owner", "filtered", "same", "wider", "phi_owner"]
    hierarchy = RoleHierarchy.build(roles)

    def rules(role: str, celsius: Rule) -> dict:
        return {
            (role, "Temp", "ts"): XI,
            (role, "Temp", "room"): XI,
            (role, "Temp", "celsius"): celsius,
        }

    access = AccessObject(
        types,
        {
            **rules("owner", XI),
            **rules("filtered", cool),
            **rules("same", cool),
            **rules("wider", XI),
            **rules("phi_owner", cool),
        },
    )
    pattern = compile_pattern("PATTERN SEQ(Temp a, Temp b) WITHIN 1 MINUTE RETURN a.room", types)

    def narrower(recipient: str, owner: str) -> str | None:
        return narrower_for(pattern, access, hierarchy, [recipient], [owner])

    assert narrower("filtered", "owner") == "Temp.celsius"  # not read, still binding
    assert narrower("same", "phi_owner") is None
    assert narrower("wider", "phi_owner") is None  # she receives every event the owner did
    access = AccessObject(types, {**access.rules, **rules("same", cooler)})
    assert narrower("same", "phi_owner") == "Temp.celsius"


def test_a_junior_does_not_receive_what_its_crossing_senior_saw() -> None:
    """The senior's view passes the events of either junior: a junior receiving its
    matches would get events (and values) of the other's; the other way round is
    covered, event by event."""
    from streamshield.cep.pattern import compile_pattern
    from streamshield.cep.validation import narrower_for
    from tests.conformance import cep_protection as case

    pattern = compile_pattern(case.PATTERNS["cross"], case.TYPES)

    def narrower(recipient: str, owner: str) -> str | None:
        return narrower_for(pattern, case.ACCESS, case.HIERARCHY, [recipient], [owner])

    assert narrower("north", "lead") == "D.k"  # her Phi on k filters what lead received
    assert narrower("lead", "north") is None
    text = "PATTERN SEQ(D d, D e) WITHIN 2 SECONDS RETURN d.id, e.id"
    ids = compile_pattern(text, case.TYPES)
    assert narrower_for(ids, case.ACCESS, case.HIERARCHY, ["lead"], ["south"]) is None
