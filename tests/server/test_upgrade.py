"""Upgrade: a storage root written by the previous release opens under this code and
goes on, or start-up refuses it with a message saying what to do.

The root is ``tests/fixtures/release-0.1.0.tar.gz`` (landing zone, labelled store,
shield state, checkpoints, result stores, query and schema definitions, SQLite catalog),
made by ``tests/fixtures/make_release_root.py`` from release 0.1.0 (its docstring says
how). Spark's checkpoints name files by absolute path, so the root is unpacked where it
was written; unpacked anywhere else, it is refused naming that place.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from streamshield.catalog import migrations
from streamshield.catalog.database import transaction
from streamshield.client import parse_sse
from streamshield.engine.store.root_location import RootMoved
from tests.fixtures.make_release_root import BUILD_ROOT
from tests.server.conftest import ok, serve_root, stop_server, tuple_line

pytestmark = pytest.mark.spark
ARCHIVE = Path(__file__).resolve().parents[1] / "fixtures" / "release-0.1.0.tar.gz"


def _unpack(into: Path) -> Path:
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(into, filter="data")
    return into / "root"


@pytest.fixture
def release_root() -> Iterator[Path]:
    """The release's root at the path it was written at (one test run at a time)."""
    BUILD_ROOT.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{BUILD_ROOT.parent}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(BUILD_ROOT, ignore_errors=True)
        assert _unpack(BUILD_ROOT.parent) == BUILD_ROOT
        try:
            yield BUILD_ROOT
        finally:
            shutil.rmtree(BUILD_ROOT, ignore_errors=True)


def _subscribed(client: httpx.Client, name: str, wanted: int, then) -> list[int]:
    """Every ``id`` the output gives from its first batch on, until ``wanted`` came;
    ``then()`` runs once the stored batches are replayed (the subscription is live)."""
    ids: list[int] = []
    timeout = httpx.Timeout(30, read=120)
    path = f"/queries/{name}/subscribe"
    with client.stream("GET", path, params={"after": -1}, timeout=timeout) as answer:
        assert answer.status_code == 200, answer.read()
        for event, data in parse_sse(answer.iter_lines()):
            assert event in ("rows", "replayed"), (event, data)
            if event == "replayed":
                then()
            else:
                ids += [row["id"] for row in data["rows"]]
            if len(ids) >= wanted:
                break
    return ids


def test_a_release_root_opens_and_goes_on(spark, release_root) -> None:
    manifest = json.loads((release_root / "manifest.json").read_text())
    server = serve_root(release_root, spark)
    try:
        with transaction(server.service.security.engine) as db:
            assert migrations.current(db) == migrations.HEAD
        for name, query in manifest["queries"].items():
            live = server.service.queries.get(name)
            assert live.running and live.internal == query["internal"]  # its own checkpoint
        ed = server.login("ed", ["INFO_PROVIDER"])
        first = manifest["tuples"] + 2  # seq 1 was the sp, tuples 2..tuples+1
        lines = [
            tuple_line(
                "ticks", "ed", seq, 1000 + seq, {"id": 1000 + seq, "symbol": "N", "price": 99.0}
            )
            for seq in range(first, first + 3)
        ]

        def append() -> None:  # a selection computes only while someone receives it
            assert ok(ed.post("/streams/ticks/elements", content="\n".join(lines)))["accepted"] == 3

        al = server.login("al", ["CUSTOMER1"])
        ids = _subscribed(al, "picks", manifest["picks_rows"] + 3, append)
        old = [i for i in range(1, manifest["tuples"] + 1) if i > 10]
        assert sorted(ids) == old + [1000 + s for s in range(first, first + 3)]  # each once
    finally:
        stop_server(server)


def test_a_moved_release_root_is_refused_naming_where_it_belongs(spark, tmp_path) -> None:
    moved = _unpack(tmp_path)
    with pytest.raises(RootMoved) as refused:
        serve_root(moved, spark)
    assert str(BUILD_ROOT) in str(refused.value)
    command = [sys.executable, "-m", "streamshield.cli", "serve", "--root", str(moved)]
    done = subprocess.run(
        [*command, "--no-example", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"Serve it from {BUILD_ROOT}" in done.stdout
