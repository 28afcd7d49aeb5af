"""A real server per test module: TLS on a free loopback port, the shared Spark session.

The server runs in-process (uvicorn in a thread) so that it shares the test session's
JVM; clients talk to it over HTTPS only, trusting exactly its self-signed certificate.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from streamshield.catalog.security import SecurityCatalog
from streamshield.catalog.throttle import ThrottlePolicy
from streamshield.server.app import create_app
from streamshield.server.application_query import SeparateLevels
from streamshield.server.runner import Running, serve_in_thread
from streamshield.server.service import ServerService
from streamshield.server.tls import ensure_self_signed
from tests.polling import poll
from tests.spark.conftest import spark  # noqa: F401  (the one session-scoped Spark fixture)

ROLES = {"ADMIN": "", "CUSTOMER1": "", "CUSTOMER2": "", "INFO_PROVIDER": "", "OTHER": ""}
PASSWORD = "correct horse battery staple"


@dataclass
class Server:
    url: str
    cert: Path
    service: ServerService
    running: Running

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        context = ssl.create_default_context(cafile=str(self.cert))
        return httpx.Client(base_url=self.url, verify=context, headers=headers, timeout=60)

    def login(self, user: str, roles: list[str], password: str = PASSWORD) -> httpx.Client:
        with self.client() as anonymous:
            answer = anonymous.post(
                "/login", json={"user": user, "password": password, "roles": roles}
            )
        assert answer.status_code == 200, answer.text
        return self.client(answer.json()["token"])


def start_server(
    root: Path,
    session,
    users: dict[str, list[str]],
    separate_levels: SeparateLevels | None = None,
    **security_options,
) -> Server:
    security = SecurityCatalog(root / "catalog.db", **security_options)
    security.catalog.set_roles(list(ROLES), [])
    first, *others = users.items()
    security.create_user(first[0], PASSWORD, first[1])
    admin = security.login(first[0], PASSWORD, first[1])
    for name, roles in others:
        security.create_user(name, PASSWORD, roles, by=admin)
    return serve_root(root, session, security, separate_levels)


def serve_root(
    root: Path,
    session,
    security: SecurityCatalog | None = None,
    separate_levels: SeparateLevels | None = None,
) -> Server:
    """A server on ``root`` as it is (a restart when the root was served before);
    ``separate_levels``: each level's queries in a Spark application of its own."""
    security = security or SecurityCatalog(root / "catalog.db")
    service = ServerService(session, root, security, separate_levels)
    service.start()
    tls = ensure_self_signed(root / "tls")
    running = serve_in_thread(create_app(service, queue_size=4), "127.0.0.1", 0, tls)
    return Server(running.url, tls.cert, service, running)


def stop_server(server: Server) -> None:
    """The service first (its subscribers get a ``closed`` event), then the HTTP server."""
    server.service.stop()
    server.running.stop()


def ok(answer: httpx.Response, status: int = 200) -> dict:
    """The JSON of an answer that must have ``status`` (its text when it has not)."""
    assert answer.status_code == status, answer.text
    return answer.json()


def grant(client: httpx.Client, permission: str, kind: str, obj: str, role: str) -> None:
    body = {"permission": permission, "kind": kind, "object": obj, "role": role}
    ok(client.post("/grants", json=body))


def audit_text(entries: list[dict]) -> str:
    """Audit entries as JSON without their timestamps, for "this value never leaks" checks:
    a timestamp's microseconds can spell a short secret by chance (a CI failure on "4242")."""
    return json.dumps([{k: v for k, v in e.items() if k != "at"} for e in entries])


BOREALIS_USERS = {
    "joe": ["ADMIN"],
    "ed": ["INFO_PROVIDER"],
    "al": ["CUSTOMER1"],
    "bob": ["CUSTOMER2"],
    "mallory": ["OTHER"],
}


@pytest.fixture(scope="module")
def server(spark, tmp_path_factory) -> Iterator[Server]:  # noqa: F811
    root = tmp_path_factory.mktemp("server")
    throttle = ThrottlePolicy(free_failures=3, window=60.0, base_delay=30.0, max_delay=60.0)
    started = start_server(root, spark, BOREALIS_USERS, throttle=throttle, session_ttl=600.0)
    yield started
    stop_server(started)


class Subscriber:
    """A live SSE subscription read in a background thread; events collect in ``events``."""

    def __init__(self, client: httpx.Client, name: str, path: str | None = None) -> None:
        """``path``: another SSE route than the query's (a pattern's)."""
        import threading

        from streamshield.client import parse_sse

        self.events: list[tuple[str, dict]] = []
        self.status: int | None = None
        self._client = client
        self._response: httpx.Response | None = None
        self._parse = parse_sse
        self._path = path or f"/queries/{name}/subscribe"
        self._thread = threading.Thread(target=self._run, args=(name,), daemon=True)
        self._thread.start()
        poll(lambda: self.status is not None, timeout=30)

    def _run(self, name: str) -> None:
        try:
            with self._client.stream(
                "GET", self._path, timeout=httpx.Timeout(30, read=None)
            ) as response:
                self._response = response
                self.status = response.status_code
                if response.status_code != 200:
                    response.read()
                    return
                for event in self._parse(response.iter_lines()):
                    self.events.append(event)
        except (httpx.HTTPError, RuntimeError):
            self.status = self.status or -1

    def rows(self) -> list[dict]:
        return [row for event, data in self.events if event == "rows" for row in data["rows"]]

    def close(self) -> None:
        """Ends the stream from the test thread without touching the reader's TLS state.

        Closing the response here would free the socket's descriptor while the reader
        thread may still be inside a TLS read on it; the next connection then reuses
        that number and the stale read steals its bytes (seen as bad record MACs on
        other subscribers). A shutdown keeps the descriptor: the reader sees end of
        stream and closes the response itself, in its own thread.
        """
        if self._response is not None:
            stream = self._response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
        self._thread.join(30)
        assert not self._thread.is_alive(), "the subscriber's reader did not end"


def tuple_line(
    stream: str, provider: str, seq: int, tid: int, values: dict, ts: int = 100, csn: int = 1
) -> str:
    import json

    return json.dumps(
        {
            "type": "tuple",
            "stream": stream,
            "provider": provider,
            "seq": seq,
            "tid": tid,
            "policy": {"ts": ts, "csn": csn},
            "values": values,
        }
    )


def sp_line(stream: str, provider: str, seq: int, roles: str, ts: int = 100, sn: int = 1) -> str:
    import json

    return json.dumps(
        {
            "type": "sp",
            "stream": stream,
            "provider": provider,
            "seq": seq,
            "ts": ts,
            "sn": sn,
            "ddp": {"streams": stream, "tuples": "*", "attributes": "*"},
            "srp": {"roles": roles, "grant_option": False},
            "sign": "+",
            "immutable": False,
        }
    )
