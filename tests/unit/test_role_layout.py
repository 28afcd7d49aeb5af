"""Stable role bit layout: a role appended or an edge changed never changes what an
already encoded label means (the labels stored on disk)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.policy.encoding import RoleCodec
from streamshield.policy.policy import Access
from streamshield.policy.privileges import Privilege
from streamshield.policy.roles import (
    RoleCapacityError,
    RoleCycleError,
    RoleHierarchy,
    UnknownRoleError,
    capacity_for,
)

BASE = RoleHierarchy.build(
    ["E", "D", "C", "N"], [("D", "E"), ("C", "D")], order=["C", "D", "E", "N"], capacity=64
)


def test_capacity_rounds_to_words() -> None:
    assert [capacity_for(n) for n in (0, 1, 64, 65, 500)] == [64, 64, 64, 128, 512]
    with pytest.raises(ValueError, match="multiple of 64"):
        RoleHierarchy.build(["A"], capacity=10)
    with pytest.raises(RoleCapacityError):
        RoleHierarchy.build([f"R{i}" for i in range(65)], capacity=64)


def test_appending_keeps_positions_and_width() -> None:
    grown = BASE.with_role("S", ["C"])
    assert grown.roles == ("C", "D", "E", "N", "S") and grown.keeps_layout_of(BASE)
    assert grown.effective(["S"]) == {"S", "C", "D", "E"}
    assert RoleCodec(grown).width == RoleCodec(BASE).width == 3  # one word per block
    with pytest.raises(ValueError, match="already exists"):
        grown.with_role("S")
    with pytest.raises(UnknownRoleError):
        BASE.with_role("X", ["NOPE"])
    resorted = RoleHierarchy.build(grown.roles, grown.edges)  # the old sorted layout
    assert resorted.roles == ("C", "D", "E", "N", "S")
    widened = RoleHierarchy.build(grown.roles, grown.edges, order=grown.roles, capacity=128)
    assert not widened.keeps_layout_of(BASE)  # another width: refused by the engine


def test_a_full_capacity_refuses_the_next_role() -> None:
    full = RoleHierarchy.build([f"R{i:02d}" for i in range(64)], capacity=64)
    with pytest.raises(RoleCapacityError, match="capacity of 64"):
        full.with_role("R64")


def test_cycles_and_edges() -> None:
    with pytest.raises(RoleCycleError):
        BASE.with_junior("E", "C")
    with pytest.raises(RoleCycleError):
        BASE.with_junior("N", "N")
    linked = BASE.with_junior("N", "E")
    assert linked.readers(["E"]) == {"E", "D", "C", "N"} and linked.keeps_layout_of(BASE)
    assert linked.without_junior("N", "E") == BASE
    with pytest.raises(KeyError):
        BASE.without_junior("N", "E")


@given(
    granted=st.sets(st.sampled_from(BASE.roles)),
    denied=st.sets(st.sampled_from(BASE.roles)),
    new_roles=st.lists(st.text("XYZ", min_size=1, max_size=3), unique=True, max_size=5),
)
def test_old_labels_read_the_same_after_roles_are_appended(granted, denied, new_roles) -> None:
    old = RoleCodec(BASE)
    hierarchy = BASE
    for i, role in enumerate(new_roles):
        hierarchy = hierarchy.with_role(role, ["E"] if i % 2 else [])  # some above old roles
    new = RoleCodec(hierarchy)
    encoded = old.access(Access(BASE.readers(granted), frozenset(denied)))
    assert new.decode(encoded) == old.decode(encoded)
    for roles in [[r] for r in BASE.roles]:
        for privilege in (Privilege.READ, Privilege.STATISTICS):
            assert encoded.allows(new.query(roles, privilege)) == encoded.allows(
                old.query(roles, privilege)
            )
    for i, role in enumerate(new_roles):
        assert role not in new.decode(encoded).readers  # in no old label
        # it reads an old tuple only through its juniors, exactly as they do
        assert encoded.allows(new.query([role])) == (
            bool(i % 2) and encoded.allows(old.query(["E"]))
        )
