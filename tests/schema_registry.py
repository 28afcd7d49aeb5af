"""A schema registry for the tests: the part of Confluent's REST API that confluent-kafka's
schema-registry client, serializers and deserializers call, served on a loopback port.

Why one of our own: no schema registry installs from PyPI, and the real one needs a JVM
and a Kafka of its own. The clients on both ends are confluent-kafka's real code, so
what this serves is what they ask for, found by running them: registering a schema
under a subject (``POST /subjects/{subject}/versions``, the same text again gets the
same id) and fetching one by id (``GET /schemas/ids/{id}``, 404 with error code 40403
for an id it never gave). It can be stopped and started again on the same port, its
schemas kept, for an outage (connection refused), answer 503 to everything while
``failing`` is set, and ask for HTTP basic auth. Every request is counted in ``asked``
(method and path), so a test sees what a client fetched and how often.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCHEMA_TYPE = "application/vnd.schemaregistry.v1+json"
REGISTER = re.compile(r"/subjects/([^/]+)/versions\Z")
BY_ID = re.compile(r"/schemas/ids/(\d+)\Z")


class SchemaRegistryServer:
    """One registry on ``127.0.0.1``; :meth:`stop` ends it, :meth:`start` serves again."""

    def __init__(self, user: str | None = None, password: str | None = None) -> None:
        self.schemas: dict[int, dict[str, Any]] = {}  # id -> {"schema", "schemaType"}
        self.subjects: dict[str, list[int]] = {}
        self.asked: Counter[tuple[str, str]] = Counter()
        self.failing = False
        self._credentials = (
            base64.b64encode(f"{user}:{password}".encode()).decode() if user else None
        )
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                registry._answer(self, "GET", None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                registry._answer(self, "POST", self.rfile.read(length))

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Closes the port: a client's connection is refused until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """The schema's id under ``subject``, given anew or as it was given before."""
        with self._lock:
            for known, entry in self.schemas.items():
                if entry["schema"] == schema and entry["schemaType"] == schema_type:
                    found = known
                    break
            else:
                found = len(self.schemas) + 1
                self.schemas[found] = {"schema": schema, "schemaType": schema_type}
            versions = self.subjects.setdefault(subject, [])
            if found not in versions:
                versions.append(found)
            return found

    def _answer(self, handler: BaseHTTPRequestHandler, method: str, body: bytes | None) -> None:
        path = handler.path.split("?", 1)[0]
        self.asked[(method, path)] += 1
        if self.failing:
            return _send(handler, 503, {"error_code": 50301, "message": "unavailable"})
        if self._credentials is not None:
            given = handler.headers.get("Authorization", "")
            if given != f"Basic {self._credentials}":
                return _send(handler, 401, {"error_code": 401, "message": "unauthorized"})
        if method == "POST" and (match := REGISTER.match(path)):
            asked = json.loads(body or b"{}")
            schema_type = asked.get("schemaType") or "AVRO"
            found = self.register(match.group(1), asked["schema"], schema_type)
            return _send(handler, 200, {"id": found})
        if method == "GET" and (match := BY_ID.match(path)):
            entry = self.schemas.get(int(match.group(1)))
            if entry is None:
                message = f"Schema {match.group(1)} not found"
                return _send(handler, 404, {"error_code": 40403, "message": message})
            shown = {"schema": entry["schema"]}
            if entry["schemaType"] != "AVRO":  # as Confluent's registry: AVRO unsaid
                shown["schemaType"] = entry["schemaType"]
            return _send(handler, 200, shown)
        _send(handler, 404, {"error_code": 404, "message": f"no route {method} {path}"})


def _send(handler: BaseHTTPRequestHandler, status: int, answer: dict[str, Any]) -> None:
    data = json.dumps(answer).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", SCHEMA_TYPE)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
