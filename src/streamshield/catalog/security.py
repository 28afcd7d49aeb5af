"""The security catalog: users, sessions, OxRBAC objects and grants, settings, quotas, audit.

:class:`SecurityCatalog` is the facade the HTTP server builds on (Securing Borealis'
SecAdmin with its Session Manager, Authenticator and Authorizer). It stores everything
in the same database as the engine's catalog (:class:`~streamshield.catalog.store.SqlCatalog`,
reachable as ``.catalog``), decides with the pure rules of
:mod:`streamshield.catalog.oxrbac` and records what happened in :mod:`~.audit`.

Contract for callers:

* Every method taking a ``session`` re-reads it from the database by its token: a
  logged-out or expired session fails with :class:`AuthError` at once, and a
  :class:`Session` object built by hand carries no authority of its own.
* A session acts with its activated roles that the user *still* holds, plus their
  juniors; roles taken away from a user stop counting in open sessions and queries.
* Refusals are :class:`PermissionDenied` (visible object) or :class:`NotFound`
  (missing or invisible object: the same message either way); both are audited.
* Users: the first user is created without a session (bootstrap) and owns SYSTEM; every
  later user is created by a session holding CHANGE SYSTEM. A disabled user cannot log
  in (the same AuthError as a wrong password) and none of her sessions is valid.
* Sessions: a random 256-bit token, only its SHA-256 is stored (a fast hash suffices
  for a random secret of that size); expiry ``session_ttl`` seconds (default 1 h).
* Failed logins are throttled per (user name, client address) and per client
  (:mod:`~.throttle`), never per name alone, so nobody can lock a user out from another
  address; the throttle is checked before the password, and a check runs concurrently
  with at most the attempts already in flight. An unknown name and a wrong password
  fail with the same error after the same work (an argon2 verify against a dummy hash).
* A session ends at logout, at expiry, when its user is disabled, and when her password
  changes (her own change ends her other sessions, an administrator's reset all).
* Sessions opened by OpenID Connect tokens (:mod:`~.federation`) are rows of the same
  table keyed by the token's hash, ending at the token's expiry; a newer token of the
  same user narrows her older token sessions to its roles.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from argon2 import PasswordHasher
from sqlalchemy import Connection, case, delete, func, insert, or_, select, update

from streamshield.catalog import audit
from streamshield.catalog import oxrbac as ox
from streamshield.catalog import tables as t
from streamshield.catalog.administration import Administration
from streamshield.catalog.audit import AuditEntry, AuditFilter, Event, Outcome
from streamshield.catalog.database import UrlOrEngine, on_write, transaction, upsert
from streamshield.catalog.errors import (
    AlreadyExists,
    AuthError,
    GrantNotFound,
    NotFound,
    PermissionDenied,
    RoleActivationError,
    SecurityError,
    Throttled,
    from_denial,
)
from streamshield.catalog.federation import METHOD as FEDERATED
from streamshield.catalog.federation import Federation, TokenIdentity
from streamshield.catalog.grant_rows import delete_grant, drop_unsupported
from streamshield.catalog.guarded import GuardedChanges
from streamshield.catalog.identifiers import USER_NAME as _USER_NAME
from streamshield.catalog.identifiers import token_hash as _token_hash
from streamshield.catalog.levels import Levels
from streamshield.catalog.oxrbac import (
    SYSTEM,
    Grantee,
    GranteeKind,
    Kind,
    ObjectRef,
    Permission,
    Subject,
)
from streamshield.catalog.passwords import DEFAULT_HASHER, Passwords
from streamshield.catalog.refusal_budget import RefusalBudget
from streamshield.catalog.store import (
    SqlCatalog,
    StreamExists,
    UnknownStreamError,
    find_stream,
    insert_stream,
    load_hierarchy,
    load_server_policies,
    store_server_policy,
    store_stream_tags,
)
from streamshield.catalog.streams import StreamDefinition
from streamshield.catalog.throttle import ThrottlePolicy, login_keys
from streamshield.catalog.view import POLL_SECONDS, CatalogView
from streamshield.policy.policy import Combine, ServerPolicy

__all__ = [
    "DEFAULT_SETTINGS",
    "AlreadyExists",
    "AuditEntry",
    "AuditFilter",
    "AuthError",
    "Grantee",
    "Kind",
    "NotFound",
    "ObjectRef",
    "Permission",
    "PermissionDenied",
    "QueryRecord",
    "QueryStatus",
    "Quota",
    "QuotaExceeded",
    "RoleActivationError",
    "SecurityCatalog",
    "SecurityError",
    "Session",
    "Throttled",
]

DEFAULT_SETTINGS: dict[str, Any] = {
    "quota.max_running_queries": 10,
    "quota.max_state_rows": 1_000_000,
}
"""Settings in force until changed with :meth:`SecurityCatalog.set_setting`."""


class QuotaExceeded(SecurityError):
    """The user's quota (running queries) does not allow this."""


class QueryStatus(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Session:
    """A login: ``token`` is the bearer secret, ``roles`` the activated roles."""

    token: str
    user: str
    roles: frozenset[str]
    expires_at: float  # seconds since the epoch
    client: str | None = None


@dataclass(frozen=True)
class Quota:
    max_running_queries: int
    max_state_rows: int


@dataclass(frozen=True)
class QueryRecord:
    """A registered query; it runs with ``roles``, the roles active when it was added."""

    name: str
    owner: str
    roles: frozenset[str]
    inputs: tuple[str, ...]
    output_stream: str | None
    status: QueryStatus


@dataclass(frozen=True)
class Acting:
    """A user acting with chosen roles outside any session: a sink she attached from a
    session acts with that session's roles, of which only those she still holds count."""

    user: str
    roles: frozenset[str]


Who = Session | str | Acting
"""A session (checked by token), a user name acting with every role it holds, or a
user acting with chosen roles (:class:`Acting`)."""


class SecurityCatalog(GuardedChanges, Administration, Levels, Federation):
    """Users, authentication, sessions, OxRBAC, settings, quotas and audit on one database.

    User and role administration (with its permission rules and password policy) is in
    :class:`~streamshield.catalog.administration.Administration`; Chinese-Wall classes,
    levels and clearances in :class:`~streamshield.catalog.levels.Levels`.

    ``target``: a database URL, a SQLite file path or an Engine (as
    :class:`SqlCatalog`). ``clock`` returns seconds since the epoch (tests move time).
    """

    def __init__(
        self,
        target: UrlOrEngine,
        *,
        session_ttl: float = 3600.0,
        throttle: ThrottlePolicy | None = None,
        password_hasher: PasswordHasher = DEFAULT_HASHER,
        clock: Callable[[], float] = time.time,
        view_poll_seconds: float = POLL_SECONDS,
    ) -> None:
        if session_ttl <= 0:
            raise ValueError("session_ttl must be positive")
        self.catalog = SqlCatalog(target)
        self.engine = self.catalog.engine
        self.session_ttl = session_ttl
        self.throttle = throttle or ThrottlePolicy()
        self.refusals = RefusalBudget()
        """Audit entries per client address for refusals anyone can cause (throttled
        logins, bad bearer tokens): catalog/refusal_budget.py."""
        self.passwords = Passwords(password_hasher)
        self.passwords.prepare()  # unknown names cost the same from the first login on
        self.clock = clock
        self.view = CatalogView(self._version, poll_seconds=view_poll_seconds)
        on_write(self.engine, self.view.written)
        self.catalog.view = self.view
        with self._write() as db:
            if db.execute(select(t.objects.c.name).where(_is(SYSTEM))).first() is None:
                db.execute(insert(t.objects).values(kind="system", name="system", created_at=0.0))

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with transaction(self.engine, write=True) as db:
            yield db

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with transaction(self.engine) as db:
            yield db

    def _version(self) -> int:
        """The catalog version (:data:`tables.catalog_version`)."""
        with self._read() as db:
            version = db.scalar(select(t.catalog_version.c.version))
        if version is None:
            raise LookupError("the catalog version row is missing")
        return int(version)

    @property
    def changes(self) -> int:
        """Moves with every change of the catalog a right is derived from (users, roles,
        the hierarchy, sessions, grants, queries, levels), made by this process (seen at
        once) or by another one (seen within the view's poll period). Whatever derives a
        right from them (a running query's roles, a pattern's rules, a live subscription)
        compares this number with the one it was derived under and derives again only
        when it moved, so that no micro-batch has to read the catalog to notice a change."""
        return self.view.generation

    def _audit(self, event: Event, outcome: Outcome, **kwargs: Any) -> None:
        # The audit log derives no right: writing it leaves the view as it is.
        with transaction(self.engine, write=True, versioned=False) as db:
            audit.record(db, self.clock(), event, outcome, **kwargs)

    def _refuse(
        self, actor: str, event: Event, error: PermissionDenied | SecurityError
    ) -> SecurityError:
        """Audits a refusal in its own transaction (the failed one is rolled back)."""
        obj = getattr(error, "object", None)
        detail = (
            {"permission": error.permission.value} if isinstance(error, PermissionDenied) else {}
        )
        detail["request"] = event.value
        self._audit(Event.DENIED, Outcome.DENIED, actor=actor, obj=obj, detail=detail)
        return error

    # -- users -------------------------------------------------------------------------------

    def create_user(
        self, name: str, password: str, roles: Iterable[str], *, by: Session | None = None
    ) -> None:
        """Creates a user holding ``roles`` (roles of the stored hierarchy).

        Without ``by`` only the very first user can be created (bootstrap): it becomes
        the owner of SYSTEM. Afterwards ``by`` must hold CHANGE SYSTEM.
        """
        if not isinstance(name, str) or not _USER_NAME.match(name):
            raise ValueError("user names are 1-200 characters of letters, digits, _ . @ -")
        roles = frozenset(roles)
        password_hash = self.passwords.hash(password)
        error: SecurityError | None = None
        actor = name
        with self._write() as db:
            hierarchy = load_hierarchy(db)
            unknown = sorted(roles - set(hierarchy.roles))
            if unknown:
                raise ValueError(f"unknown roles {unknown}")
            bootstrap = db.execute(select(t.users.c.name).limit(1)).first() is None
            if by is None and not bootstrap:
                error = PermissionDenied(Permission.CHANGE_SYSTEM, SYSTEM)
            elif by is not None:
                subject = self._subject(db, by)
                actor = subject.user
                denial = ox.require(self._acl(db), subject, Permission.CHANGE_SYSTEM, SYSTEM)
                error = None if denial is None else from_denial(denial)
            if error is None:
                taken = select(t.users.c.name).where(func.lower(t.users.c.name) == name.lower())
                if db.execute(taken).first() is not None:
                    raise AlreadyExists(f"user {name!r} already exists")
                db.execute(
                    insert(t.users).values(
                        name=name, password_hash=password_hash, created_at=self.clock()
                    )
                )
                _set_user_roles(db, name, roles)
                if bootstrap:
                    db.execute(update(t.objects).where(_is(SYSTEM)).values(owner=name))
                detail = {"user": name, "roles": sorted(roles), "bootstrap": bootstrap}
                audit.record(
                    db, self.clock(), Event.CREATE_USER, Outcome.OK, actor=actor, detail=detail
                )
        if error is not None:
            raise self._refuse(actor, Event.CREATE_USER, error)

    def set_user_roles(self, session: Session, name: str, roles: Iterable[str]) -> None:
        """Replaces a user's roles (CHANGE SYSTEM). Grants the user can no longer back
        (they relied on a role taken away) are removed, with their cascade."""
        roles = frozenset(roles)
        with self._guarded(session, Event.SET_USER_ROLES) as change:
            db = change.db
            change.refuse_if(
                ox.require(change.acl, change.subject, Permission.CHANGE_SYSTEM, SYSTEM)
            )
            unknown = sorted(roles - set(load_hierarchy(db).roles))
            if unknown:
                raise ValueError(f"unknown roles {unknown}")
            if db.execute(select(t.users.c.name).where(t.users.c.name == name)).first() is None:
                raise ValueError("unknown user")
            _set_user_roles(db, name, roles)
            dropped = drop_unsupported(db, self._acl(db))
            change.done(detail={"user": name, "roles": sorted(roles), "grants_removed": dropped})

    def user_roles(self, name: str) -> frozenset[str]:
        """The roles a user holds (empty for unknown users)."""
        with self._read() as db:
            return _held_roles(db, name)

    def acting_roles(self, name: str) -> frozenset[str]:
        """The roles a user's queries may run with now: none for a disabled user."""

        def read() -> frozenset[str]:
            with self._read() as db:
                disabled = db.scalar(select(t.users.c.disabled).where(t.users.c.name == name))
                return frozenset() if disabled is not False else _held_roles(db, name)

        return self.view.lookup(("acting", name), read)

    def user_enabled(self, name: str) -> bool:
        """Whether ``name`` is a user who is not disabled (what a connector acting as
        her asks before each landing: a disabled provider's records wait)."""

        def read() -> bool:
            with self._read() as db:
                disabled = db.scalar(select(t.users.c.disabled).where(t.users.c.name == name))
                return disabled is False

        return self.view.lookup(("enabled", name), read)

    # -- authentication and sessions ---------------------------------------------------------

    def login(
        self,
        name: str,
        password: str,
        roles: Iterable[str] | None = None,
        *,
        client: str | None = None,
    ) -> Session:
        """Authenticates and opens a session activating ``roles`` (None: all held roles).

        Raises :class:`Throttled` while the name or the client must wait,
        :class:`AuthError` (one message) for an unknown name or a wrong password, and
        :class:`RoleActivationError` when the roles are empty or not all held.
        """
        now = self.clock()
        keys = login_keys(name, client)
        with self._read() as db:
            wait = max(self._retry_after(db, kind, key, now) for kind, key in keys)
            user = db.execute(
                select(t.users.c.password_hash, t.users.c.disabled).where(t.users.c.name == name)
            ).first()
        stored = None if user is None else user.password_hash
        disabled = user is not None and bool(user.disabled)
        if wait > 0:
            suppressed = self.refusals.take(client)
            if suppressed is not None:  # else counted, written with the address's next
                said: dict[str, object] = {"name": name}
                if suppressed:
                    said["suppressed"] = suppressed
                self._audit(Event.LOGIN, Outcome.THROTTLED, client=client, detail=said)
            raise Throttled(wait)
        # A disabled user is refused exactly like a wrong password (same message, same
        # cost: the password is still verified); only administrators read the reason.
        ok = self.passwords.verify(stored, password) and not disabled
        with self._write() as db:
            if not ok:
                for kind, key in keys:
                    db.execute(insert(t.login_failures).values(key_kind=kind, key=key, at=now))
                    db.execute(
                        delete(t.login_failures).where(
                            t.login_failures.c.key_kind == kind,
                            t.login_failures.c.key == key,
                            t.login_failures.c.at <= now - self.throttle.window,
                        )
                    )
                detail: dict[str, Any] = {"name": name}
                if disabled:
                    detail["admin_only"] = {"reason": "disabled"}
                audit.record(db, now, Event.LOGIN, Outcome.FAILED, client=client, detail=detail)
            else:
                pair_kind, _ = keys[0]
                db.execute(
                    delete(t.login_failures).where(
                        t.login_failures.c.key_kind == pair_kind, t.login_failures.c.key == name
                    )
                )
                held = _held_roles(db, name)
                wanted = held if roles is None else _as_held(roles, held)
                activated = wanted if wanted and wanted <= held else None
                if activated is None:
                    audit.record(
                        db,
                        now,
                        Event.LOGIN,
                        Outcome.DENIED,
                        actor=name,
                        client=client,
                        detail={"reason": "roles"},
                    )
                else:
                    session = self._open_session(db, name, activated, client, now)
                    if stored is not None and self.passwords.needs_rehash(stored):
                        db.execute(
                            update(t.users)
                            .where(t.users.c.name == name)
                            .values(password_hash=self.passwords.hash(password))
                        )
        if not ok:
            raise AuthError()
        if activated is None:
            raise RoleActivationError(held)
        return session

    def _retry_after(self, db: Connection, kind: str, key: str, now: float) -> float:
        failures = db.scalars(
            select(t.login_failures.c.at).where(
                t.login_failures.c.key_kind == kind,
                t.login_failures.c.key == key,
                t.login_failures.c.at > now - self.throttle.window,
            )
        ).all()
        return self.throttle.retry_after(failures, now)

    def _open_session(
        self,
        db: Connection,
        name: str,
        roles: frozenset[str],
        client: str | None,
        now: float,
        token: str | None = None,
        federated: TokenIdentity | None = None,
    ) -> Session:
        """A new session row and its ``login ok`` entry: a password login's (a new random
        token, ``session_ttl``), or a verified bearer token's (that token, until its
        expiry; :mod:`~.federation`)."""
        db.execute(delete(t.sessions).where(t.sessions.c.expires_at <= now))
        token = token or secrets.token_urlsafe(32)
        expires_at = now + self.session_ttl if federated is None else federated.expires_at
        db.execute(
            insert(t.sessions).values(
                token_hash=_token_hash(token),
                user_name=name,
                roles=json.dumps(sorted(roles)),
                client=client,
                created_at=now,
                expires_at=expires_at,
                issuer=None if federated is None else federated.issuer,
                issued_at=None if federated is None else federated.issued_at,
            )
        )
        detail: dict[str, Any] = {"roles": sorted(roles)}
        if federated is not None:
            detail |= {"method": FEDERATED, "issuer": federated.issuer}
        audit.record(db, now, Event.LOGIN, Outcome.OK, actor=name, client=client, detail=detail)
        return Session(token, name, roles, expires_at, client)

    def session(self, token: str) -> Session:
        """The live session of a token; AuthError when unknown, forged, expired or ended.

        Kept by the view (an ended session, a disabled user or a role taken away moves
        the version); expiry is checked against the clock on every call."""
        if not isinstance(token, str) or not token:
            raise AuthError()

        def read() -> Session:
            with self._read() as db:
                return self._session(db, token)

        live = self.view.lookup(("session", _token_hash(token)), read)
        if live.expires_at <= self.clock():
            raise AuthError()  # still kept: session_expired() reports it to the watch
        return live

    def session_expired(self) -> bool:
        """Whether a session the view keeps has expired (a live subscription of it must
        end although no change moved the version); each expired one is reported once."""
        now = self.clock()
        expired = [live for live in self.view.kept("session") if live.expires_at <= now]
        for live in expired:
            self.view.forget(("session", _token_hash(live.token)))
        return bool(expired)

    def _session(self, db: Connection, token: str) -> Session:
        if not isinstance(token, str) or not token:
            raise AuthError()
        row = db.execute(
            select(t.sessions).where(t.sessions.c.token_hash == _token_hash(token))
        ).first()
        if row is None or row.expires_at <= self.clock():
            raise AuthError()
        disabled = db.scalar(select(t.users.c.disabled).where(t.users.c.name == row.user_name))
        if disabled is None or disabled:  # removed or disabled: the session is void
            raise AuthError()
        roles = frozenset(json.loads(row.roles)) & _held_roles(db, row.user_name)
        if not roles:
            raise AuthError()
        return Session(token, row.user_name, roles, row.expires_at, row.client)

    def logout(self, token: str) -> None:
        """Ends a session; unknown tokens are ignored (logout is idempotent). A token
        session keeps its row with no role until the token expires, so that the same
        token presented again stays refused (:mod:`~.federation`)."""
        with self._write() as db:
            row = db.execute(
                select(t.sessions.c.user_name, t.sessions.c.client, t.sessions.c.issuer).where(
                    t.sessions.c.token_hash == _token_hash(token)
                )
            ).first()
            if row is not None:
                ended = t.sessions.c.token_hash == _token_hash(token)
                if row.issuer is None:
                    db.execute(delete(t.sessions).where(ended))
                else:
                    db.execute(update(t.sessions).where(ended).values(roles="[]"))
                audit.record(
                    db,
                    self.clock(),
                    Event.LOGOUT,
                    Outcome.OK,
                    actor=row.user_name,
                    client=row.client,
                )

    # -- subjects and the ACL state ------------------------------------------------------------

    def _kept_subject(self, who: Who) -> Subject:
        """:meth:`_subject` through the view (outside any transaction)."""
        if isinstance(who, Session):
            live = self.session(who.token)
            user, activated = live.user, live.roles
        elif isinstance(who, Acting):
            user, activated = who.user, who.roles
        elif isinstance(who, str):
            user, activated = who, None
        else:
            raise TypeError("expected a Session or a user name")

        def read() -> Subject:
            with self._read() as db:
                return _effective(db, user, activated)

        return self.view.lookup(("subject", user, activated), read)

    def _kept_acl(self) -> ox.AclState:
        def read() -> ox.AclState:
            with self._read() as db:
                return self._acl(db)

        return self.view.lookup(("acl",), read)

    def _subject(self, db: Connection, who: Who) -> Subject:
        if isinstance(who, Session):
            live = self._session(db, who.token)
            return _effective(db, live.user, live.roles)
        if isinstance(who, Acting):
            return _effective(db, who.user, who.roles)
        if not isinstance(who, str):
            raise TypeError("expected a Session or a user name")
        return _effective(db, who, None)

    def _acl(self, db: Connection) -> ox.AclState:
        objects: dict[ObjectRef, ox.CatalogObject] = {}
        for row in db.execute(select(t.objects)):
            ref = ObjectRef(Kind(row.kind), row.name)
            parent = (
                None
                if row.parent_kind is None
                else ObjectRef(Kind(row.parent_kind), row.parent_name)
            )
            objects[ref] = ox.CatalogObject(ref, row.owner, parent)
        for name in db.scalars(select(t.streams.c.name)):
            ref = ObjectRef(Kind.STREAM, name)
            objects.setdefault(ref, ox.CatalogObject(ref, None))
        grants = frozenset(_grant(row) for row in db.execute(select(t.grants)))
        juniors = load_hierarchy(db).juniors
        held: dict[str, set[str]] = {}
        for user, role in db.execute(select(t.user_roles)):
            held.setdefault(user, set()).add(role)
        user_roles = {
            user: ox.effective_subject(user, roles, roles, juniors).roles
            for user, roles in held.items()
        }
        return ox.AclState(objects, grants, user_roles)

    # -- decisions -----------------------------------------------------------------------------

    def check(self, who: Who, permission: Permission, obj: ObjectRef) -> bool:
        """Does the session (or user, with all its roles) hold the permission? (Kept by
        the view: a grant, a revocation, a role or session change moves the version.)"""
        permission = Permission(permission)
        subject = self._kept_subject(who)
        return self.view.lookup(
            ("check", subject, permission, obj),
            lambda: ox.holds(self._kept_acl(), subject, permission, obj),
        )

    def require(self, who: Who, permission: Permission, obj: ObjectRef) -> None:
        """Like :meth:`check`, raising PermissionDenied / NotFound (audited) when refused."""
        with self._read() as db:
            subject = self._subject(db, who)
            denial = ox.require(self._acl(db), subject, Permission(permission), obj)
        if denial is not None:
            raise self._refuse(subject.user, Event.DENIED, from_denial(denial))

    def visible(self, session: Session, kind: Kind) -> list[str]:
        """Names of the objects of ``kind`` the session may see (user abstraction layer)."""
        with self._read() as db:
            refs = ox.visible(self._acl(db), self._subject(db, session), Kind(kind))
        return [ref.name for ref in refs]

    def readable_sources(self, who: Who) -> tuple[set[str], set[str]]:
        """(streams readable raw, streams readable as aggregates) for SecFilter.

        Delivery calls it every micro-batch: the view keeps the answer per subject until
        the version moves; computing it is one read transaction of a few indexed queries
        (only grants of the two read permissions to this user or its roles are loaded).
        Raw reading implies aggregate reading. The sets are the caller's own.
        """
        subject = self._kept_subject(who)
        raw, aggregate = self.view.lookup(
            ("readable", subject), lambda: self._readable_sources(subject)
        )
        return set(raw), set(aggregate)

    def _readable_sources(self, subject: Subject) -> tuple[frozenset[str], frozenset[str]]:
        reads = (Permission.READ_TUPLE.value, Permission.READ_AGGREGATE.value)
        with self._read() as db:
            grantees = or_(
                (t.grants.c.grantee_kind == "user") & (t.grants.c.grantee == subject.user),
                (t.grants.c.grantee_kind == "role") & t.grants.c.grantee.in_(sorted(subject.roles)),
            )
            rows = db.execute(
                select(t.grants).where(t.grants.c.permission.in_(reads), grantees)
            ).all()
            owners = db.execute(
                select(t.objects.c.kind, t.objects.c.name, t.objects.c.owner).where(
                    t.objects.c.kind.in_(("system", "stream"))
                )
            ).all()
            names = set(db.scalars(select(t.streams.c.name)))
        objects = {
            ObjectRef(Kind(kind), name): ox.CatalogObject(ObjectRef(Kind(kind), name), owner)
            for kind, name, owner in owners
        }
        names |= {ref.name for ref in objects if ref.kind is Kind.STREAM}
        for name in names:
            ref = ObjectRef(Kind.STREAM, name)
            objects.setdefault(ref, ox.CatalogObject(ref, None))
        state = ox.AclState(objects, frozenset(_grant(row) for row in rows))
        raw, aggregate = ox.readable(state, subject, names)
        return frozenset(raw), frozenset(aggregate)

    def can_write(self, who: Who, stream: str) -> bool:
        """May append tuples to the stream (WRITE; section 5.2: authorised senders)."""
        return self.check(who, Permission.WRITE, ObjectRef(Kind.STREAM, stream))

    def can_inject(self, who: Who, stream: str) -> bool:
        """May inject sps into the stream (its owner or a delegate holding INJECT SP)."""
        return self.check(who, Permission.INJECT_SP, ObjectRef(Kind.STREAM, stream))

    def can_subscribe(self, who: Who, stream: str) -> bool:
        return self.check(who, Permission.SUBSCRIBE, ObjectRef(Kind.STREAM, stream))

    # -- objects -------------------------------------------------------------------------------

    def add_schema(self, session: Session, name: str) -> None:
        """Adds a schema owned by the session's user (ADD on SYSTEM)."""
        ref = ObjectRef(Kind.SCHEMA, _object_name(name))
        with self._guarded(session, Event.ADD_SCHEMA) as change:
            change.refuse_if(ox.check_add(change.acl, change.subject, SYSTEM))
            _insert_object(change.db, ref, change.actor, None, change.now)
            change.done(obj=ref)

    def add_stream(self, session: Session, schema: str, definition: StreamDefinition) -> None:
        """Registers an input stream in a schema (ADD on the schema), owned by the user."""
        parent = ObjectRef(Kind.SCHEMA, schema)
        ref = ObjectRef(Kind.STREAM, definition.name)
        with self._guarded(session, Event.ADD_STREAM) as change:
            change.refuse_if(ox.check_add(change.acl, change.subject, parent))
            _insert_object(change.db, ref, change.actor, parent, change.now)
            insert_stream(change.db, definition)
            change.done(obj=ref, detail={"schema": schema})

    def set_stream_tags(
        self, session: Session, stream: str, tags: Mapping[str, Collection[str]]
    ) -> StreamDefinition:
        """Replaces an input stream's attribute tags (CHANGE SYSTEM; an attribute left
        out has none); the retagged definition. Secure ingest resolves tag policies
        against it from its next micro-batch."""
        with self._administering(session, Event.SET_STREAM_TAGS) as (db, actor):
            definition = find_stream(db, stream)
            if definition is None:
                raise UnknownStreamError(stream)
            retagged = definition.retagged(tags)  # ValueError: a bad tag or attribute
            store_stream_tags(db, retagged)
            detail = {"tags": {n: sorted(ts) for n, ts in retagged.tags_of.items()}}
            audit.record(
                db,
                self.clock(),
                Event.SET_STREAM_TAGS,
                Outcome.OK,
                actor=actor,
                obj=ObjectRef(Kind.STREAM, stream),
                detail=detail,
            )
        return retagged

    def set_server_policy(self, session: Session, scope: str, cql_text: str, mode: Combine) -> None:
        """Stores (replaces) the server policy of a scope (CHANGE SYSTEM): a stream, or
        a stream-name glob that also takes in streams added later (store.set_server_policy)."""
        with self._administering(session, Event.SET_SERVER_POLICY) as (db, actor):
            store_server_policy(db, scope, cql_text, Combine(mode))
            audit.record(
                db,
                self.clock(),
                Event.SET_SERVER_POLICY,
                Outcome.OK,
                actor=actor,
                detail={"scope": scope, "mode": Combine(mode).value, "cql": cql_text},
            )

    def server_policies(self) -> dict[str, ServerPolicy]:
        """The stored server policies by scope (store.load_server_policies)."""
        with self._read() as db:
            return load_server_policies(db)

    def add_query(
        self,
        session: Session,
        name: str,
        inputs: Iterable[str],
        output_stream: str | None = None,
        *,
        status: QueryStatus = QueryStatus.RUNNING,
        audited: bool = True,
    ) -> QueryRecord:
        """Adds a query over ``inputs`` running with the session's activated roles.

        Checks ADD on SYSTEM, then READ TUPLE or READ AGGREGATE on each input; the query
        and its output stream (if named) are owned by the user, with no other grants.
        A running query counts against the owner's quota. ``audited=False``: the
        registration is audited once its outcome is known, by
        :meth:`record_registration` (the server's engine may still refuse the query).
        """
        ref = ObjectRef(Kind.QUERY, _object_name(name))
        inputs = tuple(dict.fromkeys(inputs))
        if not inputs:
            raise ValueError("a query needs at least one input stream")
        with self._guarded(session, Event.ADD_QUERY) as change:
            db, subject = change.db, change.subject
            live = self._session(db, session.token)
            input_refs = [ObjectRef(Kind.STREAM, s) for s in inputs]
            change.refuse_if(ox.check_add_query(change.acl, subject, input_refs))
            if status is QueryStatus.RUNNING:
                change.refuse_if(self._quota_error(db, subject.user))
            _insert_object(db, ref, subject.user, None, change.now)
            if output_stream is not None:
                out = ObjectRef(Kind.STREAM, _object_name(output_stream))
                if db.execute(
                    select(t.streams.c.name).where(func.lower(t.streams.c.name) == out.name.lower())
                ).first():
                    raise StreamExists(out.name)
                _insert_object(db, out, subject.user, ref, change.now)
            record = QueryRecord(
                ref.name, subject.user, live.roles, inputs, output_stream, QueryStatus(status)
            )
            db.execute(
                insert(t.queries).values(
                    name=ref.name,
                    owner=subject.user,
                    roles=json.dumps(sorted(live.roles)),
                    inputs=json.dumps(list(inputs)),
                    output_stream=output_stream,
                    status=record.status.value,
                )
            )
            if audited:
                change.done(obj=ref, detail=_added_detail(record))
        return record

    def record_registration(
        self, user: str, name: str, error: str | None = None, *, recorded: bool = True
    ) -> None:
        """Audits the outcome of a query registration, in one entry: ``add_query ok``
        for the query ``user`` added unaudited (:meth:`add_query`), or, with ``error``
        (the code its author was answered), ``add_query refused``, the query and its
        output stream removed if this registration ``recorded`` them (a refusal is no
        removal by its author: nothing of it is left, and no ``remove_query`` entry).
        A registration refused before :meth:`add_query` recorded anything removes
        nothing: a query of that name is another registration's, still running."""
        ref = ObjectRef(Kind.QUERY, _object_name(name))
        with self._write() as db:
            row = db.execute(
                select(t.queries).where(t.queries.c.name == ref.name, t.queries.c.owner == user)
            ).first()
            if error is None:
                if row is None:
                    raise LookupError(f"no query {name!r} of {user!r} to confirm")
                detail = _added_detail(_query_record(row))
                audit.record(
                    db,
                    self.clock(),
                    Event.ADD_QUERY,
                    Outcome.OK,
                    actor=user,
                    obj=ref,
                    detail=detail,
                )
                return
            if row is not None and recorded:
                output = ObjectRef(Kind.STREAM, row.output_stream) if row.output_stream else None
                for obj in (ref, output) if output is not None else (ref,):
                    db.execute(
                        delete(t.grants).where(
                            t.grants.c.obj_kind == obj.kind.value, t.grants.c.obj_name == obj.name
                        )
                    )
                    db.execute(delete(t.objects).where(_is(obj)))
                db.execute(delete(t.queries).where(t.queries.c.name == ref.name))
            audit.record(
                db,
                self.clock(),
                Event.ADD_QUERY,
                Outcome.REFUSED,
                actor=user,
                obj=ref,
                detail={"error": error},
            )

    def audit_restored_registration(self, name: str) -> bool:
        """Audits, as ``add_query ok`` with ``restored`` in its detail, a query that
        :meth:`add_query` recorded unaudited and whose outcome never reached the audit:
        the server died between recording it and starting it, and the next start runs
        it from its staged definition. Every recorded query then has its entry. True
        when one was written; a query audited since its object was created is left."""
        ref = ObjectRef(Kind.QUERY, _object_name(name))
        since_created = (
            select(func.count())
            .select_from(t.audit)
            .where(
                t.audit.c.event == Event.ADD_QUERY.value,
                t.audit.c.object_kind == ref.kind.value,
                t.audit.c.object_name == ref.name,
                t.audit.c.at >= select(t.objects.c.created_at).where(_is(ref)).scalar_subquery(),
            )
        )
        with self._read() as db:
            row = db.execute(select(t.queries).where(t.queries.c.name == ref.name)).first()
            if row is None or db.scalar(since_created):
                return False
        with self._write() as db:
            row = db.execute(select(t.queries).where(t.queries.c.name == ref.name)).first()
            if row is None or db.scalar(since_created):
                return False
            detail = {**_added_detail(_query_record(row)), "restored": True}
            audit.record(
                db,
                self.clock(),
                Event.ADD_QUERY,
                Outcome.OK,
                actor=row.owner,
                obj=ref,
                detail=detail,
            )
        return True

    def _quota_error(self, db: Connection, user: str) -> QuotaExceeded | None:
        running = db.scalar(
            select(func.count())
            .select_from(t.queries)
            .where(t.queries.c.owner == user, t.queries.c.status == QueryStatus.RUNNING.value)
        )
        assert running is not None  # COUNT(*) always gives a row
        if running >= self._quota(db, user).max_running_queries:
            return QuotaExceeded("running-query quota reached")
        return None

    def query(self, session: Session, name: str) -> QueryRecord:
        """A query the session may see; NotFound otherwise."""
        ref = ObjectRef(Kind.QUERY, name)
        with self._read() as db:
            subject = self._subject(db, session)
            seen = ox.can_see(self._acl(db), subject, ref)
            row = db.execute(select(t.queries).where(t.queries.c.name == name)).first()
        if not seen or row is None:
            raise NotFound(Permission.VIEW_OBJECT, ref)
        return _query_record(row)

    def queries(self, who: Who | None = None) -> list[QueryRecord]:
        """Queries visible to ``who``; all of them for the trusted server (``who=None``)."""
        with self._read() as db:
            rows = db.execute(select(t.queries).order_by(t.queries.c.name)).all()
            if who is None:
                return [_query_record(row) for row in rows]
            subject, state = self._subject(db, who), self._acl(db)
        return [
            _query_record(row)
            for row in rows
            if ox.can_see(state, subject, ObjectRef(Kind.QUERY, row.name))
        ]

    def set_query_status(self, session: Session, name: str, status: QueryStatus | str) -> None:
        """Starts or stops a query (SET QUERY STATUS); starting counts against the quota."""
        ref = ObjectRef(Kind.QUERY, name)
        status = QueryStatus(status)
        with self._guarded(session, Event.SET_QUERY_STATUS) as change:
            db = change.db
            change.refuse_if(
                ox.require(change.acl, change.subject, Permission.SET_QUERY_STATUS, ref)
            )
            row = db.execute(select(t.queries).where(t.queries.c.name == name)).first()
            if row is None:
                change.refuse_if(NotFound(Permission.SET_QUERY_STATUS, ref))
            elif status is QueryStatus.RUNNING and row.status != status.value:
                change.refuse_if(self._quota_error(db, row.owner))
            db.execute(
                update(t.queries).where(t.queries.c.name == name).values(status=status.value)
            )
            change.done(obj=ref, detail={"status": status.value})

    def remove_query(self, session: Session, name: str) -> None:
        """Removes a query, its output stream and their grants (owner or administrator)."""
        ref = ObjectRef(Kind.QUERY, name)
        with self._guarded(session, Event.REMOVE_QUERY) as change:
            db, state, subject = change.db, change.acl, change.subject
            if not ox.can_see(state, subject, ref):
                change.refuse_if(NotFound(Permission.VIEW_OBJECT, ref))
            elif not ox.may_remove(state, subject, ref):
                change.refuse_if(PermissionDenied(Permission.CHANGE_SYSTEM, ref))
            doomed = [ref] + [o.ref for o in state.objects.values() if o.parent == ref]
            for obj in doomed:
                db.execute(
                    delete(t.grants).where(
                        t.grants.c.obj_kind == obj.kind.value, t.grants.c.obj_name == obj.name
                    )
                )
                db.execute(delete(t.objects).where(_is(obj)))
            db.execute(delete(t.queries).where(t.queries.c.name == name))
            change.done(obj=ref)

    # -- permissions ---------------------------------------------------------------------------

    def grant(
        self,
        session: Session,
        permission: Permission,
        obj: ObjectRef,
        grantee: Grantee,
        with_grant_option: bool = False,
    ) -> None:
        """Grants ``permission`` on ``obj`` (owner, CHANGE PERM, or the permission WITH
        GRANT OPTION). Granting again only ever adds the grant option, never drops it."""
        permission = Permission(permission)
        if permission not in ox.APPLICABLE[obj.kind]:
            raise ValueError(f"{permission.value} does not apply to a {obj.kind.value}")
        with self._guarded(session, Event.GRANT) as change:
            db = change.db
            change.refuse_if(ox.check_grant(change.acl, change.subject, permission, obj))
            self._check_grantee(db, grantee)
            row = {
                "permission": permission.value,
                "obj_kind": obj.kind.value,
                "obj_name": obj.name,
                "grantee_kind": grantee.kind.value,
                "grantee": grantee.name,
                "grantor": change.actor,
                "with_grant_option": with_grant_option,
            }
            keys = ["permission", "obj_kind", "obj_name", "grantee_kind", "grantee", "grantor"]
            existing = t.grants.c.with_grant_option
            upsert(
                db,
                t.grants,
                row,
                keys,
                {
                    "with_grant_option": lambda new: case(
                        (existing, True), else_=new.with_grant_option
                    )
                },
            )
            change.done(
                obj=obj,
                detail={
                    "permission": permission.value,
                    "grantee": str(grantee),
                    "with_grant_option": with_grant_option,
                },
            )

    @staticmethod
    def _check_grantee(db: Connection, grantee: Grantee) -> None:
        if grantee.kind is GranteeKind.USER:
            found = db.execute(select(t.users.c.name).where(t.users.c.name == grantee.name))
        else:
            found = db.execute(select(t.roles.c.name).where(t.roles.c.name == grantee.name))
        if found.first() is None:
            raise ValueError("unknown grantee")

    def revoke(
        self, session: Session, permission: Permission, obj: ObjectRef, grantee: Grantee
    ) -> int:
        """Revokes, with cascade (see :func:`oxrbac.plan_revoke`); returns grants removed."""
        permission = Permission(permission)
        with self._guarded(session, Event.REVOKE) as change:
            plan = ox.plan_revoke(change.acl, change.subject, permission, obj, grantee)
            if isinstance(plan, ox.Denial):
                change.refuse(plan)
            if not plan:
                raise GrantNotFound(permission, obj, grantee)  # not a refusal: nothing to undo
            for grant in plan:
                delete_grant(change.db, grant)
            detail = {"permission": permission.value, "grantee": str(grantee), "removed": len(plan)}
            change.done(obj=obj, detail=detail)
        return len(plan)

    # -- settings and quotas -------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """Settings in force: :data:`DEFAULT_SETTINGS` overlaid with stored values."""
        with self._read() as db:
            return _settings(db)

    def set_setting(self, session: Session, key: str, value: Any) -> None:
        """Stores a JSON-serialisable setting (CHANGE SYSTEM)."""
        text = json.dumps(value)
        with self._guarded(session, Event.SET_SETTING) as change:
            change.refuse_if(
                ox.require(change.acl, change.subject, Permission.CHANGE_SYSTEM, SYSTEM)
            )
            upsert(change.db, t.settings, {"key": key, "value": text}, ["key"], {"value": text})
            change.done(obj=SYSTEM, detail={"key": key})

    def change_connector(
        self, session: Session, event: Event, stream: str, detail: dict, act: Callable[[], None]
    ) -> None:
        """Binds or unbinds a connector on ``stream`` (CHANGE SYSTEM): ``act`` does it,
        inside the audited change, so a refusal or a failure of ``act`` leaves neither
        the connector nor its audit entry."""
        with self._guarded(session, event) as change:
            change.refuse_if(
                ox.require(change.acl, change.subject, Permission.CHANGE_SYSTEM, SYSTEM)
            )
            act()
            change.done(obj=ObjectRef(Kind.STREAM, stream), detail=detail)

    def set_quota(
        self,
        session: Session,
        user: str,
        *,
        max_running_queries: int | None = None,
        max_state_rows: int | None = None,
    ) -> None:
        """Sets a user's quotas (CHANGE SYSTEM); None falls back to the settings."""
        with self._guarded(session, Event.SET_QUOTA) as change:
            change.refuse_if(
                ox.require(change.acl, change.subject, Permission.CHANGE_SYSTEM, SYSTEM)
            )
            row = {"max_running_queries": max_running_queries, "max_state_rows": max_state_rows}
            upsert(change.db, t.quotas, {"user_name": user, **row}, ["user_name"], row)
            change.done(detail={"user": user, **row})

    def quota(self, user: str) -> Quota:
        """A user's quotas, as the server enforces them."""
        with self._read() as db:
            return self._quota(db, user)

    @staticmethod
    def _quota(db: Connection, user: str) -> Quota:
        defaults = _settings(db)
        row = db.execute(select(t.quotas).where(t.quotas.c.user_name == user)).first()
        running = None if row is None else row.max_running_queries
        state = None if row is None else row.max_state_rows
        return Quota(
            int(defaults["quota.max_running_queries"] if running is None else running),
            int(defaults["quota.max_state_rows"] if state is None else state),
        )

    # -- audit ---------------------------------------------------------------------------------

    def audit_entries(
        self, session: Session, filters: AuditFilter | None = None
    ) -> list[AuditEntry]:
        """Audit entries the session may read: all with CHANGE SYSTEM, else its own."""
        with self._read() as db:
            subject = self._subject(db, session)
            admin = ox.holds(self._acl(db), subject, Permission.CHANGE_SYSTEM, SYSTEM)
            entries = audit.read(db, filters or AuditFilter(), None if admin else subject.user)
        return entries if admin else [audit.without_admin_only(e) for e in entries]

    def record_drop(
        self,
        user: str,
        obj: ObjectRef,
        dropped: int,
        *,
        policy_ids: Iterable[str] = (),
        reason: str = "secfilter",
    ) -> None:
        """Audits an access decision that withheld ``dropped`` tuples from ``user``.

        For the trusted engine (delivery, SecFilter): ids and counts only, never values.
        """
        self._audit(
            Event.DATA_DROPPED,
            Outcome.DENIED,
            actor=user,
            obj=obj,
            detail={
                "dropped": int(dropped),
                "policy_ids": sorted(set(policy_ids)),
                "reason": reason,
            },
        )

    def record_rejected(self, user: str, obj: ObjectRef, reason: str, count: int) -> None:
        """Audits elements the landing zone refused for a reason that signals an attack
        (e.g. ``future_timestamp``): the reason and a count, never the elements."""
        self._audit(
            Event.DENIED,
            Outcome.DENIED,
            actor=user,
            obj=obj,
            detail={"reason": reason, "rejected": int(count)},
        )

    def record_query_sp(self, user: str, query: str, sign: str, outcome: str) -> None:
        """Audits a query-scoped sp that changed no privacy switch: a repeated ``+``, a
        ``-`` without its ``+`` (both ignored) or one naming no query (refused)."""
        self._audit(
            Event.QUERY_SP,
            Outcome.DENIED if outcome == "unknown-query" else Outcome.OK,
            actor=None,
            obj=ObjectRef(Kind.QUERY, query),
            detail={"sign": sign, "outcome": outcome, "admin_only": {"user": user}},
        )

    def record_query_failure(
        self, owner: str | None, name: str, error_class: str, message: str
    ) -> None:
        """Audits a query the engine stopped with an error (``owner`` None: the server's
        own ingest query, an entry only administrators read).

        The owner reads the error class; Spark's full message can quote data values, so it
        sits under ``admin_only``, which only administrators' reads keep.
        """
        self._audit(
            Event.QUERY_FAILED,
            Outcome.FAILED,
            actor=owner,
            obj=ObjectRef(Kind.QUERY, name),
            detail={"error_class": error_class, "admin_only": {"message": message[:20_000]}},
        )


# -- helpers ---------------------------------------------------------------------------------


def _is(ref: ObjectRef) -> Any:
    return (t.objects.c.kind == ref.kind.value) & (t.objects.c.name == ref.name)


def _object_name(name: str) -> str:
    if not isinstance(name, str) or not _USER_NAME.match(name):
        raise ValueError("object names are 1-200 characters of letters, digits, _ . @ -")
    return name


def _insert_object(
    db: Connection, ref: ObjectRef, owner: str, parent: ObjectRef | None, now: float
) -> None:
    taken = select(t.objects.c.name).where(
        t.objects.c.kind == ref.kind.value, func.lower(t.objects.c.name) == ref.name.lower()
    )
    if db.execute(taken).first() is not None:
        if ref.kind is Kind.STREAM:
            raise StreamExists(ref.name)
        raise AlreadyExists(f"{ref} already exists")
    db.execute(
        insert(t.objects).values(
            kind=ref.kind.value,
            name=ref.name,
            owner=owner,
            parent_kind=None if parent is None else parent.kind.value,
            parent_name=None if parent is None else parent.name,
            created_at=now,
        )
    )


def _as_held(roles: Iterable[str], held: frozenset[str]) -> frozenset[str]:
    """The requested roles, each as the held role it names ignoring case (``nd`` is
    ``ND``); a role matching none, or two held roles differing only in case, stays as
    asked, so activation fails for it rather than guess."""
    by_folded: dict[str, list[str]] = {}
    for role in held:
        by_folded.setdefault(role.casefold(), []).append(role)
    named = set()
    for role in roles:
        matches = by_folded.get(str(role).casefold(), [])
        named.add(role if role in held or len(matches) != 1 else matches[0])
    return frozenset(named)


def _added_detail(record: QueryRecord) -> dict[str, Any]:
    """What an ``add_query ok`` entry says of the query."""
    return {
        "inputs": list(record.inputs),
        "output_stream": record.output_stream,
        "roles": sorted(record.roles),
        "status": record.status.value,
    }


def _held_roles(db: Connection, user: str) -> frozenset[str]:
    return frozenset(
        db.scalars(select(t.user_roles.c.role).where(t.user_roles.c.user_name == user))
    )


def _set_user_roles(db: Connection, user: str, roles: frozenset[str]) -> None:
    db.execute(delete(t.user_roles).where(t.user_roles.c.user_name == user))
    if roles:
        db.execute(insert(t.user_roles), [{"user_name": user, "role": r} for r in sorted(roles)])


def _effective(db: Connection, user: str, activated: Iterable[str] | None) -> Subject:
    held = _held_roles(db, user)
    juniors = load_hierarchy(db).juniors
    return ox.effective_subject(user, held if activated is None else activated, held, juniors)


def _grant(row: Any) -> ox.Grant:
    return ox.Grant(
        Permission(row.permission),
        ObjectRef(Kind(row.obj_kind), row.obj_name),
        Grantee(GranteeKind(row.grantee_kind), row.grantee),
        row.grantor,
        bool(row.with_grant_option),
    )


def _settings(db: Connection) -> dict[str, Any]:
    stored = {key: json.loads(value) for key, value in db.execute(select(t.settings))}
    return {**DEFAULT_SETTINGS, **stored}


def _query_record(row: Any) -> QueryRecord:
    return QueryRecord(
        row.name,
        row.owner,
        frozenset(json.loads(row.roles)),
        tuple(json.loads(row.inputs)),
        row.output_stream,
        QueryStatus(row.status),
    )
