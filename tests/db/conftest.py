"""Databases for the catalog suite: a SQLite file and a real PostgreSQL.

PostgreSQL comes from ``STREAMSHIELD_PG_URL`` when set (a database the tests may fill
with throw-away schemas); otherwise a private server is started for the test session:
Debian's ``postgresql`` package is installed if its binaries are missing, a cluster is
initialised in a temporary directory as the ``postgres`` OS user, started on
127.0.0.1 with a free port and a socket directory of its own, and stopped at the end.
The tests skip PostgreSQL (saying why) only when it cannot be had at all.

Each test gets an empty database: a fresh SQLite file, or a fresh PostgreSQL schema
(through ``search_path``) dropped afterwards.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

PG_URL_VARIABLE = "STREAMSHIELD_PG_URL"


def _pg_bindir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    found = shutil.which("initdb")
    return None if found is None else Path(found).resolve().parent


def _install_postgresql() -> str | None:
    """Installs Debian's postgresql once; returns why not when that is impossible."""
    if os.geteuid() != 0:
        return "PostgreSQL binaries are missing and installing them needs root"
    if shutil.which("apt-get") is None:
        return "PostgreSQL binaries are missing and apt-get is not available"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    quiet = {"env": env, "capture_output": True, "text": True, "check": False}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql"]
    done = subprocess.run(install, **quiet)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], **quiet)
        done = subprocess.run(install, **quiet)
    if done.returncode != 0:
        return f"apt-get install postgresql failed: {done.stderr.strip()[-300:]}"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _as_postgres(*command: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *map(str, command)],
        capture_output=True,
        text=True,
        check=False,
    )


@contextlib.contextmanager
def _private_server() -> Iterator[str]:
    started = time.monotonic()
    bindir = _pg_bindir()
    if bindir is None:
        reason = _install_postgresql()
        if reason is not None:
            pytest.skip(reason)
        bindir = _pg_bindir()
        if bindir is None:
            pytest.skip("postgresql was installed but no initdb was found")
    installed = time.monotonic()
    if shutil.which("runuser") is None:
        pytest.skip("runuser is missing: cannot run PostgreSQL as the postgres user")
    try:
        import pwd

        postgres = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("there is no postgres OS user to run the server as")
    root = Path(tempfile.mkdtemp(prefix="streamshield-pg-"))
    os.chown(root, postgres.pw_uid, postgres.pw_gid)
    data, sockets, log = root / "data", root / "sockets", root / "server.log"
    try:
        _check(_as_postgres("mkdir", sockets), "mkdir")
        init = _as_postgres(
            bindir / "initdb",
            "-D",
            data,
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        _check(init, "initdb")
        port = _free_port()
        options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        _check(
            _as_postgres(bindir / "pg_ctl", "-D", data, "-o", options, "-l", log, "-w", "start"),
            "pg_ctl start",
            log,
        )
        try:
            admin = create_engine(
                f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres",
                isolation_level="AUTOCOMMIT",
            )
            with admin.connect() as connection:
                connection.execute(text("CREATE DATABASE streamshield_test"))
            admin.dispose()
            print(
                f"\nPostgreSQL: binaries {installed - started:.1f}s, "
                f"initdb+start {time.monotonic() - installed:.1f}s"
            )
            yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/streamshield_test"
        finally:
            _as_postgres(bindir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _check(done: subprocess.CompletedProcess[str], what: str, log: Path | None = None) -> None:
    if done.returncode != 0:
        detail = done.stderr.strip()
        if log is not None and log.exists():
            detail += "\n" + log.read_text()[-1000:]
        pytest.skip(f"cannot start a private PostgreSQL: {what} failed: {detail[-600:]}")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL: ``$STREAMSHIELD_PG_URL`` or a private server for this session."""
    given = os.environ.get(PG_URL_VARIABLE)
    if given:
        yield given
        return
    with _private_server() as url:
        yield url


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    """An engine whose tables land in a fresh schema, dropped after the test."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine = create_engine(pg_url, connect_args={"options": f"-c search_path={schema}"})
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_target(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path | Engine:
    """What a catalog is opened with: a SQLite file path, or a PostgreSQL engine."""
    if request.param == "sqlite":
        return tmp_path / "catalog.db"
    return request.getfixturevalue("pg_engine")
