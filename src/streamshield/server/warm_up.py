"""``streamshield warm-up``: the JVM class archive written once per install, ahead of use.

Without an archive the JVM loads and verifies Spark's classes one by one: a first start
on a new install took 46-65 s to ``/readyz`` on 2 cores, and its first stop another
40-50 s while the JVM wrote the archive at its exit. ``make run`` calls this first, so
that the server's own first start maps an archive and its stops are quick. The archive
is written by the server itself, not by a synthetic workload: the hospital example is
served on a throw-away root (its own SQLite catalog and a free loopback port, whatever
the configuration says) until its queries have run a batch, then stopped cleanly, so
the archive holds every class a served start, the example's queries and ingest load.
An install that has its archive returns at once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

WARM_UP_BOUND = 300.0
"""Seconds the example may take to become ready and run its first batch; past this the
server is stopped anyway (an archive of what was loaded so far is still written)."""


def archive_needed() -> bool:
    """Whether this install (pyspark, its jars, the JVM) has no class archive yet."""
    from streamshield.engine.session import cache_directory, class_cache

    _option, pending = class_cache(cache_directory())
    return pending is not None


def warm_up(echo: Callable[[str], None] = print) -> int:
    """Writes the class archive when there is none (exit code, 0 when it is in place)."""
    if not archive_needed():
        echo("JVM class archive in place: nothing to warm up")
        return 0
    from streamshield.engine.session import cache_directory, class_cache
    from streamshield.server.main import run_server
    from streamshield.server.settings import load

    echo("writing the JVM class archive, once per install (half a minute to two minutes)…")
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streamshield-warm-up-") as scratch:
        root = Path(scratch) / "root"
        given = {
            "root": root,
            "host": "127.0.0.1",
            "port": _free_port(),
            "catalog_url": f"sqlite:///{root / 'catalog.db'}",  # never the configured one
            "example": True,
            "jvm_class_cache": True,
            "log_level": "error",  # its example's warnings are no one's concern
        }
        settings = load(given).model_copy(update={"tls_cert": None, "tls_key": None})
        watcher = threading.Thread(
            target=_stop_after_first_batch, args=(settings,), name="warm-up", daemon=True
        )
        watcher.start()
        code = run_server(settings, lambda _line: None)
    if code != 0:
        echo(f"the warm-up server exited with {code}: the first start will write the archive")
        return code
    _option, pending = class_cache(cache_directory())
    if pending is not None:
        echo("the JVM wrote no class archive: the first start will write it")
        return 1
    echo(f"JVM class archive written in {time.monotonic() - began:.0f} s")
    return 0


def _stop_after_first_batch(settings) -> None:
    """SIGTERM to this process (the server's own clean stop) once the example's queries
    have each run a batch, or at :data:`WARM_UP_BOUND`."""
    deadline = time.monotonic() + WARM_UP_BOUND
    try:
        while time.monotonic() < deadline and not _batch_run(settings):
            time.sleep(1.0)
    finally:
        os.kill(os.getpid(), signal.SIGTERM)


def _batch_run(settings) -> bool:
    """Whether the example is ready and every one of its queries has run a batch."""
    from streamshield.server.hospital import CREDENTIALS

    cert, credentials = settings.root / "tls" / "server-cert.pem", settings.root / CREDENTIALS
    if not (cert.exists() and credentials.exists()):
        return False
    url = f"https://{settings.host}:{settings.port}"
    context = ssl.create_default_context(cafile=str(cert))
    try:
        with httpx.Client(base_url=url, verify=context, timeout=10) as http:
            if http.get("/readyz").status_code != 200:
                return False
            password = json.loads(credentials.read_text())["admin"]
            login = {"user": "admin", "password": password, "roles": ["ADMIN"]}
            token = http.post("/login", json=login).json()["token"]
            answer = http.get("/queries", headers={"Authorization": f"Bearer {token}"})
            queries = answer.json()["queries"]
    except (httpx.HTTPError, ssl.SSLError, KeyError, ValueError):
        return False
    return bool(queries) and all(q.get("last_batch") is not None for q in queries)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
