"""``streamshield serve`` end to end: a subprocess on a temporary root and a free port;
ready on /readyz, log in with the credentials it printed the path of, subscribe,
receive a row; SIGTERM stops it cleanly (exit 0, no stack trace) and a restart on the
same root resumes every query from its checkpoint; a SIGTERM to its whole process group
(``timeout``, systemd's default, which Spark's JVM gets too) stops that one with one
warning line and no stack trace; SIGINT stops the PostgreSQL-catalog one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from bench.restart_profile import steps

from streamshield.client import parse_sse
from tests.db.conftest import pg_url  # noqa: F401  (the session's PostgreSQL)
from tests.server.conftest import poll

pytestmark = pytest.mark.spark
STOP_BOUND = 90  # seconds a signalled server may take to exit (JVM class archive included)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Serve:
    """One ``streamshield serve`` process and what it printed."""

    def __init__(self, root: Path, *options: str, group: bool = False) -> None:
        """``group``: a process group of its own (with the JVM), for :meth:`stop_group`."""
        self.root, self.port = root, _free_port()
        command = [sys.executable, "-m", "streamshield.cli", "serve", "--root", str(root)]
        command += ["--port", str(self.port), "--round-seconds", "1", *options]
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=group,
        )
        self.output: list[str] = []
        reader = threading.Thread(
            target=lambda: self.output.extend(self.process.stdout), daemon=True
        )
        reader.start()

    def http(self) -> httpx.Client:
        cert = self.root / "tls" / "server-cert.pem"
        poll(lambda: cert.exists() or self.process.poll() is not None, timeout=240)
        context = ssl.create_default_context(cafile=str(cert))
        return httpx.Client(base_url=f"https://127.0.0.1:{self.port}", verify=context, timeout=60)

    def ready(self, http: httpx.Client) -> float:
        """Seconds from process start to /readyz 200 (no token needed)."""

        def answer() -> bool:
            assert self.process.poll() is None, self.text()
            try:
                return http.get("/readyz").status_code == 200
            except httpx.TransportError:  # not listening yet
                return False

        poll(answer, timeout=240)
        return time.monotonic() - self.started

    def stop(self, sig: signal.Signals, group: bool = False) -> int:
        """``group``: the signal goes to the whole process group, the JVM included."""
        if group and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
        else:
            self.process.send_signal(sig)
        try:
            return self.process.wait(STOP_BOUND)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def text(self) -> str:
        return "".join(line for line in self.output if not line.startswith("\tat "))[-3000:]


def _login(http: httpx.Client, user: str, password: str, role: str) -> dict[str, str]:
    answer = http.post("/login", json={"user": user, "password": password, "roles": [role]})
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['token']}"}


def _queries(http: httpx.Client, admin: dict[str, str]) -> dict[str, dict]:
    return {q["name"]: q for q in http.get("/queries", headers=admin).json()["queries"]}


def test_serve_end_to_end_stops_on_sigterm_and_resumes(tmp_path) -> None:
    root = tmp_path / "root"
    first = Serve(root)
    rows: list[dict] = []
    events: list[tuple[str, dict]] = []
    try:
        with first.http() as http:
            first.ready(http)
            passwords = json.loads((root / "example-credentials.json").read_text())
            secrets = ["example-credentials.json", "catalog.db", "tls/server-key.pem"]
            secrets += [s for s in ("catalog.db-wal", "catalog.db-shm") if (root / s).exists()]
            modes = {name: (root / name).stat().st_mode & 0o777 for name in secrets}
            assert modes == dict.fromkeys(secrets, 0o600), modes
            assert (root / "tls").stat().st_mode & 0o777 == 0o700
            nina = _login(http, "nina", passwords["nina"], "ND")

            def subscribe() -> None:
                with http.stream(
                    "GET",
                    "/queries/heart_nina_out/subscribe",
                    headers=nina,
                    timeout=httpx.Timeout(30, read=None),
                ) as response:
                    for event, data in parse_sse(response.iter_lines()):
                        events.append((event, data))
                        if event == "rows":
                            rows.extend(data["rows"])

            listener = threading.Thread(target=subscribe, daemon=True)
            listener.start()
            poll(lambda: rows, timeout=240)
            admin = _login(http, "admin", passwords["admin"], "ADMIN")
            before = poll(lambda: _queries(http, admin)["heart_nina"]["last_batch"], timeout=120)
            code = first.stop(signal.SIGTERM)
            listener.join(30)
            # The subscriber is told, not cut off: the last event is the server's goodbye.
            assert events[-1] == ("closed", {"reason": "server stopping"}), events[-3:]
    finally:
        code = first.stop(signal.SIGTERM)
    assert code == 0, first.text()
    assert {"patient_id", "beats_per_min"} <= set(rows[0])
    assert not any(key.startswith("_ss_") for key in rows[0])
    everything = "".join(first.output)  # the whole of stdout and stderr, not the tail
    assert "Traceback" not in everything and "CancelledError" not in everything, first.text()
    assert "[cds]" not in everything  # the JVM's class archive is read or written quietly
    # Where the start-up's time went, as the server prints it once ready.
    (started,) = steps(everything)
    assert {"spark start", "example", "api", "ingest", "queries"} <= set(started["steps"])
    assert started["ready_after"] >= sum(started["steps"].values()) - 0.5, started
    login = next(line for line in first.output if " client login " in line).split()[0]
    assert shutil.which(login) or Path(login).is_file(), login  # runs as printed, from here

    again = Serve(root, group=True)  # same root: the queries resume from their checkpoints
    try:
        with again.http() as http:
            again.ready(http)
            admin = _login(http, "admin", passwords["admin"], "ADMIN")
            queries = _queries(http, admin)
            assert {q["status"] for q in queries.values()} == {"running"}, queries
            resumed = poll(
                lambda: (_queries(http, admin)["heart_nina"]["last_batch"] or -1) > before,
                timeout=120,
            )
            assert resumed
    finally:  # as ``timeout`` or systemd stops it: the JVM gets the signal too
        code = again.stop(signal.SIGTERM, group=True)
    assert code == 0, again.text()
    # Exit 0 whatever the race; a traceback only from the race itself (the JVM gone under a
    # Py4J call), and then the server says so in its one warning line. py4j's own record of
    # that cut command is dropped by the server (``_jvm_gone_noise``).
    everything = "".join(again.output)
    assert "Traceback" not in everything or "Spark's JVM got the stop signal too" in everything
    assert "Exception while sending command" not in everything, again.text()


REFLECTING = """
public class Reflecting {
    public static void main(String[] args) throws Exception {
        java.lang.reflect.Method m = Reflecting.class.getMethod("hashCode");
        for (int i = 0; i < 20; i++) m.invoke(new Reflecting());
    }
}
"""


def test_writing_the_jvm_class_archive_prints_no_cds_warnings(tmp_path) -> None:
    """The JVM warns once per class it cannot archive (the reflection accessors Spark
    generates by the thousand, class version 49): the option ``class_cache`` gives keeps
    those quiet. Checked against the real JVM with accessors generated at once."""
    from streamshield.engine.session import class_cache

    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH")
    source = tmp_path / "Reflecting.java"
    source.write_text(REFLECTING)

    def run(*options: str) -> str:
        command = [java, "-Dsun.reflect.inflationThreshold=0", *options, str(source)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if done.returncode != 0 and "jdk.compiler" in done.stderr:
            pytest.skip("this JVM runs no source files (no jdk.compiler)")
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    loud = run(f"-XX:ArchiveClassesAtExit={tmp_path / 'loud.jsa'}")
    assert "[warning][cds]" in loud  # what every stop printed a thousand times
    option, pending = class_cache(tmp_path / "cache")
    assert pending is not None
    assert "[cds]" not in run(*option.split())
    assert pending.stat().st_size > 0  # quiet, and the archive is still written


def test_serve_on_a_postgresql_catalog(tmp_path, pg_url) -> None:  # noqa: F811
    """``--catalog-url``: users, grants and queries live in PostgreSQL, not under root."""
    from sqlalchemy import create_engine, text

    database = f"serve_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{database}"'))
    url = pg_url.rsplit("/", 1)[0] + f"/{database}"
    root = tmp_path / "root"
    server = Serve(root, "--catalog-url", url)
    try:
        with server.http() as http:
            server.ready(http)
            passwords = json.loads((root / "example-credentials.json").read_text())
            headers = _login(http, "admin", passwords["admin"], "ADMIN")
            queries = _queries(http, headers)
            assert len(queries) == 5 and {q["status"] for q in queries.values()} == {"running"}
    finally:
        code = server.stop(signal.SIGINT)
    assert code == 0, server.text()
    assert not (root / "catalog.db").exists()
    users = create_engine(url)
    with users.connect() as connection:
        names = {row[0] for row in connection.execute(text("SELECT name FROM users"))}
    users.dispose()
    assert {"admin", "nina", "ward"} <= names
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE "{database}" WITH (FORCE)'))
    admin.dispose()
