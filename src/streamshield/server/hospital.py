"""The hospital example loaded into a running server (the main job of ``streamshield serve``).

Everything goes through the same service calls the HTTP API makes, so the example
exercises the real checks: an administrator adds the schema and the HeartRate stream
and grants rights; the ward's monitors (user ``ward``, channels ``ward.monitor-<id>``)
land a round of readings every few seconds with their security punctuations; five
clinicians each register a query and may subscribe to its output. Passwords are
random, written once to a 0600 file under the storage root.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamshield.examples import hospital, hospital_ward
from streamshield.examples.hospital_catalog import junior_edges
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel
from streamshield.server.schemas import SchemaDef
from streamshield.server.service import ServerService

if TYPE_CHECKING:
    from streamshield.catalog.security import Session

log = logging.getLogger("streamshield.server")

ADMIN, PROVIDER = "ADMIN", "PROVIDER"
CLINICIANS = {"carol": "C", "nina": "ND", "gus": "GP", "erin": "ER", "ivan": "INS"}
STREAM = "HeartRate"
QUERY = "SELECT patient_id, beats_per_min, ts FROM HeartRate"
CREDENTIALS = "example-credentials.json"


def roles() -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The hospital hierarchy plus the two operational roles of the example."""
    names = {**hospital.ROLE_NAMES, ADMIN: "Administrator", PROVIDER: "Ward monitors"}
    return names, junior_edges()


@dataclass(frozen=True)
class ExampleUsers:
    """The example's users: passwords (saved 0600) and a session for each who acts."""

    passwords: dict[str, str]
    sessions: dict[str, Any]


def create_example_users(security: Any, root: Path) -> ExampleUsers:
    """Users and their sessions, in the catalog alone: no Spark needed, so ``serve``
    does this (a dozen argon2id hashes) while the JVM starts. The example's roles
    (:func:`roles`) must be stored first."""
    passwords = {user: secrets.token_urlsafe(12) for user in ["admin", "ward", *CLINICIANS]}
    security.create_user("admin", passwords["admin"], [ADMIN])
    admin = security.login("admin", passwords["admin"], [ADMIN])
    security.create_user("ward", passwords["ward"], [PROVIDER], by=admin)
    for user, role in CLINICIANS.items():
        security.create_user(user, passwords[user], [role], by=admin)
    _save(root / CREDENTIALS, passwords)
    sessions = {"admin": admin}
    for user, role in CLINICIANS.items():
        sessions[user] = security.login(user, passwords[user], [role])
    return ExampleUsers(passwords, sessions)


def load_example(service: ServerService, users: ExampleUsers | None = None) -> dict[str, str]:
    """Users (unless ``users`` made them), stream, grants and queries; returns user ->
    password (also saved 0600)."""
    if users is None:  # roles() are stored before the service is built
        users = create_example_users(service.security, service.root)
    passwords, admin = users.passwords, users.sessions["admin"]
    service.streams.add_schema(admin, SchemaDef("vitals", *_shape()))
    service.streams.add_stream(admin, STREAM, "vitals")
    for role in ("E", "ER", "INS", PROVIDER):
        _grant(service, admin, "VIEW CATALOG", "system", "system", role)
        _grant(service, admin, "VIEW OBJECT", "stream", STREAM, role)
    for role in ("E", "ER", "INS"):
        _grant(service, admin, "ADD", "system", "system", role)
        _grant(service, admin, "READ TUPLE", "stream", STREAM, role)
    _grant(service, admin, "WRITE", "stream", STREAM, PROVIDER)
    _grant(service, admin, "INJECT SP", "stream", STREAM, PROVIDER)
    for user in CLINICIANS:
        session = users.sessions[user]
        name = f"heart_{user}"
        service.query_requests.register_request(session, name, QUERY, f"{name}_out")
    return passwords


def _shape() -> tuple[tuple[tuple[str, str], ...], str, str]:
    return hospital.ATTRIBUTE_TYPES[STREAM], "patient_id", "ts"


def _grant(service: ServerService, session: Session, perm: str, kind: str, obj: str, role: str):
    body = {
        "permission": perm,
        "kind": kind,
        "object": obj,
        "role": role,
        "user": None,
        "grant_option": False,
    }
    service.administration.grant(session, body)


def _save(path: Path, passwords: dict[str, str]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(passwords, out, indent=2)


@dataclass
class WardProvider:
    """Lands one round of the ward's readings every ``period`` seconds, as user ``ward``."""

    service: ServerService
    password: str
    period: float = 5.0
    rounds: int = 1000
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    landed: int = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ward-provider", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        monitors = [hospital_ward.Monitor(p) for p in hospital_ward.PATIENTS]
        for monitor in monitors:
            monitor.channel = Channel(STREAM, f"ward.monitor-{monitor.patient}")
        session = None
        for round_no in range(self.rounds):
            lines = []
            for monitor in monitors:
                if round_no == 0:
                    lines += [to_line(e) for e in monitor.send_policy(hospital_ward.ROUTINE, 100)]
                if round_no == 1 and monitor.patient == hospital_ward.EMERGENCY_PATIENT:
                    lines += [to_line(e) for e in monitor.send_policy(hospital_ward.EMERGENCY, 200)]
                lines += [to_line(e) for e in monitor.readings(round_no)]
            try:
                if session is None:
                    session = self.service.administration.login(
                        "ward", self.password, [PROVIDER], "provider"
                    )
                report = self.service.streams.append(session, STREAM, lines)
                self.landed += report.accepted
            except Exception as err:  # a provider outage must not kill the server
                log.warning("ward provider: round %d failed (%s)", round_no, type(err).__name__)
                session = None
            if self._stop.wait(self.period):
                return
