"""Sessions opened by OpenID Connect tokens: users found, bound or provisioned, roles
taken from the token.

A mixin of :class:`~streamshield.catalog.security.SecurityCatalog`. The server checks
the token (signature, issuer, audience, lifetime: ``server/oidc_tokens.py``) and hands
over what it says (:class:`TokenIdentity`); the catalog decides who that is and with
which roles she acts. A token session is an ordinary row of the sessions table keyed
by the token's SHA-256, so every check that reads a session by its token (each request,
each delivered batch) works on it unchanged, and it ends at the token's expiry.

Rules (docs/security.md, "Single sign-on"):

* Identity: the (issuer, subject) pair is bound to a user at her first token; later
  tokens of that pair act as that user whatever their user-name claim says, and a token
  naming a bound user with another subject is refused ("user name bound to another
  identity"), so an IdP account renamed to a colleague's name does not become her.
* Unknown user: created when the issuer provisions (``provision = true``), holding
  every role the issuer's mapping can give (the catalog's ceiling for her, which an
  administrator may narrow), else refused ("unknown user"). A user name differing from
  an existing one only in case is refused ("user name taken").
* A disabled user is refused ("user disabled") whatever her token says.
* Roles: the token's mapped roles that she holds in the catalog. A token issued later
  (``iat``) than her other token sessions of the same issuer narrows them to its roles
  in the same transaction (the catalog's version moves, so live subscriptions are
  re-checked); a token issued earlier than her newest one gets no role the newest does
  not have. A token leaving her no role is refused ("no roles") after the narrowing.
* Logout keeps the row with no role until the token expires: the same token presented
  again stays refused ("session ended") instead of opening a new session.

Every refusal is audited (``login`` / ``failed`` or ``denied``, detail ``method: oidc``
and the reason).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from streamshield.catalog import audit
from streamshield.catalog import tables as t
from streamshield.catalog.audit import Event, Outcome
from streamshield.catalog.errors import AuthError
from streamshield.catalog.identifiers import USER_NAME, token_hash
from streamshield.catalog.store import load_hierarchy

if TYPE_CHECKING:
    from streamshield.catalog.passwords import Passwords
    from streamshield.catalog.refusal_budget import RefusalBudget
    from streamshield.catalog.security import Session

METHOD = "oidc"


class TokenRefused(AuthError):
    """A bearer token that opens no session; ``reason`` is safe to show (which rule)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"token refused: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class TokenIdentity:
    """What a verified token says: who (issuer and subject, and the user name they go
    by), the roles her claims map to, the token's ``iat`` and the time its session ends
    (seconds since the epoch), and the issuer's provisioning rule and role ceiling."""

    issuer: str
    subject: str
    user: str
    roles: frozenset[str]
    issued_at: float
    expires_at: float
    provision: bool
    ceiling: frozenset[str]


@dataclass(frozen=True)
class _Refusal:
    """Why a token opens no session, and who she is when that is known."""

    reason: str
    user: str | None = None
    outcome: Outcome = Outcome.FAILED


class Federation:
    """Token sessions; mixed into SecurityCatalog (module doc)."""

    # provided by SecurityCatalog
    _write: Callable[[], Any]
    _audit: Callable[..., None]
    clock: Callable[[], float]
    refusals: RefusalBudget
    passwords: Passwords
    session: Callable[[str], Session]
    _open_session: Callable[..., Session]

    def record_token_refused(
        self, reason: str, client: str | None, issuer: str | None = None
    ) -> None:
        """Audits a token the server refused before the catalog saw it (bad signature,
        expired, wrong audience...), within the address's budget
        (:mod:`~streamshield.catalog.refusal_budget`). Only the reason and the configured
        issuer are recorded: an unverified token's claims are the attacker's word."""
        suppressed = self.refusals.take(client)
        if suppressed is None:
            return  # counted, written with the address's next entry
        detail: dict[str, Any] = {"method": METHOD, "reason": reason}
        if issuer is not None:
            detail["issuer"] = issuer
        if suppressed:
            detail["suppressed"] = suppressed
        self._audit(Event.LOGIN, Outcome.FAILED, client=client, detail=detail)

    def token_session(self, token: str, identity: TokenIdentity, client: str | None) -> Session:
        """The session of a verified token: the one it opened before, else a new one
        (module doc: who she is, her roles, what it narrows); :class:`TokenRefused`."""
        try:
            return self.session(token)
        except AuthError:
            pass  # none yet, or ended: decided below under the write lock
        try:
            opened = self._open_token_session(token, identity, client)
        except IntegrityError:
            # A request with the same token opened its session meanwhile, or one with
            # another token of hers provisioned or bound her: decided again once.
            try:
                return self.session(token)
            except AuthError:
                opened = self._open_token_session(token, identity, client)
        if isinstance(opened, _Refusal):
            raise TokenRefused(opened.reason)
        return opened

    def _open_token_session(
        self, token: str, identity: TokenIdentity, client: str | None
    ) -> Session | _Refusal:
        """:meth:`_token_session` in a write transaction, a refusal audited in it."""
        with self._write() as db:
            now = self.clock()
            opened = self._token_session(db, token, identity, client, now)
            if isinstance(opened, _Refusal):
                detail = _detail(identity, reason=opened.reason)
                audit.record(
                    db,
                    now,
                    Event.LOGIN,
                    opened.outcome,
                    actor=opened.user,
                    client=client,
                    detail=detail,
                )
        return opened

    def _token_session(
        self, db: Connection, token: str, identity: TokenIdentity, client: str | None, now: float
    ) -> Session | _Refusal:
        if identity.expires_at <= now:
            return _Refusal("token expired")
        ended = t.sessions.c.token_hash == token_hash(token)
        if db.scalar(select(t.sessions.c.user_name).where(ended)) is not None:
            return _Refusal("session ended")
        name = self._bound_user(db, identity, now)
        if isinstance(name, _Refusal):
            return name
        roles = self._token_roles(db, name, identity)
        if not roles:
            return _Refusal("no roles", name, Outcome.DENIED)
        return self._open_session(db, name, roles, client, now, token, identity)

    def _bound_user(self, db: Connection, identity: TokenIdentity, now: float) -> str | _Refusal:
        """The user the identity is: bound before, or found or provisioned and bound now."""
        ids = t.identities.c
        bound = db.scalar(
            select(ids.user_name).where(
                ids.issuer == identity.issuer, ids.subject == identity.subject
            )
        )
        name = bound if bound is not None else identity.user
        if bound is None:
            if not USER_NAME.match(name):
                return _Refusal("no usable user name")
            other = db.scalar(
                select(ids.subject).where(ids.issuer == identity.issuer, ids.user_name == name)
            )
            if other is not None:
                return _Refusal("user name bound to another identity")
        user = db.execute(
            select(t.users.c.name, t.users.c.disabled).where(
                func.lower(t.users.c.name) == name.lower()
            )
        ).first()
        if user is not None and user.name != name:
            return _Refusal("user name taken")
        if user is None:
            if bound is not None or not identity.provision:
                return _Refusal("unknown user")
            self._provision(db, name, identity, now)
        elif user.disabled:
            return _Refusal("user disabled", name)
        if bound is None:
            db.execute(
                insert(t.identities).values(
                    issuer=identity.issuer, subject=identity.subject, user_name=name, linked_at=now
                )
            )
        return name

    def _provision(self, db: Connection, name: str, identity: TokenIdentity, now: float) -> None:
        """A new user holding the issuer's ceiling (the roles of the hierarchy among
        them); her password is a random secret nobody knows: she logs in by token."""
        roles = sorted(identity.ceiling & set(load_hierarchy(db).roles))
        db.execute(
            insert(t.users).values(
                name=name,
                password_hash=self.passwords.hash(secrets.token_urlsafe(32)),
                created_at=now,
            )
        )
        if roles:
            db.execute(insert(t.user_roles), [{"user_name": name, "role": r} for r in roles])
        audit.record(
            db,
            now,
            Event.CREATE_USER,
            Outcome.OK,
            actor=name,
            detail={"user": name, "roles": roles, "provisioned_by": identity.issuer},
        )

    def _token_roles(self, db: Connection, name: str, identity: TokenIdentity) -> frozenset[str]:
        """The roles the token gives her (mapped and held), narrowing her other token
        sessions of the issuer when it is her newest, narrowed by her newest otherwise."""
        held = frozenset(
            db.scalars(select(t.user_roles.c.role).where(t.user_roles.c.user_name == name))
        )
        roles = identity.roles & held
        s = t.sessions.c
        others = db.execute(
            select(s.token_hash, s.roles, s.issued_at).where(
                s.user_name == name, s.issuer == identity.issuer
            )
        ).all()
        newest = max(others, key=lambda row: row.issued_at or 0.0, default=None)
        if newest is not None and (newest.issued_at or 0.0) > identity.issued_at:
            return roles & frozenset(json.loads(newest.roles))
        for row in others:
            old = frozenset(json.loads(row.roles))
            if old - roles:
                db.execute(
                    update(t.sessions)
                    .where(s.token_hash == row.token_hash)
                    .values(roles=json.dumps(sorted(old & roles)))
                )
        return roles


def _detail(identity: TokenIdentity, **more: Any) -> dict[str, Any]:
    return {"method": METHOD, "issuer": identity.issuer, **more}
