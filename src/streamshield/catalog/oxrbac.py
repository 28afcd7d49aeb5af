"""Owner-extended RBAC (OxRBAC, Securing Borealis section 2-3): pure decisions, no storage.

Objects are the SYSTEM, SCHEMAs, STREAMs and QUERYs; every object but a stream
registered outside the security catalog has an owning *user*. Permissions are granted
to users or roles, optionally WITH GRANT OPTION. Rules chosen where the paper is terse:

* **Owners** hold every permission on their object, with grant option. The owner of
  SYSTEM (the bootstrap administrator) owns the whole catalog in this sense.
* **A grant on SYSTEM is global**: permission P granted on SYSTEM holds on every object
  P applies to (READ TUPLE on SYSTEM reads every stream).
* **Roles**: a grant to role r reaches a subject whose *effective* roles (activated
  roles plus all their juniors, see :mod:`streamshield.policy.roles`) contain r.
* **Visibility** (user abstraction layer): an object is visible with VIEW OBJECT on it;
  listing needs VIEW CATALOG on SYSTEM as well. An invisible object is reported as
  "not found", exactly like a missing one. SYSTEM exists for everyone: a permission
  missing on it is named, never "not found".
* **Granting** P on O needs: ownership of O (or SYSTEM), or CHANGE PERM on O (for any
  P except CHANGE PERM itself), or P on O WITH GRANT OPTION.
* **Revoking** removes the caller's own grants of P on O to the grantee; the owner and
  CHANGE PERM holders remove everyone's. Revocation **cascades**: a grant survives only
  if its grantor still has authority to make it without relying on grants that were
  removed (least fixpoint from the owners, so grant cycles do not keep each other
  alive).
* **ADD**: a schema or a query is added under SYSTEM (ADD on SYSTEM), a stream under a
  schema (ADD on the schema). Adding a query also needs, for every input stream,
  READ TUPLE or READ AGGREGATE (checked in the order the paper lists: ADD, then each
  input). New objects are owned by their creator; no other default grants.
* **Data senders** (section 5.2): WRITE appends tuples to a stream; INJECT SP injects
  sps into it, held by the owner or a delegate granted INJECT SP.

Everything here is a function of plain data so that it can be property tested;
:mod:`streamshield.catalog.security` loads the data and stores the results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property


class Kind(StrEnum):
    SYSTEM = "system"
    SCHEMA = "schema"
    STREAM = "stream"
    QUERY = "query"


class Permission(StrEnum):
    VIEW_CATALOG = "VIEW CATALOG"
    VIEW_OBJECT = "VIEW OBJECT"
    ADD = "ADD"
    SET_QUERY_STATUS = "SET QUERY STATUS"
    SUBSCRIBE = "SUBSCRIBE"
    READ_TUPLE = "READ TUPLE"
    READ_AGGREGATE = "READ AGGREGATE"
    WRITE = "WRITE"
    INJECT_SP = "INJECT SP"
    CHANGE_PERM = "CHANGE PERM"
    CHANGE_SYSTEM = "CHANGE SYSTEM"


APPLICABLE: Mapping[Kind, frozenset[Permission]] = {
    Kind.SYSTEM: frozenset(Permission),  # a grant on SYSTEM is global
    Kind.SCHEMA: frozenset({Permission.VIEW_OBJECT, Permission.ADD, Permission.CHANGE_PERM}),
    Kind.STREAM: frozenset(
        {
            Permission.VIEW_OBJECT,
            Permission.SUBSCRIBE,
            Permission.READ_TUPLE,
            Permission.READ_AGGREGATE,
            Permission.WRITE,
            Permission.INJECT_SP,
            Permission.CHANGE_PERM,
        }
    ),
    Kind.QUERY: frozenset(
        {Permission.VIEW_OBJECT, Permission.SET_QUERY_STATUS, Permission.CHANGE_PERM}
    ),
}
"""Which permissions mean something on which kind of object."""


@dataclass(frozen=True, order=True)
class ObjectRef:
    kind: Kind
    name: str

    def __str__(self) -> str:
        return f"{self.kind.value} {self.name}"


SYSTEM = ObjectRef(Kind.SYSTEM, "system")


@dataclass(frozen=True)
class CatalogObject:
    """An object with its owning user (None: registered outside the security catalog)."""

    ref: ObjectRef
    owner: str | None
    parent: ObjectRef | None = None


class GranteeKind(StrEnum):
    USER = "user"
    ROLE = "role"


@dataclass(frozen=True, order=True)
class Grantee:
    kind: GranteeKind
    name: str

    @classmethod
    def user(cls, name: str) -> Grantee:
        return cls(GranteeKind.USER, name)

    @classmethod
    def role(cls, name: str) -> Grantee:
        return cls(GranteeKind.ROLE, name)

    def __str__(self) -> str:
        return f"{self.kind.value} {self.name}"


@dataclass(frozen=True, order=True)
class Grant:
    """``grantor`` gave ``permission`` on ``obj`` to ``grantee``."""

    permission: Permission
    obj: ObjectRef
    grantee: Grantee
    grantor: str
    with_grant_option: bool = False


@dataclass(frozen=True)
class Subject:
    """Who asks: a user acting with a set of *effective* roles (activated + juniors)."""

    user: str
    roles: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Denial:
    """Why a request is refused: the first permission missing, and on which object.

    ``visible`` is False when the caller may not see the object (or it does not
    exist): the caller must then be told "not found" and nothing else.
    """

    permission: Permission
    obj: ObjectRef
    visible: bool


@dataclass(frozen=True)
class AclState:
    """Objects, grants and each user's effective roles (the latter for cascades only)."""

    objects: Mapping[ObjectRef, CatalogObject]
    grants: frozenset[Grant] = frozenset()
    user_roles: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @cached_property
    def _by_target(self) -> dict[tuple[Permission, ObjectRef], list[Grant]]:
        index: dict[tuple[Permission, ObjectRef], list[Grant]] = {}
        for grant in self.grants:
            index.setdefault((grant.permission, grant.obj), []).append(grant)
        return index

    def grants_on(self, permission: Permission, obj: ObjectRef) -> list[Grant]:
        return self._by_target.get((permission, obj), [])

    def owner(self, obj: ObjectRef) -> str | None:
        found = self.objects.get(obj)
        return None if found is None else found.owner

    def subject_of(self, user: str) -> Subject:
        """A user with every role they hold: the authority a stored grant relies on."""
        return Subject(user, self.user_roles.get(user, frozenset()))


def _reaches(grantee: Grantee, subject: Subject) -> bool:
    if grantee.kind is GranteeKind.USER:
        return grantee.name == subject.user
    return grantee.name in subject.roles


def is_owner(state: AclState, subject: Subject, obj: ObjectRef) -> bool:
    """Owner of the object, or of SYSTEM (which owns everything)."""
    if obj not in state.objects:
        return False
    return subject.user in (state.owner(obj), state.owner(SYSTEM)) and bool(subject.user)


def holds(
    state: AclState,
    subject: Subject,
    permission: Permission,
    obj: ObjectRef,
    *,
    grant_option: bool = False,
) -> bool:
    """Does the subject hold the permission on the object (with grant option if asked)?

    Unknown objects and permissions that do not apply to the object's kind are denied.
    """
    if obj not in state.objects or permission not in APPLICABLE[obj.kind]:
        return False
    if is_owner(state, subject, obj):
        return True
    for target in (obj, SYSTEM) if obj != SYSTEM else (SYSTEM,):
        for grant in state.grants_on(permission, target):
            if _reaches(grant.grantee, subject) and (grant.with_grant_option or not grant_option):
                return True
    return False


def can_see(state: AclState, subject: Subject, obj: ObjectRef) -> bool:
    return holds(state, subject, Permission.VIEW_OBJECT, obj)


def visible(state: AclState, subject: Subject, kind: Kind) -> list[ObjectRef]:
    """The user abstraction layer: objects of a kind the subject may see, sorted."""
    if not holds(state, subject, Permission.VIEW_CATALOG, SYSTEM):
        return []
    return sorted(ref for ref in state.objects if ref.kind is kind and can_see(state, subject, ref))


def require(
    state: AclState, subject: Subject, permission: Permission, obj: ObjectRef
) -> Denial | None:
    """None when allowed; otherwise a Denial that only says "not found" for unseen objects."""
    if holds(state, subject, permission, obj):
        return None
    return Denial(permission, obj, obj == SYSTEM or can_see(state, subject, obj))


def may_grant_authority(
    state: AclState, subject: Subject, permission: Permission, obj: ObjectRef
) -> bool:
    """May the subject give ``permission`` on ``obj`` to someone (ignoring visibility)?"""
    if obj not in state.objects or permission not in APPLICABLE[obj.kind]:
        return False
    if is_owner(state, subject, obj):
        return True
    if permission is not Permission.CHANGE_PERM and holds(
        state, subject, Permission.CHANGE_PERM, obj
    ):
        return True
    return holds(state, subject, permission, obj, grant_option=True)


def check_grant(
    state: AclState, subject: Subject, permission: Permission, obj: ObjectRef
) -> Denial | None:
    """None when the subject may grant; else the Denial (CHANGE PERM is what is missing)."""
    if not can_see(state, subject, obj):
        return Denial(Permission.CHANGE_PERM, obj, visible=False)
    if may_grant_authority(state, subject, permission, obj):
        return None
    return Denial(Permission.CHANGE_PERM, obj, visible=True)


def supported(state: AclState) -> frozenset[Grant]:
    """The grants still backed by authority: least fixpoint from ownership.

    A grant counts once its grantor has authority using only grants already counted,
    so a cycle of grants (A gives B, B gives A) survives only if someone in it still
    has authority from outside the cycle.
    """
    valid: set[Grant] = set()
    pending = set(state.grants)
    while pending:
        trial = replace(state, grants=frozenset(valid))
        newly = {
            g
            for g in pending
            if may_grant_authority(trial, state.subject_of(g.grantor), g.permission, g.obj)
        }
        if not newly:
            break
        valid |= newly
        pending -= newly
    return frozenset(valid)


def plan_revoke(
    state: AclState,
    subject: Subject,
    permission: Permission,
    obj: ObjectRef,
    grantee: Grantee,
) -> frozenset[Grant] | Denial:
    """The grants a revocation removes, cascade included; or a Denial.

    The owner (and CHANGE PERM holders, for permissions other than CHANGE PERM) remove
    the grantee's permission whoever gave it; anyone else removes only their own grants
    and is refused when they have none to remove (whether others granted is not told).
    """
    if not can_see(state, subject, obj):
        return Denial(Permission.CHANGE_PERM, obj, visible=False)
    matching = [g for g in state.grants_on(permission, obj) if g.grantee == grantee]
    if is_owner(state, subject, obj) or (
        permission is not Permission.CHANGE_PERM
        and holds(state, subject, Permission.CHANGE_PERM, obj)
    ):
        direct = set(matching)
    else:
        direct = {g for g in matching if g.grantor == subject.user}
        if not direct:
            return Denial(Permission.CHANGE_PERM, obj, visible=True)
    remaining = replace(state, grants=state.grants - direct)
    return state.grants - supported(remaining)


def check_add(state: AclState, subject: Subject, container: ObjectRef) -> Denial | None:
    """ADD on the container (SYSTEM for schemas and queries, a schema for streams)."""
    return require(state, subject, Permission.ADD, container)


def check_add_query(
    state: AclState, subject: Subject, inputs: Iterable[ObjectRef]
) -> Denial | None:
    """The paper's recursive check: ADD on SYSTEM, then every input stream readable.

    An input needs READ TUPLE or READ AGGREGATE (aggregate-only inputs are allowed:
    SecFilter releases only aggregates of them at delivery). Inputs the subject cannot
    see are "not found".
    """
    denial = check_add(state, subject, SYSTEM)
    if denial is not None:
        return denial
    for ref in inputs:
        if ref.kind is not Kind.STREAM or not can_see(state, subject, ref):
            return Denial(Permission.READ_TUPLE, ref, visible=False)
        if not (
            holds(state, subject, Permission.READ_TUPLE, ref)
            or holds(state, subject, Permission.READ_AGGREGATE, ref)
        ):
            return Denial(Permission.READ_TUPLE, ref, visible=True)
    return None


def may_remove(state: AclState, subject: Subject, obj: ObjectRef) -> bool:
    """Removing an object modifies it: its owner, SYSTEM's owner or a CHANGE SYSTEM holder."""
    return is_owner(state, subject, obj) or holds(state, subject, Permission.CHANGE_SYSTEM, SYSTEM)


def readable(
    state: AclState, subject: Subject, streams: Iterable[str]
) -> tuple[set[str], set[str]]:
    """(raw-readable, aggregate-readable) stream names; raw reading implies aggregates."""
    read, aggregate = set(), set()
    for name in streams:
        ref = ObjectRef(Kind.STREAM, name)
        if holds(state, subject, Permission.READ_TUPLE, ref):
            read.add(name)
            aggregate.add(name)
        elif holds(state, subject, Permission.READ_AGGREGATE, ref):
            aggregate.add(name)
    return read, aggregate


def effective_subject(
    user: str, activated: Iterable[str], held: Iterable[str], juniors: Mapping[str, frozenset[str]]
) -> Subject:
    """A subject from activated roles, keeping only roles the user still holds and the
    hierarchy still knows (deny by default), plus all their juniors."""
    start = set(activated) & set(held) & set(juniors)
    effective: set[str] = set()
    stack = list(start)
    while stack:
        role = stack.pop()
        if role not in effective:
            effective.add(role)
            stack.extend(juniors.get(role, ()))
    return Subject(user, frozenset(effective))
