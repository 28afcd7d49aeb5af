"""The per-role protection engine, pure (paper 4, section IV): what a role's copy of the bus
holds, per operator, and the conformance cases' oracle answers."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.cep.oracle import Event
from streamshield.cep.pattern import compile_pattern
from streamshield.cep.protection import Detector, detectors, protect
from streamshield.cep.validation import PatternRefused, validate
from streamshield.policy.cep_rules import (
    DENIED,
    READ,
    AccessObject,
    Comparison,
    Function,
    Operator,
    Rule,
)
from streamshield.policy.roles import RoleHierarchy
from tests.conformance import cep_protection as case
from tests.unit.test_cep_rules import ROLES, access_objects, hierarchies
from tests.unit.test_cep_rules import events as temp_events


def test_trees_follow_fig3_and_inheritance() -> None:
    trees = detectors(case.ACCESS, case.HIERARCHY, case.ROLES)
    assert set(trees) == {"A", "B", "C"}
    assert {n: r.operator for n, r in trees["A"].released.items()} == {
        "id": Operator.READ,
        "k": Operator.READ,
        "v": Operator.CONDITIONAL,
        "w": Operator.STATISTICS,
    }
    assert "w" not in trees["B"].released  # staff's psi, inherited: analyst has no rule
    assert trees["B"].released["id"] == READ  # analyst's own xi shadows staff's psi
    # one tree each, one comparison: C.id and C.v share theirs
    assert [len(t.condition[0]) for t in trees.values()] == [1, 1, 1]
    # staff alone: B has no rule but psi, C none at all: neither passes (3 (b))
    assert set(detectors(case.ACCESS, case.HIERARCHY, {"staff"})) == {"A"}


def test_copies_pass_only_events_meeting_every_phi_and_drop_psi() -> None:
    trees = detectors(case.ACCESS, case.HIERARCHY, case.ROLES)
    a_in, a_out, b_in, b_out, c_in, c_out, *_ = case.fixed_batches()[0]
    copies = {e.serial: e.values for e in protect(trees, case.fixed_batches()[0])}
    assert copies[a_in.serial]["v"] == 5 and copies[a_in.serial]["w"] == 10  # Omega travels
    assert "w" not in copies[b_in.serial] and copies[b_in.serial]["k"] == 1
    assert set(copies[c_in.serial]) == {"ts", "id", "v"}  # a new event without k, w
    assert not {a_out.serial, b_out.serial, c_out.serial} & set(copies)  # not even as NULLs
    assert None not in {v for copy in copies.values() for v in copy.values()}


def test_conformance_cases_oracle_answers() -> None:
    """What the Spark test must find too; protection changes every pattern's answer."""
    found = case.expected(case.fixed_batches())
    assert sorted(found["seq"]) == [(1, 3, 5, 1), (1, 11, 5, 1), (7, 11, 3, 1), (8, 11, 3, 1)]
    assert sorted(r[0] for r in found["or"] if r[0] is not None) == [1, 7, 8, 10]
    assert sorted(r[2] for r in found["or"] if r[2] is not None) == [5, 9]  # not C 6
    assert all(None not in (r[:2] if r[0] is not None else r[2:]) for r in found["or"])
    assert [row[2:] for row in found["omega"]] == [(3, 30.0, 3)]  # the 1-match group withheld
    assert found["not"] == [(7, 8)]  # B 4 lies between a@7 and a@8; the role never sees it
    # D 14 meets neither junior's Phi: no pair has it; w only where north receives d
    assert sorted(found["cross"], key=repr) == [(12, 13, 1, 0), (12, 15, 1, 1), (13, 15, None, 1)]
    raw = case.unprotected(case.fixed_batches())
    assert sorted(raw["not"]) == [(1, 2), (2, 7), (2, 8)]
    assert all(sorted(raw[n], key=repr) != sorted(found[n], key=repr) for n in case.PATTERNS)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("PATTERN SEQ(A a, B b) WITHIN 1 SECOND RETURN b.w", "B.w (read as b.w) is denied"),
        ("PATTERN SEQ(A a, B b) WITHIN 1 SECOND RETURN a.w", "statistics only"),
        ("PATTERN SEQ(A a, B b) WHERE a.w > 1 WITHIN 1 SECOND RETURN a.id", "statistics only"),
        ("PATTERN SEQ(A a, B b) WITHIN 1 SECOND RETURN max(a.w)", "not max"),
        ("PATTERN SEQ(A a, C c) WHERE a.k = c.k WITHIN 1 SECOND RETURN a.id", "C.k"),
    ],
)
def test_reads_beyond_the_operators_are_refused(text: str, problem: str) -> None:
    with pytest.raises(PatternRefused, match=re.escape(problem)) as caught:
        validate(compile_pattern(text, case.TYPES), case.ACCESS, case.HIERARCHY, case.ROLES)
    assert "L1" not in str(caught.value) and ">" not in str(caught.value)


def test_a_partition_key_needs_xi_on_every_type() -> None:
    pattern = compile_pattern("PATTERN SEQ(A a, B b) WITHIN 1 SECOND RETURN a.id", case.TYPES)
    validate(pattern, case.ACCESS, case.HIERARCHY, case.ROLES, key="id")
    with pytest.raises(PatternRefused, match=r"partition key B\.k"):
        validate(pattern, case.ACCESS, case.HIERARCHY, case.ROLES, key="k")


def test_omega_aggregates_carry_the_k_rule() -> None:
    def clearance(text):
        pattern = compile_pattern(text, case.TYPES)
        return validate(pattern, case.ACCESS, case.HIERARCHY, case.ROLES)

    assert clearance(case.PATTERNS["omega"]).statistics
    assert not clearance("PATTERN SEQ(A a, B b) WITHIN 1 SECOND RETURN avg(b.v)").statistics


# --------------------------------------------------------------------- properties

OPERATORS = st.sampled_from(list(Operator))
NAMES = ("p", "q", "r")


def _phi(draw) -> Rule:
    cond = Comparison(draw(st.sampled_from(NAMES)), draw(st.sampled_from(["<", ">="])), 3)
    return Rule(Operator.CONDITIONAL, conditions=((cond,),))


@st.composite
def trees_and_events(draw):
    released = {}
    for name in NAMES:
        op = draw(OPERATORS)
        if op is Operator.CONDITIONAL:
            released[name] = _phi(draw)
        elif op is Operator.STATISTICS:
            released[name] = Rule(op, functions=frozenset({Function.COUNT}))
        elif op is Operator.READ:
            released[name] = READ
    on_time = _phi(draw) if draw(st.booleans()) else READ
    values = st.one_of(st.none(), st.integers(0, 6))
    events = [
        Event("T", {"ts": None, **{n: draw(values) for n in NAMES}}, serial)
        for serial in range(draw(st.integers(0, 8)))
    ]
    return released, on_time, events


@settings(max_examples=200, deadline=None)
@given(trees_and_events())
def test_a_copy_releases_nothing_its_rules_do_not(drawn) -> None:
    """An event passes whole (its released attributes, unchanged) exactly when it meets
    every Phi condition of its type, the event time's included; else nothing of it."""
    released, on_time, events = drawn
    trees = {"T": Detector.of("T", {**released, "ts": on_time})} if released else {}
    copies = {c.serial: c for c in protect(trees, events)}
    phis = [r for r in (*released.values(), on_time) if r.operator is Operator.CONDITIONAL]
    for original in events:
        copy = copies.get(original.serial)
        meets = bool(released) and all(r.readable_on(original.values) for r in phis)
        assert (copy is not None) == meets
        if copy is None:
            continue
        assert set(copy.values) == {"ts", *released}  # psi: not in the new event at all
        for name in released:
            assert copy.values[name] == original.values[name]


def test_a_type_without_rules_has_no_tree() -> None:
    access = AccessObject({"T": {"ts": "timestamp", "x": "long"}}, {})
    assert detectors(access, RoleHierarchy.build(["r"]), {"r"}) == {}


# ------------------------------------------------ Phi: only events inside pass (Fig. 3 (d))

TEMPS = {
    "Temperature": {"ts": "timestamp", "room": "string", "celsius": "double"},
    "Smoke": {"ts": "timestamp", "room": "string"},
}
COOL = Rule(Operator.CONDITIONAL, conditions=((Comparison("celsius", "<", 40),),))
PHI_ACCESS = AccessObject(
    TEMPS,
    {
        ("desk", "Temperature", "ts"): READ,
        ("desk", "Temperature", "room"): READ,
        ("desk", "Temperature", "celsius"): COOL,
        ("desk", "Smoke", "ts"): READ,
        ("desk", "Smoke", "room"): READ,
    },
)
PHI_ROLES = RoleHierarchy.build(["desk"])


def _desk(text: str, batches: list[list[Event]]) -> list[tuple]:
    """The rows the desk's space yields: validated, protected, matched by the oracle."""
    from streamshield.cep import oracle

    pattern = compile_pattern(text, TEMPS)
    validate(pattern, PHI_ACCESS, PHI_ROLES, {"desk"})
    trees = detectors(PHI_ACCESS, PHI_ROLES, {"desk"})
    copies = [protect(trees, batch) for batch in batches]
    kept = oracle.admitted(copies, TEMPS, timedelta(seconds=5), drops=oracle.stateful(pattern))
    return oracle.results(pattern, oracle.matches(pattern, kept))


def _reading(serial: int, second: float, room: str, celsius: float | None) -> Event:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=second)
    return Event("Temperature", {"ts": at, "room": room, "celsius": celsius}, serial)


def _smoke(serial: int, second: float, room: str) -> Event:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=second)
    return Event("Smoke", {"ts": at, "room": room}, serial)


HOT_AND_COOL = [
    [
        _reading(1, 1, "S1", 20.0),
        _reading(2, 2, "S1", 45.0),  # outside the condition
        _reading(3, 3, "S1", None),  # unknown is not true: outside too
        _smoke(4, 4, "S1"),
        _reading(5, 5, "S1", 30.0),
        _reading(6, 6, "O2", 90.0),  # outside
        _smoke(7, 7, "O2"),
    ]
]


def test_an_event_outside_a_phi_condition_is_not_counted() -> None:
    counted = _desk(
        "PATTERN SEQ(Temperature a, Smoke s) WITHIN 1 MINUTE RETURN count(*) AS n",
        HOT_AND_COOL,
    )
    # a@1 and a@5 with s@4 / s@7: 3 pairs; the hot and unknown readings add none
    assert [row[2:] for row in counted] == [(3,)]


def test_an_event_outside_a_phi_condition_is_not_shown_with_null() -> None:
    rows = _desk(
        "PATTERN SEQ(Temperature a, Smoke s) WHERE a.room = s.room WITHIN 1 MINUTE "
        "RETURN a.room, a.celsius",
        HOT_AND_COOL,
    )
    assert sorted(rows) == [("S1", 20.0)]


def test_a_pattern_that_does_not_read_the_phi_attribute_is_filtered_alike() -> None:
    """Else two patterns of one role would differ by the events outside the condition."""
    rows = _desk(
        "PATTERN SEQ(Temperature a, Smoke s) WHERE a.room = s.room WITHIN 1 MINUTE "
        "RETURN a.room, a.ts",
        HOT_AND_COOL,
    )
    assert len(rows) == 1 and rows[0][0] == "S1"  # not O2 (90), not the 45 or the NULL


def test_an_event_outside_a_phi_condition_kills_no_match_of_a_not() -> None:
    """The NOT's absence is of events the role receives: whether a hot reading lies in the
    gap changes nothing the role sees, so the match tells nothing of it."""
    text = (
        "PATTERN SEQ(Smoke s, NOT Temperature t, Smoke s2) WHERE t.room = s.room "
        "WITHIN 1 MINUTE RETURN s.room, s2.room"
    )
    quiet = [[_smoke(1, 1, "S1"), _smoke(2, 5, "S1")]]
    hot = [[_smoke(1, 1, "S1"), _reading(3, 3, "S1", 45.0), _smoke(2, 5, "S1")]]
    cool = [[_smoke(1, 1, "S1"), _reading(3, 3, "S1", 25.0), _smoke(2, 5, "S1")]]
    assert _desk(text, quiet) == _desk(text, hot) == [("S1", "S1")]
    assert _desk(text, cool) == []


# ------------------------------------- a senior receives the union of its juniors' views

CROSS_TYPES = {"T": {"ts": "timestamp", "a": "long", "b": "long", "c": "long"}}
LOW_A = Rule(Operator.CONDITIONAL, conditions=((Comparison("a", "<", 3),),))
LOW_B = Rule(Operator.CONDITIONAL, conditions=((Comparison("b", "<", 3),),))
CROSS_ROLES = RoleHierarchy.build(["j1", "j2", "senior"], [("senior", "j1"), ("senior", "j2")])
CROSSING = AccessObject(
    CROSS_TYPES,
    {
        ("j1", "T", "ts"): READ,
        ("j1", "T", "a"): LOW_A,
        ("j1", "T", "b"): READ,
        ("j1", "T", "c"): READ,
        ("j2", "T", "ts"): READ,
        ("j2", "T", "a"): READ,
        ("j2", "T", "b"): LOW_B,
    },
)


def _copies(access: AccessObject, hierarchy: RoleHierarchy, role: str, events) -> dict:
    return {c.serial: c.values for c in protect(detectors(access, hierarchy, {role}), events)}


def test_a_senior_of_crossing_phi_juniors_receives_only_their_events() -> None:
    """Each junior receives the events meeting its own Phi; the senior (no rule of its
    own, so xi on a and b by the attribute bound) must not receive the events neither
    receives, and sees c (only j1's) only on j1's events."""
    events = [
        Event("T", {"ts": None, "a": 1, "b": 9, "c": 10}, 1),  # j1's only
        Event("T", {"ts": None, "a": 9, "b": 1, "c": 20}, 2),  # j2's only
        Event("T", {"ts": None, "a": 9, "b": 9, "c": 30}, 3),  # neither's
        Event("T", {"ts": None, "a": 1, "b": 1, "c": 40}, 4),  # both
    ]
    senior = _copies(CROSSING, CROSS_ROLES, "senior", events)
    assert sorted(senior) == [1, 2, 4]
    assert senior[1] == {"ts": None, "a": 1, "b": 9, "c": 10}
    assert senior[2] == {"ts": None, "a": 9, "b": 1, "c": None}  # j2 releases no c
    assert senior[4]["c"] == 40
    pattern = compile_pattern("PATTERN SEQ(T x, T y) WITHIN 1 SECOND RETURN count(*)", CROSS_TYPES)
    clearance = validate(pattern, CROSSING, CROSS_ROLES, {"senior"})
    assert clearance.conditions == {
        v: ((Comparison("a", "<", 3),), (Comparison("b", "<", 3),)) for v in "xy"
    }


def test_crossing_phi_and_a_partition_key_or_the_event_time() -> None:
    """A value masked on some of the senior's events is no key and no readable time."""
    access = AccessObject(CROSS_TYPES, {**CROSSING.rules, ("j1", "T", "ts"): DENIED})
    pattern = compile_pattern("PATTERN SEQ(T x, T y) WITHIN 1 SECOND RETURN x.a", CROSS_TYPES)
    validate(pattern, CROSSING, CROSS_ROLES, {"senior"}, key="a")  # both release a
    with pytest.raises(PatternRefused, match="not on every event"):
        validate(pattern, CROSSING, CROSS_ROLES, {"senior"}, key="c")
    validate(
        compile_pattern("PATTERN SEQ(T x, T y) WITHIN 1 SECOND RETURN x.ts", CROSS_TYPES),
        CROSSING,
        CROSS_ROLES,
        {"senior"},
    )
    with pytest.raises(PatternRefused, match=r"T\.ts"):
        text = "PATTERN SEQ(T x, T y) WITHIN 1 SECOND RETURN x.ts"
        validate(compile_pattern(text, CROSS_TYPES), access, CROSS_ROLES, {"senior"})


def test_omega_across_juniors_keeps_only_what_every_releasing_tree_allows() -> None:
    """One column carries an Omega attribute: its functions are those every tree that
    releases it allows; a xi beside an Omega keeps the raw value on the xi junior's
    events only; a Phi beside an Omega denies (the attribute bound)."""
    count = Rule(Operator.STATISTICS, functions=frozenset({Function.COUNT}))
    both = Rule(Operator.STATISTICS, functions=frozenset({Function.COUNT, Function.AVG}))
    base = {("j1", "T", "a"): LOW_A, ("j2", "T", "b"): READ}
    senior = {"senior"}

    def view(c1: Rule, c2: Rule):
        rules = {**base, ("j1", "T", "c"): c1, ("j2", "T", "c"): c2}
        return detectors(AccessObject(CROSS_TYPES, rules), CROSS_ROLES, senior)["T"]

    assert view(both, count).rule("c") == count
    assert view(READ, count).rule("c") == READ
    assert view(READ, count).visible("c") == ((Comparison("a", "<", 3),),)
    assert view(LOW_B, count).rule("c") == DENIED
    events = [Event("T", {"ts": None, "a": 9, "b": 1, "c": 5}, 1)]  # j2's only
    rules = {**base, ("j1", "T", "c"): READ, ("j2", "T", "c"): count}
    assert _copies(AccessObject(CROSS_TYPES, rules), CROSS_ROLES, "senior", events) == {
        1: {"ts": None, "a": None, "b": 1, "c": None}
    }


UNION_TYPES = {"U": {"ts": "timestamp", "a": "long", "b": "long", "c": "long"}}
UNION_ROLES = ("r0", "r1", "r2", "r3")
SMALL = st.one_of(st.none(), st.integers(0, 3))


def _union_rule(draw) -> Rule | None:
    kind = draw(st.sampled_from(["none", "none", "xi", "psi", "phi", "phi", "omega"]))
    if kind == "xi":
        return READ
    if kind == "psi":
        return DENIED
    if kind == "omega":
        functions = draw(st.sets(st.sampled_from([Function.COUNT, Function.AVG]), min_size=1))
        return Rule(Operator.STATISTICS, functions=frozenset(functions))
    if kind == "phi":
        comparisons = st.builds(
            Comparison, st.sampled_from("abc"), st.sampled_from(["<", ">="]), st.integers(1, 3)
        )
        conjunction = tuple(draw(st.lists(comparisons, min_size=1, max_size=2)))
        return Rule(Operator.CONDITIONAL, conditions=(conjunction,))
    return None


@st.composite
def union_cases(draw):
    """Small hierarchies (a role's juniors have lower numbers), rules on a few small
    attributes (conditions pass and fail often), and events."""
    pairs = [(s, j) for s in range(4) for j in range(s)]
    edges = [(UNION_ROLES[s], UNION_ROLES[j]) for s, j in pairs if draw(st.booleans())]
    hierarchy = RoleHierarchy.build(UNION_ROLES, edges)
    rules = {("r0", "U", "ts"): READ}
    for role in UNION_ROLES:
        for name in "abc":
            rule = _union_rule(draw)
            if rule is not None:
                rules[(role, "U", name)] = rule
    values = st.fixed_dictionaries({"a": SMALL, "b": SMALL, "c": SMALL})
    events = [Event("U", {"ts": None, **v}, n) for n, v in enumerate(draw(st.lists(values)))]
    role = draw(st.sampled_from(UNION_ROLES))
    return AccessObject(UNION_TYPES, rules), hierarchy, role, events


def _applying(access: AccessObject, hierarchy: RoleHierarchy, role: str, name: str) -> set:
    """An independent statement: the effective roles with a rule on the attribute that no
    other such role is senior to."""
    found = {r for r in hierarchy.effective([role]) if (r, "U", name) in access.rules}
    return {r for r in found if hierarchy.readers([r]) & found == {r}}


@settings(max_examples=400, deadline=None)
@given(union_cases())
def test_a_role_receives_nothing_no_applying_role_receives_on_that_event(drawn) -> None:
    """Every event a role receives, an effective role with rules of its own receives in
    its own view; every value (attribute, event) it receives, a role whose rule on the
    attribute applies to it (itself, or a junior) receives on that same event; every
    aggregate function it may apply to an attribute, each such role allows too."""
    access, hierarchy, role, events = drawn
    mine = _copies(access, hierarchy, role, events)
    views = {r: _copies(access, hierarchy, r, events) for r in hierarchy.effective([role])}
    holders = {r for r, _, _ in access.rules}
    view = detectors(access, hierarchy, {role}).get("U")
    for serial, copy in mine.items():
        assert any(serial in views[r] for r in views if r in holders), serial
        for name, value in copy.items():
            if name == "ts" or value is None:
                continue
            sources = [
                r
                for r in _applying(access, hierarchy, role, name)
                if views[r].get(serial, {}).get(name) == value
            ]
            assert sources, (serial, name)
            assert view is not None
            mode = view.rule(name)
            if mode.operator is Operator.STATISTICS:
                for r in sources:
                    theirs = detectors(access, hierarchy, {r})["U"].rule(name)
                    assert theirs.operator is Operator.STATISTICS
                    assert mode.functions <= theirs.functions


@settings(max_examples=200, deadline=None)
@given(access_objects(), hierarchies(), st.sampled_from(ROLES), st.lists(temp_events, max_size=6))
def test_a_view_releases_nothing_its_attribute_bound_does_not(
    access, hierarchy, role, drawn
) -> None:
    """Per event and attribute, the view stays within the rule the role acts with on
    that attribute (combine over the applicable rules)."""
    events = [Event("Temp", {"ts": None, **values}, n) for n, values in enumerate(drawn)]
    mine = _copies(access, hierarchy, role, events)
    for event in events:
        for name, value in mine.get(event.serial, {}).items():
            if name == "ts" or value is None:
                continue
            bound = access.effective_rule(hierarchy, [role], "Temp", name)
            assert bound.capabilities(event.values), (event.serial, name)
