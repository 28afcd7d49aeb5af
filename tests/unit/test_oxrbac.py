"""OxRBAC decisions (catalog/oxrbac.py): examples and properties over random catalogs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.catalog import oxrbac as ox
from streamshield.catalog.oxrbac import (
    SYSTEM,
    AclState,
    CatalogObject,
    Denial,
    Grant,
    Grantee,
    Kind,
    ObjectRef,
    Permission,
    Subject,
)

USERS = ("root", "al", "bob", "ed")
ROLES = ("R1", "R2")
IN1, IN2 = ObjectRef(Kind.STREAM, "in1"), ObjectRef(Kind.STREAM, "in2")
SCHEMA = ObjectRef(Kind.SCHEMA, "s")
OBJECTS = {
    SYSTEM: CatalogObject(SYSTEM, "root"),
    SCHEMA: CatalogObject(SCHEMA, "ed"),
    IN1: CatalogObject(IN1, "ed", SCHEMA),
    IN2: CatalogObject(IN2, None),
}
USER_ROLES = {
    "al": frozenset({"R1"}),
    "bob": frozenset({"R2"}),
    "ed": frozenset(),
    "root": frozenset(),
}


def state(*grants: Grant) -> AclState:
    return AclState(OBJECTS, frozenset(grants), USER_ROLES)


def who(user: str) -> Subject:
    return Subject(user, USER_ROLES[user])


def g(permission: Permission, obj: ObjectRef, to: Grantee, by: str, option: bool = False) -> Grant:
    return Grant(permission, obj, to, by, option)


def test_owners_hold_everything_on_their_objects_and_system_owner_everywhere() -> None:
    s = state()
    assert ox.holds(s, who("ed"), Permission.INJECT_SP, IN1)
    assert not ox.holds(s, who("ed"), Permission.INJECT_SP, IN2)
    assert ox.holds(s, who("root"), Permission.READ_TUPLE, IN2)
    assert not ox.holds(s, who("al"), Permission.VIEW_OBJECT, IN1)


def test_unknown_objects_and_inapplicable_permissions_are_denied() -> None:
    ghost = ObjectRef(Kind.STREAM, "ghost")
    s = state(g(Permission.READ_TUPLE, ghost, Grantee.user("al"), "root"))
    assert not ox.holds(s, who("root"), Permission.READ_TUPLE, ghost)
    assert not ox.holds(s, who("al"), Permission.READ_TUPLE, ghost)
    assert not ox.holds(s, who("ed"), Permission.SUBSCRIBE, SCHEMA)  # not a schema permission


def test_system_grants_are_global_and_role_grants_need_the_role() -> None:
    s = state(g(Permission.READ_TUPLE, SYSTEM, Grantee.role("R1"), "root"))
    assert ox.holds(s, who("al"), Permission.READ_TUPLE, IN1)
    assert ox.holds(s, who("al"), Permission.READ_TUPLE, IN2)
    assert not ox.holds(s, who("bob"), Permission.READ_TUPLE, IN1)
    assert not ox.holds(s, Subject("al"), Permission.READ_TUPLE, IN1)  # role not active


def test_listing_needs_view_catalog_and_view_object() -> None:
    view = g(Permission.VIEW_OBJECT, IN1, Grantee.user("al"), "ed")
    assert ox.visible(state(view), who("al"), Kind.STREAM) == []
    catalog = g(Permission.VIEW_CATALOG, SYSTEM, Grantee.role("R1"), "root")
    assert ox.visible(state(view, catalog), who("al"), Kind.STREAM) == [IN1]


def test_denials_of_unseen_objects_say_not_visible() -> None:
    assert ox.require(state(), who("al"), Permission.READ_TUPLE, IN1) == Denial(
        Permission.READ_TUPLE, IN1, visible=False
    )
    view = g(Permission.VIEW_OBJECT, IN1, Grantee.user("al"), "ed")
    assert ox.require(state(view), who("al"), Permission.READ_TUPLE, IN1) == Denial(
        Permission.READ_TUPLE, IN1, visible=True
    )


def test_add_query_checks_add_then_every_input() -> None:
    add = g(Permission.ADD, SYSTEM, Grantee.user("al"), "root")
    see = [g(Permission.VIEW_OBJECT, o, Grantee.user("al"), "root") for o in (IN1, IN2)]
    read = g(Permission.READ_TUPLE, IN1, Grantee.user("al"), "root")
    aggregate = g(Permission.READ_AGGREGATE, IN2, Grantee.user("al"), "root")
    assert ox.check_add_query(state(), who("al"), [IN1]).permission is Permission.ADD
    assert ox.check_add_query(state(add), who("al"), [IN1]).visible is False
    assert ox.check_add_query(state(add, *see), who("al"), [IN1]) == Denial(
        Permission.READ_TUPLE, IN1, True
    )
    assert ox.check_add_query(state(add, *see, read), who("al"), [IN1, IN2]) == Denial(
        Permission.READ_TUPLE, IN2, True
    )
    assert ox.check_add_query(state(add, *see, read, aggregate), who("al"), [IN1, IN2]) is None
    assert ox.check_add_query(state(add, *see, read), who("al"), [SCHEMA]).visible is False


def test_revocation_cascades_and_cycles_do_not_keep_each_other_alive() -> None:
    al, bob = Grantee.user("al"), Grantee.user("bob")
    root_to_al = g(Permission.READ_TUPLE, IN1, al, "ed", True)
    al_to_bob = g(Permission.READ_TUPLE, IN1, bob, "al", True)
    bob_to_al = g(Permission.READ_TUPLE, IN1, al, "bob", True)
    s = state(root_to_al, al_to_bob, bob_to_al)
    plan = ox.plan_revoke(s, who("ed"), Permission.READ_TUPLE, IN1, al)
    assert plan == {root_to_al, al_to_bob, bob_to_al}
    # bob may revoke only what he gave
    assert ox.plan_revoke(s, who("bob"), Permission.READ_TUPLE, IN1, al) == Denial(
        Permission.CHANGE_PERM, IN1, visible=False
    )


def test_change_perm_grants_other_permissions_but_not_itself() -> None:
    change = g(Permission.CHANGE_PERM, IN1, Grantee.user("al"), "ed")
    s = state(change)
    assert ox.may_grant_authority(s, who("al"), Permission.WRITE, IN1)
    assert not ox.may_grant_authority(s, who("al"), Permission.CHANGE_PERM, IN1)


def test_effective_subject_keeps_held_known_roles_and_adds_juniors() -> None:
    juniors = {"A": frozenset({"B"}), "B": frozenset(), "C": frozenset()}
    subject = ox.effective_subject("u", ["A", "C", "Z"], ["A", "Z"], juniors)
    assert subject == Subject("u", frozenset({"A", "B"}))


# --- properties -----------------------------------------------------------------------------

grantees = st.one_of(
    st.sampled_from(USERS).map(Grantee.user), st.sampled_from(ROLES).map(Grantee.role)
)
grant_strategy = st.builds(
    Grant,
    st.sampled_from(list(Permission)),
    st.sampled_from(list(OBJECTS)),
    grantees,
    st.sampled_from(USERS),
    st.booleans(),
)
states = st.frozensets(grant_strategy, max_size=12).map(lambda gs: state(*gs))
subjects = st.sampled_from(USERS).map(who)


@settings(max_examples=100, deadline=None)
@given(states, subjects, st.sampled_from(list(Permission)), st.sampled_from(list(OBJECTS)))
def test_more_grants_never_take_rights_away(
    s: AclState, subject: Subject, permission: Permission, obj: ObjectRef
) -> None:
    fewer = AclState(OBJECTS, frozenset(list(s.grants)[: len(s.grants) // 2]), USER_ROLES)
    if ox.holds(fewer, subject, permission, obj):
        assert ox.holds(s, subject, permission, obj)


@settings(max_examples=100, deadline=None)
@given(states, subjects, st.sampled_from(list(Permission)), st.sampled_from(list(OBJECTS)))
def test_without_grants_only_owners_hold_anything(
    s: AclState, subject: Subject, permission: Permission, obj: ObjectRef
) -> None:
    empty = AclState(OBJECTS, frozenset(), USER_ROLES)
    owners = {OBJECTS[obj].owner, "root"}
    assert ox.holds(empty, subject, permission, obj) == (
        subject.user in owners and permission in ox.APPLICABLE[obj.kind]
    )


@settings(max_examples=100, deadline=None)
@given(states)
def test_supported_grants_are_a_fixpoint_backed_by_authority(s: AclState) -> None:
    kept = ox.supported(s)
    assert kept <= s.grants
    backed = AclState(OBJECTS, kept, USER_ROLES)
    assert ox.supported(backed) == kept
    for grant in kept:
        assert ox.may_grant_authority(
            backed, backed.subject_of(grant.grantor), grant.permission, grant.obj
        )


@settings(max_examples=100, deadline=None)
@given(
    states, subjects, st.sampled_from(list(Permission)), st.sampled_from(list(OBJECTS)), grantees
)
def test_after_revoke_by_an_authority_the_grantee_keeps_no_grant_of_it(
    s: AclState, subject: Subject, permission: Permission, obj: ObjectRef, grantee: Grantee
) -> None:
    s = AclState(OBJECTS, ox.supported(s), USER_ROLES)
    plan = ox.plan_revoke(s, subject, permission, obj, grantee)
    if isinstance(plan, Denial):
        return
    after = AclState(OBJECTS, s.grants - plan, USER_ROLES)
    assert ox.supported(after) == after.grants  # nothing unbacked is left behind
    if ox.is_owner(s, subject, obj):
        assert not any(g.grantee == grantee for g in after.grants_on(permission, obj))


@settings(max_examples=100, deadline=None)
@given(states, subjects, st.sampled_from(list(Kind)))
def test_visible_objects_are_exactly_those_with_view_object(
    s: AclState, subject: Subject, kind: Kind
) -> None:
    listed = ox.visible(s, subject, kind)
    if not ox.holds(s, subject, Permission.VIEW_CATALOG, SYSTEM):
        assert listed == []
    else:
        expected = [o for o in sorted(OBJECTS) if o.kind is kind]
        assert listed == [o for o in expected if ox.holds(s, subject, Permission.VIEW_OBJECT, o)]


@settings(max_examples=100, deadline=None)
@given(states, subjects)
def test_raw_readers_may_read_aggregates(s: AclState, subject: Subject) -> None:
    read, aggregate = ox.readable(s, subject, ["in1", "in2", "ghost"])
    assert read <= aggregate <= {"in1", "in2"}
