"""A right taken away by another process reaches the real server's subscribers.

The server keeps rights in a versioned view of the catalog (``catalog/view.py``); a
change made elsewhere moves the catalog version through database triggers, and the
server's watch notices it within its poll period. Here another OS process takes the
right: first a plain sqlite3/psycopg connection deleting the grant by hand, then a
second SecurityCatalog (what a second server process is) revoking it through the
catalog's own code. Each subscriber it concerns gets ``closed`` within a second and no
row after; Al, the query's owner, keeps receiving. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from sqlalchemy import create_engine, event, text

from streamshield.catalog.security import SecurityCatalog
from tests.db.conftest import pg_url  # noqa: F401  (the session's PostgreSQL)
from tests.server.conftest import (
    PASSWORD,
    ROLES,
    Server,
    Subscriber,
    grant,
    ok,
    poll,
    serve_root,
    stop_server,
    tuple_line,
)

pytestmark = pytest.mark.spark

version_revision = importlib.import_module(
    "streamshield.catalog.migrations.versions.0004_catalog_version"
)

USERS = {
    "joe": ["ADMIN"],
    "ward": ["INFO_PROVIDER"],
    "al": ["CUSTOMER1"],
    "bob": ["CUSTOMER2"],
    "mallory": ["OTHER"],
}
SCHEMA = {"name": "v", "attributes": [["id", "bigint"], ["hr", "bigint"]], "tid": "id"}
SELECTION = "SELECT id, hr FROM vitals"

RAW_DELETE = """
import sys, time
url, schema = sys.argv[1], sys.argv[2]
statement = (
    "DELETE FROM grants WHERE permission = 'SUBSCRIBE' AND obj_name = 'mine_out' "
    "AND grantee = 'CUSTOMER2'"
)
if url.startswith("sqlite"):
    import sqlite3
    db = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=30)
    assert db.execute(statement).rowcount == 1
    db.close()
else:
    import psycopg
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as db:
        db.execute(f'SET search_path TO "{schema}"')
        assert db.execute(statement).rowcount == 1
print(time.time())
"""

SECOND_CATALOG = """
import sys, time
from sqlalchemy import create_engine
from streamshield.catalog.oxrbac import Grantee, Kind, ObjectRef, Permission
from streamshield.catalog.security import SecurityCatalog
url, schema, password = sys.argv[1], sys.argv[2], sys.argv[3]
options = {} if url.startswith("sqlite") else {"options": f"-c search_path={schema}"}
catalog = SecurityCatalog(create_engine(url, connect_args=options))
al = catalog.login("al", password, ["CUSTOMER1"])
mine = ObjectRef(Kind.STREAM, "mine_out")
catalog.revoke(al, Permission.SUBSCRIBE, mine, Grantee.role("OTHER"))
print(time.time())
"""


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """(URL, PostgreSQL schema or ""): a catalog database the server and others share."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('remote') / 'catalog.db'}", ""
        return
    url = request.getfixturevalue("pg_url")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield url, schema
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="module")
def server(spark, backend, tmp_path_factory) -> Iterator[Server]:
    url, schema = backend
    options = {"options": f"-c search_path={schema}"} if schema else {}
    security = SecurityCatalog(create_engine(url, connect_args=options))
    security.catalog.set_roles(list(ROLES), [])
    security.create_user("joe", PASSWORD, USERS["joe"])
    admin = security.login("joe", PASSWORD, USERS["joe"])
    for name, roles in USERS.items():
        if name != "joe":
            security.create_user(name, PASSWORD, roles, by=admin)
    started = serve_root(tmp_path_factory.mktemp("served"), spark, security)
    yield started
    stop_server(started)


def _append(ward: httpx.Client, ids: range) -> None:
    lines = [tuple_line("vitals", "ward", 10 + i, i, {"id": i, "hr": 60 + i}) for i in ids]
    ok(ward.post("/streams/vitals/elements", content="\n".join(lines)))


@contextmanager
def _statements(server: Server) -> Iterator[list[str]]:
    """The SQL statements the server's catalog runs meanwhile (transaction control aside)."""
    seen: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.split()[0].upper() not in ("BEGIN", "COMMIT", "ROLLBACK"):
            seen.append(" ".join(statement.split()))

    engine = server.service.security.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _until(condition, *subscribers: Subscriber) -> None:
    """Polls; says what each subscriber got if it fails."""
    try:
        poll(condition, timeout=120)
    except AssertionError:
        got = [(s.rows(), [e for e, _ in s.events]) for s in subscribers]
        raise AssertionError(f"rows and events so far: {got}") from None


def _in_another_process(script: str, backend: tuple[str, str]) -> float:
    """Runs ``script`` in a new interpreter; the time it printed after its commit."""
    url, schema = backend
    done = subprocess.run(
        [sys.executable, "-c", script, url, schema or "-", PASSWORD],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.strip().splitlines()[-1])


def _closed_at(subscriber: Subscriber, timeout: float = 10.0) -> float:
    """When the subscriber's ``closed`` event arrived (looked at every 20 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(event == "closed" for event, _ in subscriber.events):
            return time.time()
        time.sleep(0.02)
    raise AssertionError(f"no closed event: {[e for e, _ in subscriber.events]}")


def test_a_revocation_by_another_process_closes_within_a_second(server, backend) -> None:
    joe = server.login("joe", ["ADMIN"])
    ok(joe.post("/schemas", json=SCHEMA), 201)
    ok(joe.post("/streams", json={"name": "vitals", "schema": "v"}), 201)
    for permission in ("VIEW OBJECT", "WRITE", "INJECT SP"):
        grant(joe, permission, "stream", "vitals", "INFO_PROVIDER")
    for role in ("CUSTOMER1", "CUSTOMER2", "OTHER"):  # the recipients read the source
        for permission in ("VIEW OBJECT", "READ TUPLE"):
            grant(joe, permission, "stream", "vitals", role)
        grant(joe, "VIEW CATALOG", "system", "system", role)
    grant(joe, "ADD", "system", "system", "CUSTOMER1")
    al = server.login("al", ["CUSTOMER1"])
    ok(al.post("/queries", json={"name": "mine", "text": SELECTION}), 201)
    for role in ("CUSTOMER2", "OTHER"):
        grant(al, "VIEW OBJECT", "stream", "mine_out", role)
        grant(al, "SUBSCRIBE", "stream", "mine_out", role)
    sp = {"type": "sp", "stream": "vitals", "provider": "ward", "seq": 1, "ts": 100, "sn": 1}
    sp |= {"sign": "+", "immutable": False}
    sp |= {"ddp": {"streams": "vitals", "tuples": "*", "attributes": "*"}}
    sp |= {"srp": {"roles": "{CUSTOMER1, CUSTOMER2, OTHER}", "grant_option": False}}
    ward = server.login("ward", ["INFO_PROVIDER"])
    ok(ward.post("/streams/vitals/elements", content=json.dumps(sp)))

    own = Subscriber(al, "mine")
    bob = Subscriber(server.login("bob", ["CUSTOMER2"]), "mine_out")
    mallory = Subscriber(server.login("mallory", ["OTHER"]), "mine_out")
    assert own.status == bob.status == mallory.status == 200
    _append(ward, range(1, 4))
    everyone = (own, bob, mallory)
    _until(lambda: len(bob.rows()) == len(mallory.rows()) == len(own.rows()) == 3, *everyone)

    # Steady state: a batch appended and delivered to three subscribers touches no
    # table a right is derived from (it reads the version, at most every poll period,
    # and the append reads and advances its channel's sequence number, no right).
    with _statements(server) as seen:
        _append(ward, range(4, 6))
        _until(lambda: len(bob.rows()) == len(mallory.rows()) == len(own.rows()) == 5, *everyone)
    print("statements in a steady-state batch:", seen)
    versioned = set(version_revision.VERSIONED)
    touching = [s for s in seen if versioned & set(s.replace(".", " ").split())]
    assert touching == [], touching

    # By hand, on a connection of its own: the triggers move the catalog version.
    committed = _in_another_process(RAW_DELETE, backend)
    latency = _closed_at(bob) - committed
    print(f"closed {latency:.3f} s after a hand-written DELETE")
    assert latency <= 1.0
    assert bob.events[-1] == ("closed", {"reason": "access revoked or session ended"})
    _append(ward, range(6, 8))
    _until(lambda: len(own.rows()) == 7 and len(mallory.rows()) == 7, *everyone)

    # A second catalog (another server process) revoking through the catalog's code.
    committed = _in_another_process(SECOND_CATALOG, backend)
    latency = _closed_at(mallory) - committed
    print(f"closed {latency:.3f} s after a second catalog's revoke")
    assert latency <= 1.0
    _append(ward, range(8, 10))
    _until(lambda: len(own.rows()) == 9, *everyone)
    assert sorted(r["id"] for r in bob.rows()) == [1, 2, 3, 4, 5], "no row after the revoke"
    assert sorted(r["id"] for r in mallory.rows()) == [1, 2, 3, 4, 5, 6, 7]
    for subscriber in (own, bob, mallory):
        subscriber.close()
