"""Per-role attribute operators: inheritance, the conflict rule, the JSON text form."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.policy.cep_rules import (
    DENIED,
    READ,
    AccessObject,
    Comparison,
    Function,
    Operator,
    Rule,
    combine,
)
from streamshield.policy.cep_rules_text import RulesError, dumps, loads
from streamshield.policy.roles import RoleHierarchy

TYPES = {"Temp": {"ts": "timestamp", "room": "string", "celsius": "long"}}
ATTRS = ("room", "celsius")
ROLES = tuple(f"r{i}" for i in range(5))


@st.composite
def hierarchies(draw) -> RoleHierarchy:
    """Random acyclic hierarchies: a role's juniors have lower numbers."""
    pairs = [(s, j) for s in range(5) for j in range(s)]
    edges = [pair for pair in pairs if draw(st.booleans())]
    return RoleHierarchy.build(ROLES, [(f"r{s}", f"r{j}") for s, j in edges])


conditions = st.lists(
    st.one_of(
        st.builds(
            Comparison,
            st.just("celsius"),
            st.sampled_from(["<", ">", "=", "!="]),
            st.integers(0, 60),
        ),
        st.builds(
            Comparison, st.just("room"), st.sampled_from(["=", "!="]), st.sampled_from(["L1", "L2"])
        ),
    ),
    min_size=1,
    max_size=2,
).map(tuple)

rules = st.one_of(
    st.just(READ),
    st.just(DENIED),
    conditions.map(lambda c: Rule(Operator.CONDITIONAL, conditions=(c,))),
    st.sets(st.sampled_from(list(Function)), min_size=1).map(
        lambda f: Rule(Operator.STATISTICS, functions=frozenset(f))
    ),
)


@st.composite
def access_objects(draw) -> AccessObject:
    given_rules = {}
    for key in [(r, "Temp", a) for r in ROLES for a in (*ATTRS, "ts")]:
        rule = draw(st.one_of(st.none(), rules))
        if rule is None:
            continue
        if key[2] == "ts" and rule.operator is Operator.CONDITIONAL:
            rule = READ  # no conditions on event time
        given_rules[key] = rule
    return AccessObject(TYPES, given_rules)


events = st.fixed_dictionaries(
    {"room": st.sampled_from(["L1", "L2", "L3"]), "celsius": st.integers(-5, 70)}
)


def holders(access: AccessObject, hierarchy: RoleHierarchy, roles, attr: str) -> set[str]:
    return {r for r in hierarchy.effective(roles) if (r, "Temp", attr) in access.rules}


def applicable(access: AccessObject, hierarchy: RoleHierarchy, role: str, attr: str) -> list[Rule]:
    """An independent statement of which rules apply: a rule-holding effective role's
    rule applies unless another rule-holding effective role is among its seniors."""
    found = holders(access, hierarchy, [role], attr)
    return [access.rules[(r, "Temp", attr)] for r in found if hierarchy.readers([r]) & found == {r}]


@settings(max_examples=300)
@given(access_objects(), hierarchies(), st.sampled_from(ROLES), st.sampled_from(ATTRS), events)
def test_the_combined_rule_releases_nothing_no_applicable_rule_releases(
    access, hierarchy, role, attr, event
) -> None:
    """Each capability (the raw value on this event, one aggregate) comes from one rule
    that applies (and so from one rule of an effective role)."""
    effective = access.effective_rule(hierarchy, [role], "Temp", attr)
    rules = applicable(access, hierarchy, role, attr)
    for capability in effective.capabilities(event):
        assert any(capability in rule.capabilities(event) for rule in rules), capability


@given(access_objects(), hierarchies(), st.sampled_from(ROLES), st.sampled_from(ATTRS))
def test_a_roles_own_rule_wins_over_inherited_ones(access, hierarchy, role, attr) -> None:
    own = access.rules.get((role, "Temp", attr))
    if own is not None:
        assert access.effective_rule(hierarchy, [role], "Temp", attr) == own


@given(access_objects(), hierarchies(), st.sampled_from(ROLES), st.sampled_from(ATTRS))
def test_without_an_own_rule_a_role_acts_as_its_juniors_together(
    access, hierarchy, role, attr
) -> None:
    """No own rule: the inherited combination, with the conflict rules among them."""
    if (role, "Temp", attr) not in access.rules:
        juniors = hierarchy.juniors[role]
        assert access.effective_rule(hierarchy, [role], "Temp", attr) == access.effective_rule(
            hierarchy, juniors, "Temp", attr
        )
        assert access.effective_rule(hierarchy, [role], "Temp", attr) == combine(
            applicable(access, hierarchy, role, attr)
        )


@given(access_objects(), hierarchies(), st.sampled_from(ROLES), st.sampled_from(ATTRS), events)
def test_an_applicable_prohibition_binds(access, hierarchy, role, attr, event) -> None:
    rules = applicable(access, hierarchy, role, attr)
    effective = access.effective_rule(hierarchy, [role], "Temp", attr)
    if not rules or any(r.operator is Operator.DENY for r in rules):
        assert effective.capabilities(event) == frozenset()


@settings(max_examples=300)
@given(access_objects(), hierarchies(), st.sampled_from(ROLES), st.sampled_from(ATTRS), events)
def test_a_junior_prohibition_yields_only_to_a_rule_of_a_role_above_it(
    access, hierarchy, role, attr, event
) -> None:
    """Whatever a role reads past a junior's psi, a rule of some effective role senior
    to that junior releases: a psi is never lifted by a peer or by the absence of rules."""
    effective = access.effective_rule(hierarchy, [role], "Temp", attr)
    if not effective.capabilities(event):
        return
    found = holders(access, hierarchy, [role], attr)
    for junior in found:
        if access.rules[(junior, "Temp", attr)].operator is Operator.DENY:
            assert hierarchy.readers([junior]) & found - {junior}, junior


@settings(max_examples=300)
@given(access_objects(), hierarchies(), st.sampled_from(ROLES), st.sampled_from(ATTRS), events)
def test_a_role_keeps_every_applicable_right_without_conflict(
    access, hierarchy, role, attr, event
) -> None:
    rules = applicable(access, hierarchy, role, attr)
    kinds = {r.operator for r in rules}
    if Operator.DENY in kinds or {Operator.CONDITIONAL, Operator.STATISTICS} <= kinds:
        return  # deny overrides; Phi next to Omega is denied (module docstring, rule 5)
    effective = access.effective_rule(hierarchy, [role], "Temp", attr).capabilities(event)
    for rule in rules:
        assert rule.capabilities(event) <= effective, rule


@given(access_objects(), hierarchies(), st.sampled_from(ROLES))
def test_activating_a_junior_beside_its_senior_changes_nothing(access, hierarchy, role) -> None:
    juniors = hierarchy.effective([role])
    assert access.effective(hierarchy, [role]) == access.effective(hierarchy, juniors)


@given(access_objects())
def test_the_text_form_round_trips(access) -> None:
    assert loads(dumps(access)) == access


def test_the_conflict_rule_by_example() -> None:
    phi_hot = Rule(Operator.CONDITIONAL, conditions=((Comparison("celsius", ">", 30),),))
    phi_l1 = Rule(Operator.CONDITIONAL, conditions=((Comparison("room", "=", "L1"),),))
    count = Rule(Operator.STATISTICS, functions=frozenset({Function.COUNT}))
    avg = Rule(Operator.STATISTICS, functions=frozenset({Function.AVG}))
    assert combine([READ, DENIED]) == DENIED  # psi beats xi
    assert combine([READ, phi_hot, count]) == READ
    either = combine([phi_hot, phi_l1])
    assert either.readable_on({"room": "L1", "celsius": 5})
    assert either.readable_on({"room": "L2", "celsius": 35})
    assert not either.readable_on({"room": "L2", "celsius": 5})
    assert combine([count, avg]).functions == {Function.COUNT, Function.AVG}
    assert combine([phi_hot, count]) == DENIED
    assert combine([]) == DENIED


def test_an_own_rule_overrides_an_inherited_prohibition_and_only_it() -> None:
    """Both directions: the senior's own xi wins over its junior's psi; a senior without
    a rule of its own inherits the psi; between incomparable juniors deny overrides."""
    hierarchy = RoleHierarchy.build(
        ["junior", "senior", "heir", "peer", "both"],
        [("senior", "junior"), ("heir", "junior"), ("both", "junior"), ("both", "peer")],
    )
    access = AccessObject(
        TYPES,
        {
            ("junior", "Temp", "room"): DENIED,
            ("senior", "Temp", "room"): READ,
            ("peer", "Temp", "room"): READ,
        },
    )
    rule = access.effective_rule
    assert rule(hierarchy, ["senior"], "Temp", "room") == READ
    assert rule(hierarchy, ["senior", "junior"], "Temp", "room") == READ  # junior inside senior
    assert rule(hierarchy, ["heir"], "Temp", "room") == DENIED
    assert rule(hierarchy, ["both"], "Temp", "room") == DENIED  # incomparable: psi wins
    assert rule(hierarchy, ["heir", "peer"], "Temp", "room") == DENIED
    assert rule(hierarchy, ["junior"], "Temp", "room") == DENIED


def test_a_middle_roles_rule_shadows_the_ones_below_it() -> None:
    hierarchy = RoleHierarchy.build(
        ["low", "middle", "top"], [("top", "middle"), ("middle", "low"), ("top", "low")]
    )
    phi = Rule(Operator.CONDITIONAL, conditions=((Comparison("celsius", "<", 40),),))
    access = AccessObject(
        TYPES, {("low", "Temp", "celsius"): DENIED, ("middle", "Temp", "celsius"): phi}
    )
    # the edge top -> low is implied by top -> middle -> low and changes nothing
    assert access.applicable(hierarchy, ["top"], "Temp", "celsius") == [phi]
    assert access.effective_rule(hierarchy, ["top"], "Temp", "celsius") == phi


def test_unstated_attributes_are_denied_and_do_not_override() -> None:
    hierarchy = RoleHierarchy.build(["nurse", "doctor"], [("doctor", "nurse")])
    access = AccessObject(TYPES, {("doctor", "Temp", "room"): READ})
    assert access.effective_rule(hierarchy, ["doctor"], "Temp", "room") == READ
    assert access.effective_rule(hierarchy, ["nurse"], "Temp", "room") == DENIED
    assert access.effective(hierarchy, ["doctor"])["Temp"]["celsius"] == DENIED


DOCUMENT = {
    "event_types": TYPES,
    "roles": {
        "nurse": {
            "Temp": [
                {"operator": "xi", "attributes": ["room"]},
                {
                    "operator": "phi",
                    "attributes": ["celsius"],
                    "condition": [["room", "=", "L1"], ["celsius", ">", 30]],
                },
                {"operator": "psi", "attributes": ["ts"]},
            ]
        },
        "doctor": {
            "Temp": [{"operator": "statistics", "attributes": "*", "functions": ["avg", "count"]}]
        },
    },
}


def test_a_document_with_all_operators_loads() -> None:
    access = loads(json.dumps(DOCUMENT))
    assert access.rules[("nurse", "Temp", "room")] == READ
    assert access.rules[("nurse", "Temp", "celsius")].readable_on({"room": "L1", "celsius": 31})
    assert not access.rules[("nurse", "Temp", "celsius")].readable_on({"room": "L1", "celsius": 3})
    assert access.rules[("doctor", "Temp", "ts")].functions == {Function.AVG, Function.COUNT}


def _broken(path: list, value) -> str:
    document = json.loads(json.dumps(DOCUMENT))
    target = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return json.dumps(document)


@pytest.mark.parametrize(
    ("path", "value", "where", "problem"),
    [
        (
            ["roles", "nurse", "Temp", 2, "attributes"],
            ["room"],
            "roles.nurse.Temp[2]",
            "attribute room already has an operator",
        ),
        (
            ["roles", "doctor", "Temp", 0, "attributes"],
            ["kelvin"],
            "roles.doctor.Temp[0].attributes[0]",
            "unknown attribute",
        ),
        (
            ["roles", "doctor", "Temp", 0, "functions"],
            ["median"],
            "roles.doctor.Temp[0].functions[0]",
            "unknown function",
        ),
        (
            ["roles", "nurse", "Temp", 1, "condition", 1, 2],
            "secret-value",
            "roles.nurse.Temp[1].condition[1][2]",
            "does not fit attribute celsius",
        ),
        (
            ["roles", "nurse", "Temp", 1, "condition"],
            [],
            "roles.nurse.Temp[1].condition",
            "empty condition",
        ),
        (
            ["roles", "nurse", "Temp", 0, "operator"],
            "maybe",
            "roles.nurse.Temp[0].operator",
            "unknown operator",
        ),
        (["roles", "nurse", "Smoke"], [], "roles.nurse.Smoke", "unknown event type"),
        (
            ["roles", "nurse", "Temp", 0, "condition"],
            [["room", "=", "x"]],
            "roles.nurse.Temp[0].condition",
            "unknown field",
        ),
        (["event_types", "Temp", "room"], "text", "event_types.Temp.room", "unknown kind"),
    ],
)
def test_bad_rule_files_are_refused_with_the_place_and_no_value(path, value, where, problem):
    with pytest.raises(RulesError) as caught:
        loads(_broken(path, value))
    assert caught.value.where == where
    assert problem in caught.value.problem
    assert "secret" not in str(caught.value) and "L1" not in str(caught.value)


def test_malformed_json_and_unknown_roles() -> None:
    with pytest.raises(RulesError, match=r"line 1, column 2: not valid JSON"):
        loads("{oops")
    hierarchy = RoleHierarchy.build(["nurse"])
    with pytest.raises(RulesError, match=r"roles.doctor: unknown role"):
        loads(json.dumps(DOCUMENT), hierarchy)


@pytest.mark.parametrize(
    ("document", "where"),
    [
        ({"event_types": {"T": {"ts": {}}}, "roles": {}}, "event_types.T.ts"),
        (
            {
                "event_types": {"T": {"ts": "timestamp", "x": "long"}},
                "roles": {
                    "r": {
                        "T": [{"operator": "phi", "attributes": ["x"], "condition": [["x", [], 1]]}]
                    }
                },
            },
            "roles.r.T[0].condition[0][1]",
        ),
    ],
)
def test_unhashable_json_values_are_refused_not_crashed_on(document, where) -> None:
    """Found by reading the API fuzzer's reach: a kind or a comparison given as an
    object or list raised TypeError (a 500) instead of a RulesError."""
    from streamshield.policy.cep_rules_text import from_document

    with pytest.raises(RulesError) as caught:
        from_document(document)
    assert caught.value.where == where
