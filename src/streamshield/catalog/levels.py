"""Chinese-Wall levels in the catalog: classes, stream and channel levels, clearances,
the level a session activates (paper 2, sections 3-4).

A mixin of :class:`~streamshield.catalog.security.SecurityCatalog`, like
:class:`~streamshield.catalog.administration.Administration`: it uses the catalog's
transactions, sessions, ACL state and audit. The meaning of levels (dominance, text
forms, encoding) is the pure :mod:`streamshield.policy.lattice`; this module stores
definitions and decides who may change them.

Who may do what (``docs/chinese-wall.md``):

* Defining COI classes, adding companies, defining CI classes, setting stream and
  channel levels and users' clearances: CHANGE SYSTEM on SYSTEM, checked before any
  lookup (a non-administrator learns nothing about which streams or users exist).
* Reading the classes: every logged-in user (company names are what levels are
  written with; they are definitions, not data).
* Reading a stream's level: administrators and whoever may see the stream; its
  channels' levels (which name providers): administrators only.
* Reading a clearance: oneself, and administrators for anyone.
* Activating a level in one's session: every user, for a level dominated by her
  clearance; anything above it is refused (:class:`AboveClearance`) and audited.

Classes and companies are never removed or renamed and keep their positions: a
class's position is a component of every level, a company's a bit of every stored
label (as with roles). The label width (``level_capacity`` companies, a multiple of 64)
is fixed when the first class is defined.

Defaults (:mod:`streamshield.policy.level_assignment`): a stream without a level is
*public* (the wall restricts the streams put behind it); a user without a clearance
and a session without an activated level are at *public* (deny by default). Lowering
a clearance lowers, in the same transaction, every session of the user whose active
level it no longer dominates to *public*; reading a session's level checks it against
the clearance again anyway.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, delete, func, insert, select, update

from streamshield.catalog import audit
from streamshield.catalog import oxrbac as ox
from streamshield.catalog import tables as t
from streamshield.catalog.administration import AdminError
from streamshield.catalog.audit import Event, Outcome
from streamshield.catalog.database import upsert
from streamshield.catalog.errors import NotFound, SecurityError
from streamshield.catalog.guarded import not_admin
from streamshield.catalog.identifiers import token_hash as _token_hash
from streamshield.catalog.oxrbac import SYSTEM, Kind, ObjectRef, Permission, Subject
from streamshield.policy.bitset import WORD_BITS
from streamshield.policy.coi import CoiClasses, ErrorKind, LatticeError, check_name
from streamshield.policy.lattice import Lattice, Level
from streamshield.policy.level_assignment import LevelAssignment, from_stored, to_stored

if TYPE_CHECKING:
    from streamshield.catalog.security import Session
    from streamshield.catalog.view import CatalogView

DEFAULT_LEVEL_CAPACITY = 64
MAX_LEVEL_CAPACITY = 64 * WORD_BITS  # 4096 companies: 64 label words per tuple at most
_CAPACITY_KEY = "level_capacity"


class LevelError(AdminError):
    """A level request that cannot be served; ``field`` names the input at fault."""


class InvalidLevel(LevelError):
    """Malformed or meaningless input: bad level text, unknown company, a CI class with
    two companies of one COI class, too few companies (422). ``kind`` is the lattice's
    error kind when the lattice refused it."""

    def __init__(self, message: str, field: str | None = None, kind: str | None = None) -> None:
        super().__init__(message, field)
        self.kind = kind


class UnknownLevelObject(LevelError):
    """No such COI class, input stream, user or channel level (404: requests name these
    in their path)."""


class LevelExists(LevelError):
    """The class or company name is taken (ignoring case) (409)."""


class LevelConflict(LevelError):
    """The request contradicts stored state: no class defined yet, capacity reached,
    a stream level that would not dominate its channels' levels (409)."""


class AboveClearance(LevelError):
    """A session level not dominated by the user's clearance (403)."""


@dataclass(frozen=True)
class CoiInfo:
    name: str
    companies: tuple[str, ...]


@dataclass(frozen=True)
class CiInfo:
    name: str
    companies: tuple[str, ...]
    level: str


@dataclass(frozen=True)
class ClassesInfo:
    coi: tuple[CoiInfo, ...]
    ci: tuple[CiInfo, ...]
    capacity: int | None  # None until the first class fixes it
    public: str | None
    trusted: str | None


@dataclass(frozen=True)
class StreamLevelInfo:
    stream: str
    level: str
    assigned: bool  # False: the default (public), no level was set
    channels: tuple[tuple[str, str], ...]  # (provider, level)


@dataclass(frozen=True)
class SessionLevelInfo:
    user: str
    clearance: str
    level: str


class Levels:
    """Chinese-Wall definitions and levels; mixed into SecurityCatalog (module doc)."""

    # provided by SecurityCatalog
    _write: Callable[[], Any]
    _read: Callable[[], Any]
    _subject: Callable[..., Subject]
    _session: Callable[..., Any]
    _acl: Callable[[Connection], ox.AclState]
    _refuse: Callable[..., SecurityError]
    clock: Callable[[], float]
    _administering: Callable[..., Any]
    session: Callable[[str], Session]
    view: CatalogView

    # -- auditing (the guarded transaction, _administering: catalog/guarded.py) -------------

    def _level_audit(
        self, db: Connection, event: Event, actor: str, obj: ObjectRef = SYSTEM, **detail: Any
    ) -> None:
        audit.record(db, self.clock(), event, Outcome.OK, actor=actor, obj=obj, detail=detail)

    # -- classes -----------------------------------------------------------------------------

    def define_coi_class(
        self,
        session: Session,
        name: str,
        companies: Sequence[str],
        capacity: int | None = None,
    ) -> CoiInfo:
        """A new COI class of two or more new companies (CHANGE SYSTEM), appended after
        the existing classes. ``capacity`` (companies, a multiple of 64) may be given with
        the first class only: it fixes the label width for good."""
        companies = list(companies)
        _checked(lambda: check_name("class", name), "name")
        for company in companies:
            _checked(functools.partial(check_name, "company", company), "companies")
        with self._administering(session, Event.DEFINE_COI_CLASS) as (db, actor):
            taken = db.scalar(
                select(t.coi_classes.c.name).where(func.lower(t.coi_classes.c.name) == name.lower())
            )
            if taken is not None:
                raise LevelExists(f"name: COI class {taken!r} already exists", "name")
            existing = _company_owners(db, companies)
            if existing:
                company, owner = existing[0]
                raise LevelExists(
                    f"companies: company {company!r} is already in COI class {owner!r}; a "
                    "company belongs to exactly one COI class",
                    "companies",
                )
            stored = _capacity(db)
            if stored is not None and capacity is not None and capacity != stored:
                raise LevelConflict(
                    f"capacity: the level capacity is fixed at {stored} companies once a "
                    "class exists",
                    "capacity",
                )
            if capacity is not None and (
                capacity <= 0 or capacity % WORD_BITS or capacity > MAX_LEVEL_CAPACITY
            ):
                raise InvalidLevel(
                    f"capacity: a positive multiple of {WORD_BITS}, at most {MAX_LEVEL_CAPACITY}",
                    "capacity",
                )
            limit = stored or capacity or DEFAULT_LEVEL_CAPACITY
            classes = _coi_rows(db)
            positions = _next_positions(db, len(companies))
            _checked(
                lambda: CoiClasses([*classes, (name, companies)]),
                "companies",
            )
            used = sum(len(members) for _, members in classes)
            if used + len(companies) > limit or (positions and positions[-1] >= limit):
                raise LevelConflict(
                    f"companies: the level capacity is {limit} companies and "
                    f"{used} are defined; labels have a fixed width once stored, so a new "
                    "storage root is needed for more",
                    "companies",
                )
            if stored is None:
                row = {"key": _CAPACITY_KEY, "value": json.dumps(limit)}
                upsert(db, t.catalog_meta, row, ["key"], {"value": row["value"]})
            position = _next(db.scalar(select(func.max(t.coi_classes.c.position))))
            db.execute(
                insert(t.coi_classes).values(name=name, position=position, created_at=self.clock())
            )
            db.execute(
                insert(t.companies),
                [
                    {"name": c, "coi_class": name, "position": p}
                    for c, p in zip(companies, positions, strict=True)
                ],
            )
            self._level_audit(
                db,
                Event.DEFINE_COI_CLASS,
                actor,
                coi_class=name,
                companies=companies,
                position=position,
            )
        return CoiInfo(name, tuple(companies))

    def add_company(self, session: Session, coi_class: str, company: str) -> CoiInfo:
        """Appends a company to a COI class (CHANGE SYSTEM). Stored levels keep their
        meaning: ``T`` of the class now also allows the new company."""
        _checked(lambda: check_name("company", company), "company")
        with self._administering(session, Event.ADD_COMPANY) as (db, actor):
            classes = dict(_coi_rows(db))
            if coi_class not in classes:
                raise UnknownLevelObject(f"no COI class {coi_class!r}", "name")
            existing = _company_owners(db, [company])
            if existing:
                raise LevelExists(
                    f"company: company {existing[0][0]!r} is already in COI class "
                    f"{existing[0][1]!r}",
                    "company",
                )
            limit = _capacity(db) or DEFAULT_LEVEL_CAPACITY
            (position,) = _next_positions(db, 1)
            if position >= limit:
                raise LevelConflict(
                    f"company: the level capacity of {limit} companies is reached", "company"
                )
            db.execute(
                insert(t.companies).values(name=company, coi_class=coi_class, position=position)
            )
            self._level_audit(
                db, Event.ADD_COMPANY, actor, coi_class=coi_class, company=company, bit=position
            )
            members = (*classes[coi_class], company)
        return CoiInfo(coi_class, members)

    def define_ci_class(self, session: Session, name: str, companies: Sequence[str]) -> CiInfo:
        """A complementing-interest class (CHANGE SYSTEM): known companies, at most one
        of each COI class (Definition 2)."""
        companies = list(companies)
        _checked(lambda: check_name("CI class", name), "name")
        with self._administering(session, Event.DEFINE_CI_CLASS) as (db, actor):
            lattice = _require_lattice(db, "companies")
            taken = db.scalar(
                select(t.ci_classes.c.name).where(func.lower(t.ci_classes.c.name) == name.lower())
            )
            if taken is not None:
                raise LevelExists(f"name: CI class {taken!r} already exists", "name")
            ci = _checked(lambda: lattice.classes.ci_class(name, companies), "companies")
            members = tuple(dict.fromkeys(companies))
            db.execute(insert(t.ci_classes).values(name=name, created_at=self.clock()))
            db.execute(insert(t.ci_members), [{"ci_class": name, "company": c} for c in members])
            level = lattice.format(lattice.ci_level(ci))
            self._level_audit(
                db, Event.DEFINE_CI_CLASS, actor, ci_class=name, companies=list(members)
            )
        return CiInfo(name, members, level)

    def classes_info(self, session: Session) -> ClassesInfo:
        """The COI and CI classes (any live session)."""
        with self._read() as db:
            self._subject(db, session)
            return _classes_info(db)

    # -- streams and channels ------------------------------------------------------------

    def set_stream_level(self, session: Session, stream: str, text: str) -> StreamLevelInfo:
        """Sets an input stream's level (CHANGE SYSTEM); its channels' levels must stay
        dominated by it."""
        with self._administering(session, Event.SET_STREAM_LEVEL) as (db, actor):
            lattice = _require_lattice(db, "level")
            level = _parse(lattice, text, "level")
            _require_input_stream(db, stream)
            for provider, channel in _channel_levels(db, lattice, stream):
                if not lattice.dominated(channel, level):
                    raise LevelConflict(
                        f"level: the channel of provider {provider!r} is at "
                        f"{lattice.format(channel)}, which {lattice.format(level)} does not "
                        "dominate; lower or remove that channel's level first",
                        "level",
                    )
            stored = _stored(lattice, level)
            row = {"stream": stream, "level": stored}
            upsert(db, t.stream_levels, row, ["stream"], {"level": stored})
            self._level_audit(
                db,
                Event.SET_STREAM_LEVEL,
                actor,
                ObjectRef(Kind.STREAM, stream),
                level=lattice.format(level, ascii=True),
            )
            return _stream_info(db, lattice, stream)

    def write_at(self, stream: str, lattice: Lattice, level: Level) -> None:
        """A query's output stream is at the query's level (restricted star property:
        a query writes only at its level). Set by the system when a delegating query
        creates its derived stream, before any of its tuples lands; audited."""
        with self._write() as db:
            _require_input_stream(db, stream)
            stored = _stored(lattice, level)
            upsert(
                db,
                t.stream_levels,
                {"stream": stream, "level": stored},
                ["stream"],
                {"level": stored},
            )
            self._level_audit(
                db,
                Event.SET_STREAM_LEVEL,
                "system",
                ObjectRef(Kind.STREAM, stream),
                level=lattice.format(level, ascii=True),
                reason="a query writes at its level",
            )

    def set_channel_level(
        self, session: Session, stream: str, provider: str, text: str
    ) -> StreamLevelInfo:
        """Sets the level of ``provider``'s tuples on ``stream`` (CHANGE SYSTEM): it must
        be dominated by the stream's level (a tuple never outranks its stream)."""
        with self._administering(session, Event.SET_CHANNEL_LEVEL) as (db, actor):
            lattice = _require_lattice(db, "level")
            level = _parse(lattice, text, "level")
            _require_input_stream(db, stream)
            if not _provider_known(db, provider):
                raise UnknownLevelObject(
                    f"provider: {provider!r} is no user's channel (a provider is a user name "
                    "or <user>.<name>)",
                    "provider",
                )
            bound = _stream_level(db, lattice, stream)
            if not lattice.dominated(level, bound):
                raise InvalidLevel(
                    f"level: {lattice.format(level)} is not dominated by the level of stream "
                    f"{stream!r}, {lattice.format(bound)}",
                    "level",
                )
            stored = _stored(lattice, level)
            upsert(
                db,
                t.channel_levels,
                {"stream": stream, "provider": provider, "level": stored},
                ["stream", "provider"],
                {"level": stored},
            )
            self._level_audit(
                db,
                Event.SET_CHANNEL_LEVEL,
                actor,
                ObjectRef(Kind.STREAM, stream),
                provider=provider,
                level=lattice.format(level, ascii=True),
            )
            return _stream_info(db, lattice, stream)

    def remove_channel_level(self, session: Session, stream: str, provider: str) -> StreamLevelInfo:
        """The channel sends at its stream's level again (CHANGE SYSTEM)."""
        with self._administering(session, Event.REMOVE_CHANNEL_LEVEL) as (db, actor):
            lattice = _require_lattice(db, "provider")
            _require_input_stream(db, stream)
            c = t.channel_levels.c
            gone = db.execute(
                delete(t.channel_levels).where(c.stream == stream, c.provider == provider)
            )
            if not gone.rowcount:
                raise UnknownLevelObject(
                    f"provider: the channel of {provider!r} on {stream!r} has no level of its own",
                    "provider",
                )
            self._level_audit(
                db,
                Event.REMOVE_CHANNEL_LEVEL,
                actor,
                ObjectRef(Kind.STREAM, stream),
                provider=provider,
            )
            return _stream_info(db, lattice, stream)

    def stream_level_info(self, session: Session, stream: str) -> StreamLevelInfo:
        """A stream's level (administrators, or who may see it) and its channels' levels
        (administrators only)."""
        with self._read() as db:
            subject = self._subject(db, session)
            state = self._acl(db)
            ref = ObjectRef(Kind.STREAM, stream)
            admin = ox.holds(state, subject, Permission.CHANGE_SYSTEM, SYSTEM)
            visible = ref in state.objects and ox.can_see(state, subject, ref)
            known = db.scalar(select(t.streams.c.name).where(t.streams.c.name == stream))
            if not (admin or visible) or known is None:
                raise NotFound(Permission.VIEW_OBJECT, ref)
            lattice = _require_lattice(db, "stream")
            info = _stream_info(db, lattice, stream)
        # channels name providers (users): only administrators learn who sends at what
        return info if admin else replace(info, channels=())

    # -- clearances and session levels -----------------------------------------------------

    def set_clearance(self, session: Session, user: str, text: str) -> tuple[str, int]:
        """Sets a user's clearance (CHANGE SYSTEM). Returns it and how many of her
        sessions were lowered to public because it no longer dominates their level."""
        with self._administering(session, Event.SET_CLEARANCE) as (db, actor):
            lattice = _require_lattice(db, "level")
            clearance = _parse(lattice, text, "level")
            if db.scalar(select(t.users.c.name).where(t.users.c.name == user)) is None:
                raise UnknownLevelObject(f"no user {user!r}", "name")
            stored = _stored(lattice, clearance)
            row = {"user_name": user, "level": stored}
            upsert(db, t.clearances, row, ["user_name"], {"level": stored})
            lowered = 0
            rows = db.execute(
                select(t.sessions.c.token_hash, t.sessions.c.level).where(
                    t.sessions.c.user_name == user, t.sessions.c.level.is_not(None)
                )
            ).all()
            for token_hash, level in rows:
                if not _dominated_or_damaged(lattice, level, clearance):
                    db.execute(
                        update(t.sessions)
                        .where(t.sessions.c.token_hash == token_hash)
                        .values(level=None)
                    )
                    lowered += 1
            self._level_audit(
                db,
                Event.SET_CLEARANCE,
                actor,
                user=user,
                clearance=lattice.format(clearance, ascii=True),
                sessions_lowered=lowered,
            )
        return lattice.format(clearance), lowered

    def clearance_of(self, session: Session, user: str) -> str:
        """A user's clearance: oneself, or anyone for an administrator."""
        with self._read() as db:
            subject = self._subject(db, session)
            if subject.user != user:
                denial = ox.require(self._acl(db), subject, Permission.CHANGE_SYSTEM, SYSTEM)
                if denial is not None:
                    raise self._refuse(subject.user, Event.DENIED, not_admin())
                if db.scalar(select(t.users.c.name).where(t.users.c.name == user)) is None:
                    raise UnknownLevelObject(f"no user {user!r}", "name")
            lattice = _require_lattice(db, "name")
            return lattice.format(_clearance(db, lattice, user))

    def activate_level(self, session: Session, text: str) -> SessionLevelInfo:
        """The session runs at ``text`` from now on, if the clearance dominates it."""
        with self._write() as db:
            live = self._session(db, session.token)
            lattice = _require_lattice(db, "level")
            level = _parse(lattice, text, "level")
            clearance = _clearance(db, lattice, live.user)
            refused = not lattice.dominated(level, clearance)
            if not refused:
                stored = _stored(lattice, level)
                db.execute(
                    update(t.sessions)
                    .where(t.sessions.c.token_hash == _token_hash(session.token))
                    .values(level=stored)
                )
                self._level_audit(
                    db, Event.ACTIVATE_LEVEL, live.user, level=lattice.format(level, ascii=True)
                )
        if refused:
            error = AboveClearance(
                f"level: {lattice.format(level)} is not dominated by your clearance "
                f"{lattice.format(clearance)}",
                "level",
            )
            audit_detail = {"request": Event.ACTIVATE_LEVEL.value, "reason": "above clearance"}
            with self._write() as db:
                audit.record(
                    db,
                    self.clock(),
                    Event.DENIED,
                    Outcome.DENIED,
                    actor=live.user,
                    detail={**audit_detail, "level": lattice.format(level, ascii=True)},
                )
            raise error
        return SessionLevelInfo(live.user, lattice.format(clearance), lattice.format(level))

    def session_level_info(self, session: Session) -> SessionLevelInfo:
        """The caller's clearance and active level."""
        with self._read() as db:
            live = self._session(db, session.token)
            lattice = _require_lattice(db, "level")
            level = _session_level(db, lattice, session.token, live.user)
            clearance = _clearance(db, lattice, live.user)
            return SessionLevelInfo(live.user, lattice.format(clearance), lattice.format(level))

    # -- for the engine (secure ingest, level-aware queries) --------------------------------

    def lattice(self) -> Lattice | None:
        """The lattice of the defined classes; None while no COI class is defined (then
        levels are off: nothing is labelled and no query is restricted by level)."""

        def read() -> Lattice | None:
            with self._read() as db:
                return _lattice(db)

        return self.view.lookup(("lattice",), read)

    def level_assignment(self) -> LevelAssignment | None:
        """Stream and channel levels in one snapshot (None while no class is defined);
        kept by the view until the version moves."""
        return self.view.lookup(("assignment",), self._level_assignment)

    def _level_assignment(self) -> LevelAssignment | None:
        with self._read() as db:
            lattice = _lattice(db)
            if lattice is None:
                return None
            streams = {
                s: from_stored(lattice, json.loads(v))
                for s, v in db.execute(select(t.stream_levels.c.stream, t.stream_levels.c.level))
            }
            c = t.channel_levels.c
            channels = {
                (s, p): from_stored(lattice, json.loads(v))
                for s, p, v in db.execute(select(c.stream, c.provider, c.level))
            }
        return LevelAssignment(lattice, streams, channels)

    def clearance_dominates(self, user: str, level: str) -> bool:
        """Whether ``user``'s clearance now dominates ``level`` (a level's text, read in
        the lattice of now): whether a query of hers may still run at it. A level the
        lattice no longer reads, or no lattice, is not dominated (deny by default)."""

        def read() -> bool:
            with self._read() as db:
                lattice = _lattice(db)
                if lattice is None:
                    return False
                try:
                    wanted = lattice.parse(level)
                except (LatticeError, ValueError):
                    return False
                return lattice.dominated(wanted, _clearance(db, lattice, user))

        return self.view.lookup(("dominates", user, level), read)

    def stream_level(self, stream: str) -> Level | None:
        """A stream's level (public when none is set); None while levels are off."""
        assignment = self.level_assignment()
        return None if assignment is None else assignment.stream_level(stream)

    def session_level(self, session: Session | str) -> Level | None:
        """The level a session's queries run at: its activated level if the user's
        clearance still dominates it, else public. Re-reads the session (AuthError when
        it has ended). None while levels are off."""
        token = session if isinstance(session, str) else session.token
        live = self.session(token)  # expiry checked now, whatever the view keeps

        def read() -> Level | None:
            with self._read() as db:
                self._session(db, token)
                lattice = _lattice(db)
                if lattice is None:
                    return None
                return _session_level(db, lattice, token, live.user)

        return self.view.lookup(("level", _token_hash(token)), read)


# -- helpers ---------------------------------------------------------------------------------


def _stored(lattice: Lattice, level: Level) -> str:
    """The JSON text a level is stored as (see :data:`~.level_assignment.StoredLevel`)."""
    return json.dumps(to_stored(lattice, level), sort_keys=True)


def _checked(make: Callable[[], Any], field: str) -> Any:
    """``make()``, its LatticeError turned into InvalidLevel naming ``field``."""
    try:
        return make()
    except LatticeError as err:
        message = str(err)
        prefix = "" if message.startswith(f"{field}:") else f"{field}: "
        raise InvalidLevel(prefix + message, field, err.kind.value) from None


def _parse(lattice: Lattice, text: object, field: str) -> Level:
    if not isinstance(text, str):
        raise InvalidLevel(f"{field}: a level is text such as [1, B] or [_, T]", field)
    return _checked(lambda: lattice.parse(text), field)


def _capacity(db: Connection) -> int | None:
    value = db.scalar(select(t.catalog_meta.c.value).where(t.catalog_meta.c.key == _CAPACITY_KEY))
    return None if value is None else int(json.loads(value))


def _coi_rows(db: Connection) -> list[tuple[str, list[str]]]:
    """The classes in position order, each with its companies in position order."""
    classes = db.scalars(select(t.coi_classes.c.name).order_by(t.coi_classes.c.position)).all()
    members: dict[str, list[str]] = {name: [] for name in classes}
    c = t.companies.c
    for name, owner in db.execute(select(c.name, c.coi_class).order_by(c.position)):
        members[owner].append(name)
    return [(name, members[name]) for name in classes]


def _company_owners(db: Connection, companies: Iterable[str]) -> list[tuple[str, str]]:
    """(stored name, class) of existing companies equal to any of ``companies``
    ignoring case."""
    lowered = sorted({c.lower() for c in companies})
    if not lowered:
        return []
    c = t.companies.c
    rows = db.execute(
        select(c.name, c.coi_class).where(func.lower(c.name).in_(lowered)).order_by(c.position)
    )
    return [(name, owner) for name, owner in rows]


def _next_positions(db: Connection, n: int) -> list[int]:
    start = _next(db.scalar(select(func.max(t.companies.c.position))))
    return list(range(start, start + n))


def _next(highest: int | None) -> int:
    return 0 if highest is None else highest + 1


def _lattice(db: Connection) -> Lattice | None:
    classes = _coi_rows(db)
    if not classes:
        return None
    c = t.companies.c
    order = db.scalars(select(c.name).order_by(c.position)).all()
    capacity = _capacity(db) or DEFAULT_LEVEL_CAPACITY
    # positions may have gaps only if a write failed half-way, which a transaction
    # prevents; the codec's order is the position order either way
    return Lattice(CoiClasses(classes, order=order, capacity=capacity // WORD_BITS))


def _require_lattice(db: Connection, field: str) -> Lattice:
    lattice = _lattice(db)
    if lattice is None:
        raise LevelConflict(
            f"{field}: no COI class is defined yet; define one first (POST /levels/coi)", field
        )
    return lattice


def _provider_known(db: Connection, provider: str) -> bool:
    """A provider sends as its user, or as ``<user>.<name>`` (docs/wire-format.md); user
    names may hold dots, so every prefix ending before a dot is a candidate."""
    if not isinstance(provider, str) or not 0 < len(provider) <= 200:
        return False
    candidates = {provider} | {provider[:i] for i, ch in enumerate(provider) if ch == "."}
    found = db.scalar(select(t.users.c.name).where(t.users.c.name.in_(sorted(candidates))))
    return found is not None


def _require_input_stream(db: Connection, stream: str) -> None:
    if db.scalar(select(t.streams.c.name).where(t.streams.c.name == stream)) is None:
        raise UnknownLevelObject(f"no input stream {stream!r}", "stream")


def _stream_level(db: Connection, lattice: Lattice, stream: str) -> Level:
    stored = db.scalar(select(t.stream_levels.c.level).where(t.stream_levels.c.stream == stream))
    return lattice.public if stored is None else from_stored(lattice, json.loads(stored))


def _channel_levels(db: Connection, lattice: Lattice, stream: str) -> list[tuple[str, Level]]:
    c = t.channel_levels.c
    rows = db.execute(select(c.provider, c.level).where(c.stream == stream).order_by(c.provider))
    return [(provider, from_stored(lattice, json.loads(level))) for provider, level in rows]


def _stream_info(db: Connection, lattice: Lattice, stream: str) -> StreamLevelInfo:
    assigned = db.scalar(select(t.stream_levels.c.stream).where(t.stream_levels.c.stream == stream))
    return StreamLevelInfo(
        stream,
        lattice.format(_stream_level(db, lattice, stream)),
        assigned is not None,
        tuple((p, lattice.format(lv)) for p, lv in _channel_levels(db, lattice, stream)),
    )


def _clearance(db: Connection, lattice: Lattice, user: str) -> Level:
    stored = db.scalar(select(t.clearances.c.level).where(t.clearances.c.user_name == user))
    return lattice.public if stored is None else from_stored(lattice, json.loads(stored))


def _dominated_or_damaged(lattice: Lattice, stored: str, bound: Level) -> bool:
    try:
        return lattice.dominated(from_stored(lattice, json.loads(stored)), bound)
    except (LatticeError, ValueError):
        return False  # unreadable: treat as not dominated (lowered to public)


def _session_level(db: Connection, lattice: Lattice, token: str, user: str) -> Level:
    stored = db.scalar(
        select(t.sessions.c.level).where(t.sessions.c.token_hash == _token_hash(token))
    )
    if stored is None:
        return lattice.public
    clearance = _clearance(db, lattice, user)
    if not _dominated_or_damaged(lattice, stored, clearance):
        return lattice.public  # deny by default: never above the current clearance
    return from_stored(lattice, json.loads(stored))


def _classes_info(db: Connection) -> ClassesInfo:
    classes = _coi_rows(db)
    lattice = _lattice(db)
    cis: list[CiInfo] = []
    m = t.ci_members.c
    members: dict[str, list[str]] = {}
    positions = {
        name: pos for name, pos in db.execute(select(t.companies.c.name, t.companies.c.position))
    }
    for ci, company in db.execute(select(m.ci_class, m.company)):
        members.setdefault(ci, []).append(company)
    for name in db.scalars(select(t.ci_classes.c.name).order_by(t.ci_classes.c.name)):
        companies = tuple(sorted(members.get(name, []), key=lambda c: positions.get(c, 0)))
        level = "" if lattice is None else lattice.format(lattice.level_of(companies))
        cis.append(CiInfo(name, companies, level))
    return ClassesInfo(
        tuple(CoiInfo(n, tuple(cs)) for n, cs in classes),
        tuple(cis),
        _capacity(db),
        None if lattice is None else lattice.format(lattice.public),
        None if lattice is None else lattice.format(lattice.trusted),
    )


__all__ = [
    "AboveClearance",
    "CiInfo",
    "ClassesInfo",
    "CoiInfo",
    "ErrorKind",
    "InvalidLevel",
    "LevelConflict",
    "LevelError",
    "LevelExists",
    "Levels",
    "SessionLevelInfo",
    "StreamLevelInfo",
    "UnknownLevelObject",
]
