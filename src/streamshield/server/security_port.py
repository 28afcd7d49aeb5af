"""Every call the server makes into the security catalog, in one place.

The server speaks strings (``"stream"``, ``"SUBSCRIBE"``); the catalog speaks
:mod:`streamshield.catalog.oxrbac` enums. Keeping the translation here means the
service and the API do not depend on the catalog's exact signatures, and a change
there is a change in this file only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from streamshield.catalog.audit import AuditFilter, Event
from streamshield.catalog.oxrbac import Grantee, Kind, ObjectRef, Permission
from streamshield.policy.bitset import Words
from streamshield.policy.coi import LatticeError
from streamshield.policy.query_level import QueryLevel
from streamshield.server.errors import Invalid, Unauthorized, error_code
from streamshield.server.oidc_tokens import TokenInvalid, TokenVerifier

if TYPE_CHECKING:
    from streamshield.catalog.audit import AuditEntry
    from streamshield.catalog.security import QueryRecord, QueryStatus, Session, Who
    from streamshield.catalog.streams import StreamDefinition
    from streamshield.policy.lattice import Lattice, Level
    from streamshield.policy.policy import Combine, ServerPolicy

audit_log = logging.getLogger("streamshield.audit")


class SecurityApi(Protocol):
    """What the server needs of the security catalog
    (:class:`~streamshield.catalog.security.SecurityCatalog` is the one implementation);
    every call goes through the functions below."""

    def login(
        self, name: str, password: str, roles: Iterable[str] | None = None, *, client: str | None
    ) -> Session: ...
    def session(self, token: str) -> Session: ...
    def session_expired(self) -> bool: ...
    def logout(self, token: str) -> None: ...
    def session_level(self, session: Session | str) -> Level | None: ...
    def lattice(self) -> Lattice | None: ...
    def clearance_dominates(self, user: str, level: str) -> bool: ...
    def readable_sources(self, who: Who) -> tuple[set[str], set[str]]: ...
    def acting_roles(self, name: str) -> frozenset[str]: ...
    def user_enabled(self, name: str) -> bool: ...
    def visible(self, session: Session, kind: Kind) -> list[str]: ...
    def queries(self, who: Who | None = None) -> list[QueryRecord]: ...
    def check(self, who: Who, permission: Permission, obj: ObjectRef) -> bool: ...
    def require(self, who: Who, permission: Permission, obj: ObjectRef) -> None: ...
    def can_write(self, who: Who, stream: str) -> bool: ...
    def can_inject(self, who: Who, stream: str) -> bool: ...
    def can_subscribe(self, who: Who, stream: str) -> bool: ...
    def add_schema(self, session: Session, name: str) -> None: ...
    def add_stream(self, session: Session, schema: str, definition: StreamDefinition) -> None: ...
    def set_stream_tags(
        self, session: Session, stream: str, tags: Mapping[str, Collection[str]]
    ) -> StreamDefinition: ...
    def set_server_policy(
        self, session: Session, scope: str, cql_text: str, mode: Combine
    ) -> None: ...
    def server_policies(self) -> dict[str, ServerPolicy]: ...
    def add_query(
        self,
        session: Session,
        name: str,
        inputs: Iterable[str],
        output_stream: str | None = None,
        *,
        audited: bool = True,
    ) -> QueryRecord: ...
    def record_registration(
        self, user: str, name: str, error: str | None = None, *, recorded: bool = True
    ) -> None: ...
    def audit_restored_registration(self, name: str) -> bool: ...
    def remove_query(self, session: Session, name: str) -> None: ...
    def set_query_status(self, session: Session, name: str, status: QueryStatus | str) -> None: ...
    def grant(
        self,
        session: Session,
        permission: Permission,
        obj: ObjectRef,
        grantee: Grantee,
        with_grant_option: bool = False,
    ) -> None: ...
    def revoke(
        self, session: Session, permission: Permission, obj: ObjectRef, grantee: Grantee
    ) -> int: ...
    def settings(self) -> dict[str, Any]: ...
    def set_setting(self, session: Session, key: str, value: Any) -> None: ...
    def audit_entries(
        self, session: Session, filters: AuditFilter | None = None
    ) -> list[AuditEntry]: ...
    def record_drop(
        self,
        user: str,
        obj: ObjectRef,
        dropped: int,
        *,
        policy_ids: Iterable[str] = (),
        reason: str = "secfilter",
    ) -> None: ...
    def record_rejected(self, user: str, obj: ObjectRef, reason: str, count: int) -> None: ...
    def change_connector(
        self, session: Session, event: Event, stream: str, detail: dict, act: Callable[[], None]
    ) -> None: ...
    def record_query_sp(self, user: str, query: str, sign: str, outcome: str) -> None: ...
    def record_query_failure(
        self, owner: str | None, name: str, error_class: str, message: str
    ) -> None: ...


KINDS = ("schema", "stream", "query")
LIMITS_SETTING = "operator_limits"


def ref(kind: str, name: str) -> ObjectRef:
    try:
        return ObjectRef(Kind(kind), name)
    except ValueError:
        raise Invalid(f"unknown object kind {kind[:20]!r}") from None


def permission(name: str) -> Permission:
    try:
        return Permission(name.upper().replace("_", " "))
    except ValueError:
        raise Invalid("unknown permission") from None


def user_of(session: Session) -> str:
    return str(session.user)


def roles_of(session: Session) -> tuple[str, ...]:
    return tuple(sorted(session.roles))


# -- sessions -----------------------------------------------------------------------------


def login(security: SecurityApi, user: str, password: str, roles: list[str], client: str) -> Any:
    return security.login(user, password, roles, client=client)


def token_session(security: Any, verifier: TokenVerifier, token: str, client: str | None) -> Any:
    """The session of an OpenID Connect bearer token: verified (:mod:`.oidc_tokens`),
    then found or opened by the catalog (:mod:`streamshield.catalog.federation`); every
    refusal is audited (within the address's budget) and answered 401 with its reason."""
    try:
        identity = verifier.verify(token)
    except TokenInvalid as err:
        security.record_token_refused(err.reason, client, err.issuer)
        raise Unauthorized(f"token refused: {err.reason}") from None
    return security.token_session(token, identity, client)


def session(security: SecurityApi, token: str) -> Any:
    return security.session(token)


def logout(security: SecurityApi, token: str) -> None:
    security.logout(token)


def session_expired(security: SecurityApi) -> bool:
    """Whether a session the catalog remembers has expired since it was last checked
    (its live subscriptions must end; expiry moves no catalog version)."""
    return bool(security.session_expired())


# -- Chinese-Wall levels --------------------------------------------------------------------


def session_query_level(security: SecurityApi, session: Session) -> QueryLevel | None:
    """The level a query registered in ``session`` runs at: the session's active level
    (public without clearance or activation); None while levels are off."""
    level = security.session_level(session)
    if level is None:
        return None
    lattice = security.lattice()
    return None if lattice is None else QueryLevel(lattice, lattice.check(level))


def stored_query_level(security: SecurityApi, text: str | None) -> QueryLevel | None:
    """A stored query's level back (``[1, B]``); one stored before levels existed, or
    whose text no longer parses, runs at *public* once levels are on (never above)."""
    lattice = security.lattice()
    if lattice is None:
        return None
    try:
        level = lattice.parse(text) if text is not None else lattice.public
    except LatticeError:
        level = lattice.public
    return QueryLevel(lattice, level)


def recipient_level(security: SecurityApi, session: Session) -> Words | None:
    """A subscriber's session level now, encoded; None while levels are off."""
    level = security.session_level(session)
    if level is None:
        return None
    lattice = security.lattice()
    return None if lattice is None else lattice.encode(lattice.check(level))


def clearance_dominates(security: SecurityApi, user: str, level: QueryLevel) -> bool:
    """Whether ``user``'s clearance of now dominates ``level`` (a query's level)."""
    return bool(security.clearance_dominates(user, level.text))


# -- objects ------------------------------------------------------------------------------


def visible(security: SecurityApi, session: Session, kind: str) -> list[str]:
    return list(security.visible(session, Kind(kind)))


def queries(security: SecurityApi, session: Session) -> list[Any]:
    """Query records the session may see (name, owner, inputs, output stream, status)."""
    return list(security.queries(session))


def all_queries(security: SecurityApi) -> list[Any]:
    """Every query record, for the trusted server itself (restart after a shutdown)."""
    return list(security.queries(None))


def audit_restored(security: SecurityApi, name: str) -> None:
    """The ``add_query`` entry of a query a crash kept from its audit (restart)."""
    security.audit_restored_registration(name)


def held_roles(security: SecurityApi, user: str) -> frozenset[str]:
    """The roles ``user``'s queries may run with now (a query keeps only those of its
    recorded roles): none when she is disabled or unknown."""
    return frozenset(security.acting_roles(user))


def user_enabled(security: SecurityApi, user: str) -> bool:
    """Whether ``user`` exists and is not disabled."""
    return bool(security.user_enabled(user))


def seen_streams(security: SecurityApi, session: Session, names: Iterable[str]) -> list[str]:
    """The streams of ``names`` the session may see (VIEW OBJECT on each): what a query
    naming them resolves (VIEW CATALOG is for listing, not for naming)."""
    return [s for s in names if security.check(session, Permission.VIEW_OBJECT, ref("stream", s))]


def check(security: SecurityApi, session: Session, perm: str, kind: str, name: str) -> bool:
    return bool(security.check(session, permission(perm), ref(kind, name)))


def require(security: SecurityApi, session: Session, perm: str, kind: str, name: str) -> None:
    security.require(session, permission(perm), ref(kind, name))


def add_schema(security: SecurityApi, session: Session, name: str) -> None:
    _safe(security.add_schema, session, name)


def add_stream(security: SecurityApi, session: Session, schema: str, definition: Any) -> None:
    """Registers the stream in the engine catalog and as an object, in one transaction."""
    _safe(security.add_stream, session, schema, definition)


def set_stream_tags(
    security: SecurityApi, session: Session, stream: str, tags: Mapping[str, Collection[str]]
) -> StreamDefinition:
    """Retags an input stream (CHANGE SYSTEM, audited); the retagged definition."""
    return _safe(security.set_stream_tags, session, stream, tags)


def set_server_policy(
    security: SecurityApi, session: Session, scope: str, cql_text: str, mode: Combine
) -> None:
    """Stores a scope's server policy (CHANGE SYSTEM, audited)."""
    _safe(security.set_server_policy, session, scope, cql_text, mode)


def add_query(
    security: SecurityApi,
    session: Session,
    name: str,
    inputs: Iterable[str],
    output: str,
    audited: bool = True,
) -> None:
    """``audited=False``: :func:`registered` or :func:`refused` audits it afterwards."""
    _safe(lambda: security.add_query(session, name, list(inputs), output, audited=audited))


def registered(security: SecurityApi, session: Session, name: str) -> None:
    """Audits a query added unaudited as added: the engine planned and started it."""
    security.record_registration(user_of(session), name)


def refused(
    security: SecurityApi, session: Session, name: str, err: BaseException, *, recorded: bool
) -> None:
    """Audits a registration (query or pattern) refused by ``err`` as one ``add_query
    refused`` entry with the error code its author is answered (never the message: it
    may quote the query), removing what the catalog ``recorded`` of it (False: refused
    before :func:`add_query`; a query of that name is someone's running one). OxRBAC's refusals
    never come here: the catalog audits them itself (``denied``) and records nothing.
    Auditing that fails leaves the refusal as the answer (and one line in the log)."""
    try:
        security.record_registration(user_of(session), name, error_code(err), recorded=recorded)
    except Exception as failed:
        audit_log.error("auditing the refusal of %s failed: %r", name, failed)


def remove_query(security: SecurityApi, session: Session, name: str) -> None:
    security.remove_query(session, name)


def set_query_status(security: SecurityApi, session: Session, name: str, status: str) -> None:
    security.set_query_status(session, name, status)


def grant(security: SecurityApi, session: Session, body: dict, revoke: bool) -> None:
    if (body.get("role") is None) == (body.get("user") is None):
        raise Invalid("give exactly one of role and user")
    grantee = Grantee.role(body["role"]) if body.get("role") else Grantee.user(body["user"])
    target = ref(body["kind"], body["object"])
    perm = permission(body["permission"])
    if revoke:
        _safe(security.revoke, session, perm, target, grantee)
    else:
        _safe(security.grant, session, perm, target, grantee, body["grant_option"])


def can_subscribe(security: SecurityApi, who: Who, stream: str) -> bool:
    return bool(security.can_subscribe(who, stream))


def record_drop(
    security: SecurityApi, user: str, stream: str, count: int, policies: tuple[str, ...]
) -> None:
    security.record_drop(user, ref("stream", stream), count, policy_ids=policies)


def record_rejected(security: SecurityApi, user: str, stream: str, reason: str, count: int) -> None:
    security.record_rejected(user, ref("stream", stream), reason, count)


def change_connector(
    security: SecurityApi,
    session: Session,
    bound: bool,
    stream: str,
    detail: dict,
    act: Callable[[], None],
) -> None:
    """``act`` binds (``bound``) or unbinds a connector, if the session holds CHANGE
    SYSTEM; audited either way."""
    event = Event.BIND_CONNECTOR if bound else Event.UNBIND_CONNECTOR
    security.change_connector(session, event, stream, detail, act)


def record_query_sp(security: SecurityApi, user: str, query: str, sign: str, outcome: str) -> None:
    security.record_query_sp(user, query, sign, outcome)


def record_query_failure(
    security: SecurityApi, owner: str | None, name: str, error_class: str, message: str
) -> None:
    security.record_query_failure(owner, name, error_class, message)


# -- data senders and SecFilter ---------------------------------------------------------------


def can_write(security: SecurityApi, who: Who, stream: str) -> bool:
    return bool(security.can_write(who, stream))


def can_inject(security: SecurityApi, who: Who, stream: str) -> bool:
    return bool(security.can_inject(who, stream))


# -- system ---------------------------------------------------------------------------------


def settings(security: SecurityApi) -> dict:
    return dict(security.settings())


def set_setting(security: SecurityApi, session: Session, key: str, value: Any) -> None:
    _safe(security.set_setting, session, key, value)


def _safe(fn: Any, *args: Any) -> Any:
    """Calls the catalog; its ValueErrors (bad names, inapplicable permissions) are 422s.

    Their messages are about names and rules the caller supplied, never data values.
    """
    try:
        return fn(*args)
    except ValueError as err:
        raise Invalid(str(err)) from None


def jsonable(value: Any) -> Any:
    """``value`` as JSON can carry it (an audit entry's detail): containers and scalars
    kept, anything else as its text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)
