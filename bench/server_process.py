"""A real ``streamshield serve`` process for the crash and soak harnesses.

The harnesses need what a test's in-process server cannot give: a process to SIGKILL
(the whole of it: Python driver and JVM), its own environment (the crash point), and
resource figures of its own (RSS, open files, threads). Everything here is bounded in
time; whoever starts a process stops it (:meth:`ServerProcess.kill`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from streamshield.catalog.security import SecurityCatalog

PASSWORD = "correct horse battery staple"
REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def prepare_root(
    root: Path, catalog: str | None, roles: list[str], users: dict[str, list[str]]
) -> None:
    """A fresh root's catalog: the roles, the first user (owner of SYSTEM) and the others,
    made directly in the catalog as ``streamshield admin init`` and ``user create`` do."""
    root.mkdir(parents=True, exist_ok=True)
    security = SecurityCatalog(catalog or root / "catalog.db")
    try:
        security.catalog.set_roles(roles, [])
        (first, first_roles), *others = users.items()
        security.create_user(first, PASSWORD, first_roles)
        admin = security.login(first, PASSWORD, first_roles)
        for name, held in others:
            security.create_user(name, PASSWORD, held, by=admin)
    finally:
        security.engine.dispose()


@dataclass
class Started:
    ready_seconds: float
    """From the process start to ``/readyz`` 200."""


class ServerProcess:
    """``streamshield serve`` on ``root`` in a process group of its own (``--no-example``
    unless ``example``: the hospital example, whose passwords land in
    ``root/example-credentials.json``)."""

    def __init__(
        self,
        root: Path,
        catalog: str | None = None,
        crash_at: str | None = None,
        log: Path | None = None,
        port: int | None = None,
        options: list[str] | None = None,
        example: bool = False,
    ) -> None:
        """``options``: more ``streamshield serve`` options (say, a bound)."""
        self.root, self.port = root, port or free_port()
        command = [sys.executable, "-m", "streamshield.cli", "serve", "--root", str(root)]
        command += ["--port", str(self.port), *([] if example else ["--no-example"])]
        command += options or []
        if catalog:
            command += ["--catalog-url", catalog]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO / "src"), str(REPO), *filter(None, [env.get("PYTHONPATH")])]
        )
        env.pop("STREAMSHIELD_CRASH_AT", None)
        if crash_at:
            env["STREAMSHIELD_CRASH_AT"] = crash_at
        self.log = log or root.parent / f"{root.name}-server.log"
        self._out = open(self.log, "a")  # noqa: SIM115  (closed by kill/stop)
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            command, stdout=self._out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def client(self, token: str | None = None, timeout: float = 60) -> httpx.Client:
        cert = self.root / "tls" / "server-cert.pem"
        context = ssl.create_default_context(cafile=str(cert))
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, verify=context, headers=headers, timeout=timeout)

    def wait_ready(self, timeout: float = 240) -> Started:
        """Waits (bounded) for ``/readyz`` 200; RuntimeError with the log's tail when the
        process ends or the time is up first."""
        deadline = time.monotonic() + timeout
        cert = self.root / "tls" / "server-cert.pem"
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"the server exited ({self.process.returncode}):\n{self.tail()}")
            if cert.exists():
                try:
                    with self.client(timeout=5) as http:
                        if http.get("/readyz").status_code == 200:
                            return Started(time.monotonic() - self.started)
                except (httpx.TransportError, ssl.SSLError):
                    pass
            time.sleep(0.2)
        raise RuntimeError(f"the server was not ready within {timeout:.0f} s:\n{self.tail()}")

    def login(self, user: str, roles: list[str]) -> httpx.Client:
        with self.client() as anonymous:
            answer = anonymous.post(
                "/login", json={"user": user, "password": PASSWORD, "roles": roles}
            )
        answer.raise_for_status()
        return self.client(answer.json()["token"])

    def kill(self) -> None:
        """SIGKILL to the whole process group (the Python driver and its JVM)."""
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.reap()

    def wait_exit(self, timeout: float) -> bool:
        """True when the process ended (say, by its own crash point) within ``timeout``."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def reap(self) -> None:
        """After the server's own SIGKILL: the JVM it leaves is killed too (same group)."""
        self.process.wait(60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self._out.close()

    def stop(self, timeout: float = 90) -> int:
        """SIGTERM, a clean stop; SIGKILL after ``timeout``."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            if not self.wait_exit(timeout):
                self.kill()
        self.reap()
        return self.process.returncode

    def tail(self, chars: int = 3000) -> str:
        self._out.flush()
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "".join(line + "\n" for line in text.splitlines() if not line.startswith("\tat "))[
            -chars:
        ]
