"""Rights derived from roles follow role changes on a running server (one server for the
module; tests run in file order and build on each other).

JUNX holds the event rules on ``Door``; its senior SENX has none of its own and reads
them only through the edge SENX -> JUNX. Every derived right is tried against the
change that takes it away, through the real server over TLS: the rules naming a role
created at run time, a pattern's rules after the edge that gave them is removed (and
added back), a pattern whose owner loses her role or READ, a query that read through a
removed junior (never its tuples labelled after the removal, whoever subscribes), a
query whose owner loses READ (stopped, started again when it comes back) and queries
and patterns above a lowered clearance.
"""

from __future__ import annotations

import pytest

from streamshield.catalog.security import SecurityCatalog
from tests.server.conftest import (
    PASSWORD,
    ROLES,
    Subscriber,
    grant,
    ok,
    poll,
    serve_root,
    sp_line,
    stop_server,
    tuple_line,
)

pytestmark = pytest.mark.spark

DOOR = {"ts": "timestamp", "id": "long", "room": "string", "person": "string"}
PATTERN = (
    "PATTERN SEQ(Door a, Door b) WHERE a.room = b.room WITHIN 1 MINUTE RETURN b.room, b.person"
)


def rules(*roles: str) -> dict:
    door = {"Door": [{"operator": "xi", "attributes": "*"}]}
    return {"event_types": {"Door": DOOR}, "roles": {role: door for role in roles}}


@pytest.fixture(scope="module")
def server(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("roles")
    security = SecurityCatalog(root / "catalog.db", session_ttl=3600.0)
    security.catalog.set_roles([*ROLES, "JUNX", "SENX"], [("SENX", "JUNX")])
    security.create_user("joe", PASSWORD, ["ADMIN"])
    admin = security.login("joe", PASSWORD, ["ADMIN"])
    for name, roles in {
        "ward": ["INFO_PROVIDER"],
        "sam": ["SENX"],
        "jun": ["JUNX", "OTHER"],
    }.items():
        security.create_user(name, PASSWORD, roles, by=admin)
    started = serve_root(root, spark, security)
    yield started
    stop_server(started)


@pytest.fixture(scope="module")
def joe(server):
    with server.login("joe", ["ADMIN"]) as client:
        yield client


@pytest.fixture(scope="module")
def streams(server, joe):
    """Door (events) and Badge (plain tuples), readable by SENX and JUNX, written by ward."""
    door = [["id", "bigint"], ["room", "string"], ["person", "string"], ["ts", "timestamp"]]
    badge = [["id", "bigint"], ["gate", "string"]]
    for name, attributes, extra in (("door", door, {"event_time": "ts"}), ("badge", badge, {})):
        body = {"name": name, "attributes": attributes, "tid": "id", **extra}
        ok(joe.post("/schemas", json=body), 201)
    for stream, schema in (("Door", "door"), ("Badge", "badge")):
        ok(joe.post("/streams", json={"name": stream, "schema": schema}), 201)
        for permission in ("VIEW OBJECT", "WRITE", "INJECT SP"):
            grant(joe, permission, "stream", stream, "INFO_PROVIDER")
        for role in ("SENX", "JUNX"):
            grant(joe, "VIEW OBJECT", "stream", stream, role)
            grant(joe, "READ TUPLE", "stream", stream, role)
    for role in ("SENX", "JUNX"):
        grant(joe, "ADD", "system", "system", role)
        grant(joe, "VIEW CATALOG", "system", "system", role)
    with server.login("ward", ["INFO_PROVIDER"]) as ward:
        ok(ward.post("/streams/Door/elements", content=sp_line("Door", "ward", 1, "{SENX,JUNX}")))
    return {"door_seq": 2}


def _door(server, streams, first: int, room: str, person: str) -> None:
    """Two Door events from ward in ``room`` (one match), ids ``first`` and the next:
    SENX and JUNX are named by ward's sp."""
    lines = []
    for tid in (first, first + 1):
        values = {"id": tid, "room": room, "person": person, "ts": f"2026-12-01T10:00:{tid:02d}Z"}
        lines.append(tuple_line("Door", "ward", streams["door_seq"], tid, values))
        streams["door_seq"] += 1
    with server.login("ward", ["INFO_PROVIDER"]) as ward:
        landed = ok(ward.post("/streams/Door/elements", content="\n".join(lines)))
    assert landed["accepted"] == len(lines), landed


def _badge(server, provider: str, first_seq: int, ids: list[int], readers: str | None) -> None:
    lines = [sp_line("Badge", provider, first_seq - 1, readers)] if readers else []
    lines += [
        tuple_line("Badge", provider, first_seq + i, tid, {"id": tid, "gate": "north"})
        for i, tid in enumerate(ids)
    ]
    with server.login("ward", ["INFO_PROVIDER"]) as ward:
        landed = ok(ward.post("/streams/Badge/elements", content="\n".join(lines)))
    assert landed["accepted"] == len(lines), landed


def _stopped(client, name: str) -> dict:
    return poll(
        lambda: (e := ok(client.get(f"/patterns/{name}")))["status"] == "stopped" and e,
        timeout=240,
    )


def test_the_event_rules_may_name_a_role_created_at_run_time(joe, streams) -> None:
    assert ok(joe.put("/cep/rules", json=rules("JUNX")))["version"] == 2
    ok(joe.post("/roles", json={"name": "NEWR"}), 201)
    assert ok(joe.put("/cep/rules", json=rules("JUNX", "NEWR")))["version"] == 3
    assert ok(joe.get("/cep/rules"))["rules"]["roles"]["NEWR"]


def test_a_pattern_loses_the_rules_of_a_removed_junior(server, joe, streams) -> None:
    sam = server.login("sam", ["SENX"])
    ok(sam.post("/patterns", json={"name": "p_sen", "pattern": PATTERN}), 201)
    _door(server, streams, 1, "R1", "Ada")
    rows = poll(lambda: ok(sam.get("/patterns/p_sen/rows"))["rows"], timeout=240)
    assert [(r["b_room"], r["b_person"]) for r in rows] == [("R1", "Ada")]

    ok(joe.delete("/roles/SENX/juniors/JUNX"))
    # SENX has no rules of its own now: a new pattern is refused at once ...
    refused = sam.post("/patterns", json={"name": "p_sen2", "pattern": PATTERN})
    assert refused.status_code == 403 and "Door" in refused.text
    assert ok(sam.get("/cep/rules"))["operators"]["Door"]["person"] == "psi"
    # ... the running one stops at its next micro-batch, delivering nothing more ...
    _door(server, streams, 3, "R2", "Bea")
    stopped = _stopped(sam, "p_sen")
    assert "role change" in stopped["reason"] and "Door" in stopped["reason"]
    assert stopped["delivered"] == 1
    # ... and what it delivered before is no longer hers to read.
    gone = sam.get("/patterns/p_sen/rows")
    assert gone.status_code == 403 and "Door" in gone.text

    # The edge back: the rules reach SENX again, for a new pattern and a restart.
    ok(joe.post("/roles/SENX/juniors", json={"junior": "JUNX"}))
    assert ok(sam.get("/cep/rules"))["operators"]["Door"]["person"] == "xi"
    assert ok(sam.post("/patterns/p_sen/status", json={"running": True}))["status"] == "running"
    ok(sam.delete("/patterns/p_sen"))
    sam.close()


def test_a_pattern_stops_when_its_owner_loses_its_role_or_read(server, joe, streams) -> None:
    jun = server.login("jun", ["JUNX"])
    ok(jun.post("/patterns", json={"name": "p_jun", "pattern": PATTERN}), 201)
    _door(server, streams, 5, "R3", "Cai")

    def rooms() -> set[str]:
        return {r["b_room"] for r in ok(jun.get("/patterns/p_jun/rows"))["rows"]}

    poll(lambda: "R3" in rooms(), timeout=240)  # it matched the kept events too
    delivered = ok(joe.get("/patterns/p_jun"))["delivered"]

    ok(joe.put("/users/jun/roles", json={"roles": ["OTHER"]}))  # JUNX taken away
    _door(server, streams, 7, "R4", "Dov")
    stopped = _stopped(joe, "p_jun")
    assert "none of the roles" in stopped["reason"] and stopped["delivered"] == delivered

    ok(joe.put("/users/jun/roles", json={"roles": ["JUNX", "OTHER"]}))
    jun = server.login("jun", ["JUNX"])
    assert ok(jun.post("/patterns/p_jun/status", json={"running": True}))["status"] == "running"
    body = {"permission": "READ TUPLE", "kind": "stream", "object": "Door", "role": "JUNX"}
    ok(joe.request("DELETE", "/grants", json=body))
    _door(server, streams, 9, "R5", "Eve")
    stopped = _stopped(joe, "p_jun")
    assert "READ on Door" in stopped["reason"]
    restart = jun.post("/patterns/p_jun/status", json={"running": True})
    assert restart.status_code == 403 and "READ on Door" in restart.text
    ok(joe.post("/grants", json=body))
    ok(jun.delete("/patterns/p_jun"))
    jun.close()


def test_a_running_query_reads_nothing_through_a_removed_junior(server, joe, streams) -> None:
    # ward.a's tuples name JUNX: labelled for JUNX and, while the edge stands, SENX.
    _badge(server, "ward.a", 2, [1], "{JUNX}")
    _badge(server, "ward.b", 2, [], "{SENX}")
    sam = server.login("sam", ["SENX"])
    query = {"name": "q_sen", "text": "SELECT id, gate FROM Badge", "output": "q_sen_out"}
    ok(sam.post("/queries", json=query), 201)
    live = server.service.queries.get("q_sen")
    assert live.effective == {"SENX", "JUNX"}
    before = Subscriber(sam, "q_sen")
    _badge(server, "ward.a", 3, [2], None)
    poll(lambda: 2 in {r["id"] for r in before.rows()}, timeout=240)

    ok(joe.delete("/roles/SENX/juniors/JUNX"))
    # Recompiled before the request answered: its subscribers were told why.
    assert live.effective == {"SENX"} and live.status() == "running"
    poll(lambda: any(event == "closed" for event, _ in before.events), timeout=30)
    closed = [data for event, data in before.events if event == "closed"]
    assert "role hierarchy changed" in closed[0]["reason"]
    after = Subscriber(sam, "q_sen")
    _badge(server, "ward.a", 4, [3], None)  # labelled for JUNX alone now
    _badge(server, "ward.b", 2, [4], None)  # for SENX
    poll(lambda: 4 in {r["id"] for r in after.rows()}, timeout=240)
    assert 3 not in {r["id"] for r in after.rows()} | {r["id"] for r in before.rows()}
    before.close()
    after.close()

    ok(joe.post("/roles/SENX/juniors", json={"junior": "JUNX"}))  # and back: it reads more
    assert live.effective == {"SENX", "JUNX"} and live.status() == "running"
    sam.close()


def test_a_running_query_stops_while_its_owner_lacks_read(server, joe) -> None:
    live = server.service.queries.get("q_sen")
    sam = server.login("sam", ["SENX"])
    subscriber = Subscriber(sam, "q_sen")
    grants = [
        {"permission": "READ TUPLE", "kind": "stream", "object": "Badge", "role": role}
        for role in ("SENX", "JUNX")  # SENX holds JUNX's grants too
    ]
    ok(joe.request("DELETE", "/grants", json=grants[0]))
    assert live.status() == "running"  # still READ through the junior
    ok(joe.request("DELETE", "/grants", json=grants[1]))
    assert live.status() == "stopped"
    poll(lambda: any(event == "closed" for event, _ in subscriber.events), timeout=30)
    closed = [data for event, data in subscriber.events if event == "closed"]
    assert "READ on Badge" in closed[0]["reason"]
    ok(joe.post("/grants", json=grants[1]))
    assert live.status() == "running"
    ok(joe.post("/grants", json=grants[0]))
    subscriber.close()
    sam.close()


def test_queries_and_patterns_stop_above_a_lowered_clearance(server, joe, streams) -> None:
    ok(joe.post("/levels/coi", json={"name": "COI1", "companies": ["1", "2"]}), 201)
    ok(joe.put("/users/sam/clearance", json={"level": "[1]"}))
    with server.client() as anonymous:
        body = {"user": "sam", "password": PASSWORD, "roles": ["SENX"], "level": "[1]"}
        token = ok(anonymous.post("/login", json=body))["token"]
    sam = server.client(token)
    query = {"name": "q_lvl", "text": "SELECT id FROM Badge", "output": "q_lvl_out"}
    ok(sam.post("/queries", json=query), 201)
    ok(sam.post("/patterns", json={"name": "p_lvl", "pattern": PATTERN}), 201)
    live = server.service.queries.get("q_lvl")
    assert live.level.text == "[1]" and live.status() == "running"

    ok(joe.put("/users/sam/clearance", json={"level": "[⊥]"}))
    assert live.status() == "stopped"
    _door(server, streams, 11, "R6", "Fay")
    stopped = _stopped(joe, "p_lvl")
    assert "clearance" in stopped["reason"]
    sam.close()
