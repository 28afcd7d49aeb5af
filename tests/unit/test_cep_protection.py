"""The per-role protection engine, pure (issue 15 item 3): what a role's copy of the bus
holds, per operator, and the conformance cases' oracle answers."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.cep.oracle import Event
from streamshield.cep.pattern import compile_pattern
from streamshield.cep.protection import Detector, detectors, protect
from streamshield.cep.validation import PatternRefused, validate
from streamshield.policy.cep_rules import (
    READ,
    AccessObject,
    Comparison,
    Function,
    Operator,
    Rule,
)
from streamshield.policy.roles import RoleHierarchy
from tests.conformance import cep_protection as case


def test_trees_follow_fig3_and_inheritance() -> None:
    trees = detectors(case.ACCESS, case.HIERARCHY, case.ROLES)
    assert set(trees) == {"A", "B", "C"}
    assert {n: r.operator for n, r in trees["A"].released.items()} == {
        "id": Operator.READ,
        "k": Operator.READ,
        "v": Operator.CONDITIONAL,
        "w": Operator.STATISTICS,
    }
    assert "w" not in trees["B"].released  # staff's psi beats analyst's xi
    assert not trees["A"].conditional and trees["C"].conditional
    # staff alone: B has no rule but the psi on w, C none at all: neither passes (3 (b))
    assert set(detectors(case.ACCESS, case.HIERARCHY, {"staff"})) == {"A"}


def test_copies_mask_phi_drop_psi_and_filter_all_phi_types() -> None:
    trees = detectors(case.ACCESS, case.HIERARCHY, case.ROLES)
    a_open, a_masked, _, b_masked, c_in, c_out, *_ = case.fixed_batches()[0]
    copies = {e.serial: e.values for e in protect(trees, case.fixed_batches()[0])}
    assert copies[a_open.serial]["v"] == 5 and copies[a_masked.serial]["v"] is None
    assert copies[a_masked.serial]["w"] == 20  # Omega travels; registration guards it
    assert "w" not in copies[b_masked.serial] and copies[b_masked.serial]["k"] is None
    assert set(copies[c_in.serial]) == {"ts", "id", "v"}  # a new event without k, w
    assert c_out.serial not in copies


def test_conformance_cases_oracle_answers() -> None:
    """What the Spark test must find too; protection changes every pattern's answer."""
    found = case.expected(case.fixed_batches())
    assert sorted(found["seq"]) == [(1, 3, 5, 1), (1, 11, 5, 1), (7, 11, 3, 1)]
    assert (2, None, None, None) in found["or"]  # a.v masked: NULL, not 7
    assert all(row[2] != 6 for row in found["or"])  # the C event outside Phi is absent
    assert [row[2:] for row in found["omega"]] == [(4, 25.0, 4)]  # the 1-match group withheld
    raw = case.unprotected(case.fixed_batches())
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


@st.composite
def trees_and_events(draw):
    released = {}
    for name in NAMES:
        op = draw(OPERATORS)
        if op is Operator.CONDITIONAL:
            cond = Comparison(draw(st.sampled_from(NAMES)), draw(st.sampled_from(["<", ">="])), 3)
            released[name] = Rule(op, conditions=((cond,),))
        elif op is Operator.STATISTICS:
            released[name] = Rule(op, functions=frozenset({Function.COUNT}))
        elif op is Operator.READ:
            released[name] = READ
    values = st.one_of(st.none(), st.integers(0, 6))
    events = [
        Event("T", {"ts": None, **{n: draw(values) for n in NAMES}}, serial)
        for serial in range(draw(st.integers(0, 8)))
    ]
    return released, events


@settings(max_examples=200, deadline=None)
@given(trees_and_events())
def test_a_copy_releases_nothing_its_rules_do_not(drawn) -> None:
    released, events = drawn
    trees = {"T": Detector("T", released)} if released else {}
    copies = {c.serial: c for c in protect(trees, events)}
    for original in events:
        copy = copies.get(original.serial)
        if copy is None:  # dropped: no attribute of it is released (or the type is denied)
            assert not any(
                r.operator is not Operator.CONDITIONAL or r.readable_on(original.values)
                for r in released.values()
            )
            continue
        for name in NAMES:
            rule = released.get(name)
            if rule is None:
                assert name not in copy.values  # psi: not in the new event at all
            elif copy.values[name] is not None:
                assert copy.values[name] == original.values[name]
                assert rule.operator is not Operator.CONDITIONAL or rule.readable_on(
                    original.values
                )


def test_a_type_without_rules_has_no_tree() -> None:
    access = AccessObject({"T": {"ts": "timestamp", "x": "long"}}, {})
    assert detectors(access, RoleHierarchy.build(["r"]), {"r"}) == {}
