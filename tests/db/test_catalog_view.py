"""The catalog's versioned view on SQLite and PostgreSQL: answers are kept while the
catalog version stays put, and every change a right is derived from moves it, whoever
makes it: this catalog object (seen at once), a second one on the same database (what
another server process is) and a hand-written SQL statement (seen within the poll
period). A steady-state delivered batch reads nothing but the version.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, event, inspect, select, text

from streamshield.catalog import tables as t
from streamshield.catalog.audit import AuditFilter
from streamshield.catalog.oxrbac import Grantee, Kind, ObjectRef, Permission
from streamshield.catalog.security import AuthError, SecurityCatalog, Session
from streamshield.policy.elements import Channel
from streamshield.server import security_port as port
from tests.db.test_security_catalog import CHEAP, EDGES, ROLES, Clock, stream

version_revision = importlib.import_module(
    "streamshield.catalog.migrations.versions.0004_catalog_version"
)
S1 = ObjectRef(Kind.STREAM, "s1")
POLL = 0.2  # the view's poll period in these tests (the default)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def open_catalog(target: str | Path | Engine, clock: Clock, poll: float = POLL) -> SecurityCatalog:
    return SecurityCatalog(target, password_hasher=CHEAP, clock=clock, view_poll_seconds=poll)


@pytest.fixture
def sec(db_target: str | Path | Engine, clock: Clock) -> SecurityCatalog:
    """Joe (ADMIN) owns stream s1 and gave SUBSCRIBE and READ TUPLE on it to CUSTOMER1."""
    catalog = open_catalog(db_target, clock)
    catalog.catalog.set_roles(ROLES, EDGES)
    catalog.create_user("joe", "joe-pw", ["ADMIN"])
    joe = catalog.login("joe", "joe-pw")
    catalog.create_user("al", "al-pw", ["CUSTOMER1"], by=joe)
    catalog.add_schema(joe, "s")
    catalog.add_stream(joe, "s", stream("s1"))
    for permission in (Permission.SUBSCRIBE, Permission.READ_TUPLE):
        catalog.grant(joe, permission, S1, Grantee.role("CUSTOMER1"))
    return catalog


def joe(sec: SecurityCatalog) -> Session:
    return sec.login("joe", "joe-pw")


def second_target(sec: SecurityCatalog) -> str | Engine:
    """The same database through an engine of its own, as another process opens it."""
    engine = sec.engine
    url = engine.url.render_as_string(hide_password=False)
    if engine.dialect.name == "sqlite":
        return url
    with engine.connect() as connection:
        path = connection.execute(text("SHOW search_path")).scalar()
    return create_engine(url, connect_args={"options": f"-c search_path={path}"})


def raw_sql(sec: SecurityCatalog, statement: str, **params: object) -> None:
    """A hand-written statement on a connection of its own, committed (not through
    the catalog's transactions: nothing in this process is told about it)."""
    other = second_target(sec)
    engine = create_engine(other) if isinstance(other, str) else other
    with engine.begin() as connection:
        connection.execute(text(statement), params)
    engine.dispose()


def within(seconds: float, condition: Callable[[], bool]) -> float:
    """How long ``condition`` took to hold; fails after ``seconds``."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < seconds, f"not within {seconds} s"
        time.sleep(0.01)
    return time.monotonic() - start


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements ``engine`` runs meanwhile."""
    seen: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.split()[0].upper() not in ("BEGIN", "COMMIT", "ROLLBACK"):
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def delivered_batch(sec: SecurityCatalog, token: str) -> None:
    """What the server asks the catalog per delivered batch and subscriber: her rights
    (SecFilter), her session's roles and level (the recipient decides), and whether
    she may still subscribe."""
    live = port.session(sec, token)
    sec.readable_sources(live.user)
    port.roles_of(port.session(sec, token))
    port.recipient_level(sec, port.session(sec, token))
    assert port.can_subscribe(sec, port.session(sec, token), "s1")


def version_read(statement: str) -> bool:
    return "catalog_version" in statement and statement.lstrip().upper().startswith("SELECT")


# -- the version ---------------------------------------------------------------------------


def test_every_versioned_table_has_its_trigger(sec) -> None:
    with sec.engine.connect() as connection:
        if sec.engine.dialect.name == "sqlite":
            rows = connection.execute(
                text("SELECT tbl_name FROM sqlite_master WHERE type = 'trigger'")
            )
        else:
            rows = connection.execute(
                text(
                    "SELECT c.relname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid "
                    "WHERE NOT g.tgisinternal AND g.tgname LIKE '%\\_changed'"
                )
            )
        triggered = {row[0] for row in rows}
        tables = set(inspect(connection).get_table_names())
    assert set(version_revision.VERSIONED) <= triggered
    assert set(version_revision.VERSIONED) <= tables


@pytest.mark.parametrize(
    "change",
    [
        "grant",
        "revoke",
        "set_user_roles",
        "disable",
        "logout",
        "hierarchy",
        "add_stream",
        "define_coi_class",
    ],
)
def test_each_kind_of_change_moves_the_version(sec, change) -> None:
    admin = joe(sec)
    before = sec._version()
    if change == "grant":
        sec.grant(admin, Permission.READ_AGGREGATE, S1, Grantee.user("al"))
    elif change == "revoke":
        sec.revoke(admin, Permission.SUBSCRIBE, S1, Grantee.role("CUSTOMER1"))
    elif change == "set_user_roles":
        sec.set_user_roles(admin, "al", ["CUSTOMER2"])
    elif change == "disable":
        sec.set_disabled(admin, "al", True)
    elif change == "logout":
        sec.logout(admin.token)
    elif change == "hierarchy":
        sec.catalog.set_roles([*ROLES, "NEW"], EDGES)
    elif change == "add_stream":
        sec.add_stream(admin, "s", stream("s2"))
    else:
        sec.define_coi_class(admin, "Banks", ["A", "B"])
    assert sec._version() > before


def test_audit_sequence_numbers_rejections_and_logins_leave_the_version(sec) -> None:
    """Written on the data path (per batch, per append) or by every login: they must not
    churn it. A new session invalidates nothing: what is kept is keyed by tokens."""
    al = sec.login("al", "al-pw")
    assert sec.can_subscribe(al, "s1")
    generation, before = sec.changes, sec._version()
    other = sec.login("al", "al-pw")
    assert sec.can_subscribe(other, "s1")
    sec.record_drop("al", S1, 3, policy_ids=["p"])
    sec.catalog.advance_seq(Channel("s1", "ed"), 7)
    sec.catalog.count_rejection("s1", "late", 2)
    with pytest.raises(AuthError):
        sec.login("al", "wrong")  # a login failure only: no session
    assert sec._version() == before
    assert sec.changes == generation
    sec.logout(other.token)  # ending one does
    assert sec._version() > before
    assert sec.audit_entries(joe(sec), AuditFilter(limit=10))  # the audit was written


# -- the view follows every writer ---------------------------------------------------------


def test_a_local_revocation_is_seen_by_the_next_check(db_target, clock) -> None:
    """A change through this catalog object is seen at once, however long the poll."""
    sec = open_catalog(db_target, clock, poll=3600.0)
    sec.catalog.set_roles(ROLES, EDGES)
    sec.create_user("joe", "joe-pw", ["ADMIN"])
    admin = sec.login("joe", "joe-pw")
    sec.create_user("al", "al-pw", ["CUSTOMER1"], by=admin)
    sec.add_schema(admin, "s")
    sec.add_stream(admin, "s", stream("s1"))
    sec.grant(admin, Permission.SUBSCRIBE, S1, Grantee.role("CUSTOMER1"))
    al = sec.login("al", "al-pw")
    assert sec.can_subscribe(al, "s1") and sec.can_subscribe(al, "s1")  # kept
    sec.revoke(admin, Permission.SUBSCRIBE, S1, Grantee.role("CUSTOMER1"))
    assert not sec.can_subscribe(al, "s1")
    sec.set_user_roles(admin, "al", ["CUSTOMER2"])
    with pytest.raises(AuthError):  # her session's only role is gone
        sec.session(al.token)
    bob = sec.login("joe", "joe-pw")
    sec.logout(bob.token)
    with pytest.raises(AuthError):
        sec.session(bob.token)


def test_a_change_by_a_second_catalog_is_seen_within_the_poll(sec, clock) -> None:
    """A second SecurityCatalog on the same database with an engine of its own is what
    another server process is: its revocation reaches this one's kept answers within
    the poll period."""
    al = sec.login("al", "al-pw")
    assert sec.can_subscribe(al, "s1")
    assert sec.readable_sources("al")[0] == {"s1"}
    other = open_catalog(second_target(sec), clock)
    admin = other.login("joe", "joe-pw")
    other.revoke(admin, Permission.SUBSCRIBE, S1, Grantee.role("CUSTOMER1"))
    other.revoke(admin, Permission.READ_TUPLE, S1, Grantee.role("CUSTOMER1"))
    assert within(POLL + 0.5, lambda: not sec.can_subscribe(al, "s1")) <= POLL + 0.3
    assert sec.readable_sources("al") == (set(), set())
    other.logout(al.token)
    within(POLL + 0.5, lambda: _ended(sec, al.token))


def _ended(sec: SecurityCatalog, token: str) -> bool:
    try:
        sec.session(token)
    except AuthError:
        return True
    return False


@pytest.mark.parametrize(
    ("statement", "ends_session"),
    [
        ("DELETE FROM grants WHERE permission = 'SUBSCRIBE'", False),
        ("UPDATE grants SET grantee = 'CUSTOMER2' WHERE permission = 'SUBSCRIBE'", False),
        ("DELETE FROM user_roles WHERE user_name = 'al'", True),
        ("UPDATE user_roles SET role = 'CUSTOMER2' WHERE user_name = 'al'", True),
        ("DELETE FROM sessions WHERE user_name = 'al'", True),
        ("UPDATE sessions SET expires_at = 0 WHERE user_name = 'al'", True),
        ("UPDATE users SET disabled = TRUE WHERE name = 'al'", True),
    ],
)
def test_a_hand_written_sql_change_is_seen_within_the_poll(sec, statement, ends_session) -> None:
    al = sec.login("al", "al-pw")
    assert sec.can_subscribe(al, "s1")
    raw_sql(sec, statement)

    def refused() -> bool:
        try:
            return not sec.can_subscribe(al, "s1")
        except AuthError:
            return True

    assert within(POLL + 0.5, refused) <= POLL + 0.3
    assert _ended(sec, al.token) == ends_session


def test_expiry_ends_a_kept_session_without_any_change(sec, clock) -> None:
    al = sec.login("al", "al-pw")
    assert sec.session(al.token) == al
    assert not sec.session_expired()
    version = sec._version()
    clock.now = al.expires_at
    with pytest.raises(AuthError):
        sec.session(al.token)
    with pytest.raises(AuthError):
        sec.can_subscribe(al, "s1")
    with pytest.raises(AuthError):
        sec.session_level(al)
    assert sec._version() == version  # nothing changed: the clock alone ends it
    assert sec.session_expired()  # reported once to the watch...
    assert not sec.session_expired()
    with pytest.raises(AuthError):  # ...and still refused, read afresh
        sec.session(al.token)


def test_a_login_sweeping_an_expired_session_moves_the_version(sec, clock) -> None:
    al = sec.login("al", "al-pw")
    clock.now = al.expires_at
    before = sec._version()
    sec.login("al", "al-pw")
    assert sec._version() > before


def test_an_unreadable_version_keeps_nothing_and_denies(sec) -> None:
    """Fail closed: without the version nothing kept is trusted, every answer is read
    afresh, and an unreadable catalog refuses."""
    al = sec.login("al", "al-pw")
    assert sec.can_subscribe(al, "s1")
    broken = {"on": True}
    read_version = sec.view._read_version

    def version() -> int:
        if broken["on"]:
            raise OSError("catalog unreachable")
        return read_version()

    sec.view._read_version = version
    sec.view.written()
    with statements(sec.engine) as seen:
        assert sec.can_subscribe(al, "s1")
    assert any("grants" in s for s in seen)  # read afresh, not from the view
    raw_sql(sec, "DELETE FROM grants WHERE permission = 'SUBSCRIBE'")
    assert not sec.can_subscribe(al, "s1")  # no poll period: seen at once
    broken["on"] = False
    assert not sec.can_subscribe(al, "s1")


# -- races ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["here", "elsewhere"])
def test_a_revocation_racing_a_lookup_leaves_no_stale_allow(sec, clock, where) -> None:
    """The lookup reads the grants, then the revocation commits, then the lookup keeps
    its (old) answer: the next check must still see the revocation."""
    al = sec.login("al", "al-pw")
    sec.session(al.token)
    read_grants, revoked = threading.Event(), threading.Event()
    acl = sec._acl

    def slow_acl(db):
        state = acl(db)
        if threading.current_thread() is racing:  # the revocation's own check goes on
            read_grants.set()
            assert revoked.wait(10)
        return state

    sec._acl = slow_acl
    answers: list[bool] = []
    racing = threading.Thread(target=lambda: answers.append(sec.can_subscribe(al, "s1")))
    racing.start()
    assert read_grants.wait(10)
    revoker = sec if where == "here" else open_catalog(second_target(sec), clock)
    admin = revoker.login("joe", "joe-pw")
    revoker.revoke(admin, Permission.SUBSCRIBE, S1, Grantee.role("CUSTOMER1"))
    revoked.set()
    racing.join(10)
    sec._acl = acl
    assert answers == [True]  # decided before the revocation ended: allowed then
    if where == "here":
        assert not sec.can_subscribe(al, "s1")
    else:
        within(POLL + 0.5, lambda: not sec.can_subscribe(al, "s1"))
    deadline = time.monotonic() + POLL * 2
    while time.monotonic() < deadline:  # and it stays refused
        assert not sec.can_subscribe(al, "s1")


# -- the hot path --------------------------------------------------------------------------


def test_a_steady_state_batch_reads_nothing_but_the_version(sec) -> None:
    al = sec.login("al", "al-pw")
    delivered_batch(sec, al.token)  # the first batch reads what it needs
    sec.view.poll_seconds = 3600.0
    with statements(sec.engine) as seen:
        for _ in range(20):
            delivered_batch(sec, al.token)
    assert seen == []
    sec.view.poll_seconds = 0.0  # the poll due at every lookup: still only the version
    with statements(sec.engine) as seen:
        for _ in range(3):
            delivered_batch(sec, al.token)
    assert seen and all(version_read(s) for s in seen), seen


def test_kept_answers_are_the_callers_own(sec) -> None:
    """A caller changing what it got changes nothing for the next one."""
    raw, aggregate = sec.readable_sources("al")
    raw.add("secret")
    aggregate.clear()
    assert sec.readable_sources("al") == ({"s1"}, {"s1"})


def test_the_version_row_starts_at_zero_on_a_fresh_catalog(db_target) -> None:
    sec = SecurityCatalog(db_target, password_hasher=CHEAP)
    with sec.engine.connect() as connection:
        rows = connection.execute(select(t.catalog_version)).all()
    assert len(rows) == 1 and rows[0].id == 1 and rows[0].version >= 0
