"""Administration of users, roles and the role hierarchy, guarded by OxRBAC.

A mixin of :class:`~streamshield.catalog.security.SecurityCatalog` (it uses the
catalog's transactions, subjects, ACL state and audit), kept in its own module so that
the security facade does not grow further.

Who may do what (decided here, documented in ``docs/administration.md``):

* Every user and role change, listing all users and reading another user: CHANGE
  SYSTEM on SYSTEM (administrators; the owner of SYSTEM holds it as owner). The
  permission is checked *before* the target is looked up, so a non-administrator
  learns nothing about which users or roles exist.
* Reading oneself and changing one's own password (with the current one): every
  user. A wrong current password counts as a failed login (throttled the same way).
* Listing roles and their juniors: every logged-in user (role names are what users
  activate at login and providers write in sps; they are not secret).

Password policy (:func:`check_password`): at least :data:`MIN_PASSWORD` characters, at
most :data:`MAX_PASSWORD`, not only whitespace, not the user name (ignoring case).
It applies to every password set here and by ``streamshield admin init``; the lower
level :meth:`SecurityCatalog.create_user` stays a trusted primitive (examples, tests).

Disabling a user ends all her sessions in the same transaction, and login refuses her
with the same message as a wrong password (the audit says why, to administrators
only). One cannot disable oneself: an administrator locking herself out is refused.

Roles are never deleted or renamed: a role's bit position is part of every stored
label (see :mod:`streamshield.policy.roles`). New roles append a position; a root's
capacity is fixed, and a role beyond it is refused (:class:`RoleCapacityReached`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, delete, func, select, update

from streamshield.catalog import audit
from streamshield.catalog import oxrbac as ox
from streamshield.catalog import tables as t
from streamshield.catalog.audit import Event, Outcome
from streamshield.catalog.errors import (
    AlreadyExists,
    AuthError,
    SecurityError,
    Throttled,
)
from streamshield.catalog.grant_rows import drop_unsupported
from streamshield.catalog.guarded import not_admin
from streamshield.catalog.oxrbac import SYSTEM, Permission, Subject
from streamshield.catalog.store import load_hierarchy, store_hierarchy
from streamshield.catalog.throttle import PAIR_PREFIX, login_keys
from streamshield.policy.roles import RoleCapacityError, RoleCycleError, RoleHierarchy

if TYPE_CHECKING:
    from streamshield.catalog.security import Session

MIN_PASSWORD = 12
MAX_PASSWORD = 1024  # argon2 hashes any length; a bound keeps a request from costing more
ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
"""Role names: what the CQL sp syntax (``SRP = rbac:NAME``) can spell."""


class AdminError(SecurityError):
    """An administration request that cannot be served; ``field`` names the input."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field = message, field


class WeakPassword(AdminError):
    """The password breaks the documented policy (422)."""


class UnknownUser(AdminError):
    """No user of that name (only said to administrators, or about oneself)."""


class UnknownRole(AdminError):
    """No role of that name."""


class InvalidHierarchy(AdminError):
    """The change would make the role hierarchy cyclic, or names a bad role."""


class Exists(AdminError):
    """The user or role exists already (409)."""


class RoleCapacityReached(AdminError):
    """This root's labels have no room for another role (409)."""


class SelfLockout(AdminError):
    """An administrator may not disable herself (409)."""


class UnknownObject(AdminError):
    """No catalog object of that kind and name (its grants cannot be listed)."""


@dataclass(frozen=True)
class UserInfo:
    name: str
    roles: tuple[str, ...]
    disabled: bool


@dataclass(frozen=True)
class RoleInfo:
    name: str
    juniors: tuple[str, ...]


@dataclass(frozen=True)
class GrantInfo:
    """One stored grant on an object, as an administrator reads it."""

    permission: str
    grantee_kind: str
    grantee: str
    grantor: str | None
    grant_option: bool


def check_password(password: object, user: str, field: str = "password") -> str:
    """The password if it meets the policy, else :class:`WeakPassword` naming ``field``."""
    if not isinstance(password, str) or not password:
        raise WeakPassword(f"{field}: a password is required", field)
    if len(password) < MIN_PASSWORD:
        raise WeakPassword(f"{field}: at least {MIN_PASSWORD} characters are required", field)
    if len(password) > MAX_PASSWORD:
        raise WeakPassword(f"{field}: at most {MAX_PASSWORD} characters are allowed", field)
    if not password.strip():
        raise WeakPassword(f"{field}: a password cannot be only whitespace", field)
    if password.strip().lower() == user.lower():
        raise WeakPassword(f"{field}: a password cannot be the user name", field)
    return password


def check_role_name(name: object, field: str = "name") -> str:
    if not isinstance(name, str) or not ROLE_NAME.match(name):
        raise InvalidHierarchy(
            f"{field}: role names are 1-100 letters, digits and _, not starting with a digit",
            field,
        )
    return name


class Administration:
    """User and role administration; mixed into SecurityCatalog (see the module doc)."""

    # provided by SecurityCatalog
    _write: Callable[[], Any]
    _read: Callable[[], Any]
    _subject: Callable[..., Subject]
    _acl: Callable[[Connection], ox.AclState]
    _refuse: Callable[..., SecurityError]
    _retry_after: Callable[..., float]
    _session: Callable[..., Session]
    passwords: Any
    throttle: Any
    clock: Callable[[], float]
    create_user: Callable[..., None]
    _administering: Callable[..., Any]

    # -- auditing (the guarded transaction: catalog/guarded.py) -----------------------------

    def _record(self, db: Connection, event: Event, actor: str, **detail: Any) -> None:
        audit.record(db, self.clock(), event, Outcome.OK, actor=actor, obj=SYSTEM, detail=detail)

    # -- users -------------------------------------------------------------------------------

    def add_user(
        self, session: Session, name: str, password: str, roles: Iterable[str]
    ) -> UserInfo:
        """Creates a user (CHANGE SYSTEM) after checking the password policy and roles."""
        check_password(password, name if isinstance(name, str) else "")
        roles = frozenset(roles)
        with self._read() as db:
            self._require_admin(db, session, Event.CREATE_USER)
            _check_roles(db, roles)
            if _user_row(db, name, ignore_case=True) is not None:
                raise Exists(f"user {name!r} already exists", "name")
        try:
            self.create_user(name, password, roles, by=session)
        except ValueError as err:
            raise AdminError(str(err), "name") from None
        except AlreadyExists:  # created by someone else since the check above
            raise Exists(f"user {name!r} already exists", "name") from None
        return self.user_info(session, name)

    def users_info(self, session: Session) -> list[UserInfo]:
        """Every user with roles and state (CHANGE SYSTEM)."""
        with self._read() as db:
            self._require_admin(db, session, Event.DENIED)
            return _users(db)

    def grants_info(self, session: Session, kind: str, name: str) -> list[GrantInfo]:
        """The grants stored on one object (CHANGE SYSTEM, checked before the object is
        looked up, so a non-administrator learns nothing about which objects exist)."""
        with self._read() as db:
            self._require_admin(db, session, Event.DENIED)
            acl = self._acl(db)
            try:
                target = ox.ObjectRef(ox.Kind(kind), name)
            except ValueError:
                raise UnknownObject(f"kind: unknown object kind {kind!r}", "kind") from None
            if target not in acl.objects:
                raise UnknownObject(f"no {kind} {name!r}", "name")
        found = [g for g in acl.grants if g.obj == target]
        return [
            GrantInfo(
                g.permission.value,
                g.grantee.kind.value,
                g.grantee.name,
                g.grantor,
                g.with_grant_option,
            )
            for g in sorted(
                found, key=lambda g: (g.permission.value, g.grantee.kind.value, g.grantee.name)
            )
        ]

    def user_info(self, session: Session, name: str) -> UserInfo:
        """One user: oneself always, anyone with CHANGE SYSTEM."""
        with self._read() as db:
            subject = self._subject(db, session)
            if subject.user != name:
                self._require_admin(db, session, Event.DENIED)
            found = [u for u in _users(db, name)]
        if not found:
            raise UnknownUser(f"no user {name!r}", "name")
        return found[0]

    def change_user_roles(self, session: Session, name: str, roles: Iterable[str]) -> UserInfo:
        """Replaces a user's roles (CHANGE SYSTEM), with typed errors for the API."""
        roles = frozenset(roles)
        with self._read() as db:
            self._require_admin(db, session, Event.SET_USER_ROLES)
            _check_roles(db, roles)
            if _user_row(db, name) is None:
                raise UnknownUser(f"no user {name!r}", "name")
        self.set_user_roles(session, name, roles)  # type: ignore[attr-defined]
        return self.user_info(session, name)

    def reset_password(self, session: Session, name: str, password: str) -> None:
        """An administrator sets a user's password (CHANGE SYSTEM), clears the failed
        logins counted against her name and ends all her sessions: a reset usually means
        the old password leaked, so sessions opened with it must not live on.

        The rights are checked before the password is hashed: the hash is memory-hard
        on purpose, and any logged-in user could otherwise make the server pay for one
        per request (seen in the API fuzzer's timings: an ordinary user's refused resets
        cost as much as an administrator's). The write re-checks them."""
        with self._read() as db:
            self._require_admin(db, session, Event.RESET_PASSWORD)
        check_password(password, name)
        password_hash = self.passwords.hash(password)
        with self._administering(session, Event.RESET_PASSWORD) as (db, actor):
            if _user_row(db, name) is None:
                raise UnknownUser(f"no user {name!r}", "name")
            db.execute(
                update(t.users).where(t.users.c.name == name).values(password_hash=password_hash)
            )
            # the failures counted against the old password no longer delay the new one
            failures = t.login_failures.c
            db.execute(
                delete(t.login_failures).where(
                    failures.key_kind.startswith(PAIR_PREFIX) | (failures.key_kind == "user"),
                    failures.key == name,
                )
            )
            ended = db.execute(delete(t.sessions).where(t.sessions.c.user_name == name))
            self._record(
                db, Event.RESET_PASSWORD, actor, user=name, sessions_ended=ended.rowcount or 0
            )

    def change_password(self, session: Session, current: str, new: str) -> None:
        """A user changes her own password, proving the current one.

        A wrong ``current`` is a failed login for throttling (a stolen session cannot
        be used to guess the password at leisure) and an :class:`AuthError`-like 403.
        Success ends every other session of the user (one opened with a stolen password
        included); the session that made the change goes on.
        """
        with self._read() as db:
            live = self._session(db, session.token)
            user = self._subject(db, session).user
            now = self.clock()
            keys = login_keys(user, live.client)
            wait = max(self._retry_after(db, kind, key, now) for kind, key in keys)
            stored = db.scalar(select(t.users.c.password_hash).where(t.users.c.name == user))
        if wait > 0:
            raise Throttled(wait)
        check_password(new, user, "new")
        if not self.passwords.verify(stored, current if isinstance(current, str) else ""):
            with self._write() as db:
                for kind, key in keys:
                    db.execute(
                        t.login_failures.insert().values(key_kind=kind, key=key, at=self.clock())
                    )
                audit.record(
                    db,
                    self.clock(),
                    Event.CHANGE_PASSWORD,
                    Outcome.FAILED,
                    actor=user,
                    detail={"reason": "current password"},
                )
            raise WrongPassword("current: the current password is not right", "current")
        password_hash = self.passwords.hash(new)
        with self._write() as db:
            self._subject(db, session)  # still live
            db.execute(
                update(t.users).where(t.users.c.name == user).values(password_hash=password_hash)
            )
            ended = db.execute(
                delete(t.sessions).where(
                    t.sessions.c.user_name == user,
                    t.sessions.c.token_hash != hashlib.sha256(session.token.encode()).hexdigest(),
                )
            )
            audit.record(
                db,
                self.clock(),
                Event.CHANGE_PASSWORD,
                Outcome.OK,
                actor=user,
                detail={"sessions_ended": ended.rowcount or 0},
            )

    def set_disabled(self, session: Session, name: str, disabled: bool) -> UserInfo:
        """Disables (ending every session at once) or enables a user (CHANGE SYSTEM)."""
        event = Event.DISABLE_USER if disabled else Event.ENABLE_USER
        with self._administering(session, event) as (db, actor):
            if _user_row(db, name) is None:
                raise UnknownUser(f"no user {name!r}", "name")
            if disabled and name == actor:
                raise SelfLockout("an administrator cannot disable herself", "name")
            db.execute(update(t.users).where(t.users.c.name == name).values(disabled=disabled))
            ended = 0
            if disabled:
                ended = db.execute(delete(t.sessions).where(t.sessions.c.user_name == name))
                ended = ended.rowcount or 0
            self._record(db, event, actor, user=name, sessions_ended=ended)
        return self.user_info(session, name)

    # -- roles -------------------------------------------------------------------------------

    def roles_info(self, session: Session) -> list[RoleInfo]:
        """Every role with its direct juniors (any live session)."""
        with self._read() as db:
            self._subject(db, session)
            hierarchy = load_hierarchy(db)
        return [RoleInfo(r, tuple(sorted(hierarchy.juniors[r]))) for r in sorted(hierarchy.roles)]

    def create_role(
        self, session: Session, name: str, juniors: Iterable[str] = ()
    ) -> tuple[RoleInfo, RoleHierarchy]:
        """A new role at the next bit position, with direct juniors (CHANGE SYSTEM).

        Returns the role and the new hierarchy (for the running engine).
        """
        check_role_name(name)
        juniors = tuple(dict.fromkeys(juniors))
        for junior in juniors:
            check_role_name(junior, "juniors")
        with self._administering(session, Event.CREATE_ROLE) as (db, actor):
            hierarchy = load_hierarchy(db)
            if any(r.lower() == name.lower() for r in hierarchy.roles):
                raise Exists(f"role {name!r} already exists", "name")
            unknown = [j for j in juniors if j not in hierarchy.juniors]
            if unknown:
                raise UnknownRole(f"juniors: unknown roles {unknown}", "juniors")
            try:
                changed = hierarchy.with_role(name, juniors)
            except RoleCapacityError as err:
                raise RoleCapacityReached(
                    f"{err}: label widths are fixed once data is stored; create a new "
                    "storage root with a larger --role-capacity (streamshield admin init) "
                    "and move the data there",
                    "name",
                ) from None
            store_hierarchy(db, changed)
            position = changed.roles.index(name)
            self._record(
                db, Event.CREATE_ROLE, actor, role=name, juniors=list(juniors), position=position
            )
        return RoleInfo(name, tuple(sorted(juniors))), changed

    def add_junior(
        self, session: Session, senior: str, junior: str
    ) -> tuple[RoleInfo, RoleHierarchy]:
        """Adds the edge senior -> junior (CHANGE SYSTEM); a cycle is refused."""
        with self._administering(session, Event.ADD_JUNIOR) as (db, actor):
            hierarchy = load_hierarchy(db)
            if senior not in hierarchy.juniors:
                raise UnknownRole(f"no role {senior!r}", "name")
            if junior not in hierarchy.juniors:
                raise UnknownRole(f"junior: unknown role {junior!r}", "junior")
            try:
                changed = hierarchy.with_junior(senior, junior)
            except RoleCycleError as err:
                raise InvalidHierarchy(
                    f"junior: {junior} under {senior} would make a cycle ({err})", "junior"
                ) from None
            store_hierarchy(db, changed)
            self._record(db, Event.ADD_JUNIOR, actor, role=senior, junior=junior)
        return RoleInfo(senior, tuple(sorted(changed.juniors[senior]))), changed

    def remove_junior(
        self, session: Session, senior: str, junior: str
    ) -> tuple[RoleInfo, RoleHierarchy]:
        """Removes the edge senior -> junior (CHANGE SYSTEM). Grants that relied on the
        junior being reachable are removed with their cascade, as for a role taken away."""
        with self._administering(session, Event.REMOVE_JUNIOR) as (db, actor):
            hierarchy = load_hierarchy(db)
            if senior not in hierarchy.juniors:
                raise UnknownRole(f"no role {senior!r}", "name")
            if junior not in hierarchy.juniors[senior]:
                raise UnknownRole(f"{junior!r} is not a direct junior of {senior!r}", "name")
            changed = hierarchy.without_junior(senior, junior)
            store_hierarchy(db, changed)
            state = self._acl(db)
            removed = drop_unsupported(db, state)
            self._record(
                db,
                Event.REMOVE_JUNIOR,
                actor,
                role=senior,
                junior=junior,
                grants_removed=removed,
            )
        return RoleInfo(senior, tuple(sorted(changed.juniors[senior]))), changed

    def hierarchy(self) -> RoleHierarchy:
        """The stored hierarchy (what the running engine must use)."""
        with self._read() as db:
            return load_hierarchy(db)

    # -- helpers -----------------------------------------------------------------------------

    def _require_admin(self, db: Connection, session: Session, event: Event) -> str:
        subject = self._subject(db, session)
        denial = ox.require(self._acl(db), subject, Permission.CHANGE_SYSTEM, SYSTEM)
        if denial is not None:
            raise self._refuse(subject.user, event, not_admin())
        return subject.user


class WrongPassword(AdminError):
    """The current password given to change one's own is wrong (403)."""


def _check_roles(db: Connection, roles: frozenset[str]) -> None:
    unknown = sorted(roles - set(load_hierarchy(db).roles))
    if unknown:
        raise UnknownRole(f"roles: unknown roles {unknown}", "roles")


def _user_row(db: Connection, name: str, ignore_case: bool = False) -> Any:
    column = t.users.c.name
    where = func.lower(column) == name.lower() if ignore_case else column == name
    return db.execute(select(column).where(where)).first()


def _users(db: Connection, name: str | None = None) -> list[UserInfo]:
    query = select(t.users.c.name, t.users.c.disabled).order_by(t.users.c.name)
    if name is not None:
        query = query.where(t.users.c.name == name)
    rows = db.execute(query).all()
    held: dict[str, list[str]] = {}
    for user, role in db.execute(select(t.user_roles.c.user_name, t.user_roles.c.role)):
        held.setdefault(user, []).append(role)
    return [UserInfo(n, tuple(sorted(held.get(n, ()))), bool(d)) for n, d in rows]


__all__ = [
    "MAX_PASSWORD",
    "MIN_PASSWORD",
    "AdminError",
    "Administration",
    "AuthError",
    "Exists",
    "GrantInfo",
    "InvalidHierarchy",
    "RoleCapacityReached",
    "RoleInfo",
    "SelfLockout",
    "UnknownObject",
    "UnknownRole",
    "UnknownUser",
    "UserInfo",
    "WeakPassword",
    "WrongPassword",
    "check_password",
]
