"""Event patterns through the real server over TLS (docs/cep.md): rules administered
through the API, registration refused with a 4xx naming the attribute, the life cycle,
the recipient's check, and a revocation stopping a running pattern at its next batch.

With Chinese-Wall levels on: the pattern runs at its owner's session level [1, A] and
never matches an event of another provider at [1, B]; its rows are checked per
recipient (a user the events' sps do not name gets none, the owner at a lower level
none); a partition key through the API; the rows over SSE, ended by the revocation."""

from __future__ import annotations

import json

import pytest

from streamshield.server.event_patterns import PatternService
from tests.server.conftest import (
    PASSWORD,
    Subscriber,
    grant,
    ok,
    poll,
    sp_line,
    start_server,
    stop_server,
    tuple_line,
)

pytestmark = pytest.mark.spark

USERS = {
    "joe": ["ADMIN"],
    "ward": ["INFO_PROVIDER"],
    "wes": ["INFO_PROVIDER"],
    "al": ["CUSTOMER1"],
    "bob": ["CUSTOMER2"],
    "cy": ["OTHER"],
}
SCHEMAS = {
    "temp": [["id", "bigint"], ["room", "string"], ["celsius", "double"], ["ts", "timestamp"]],
    "smoke": [["id", "bigint"], ["room", "string"], ["level", "bigint"], ["ts", "timestamp"]],
}
TYPES = {
    "Temp": {"ts": "timestamp", "id": "long", "room": "string", "celsius": "double"},
    "Smoke": {"ts": "timestamp", "id": "long", "room": "string", "level": "long"},
}


def rules(smoke_level: str = "xi") -> dict:
    """CUSTOMER1 (and OTHER) read rooms, celsius only in room L1 (Phi), smoke fully;
    CUSTOMER2 sees temperatures as statistics and no smoke at all."""
    smoke = [{"operator": "xi", "attributes": ["ts", "id", "room"]}]
    smoke.append({"operator": smoke_level, "attributes": ["level"]})
    customer1 = {
        "Temp": [
            {"operator": "xi", "attributes": ["ts", "id", "room"]},
            {"operator": "phi", "attributes": ["celsius"], "condition": [["room", "=", "L1"]]},
        ],
        "Smoke": smoke,
    }
    return {
        "event_types": TYPES,
        "roles": {
            "OTHER": customer1,  # the operators allow cy the pattern; the sps do not
            "CUSTOMER1": customer1,
            "CUSTOMER2": {
                "Temp": [
                    {"operator": "xi", "attributes": ["ts", "room"]},
                    {"operator": "omega", "attributes": ["celsius"], "functions": ["avg"]},
                ],
                "Smoke": [{"operator": "psi", "attributes": "*"}],
            },
        },
    }


FIRE = (
    "PATTERN SEQ(Temp a, Smoke b) WHERE a.room = b.room AND a.celsius > 50 "
    "WITHIN 1 MINUTE RETURN a.room, a.celsius, b.level"
)


def _events(stream: str, first_seq: int, rows: list[dict], provider: str = "ward") -> str:
    return "\n".join(
        tuple_line(stream, provider, first_seq + i, row["id"], row, csn=1)
        for i, row in enumerate(rows)
    )


def _login(server, user: str, roles: list[str], level: str):
    with server.client() as anonymous:
        body = {"user": user, "password": PASSWORD, "roles": roles, "level": level}
        answer = ok(anonymous.post("/login", json=body))
    return server.client(answer["token"])


def test_patterns_through_the_api(spark, tmp_path) -> None:
    server = start_server(tmp_path, spark, USERS)
    try:
        joe = server.login("joe", ["ADMIN"])
        for name, attributes in SCHEMAS.items():
            body = {"name": name, "attributes": attributes, "tid": "id", "event_time": "ts"}
            ok(joe.post("/schemas", json=body), 201)
        for stream, schema in (("Temp", "temp"), ("Smoke", "smoke")):
            ok(joe.post("/streams", json={"name": stream, "schema": schema}), 201)
            for permission in ("VIEW OBJECT", "WRITE", "INJECT SP"):
                grant(joe, permission, "stream", stream, "INFO_PROVIDER")
            for role in ("CUSTOMER1", "CUSTOMER2"):
                grant(joe, "VIEW OBJECT", "stream", stream, role)
                grant(joe, "READ TUPLE", "stream", stream, role)
            grant(joe, "VIEW OBJECT", "stream", stream, "OTHER")
            grant(joe, "READ TUPLE", "stream", stream, "OTHER")
        for role in ("CUSTOMER1", "CUSTOMER2"):
            grant(joe, "ADD", "system", "system", role)
            grant(joe, "VIEW CATALOG", "system", "system", role)
        # Levels: ward's temperatures at [1, A], wes's at [1, B]; smoke is public.
        ok(joe.post("/levels/coi", json={"name": "COI1", "companies": ["1", "2"]}), 201)
        ok(joe.post("/levels/coi", json={"name": "COI2", "companies": ["A", "B"]}), 201)
        ok(joe.put("/levels/streams/Temp", json={"level": "[1, T]"}))
        for provider, level in (("ward", "[1, A]"), ("wes", "[1, B]")):
            ok(joe.put(f"/levels/streams/Temp/channels/{provider}", json={"level": level}))
        for user in ("al", "cy"):
            ok(joe.put(f"/users/{user}/clearance", json={"level": "[1, A]"}))
        al = _login(server, "al", ["CUSTOMER1"], "[1, A]")
        cy = _login(server, "cy", ["OTHER"], "[1, A]")
        low_al = server.login("al", ["CUSTOMER1"])  # the owner at the public level
        bob = server.login("bob", ["CUSTOMER2"])

        # Rules: only CHANGE SYSTEM; a bad document is a 422 naming the place, no value.
        assert al.put("/cep/rules", json=rules()).status_code == 403
        bad = rules()
        bad["roles"]["CUSTOMER1"]["Temp"][1]["condition"] = [["room", "=", 7]]
        refused = joe.put("/cep/rules", json=bad)
        assert refused.status_code == 422 and "condition[0][2]" in refused.text
        assert ok(joe.put("/cep/rules", json=rules()))["version"] == 2
        mine = ok(al.get("/cep/rules"))["operators"]
        assert mine["Temp"]["celsius"] == "phi" and "L1" not in json.dumps(mine)

        # Registration: malformed (line, column), unknown attribute, beyond the operators.
        bad_syntax = al.post("/patterns", json={"name": "x", "pattern": "PATTERN SEQ(Temp a"})
        assert bad_syntax.status_code == 422 and "line 1" in bad_syntax.text
        unknown = al.post(
            "/patterns", json={"name": "x", "pattern": FIRE.replace("b.level", "b.x")}
        )
        assert unknown.status_code == 422 and "no attribute x" in unknown.text
        beyond = bob.post("/patterns", json={"name": "x", "pattern": FIRE})
        assert beyond.status_code == 403 and "Smoke" in beyond.text
        raw_omega = bob.post(
            "/patterns",
            json={
                "name": "x",
                "pattern": "PATTERN OR(Temp a, Temp c) WITHIN 1 SECOND RETURN a.celsius",
            },
        )
        assert raw_omega.status_code == 403 and "Temp.celsius" in raw_omega.text
        # Every number has a bound: a clear 422, and the connection stays usable.
        for within, words in (
            ("99999999999999 HOURS", "at most 2147483647 seconds"),
            ("1" + "0" * 30 + " HOURS", "at most 2147483647 seconds"),
            ("2 HOURS", "limit exceeded (range)"),  # the role's max_range_seconds
        ):
            text = FIRE.replace("WITHIN 1 MINUTE", f"WITHIN {within}")
            too_long = al.post("/patterns", json={"name": "x", "pattern": text})
            assert too_long.status_code == 422 and words in too_long.text, too_long.text
        wide = FIRE.replace("a.celsius", "a.celsius > 1" + "0" * 40 + " AND a.celsius", 1)
        wide_answer = al.post("/patterns", json={"name": "x", "pattern": wide})
        assert wide_answer.status_code == 422 and "64 bits" in wide_answer.text
        bad_key = al.post("/patterns", json={"name": "x", "pattern": FIRE, "key": "celsius"})
        assert bad_key.status_code == 422 and "Smoke has no attribute celsius" in bad_key.text
        fire = {"name": "fire", "pattern": FIRE, "key": "room"}
        registered = ok(al.post("/patterns", json=fire), 201)
        assert registered["status"] == "running" and registered["output"] == "fire_out"
        assert registered["key"] == "room" and registered["level"] == "[1, A]"
        assert al.post("/patterns", json={"name": "fire", "pattern": FIRE}).status_code == 409
        # A refusal under a taken name leaves that pattern alone; every refusal above is
        # audited as one add_query refused entry with its code.
        retyped = al.post("/patterns", json={"name": "fire", "pattern": "PATTERN SEQ(Temp a"})
        assert retyped.status_code == 422
        assert ok(al.get("/patterns/fire"))["status"] == "running"
        entries = ok(joe.get("/audit", params={"limit": 1000}))["entries"]
        on_x = [e for e in entries if (e["object"] or {}).get("name") == "x"]
        assert len(on_x) >= 8, on_x
        assert {(e["action"], e["outcome"]) for e in on_x} == {("add_query", "refused")}
        assert all(e["detail"]["error"] for e in on_x)
        assert [p["name"] for p in ok(al.get("/patterns"))["patterns"]] == ["fire"]
        assert ok(bob.get("/patterns"))["patterns"] == []  # not his object
        assert bob.get("/patterns/fire").status_code == 404
        explained = ok(al.get("/patterns/fire"))
        assert explained["variables"][0]["operators"]["celsius"] == "phi"
        # It runs in its level's processor, its state under the level's directory.
        running = server.service.patterns.patterns["fire"].running
        processor = server.service.cql.processors.of(running.holder)
        assert processor is not None and processor.level.text == "[1, A]"
        assert running.checkpoint == processor.path("patterns", "fire")

        ward = server.login("ward", ["INFO_PROVIDER"])
        policy = sp_line("Temp", "ward", 1, "{CUSTOMER1,CUSTOMER2}")
        temps = [
            {"id": 1, "room": "L1", "celsius": 60.0, "ts": "2026-11-23T10:00:01Z"},
            {"id": 2, "room": "L2", "celsius": 70.0, "ts": "2026-11-23T10:00:02Z"},
        ]
        ok(ward.post("/streams/Temp/elements", content=policy + "\n" + _events("Temp", 2, temps)))
        wes = server.login("wes", ["INFO_PROVIDER"])  # another company's: [1, B]
        policy = sp_line("Temp", "wes", 1, "{CUSTOMER1,CUSTOMER2}")
        across = [{"id": 5, "room": "L1", "celsius": 99.0, "ts": "2026-11-23T10:00:03Z"}]
        ok(
            wes.post(
                "/streams/Temp/elements", content=policy + "\n" + _events("Temp", 2, across, "wes")
            )
        )
        smokes = [
            {"id": 1, "room": "L1", "level": 3, "ts": "2026-11-23T10:00:05Z"},
            {"id": 2, "room": "L2", "level": 4, "ts": "2026-11-23T10:00:06Z"},
            # Bad input: a wrong type is rejected alone, named without its value; missing
            # attributes are NULL (no room: no key, no match).
            {"id": 7, "room": "L1", "level": "x-secret", "ts": "2026-11-23T10:00:05Z"},
            {"id": 8, "ts": "2026-11-23T10:00:07Z"},
        ]
        policy = sp_line("Smoke", "ward", 1, "{CUSTOMER1,CUSTOMER2}")
        landed = ok(
            ward.post(
                "/streams/Smoke/elements", content=policy + "\n" + _events("Smoke", 2, smokes)
            )
        )
        assert landed["rejected"] == 1 and "values.level" in json.dumps(landed["rejections"])
        assert "x-secret" not in json.dumps(landed)

        def rows_of(client, after: int = -1) -> list[dict]:
            read = ok(client.get("/patterns/fire/rows", params={"after": after}))
            assert read["gap"] is None  # nothing was pruned: ids may skip, rows may not
            return read["rows"]

        found = poll(lambda: rows_of(al), timeout=240)
        # L2's celsius is outside the Phi condition: its temperature never matches; wes's
        # [1, B] temperature in L1 is above the pattern's level: never read.
        shown = [(r["room"], r["a_room"], r["a_celsius"], r["b_level"]) for r in found]
        assert shown == [("L1", "L1", 60.0, 3)]
        live = Subscriber(al, "fire", "/patterns/fire/subscribe?after=-1")
        assert live.status == 200
        poll(lambda: live.rows(), timeout=60)
        assert [(r["a_room"], r["b_level"]) for r in live.rows()] == [("L1", 3)]

        # The recipient decides, per row: cy's operators allow the pattern, but the sps
        # name only CUSTOMER1 and CUSTOMER2; al in a session at the public level is below
        # the rows' level [1, A].
        grant(al, "VIEW OBJECT", "query", "fire", "OTHER")
        grant(al, "SUBSCRIBE", "stream", "fire_out", "OTHER")
        assert ok(cy.get("/patterns/fire/rows"))["rows"] == []
        assert rows_of(low_al) == []

        # The recipient decides: bob may SUBSCRIBE but his own operators deny Smoke.
        grant(al, "VIEW OBJECT", "query", "fire", "CUSTOMER2")
        grant(al, "SUBSCRIBE", "stream", "fire_out", "CUSTOMER2")
        denied = bob.get("/patterns/fire/rows")
        assert denied.status_code == 403 and "Smoke" in denied.text

        # A pattern's subscription ends on the pattern's own check, not a query's: cy
        # loses READ TUPLE on Smoke (SUBSCRIBE on the output kept) and is told at once,
        # with no batch coming to carry the news.
        watcher = Subscriber(cy, "fire", "/patterns/fire/subscribe")
        assert watcher.status == 200
        body = {"permission": "READ TUPLE", "kind": "stream", "object": "Smoke", "role": "OTHER"}
        ok(joe.request("DELETE", "/grants", json=body))
        poll(lambda: any(event == "closed" for event, _ in watcher.events), timeout=10)
        watcher.close()

        # Revocation: Smoke.level denied to CUSTOMER1; the next batch stops the pattern.
        ok(joe.put("/cep/rules", json=rules(smoke_level="psi")))
        later = [{"id": 3, "room": "L1", "celsius": 80.0, "ts": "2026-11-23T10:00:10Z"}]
        ok(ward.post("/streams/Temp/elements", content=_events("Temp", 4, later)))
        more = [{"id": 3, "room": "L1", "level": 9, "ts": "2026-11-23T10:00:12Z"}]
        ok(ward.post("/streams/Smoke/elements", content=_events("Smoke", 6, more)))
        stopped = poll(
            lambda: (e := ok(al.get("/patterns/fire")))["status"] == "stopped" and e, timeout=240
        )
        assert "Smoke.level" in stopped["reason"] and "denied" in stopped["reason"]
        assert stopped["delivered"] == 1  # the batch after the rule change delivered nothing
        poll(lambda: any(event == "closed" for event, _ in live.events), timeout=30)
        live.close()
        # ... and al's own operators no longer allow what was delivered before either
        gone = al.get("/patterns/fire/rows")
        assert gone.status_code == 403 and "Smoke.level" in gone.text
        # A server restart restores the definition (recorded as running in the catalog);
        # the rules in force keep it stopped.
        restored = PatternService(server.service)
        restored.restore()
        again = restored.patterns["fire"]
        assert again.running.status == "stopped" and "Smoke.level" in again.running.reason

        restart = al.post("/patterns/fire/status", json={"running": True})
        assert restart.status_code == 403 and "Smoke.level" in restart.text

        assert ok(al.delete("/patterns/fire"))["removed"] == "fire"
        assert not running.checkpoint.exists()  # a later "fire" starts afresh
        assert "fire" not in json.loads((tmp_path / "cep" / "patterns.json").read_text())
        assert al.get("/patterns/fire").status_code == 404
    finally:
        stop_server(server)
