"""Role hierarchy (paper 1, Fig. 2): effective roles go down, readers of a grant go up."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.examples import hospital
from streamshield.policy.roles import RoleCycleError, RoleHierarchy, UnknownRoleError

H = hospital.hierarchy()


def test_fig2_effective_roles() -> None:
    assert H.effective(["C"]) == {"C", "D", "E"}
    assert H.effective(["ND"]) == {"ND", "E"}
    assert H.effective(["E"]) == {"E"}
    assert H.effective(["DM", "ND"]) == {"DM", "D", "ND", "E"}
    assert H.effective([]) == frozenset()


def test_fig2_readers_of_a_grant() -> None:
    assert H.readers(["D"]) == {"D", "DM", "C", "GP"}
    assert H.readers(["E"]) == {"E", "D", "ND", "DM", "C", "GP"}
    assert H.readers(["C"]) == {"C"}
    assert H.readers(["INS"]) == {"INS"}


def test_unknown_role_is_an_error_not_an_empty_set() -> None:
    with pytest.raises(UnknownRoleError, match="Surgeon"):
        H.effective(["Surgeon"])
    with pytest.raises(UnknownRoleError):
        H.readers(["C", "Surgeon"])
    with pytest.raises(UnknownRoleError):
        RoleHierarchy.build(["A"], [("A", "B")])


def test_cycles_are_rejected() -> None:
    with pytest.raises(RoleCycleError, match="A -> B -> A"):
        RoleHierarchy.build(["A", "B"], [("A", "B"), ("B", "A")])
    with pytest.raises(RoleCycleError):
        RoleHierarchy.build(["A"], [("A", "A")])


role_sets = st.sets(st.sampled_from(H.roles))


@given(activated=role_sets, granted=role_sets)
def test_grant_reaches_query_iff_readers_meet_activated(
    activated: set[str], granted: set[str]
) -> None:
    """The stored (upward-closed) reader set decides exactly like effective roles would."""
    by_effective = bool(H.effective(activated) & set(granted))
    assert by_effective == bool(set(activated) & H.readers(granted))
    assert by_effective == bool(H.effective(activated) & H.readers(granted))


@given(roles=role_sets)
def test_closures_are_closures(roles: set[str]) -> None:
    effective = H.effective(roles)
    assert set(roles) <= effective
    assert H.effective(effective) == effective
    readers = H.readers(roles)
    assert set(roles) <= readers and H.readers(readers) == readers
