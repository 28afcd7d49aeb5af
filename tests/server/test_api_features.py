"""INSERT SP, system settings and operator limits, query status, audit and revocation
through the real server (one server for the module; tests run in file order).

Each test tries to break one rule; it fails if that protection is removed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from streamshield.policy.elements import Channel
from streamshield.policy.operator_limits import OperatorLimits
from tests.server.conftest import PASSWORD, Subscriber, audit_text, poll, sp_line, tuple_line

pytestmark = pytest.mark.spark

SECRET = "SECRET_SYMBOL_42"


def _grant(client, permission, kind, obj, role=None, user=None, revoke=False) -> None:
    body = {"permission": permission, "kind": kind, "object": obj, "role": role, "user": user}
    answer = client.request("DELETE" if revoke else "POST", "/grants", json=body)
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def world(server):
    """Joe's stream ``prices``: Ed writes and injects sps, Al reads and adds queries,
    Mallory sees and writes it but may not inject sps, Bob sees nothing."""
    joe = server.login("joe", ["ADMIN"])
    schema = {
        "name": "quotes",
        "attributes": [["id", "bigint"], ["symbol", "string"], ["price", "double"]],
        "tid": "id",
    }
    assert joe.post("/schemas", json=schema).status_code == 201
    assert joe.post("/streams", json={"name": "prices", "schema": "quotes"}).status_code == 201
    for role in ("INFO_PROVIDER", "CUSTOMER1", "OTHER"):
        _grant(joe, "VIEW CATALOG", "system", "system", role)
        _grant(joe, "VIEW OBJECT", "stream", "prices", role)
    _grant(joe, "WRITE", "stream", "prices", "INFO_PROVIDER")
    _grant(joe, "INJECT SP", "stream", "prices", "INFO_PROVIDER")
    _grant(joe, "WRITE", "stream", "prices", "OTHER")
    _grant(joe, "READ TUPLE", "stream", "prices", "CUSTOMER1")
    _grant(joe, "ADD", "system", "system", "CUSTOMER1")
    return joe


def _register(client, name, text, output=None):
    return client.post("/queries", json={"name": name, "text": text, "output": output})


def _names(client) -> set[str]:
    return {q["name"] for q in client.get("/catalog").json()["queries"]}


# -- INSERT SP through POST /queries ------------------------------------------------------------


def test_insert_sp_lands_on_the_callers_channel_and_needs_inject_sp(server, world) -> None:
    catalog = server.service.catalog
    script = "INSERT SP INTO STREAM prices LET DDP = TUPLES: *, SRP = rbac:CUSTOMER1"
    mallory = server.login("mallory", ["OTHER"])  # sees and writes prices, no INJECT SP
    before = catalog.last_seq(Channel("prices", "mallory"))
    refused = _register(mallory, "sp1", script)
    assert refused.status_code == 403, refused.text
    assert catalog.last_seq(Channel("prices", "mallory")) == before  # nothing landed
    bob = server.login("bob", ["CUSTOMER2"])  # cannot even see prices
    hidden = _register(bob, "sp1", script)
    missing = _register(bob, "sp1", script.replace("prices", "no_such"))
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()

    ed = server.login("ed", ["INFO_PROVIDER"])
    answer = _register(ed, "sp1", script)
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert (body["stream"], body["provider"], body["csn"]) == ("prices", "ed", 1)
    assert catalog.last_seq(Channel("prices", "ed")) == body["last_seq"]
    # The provider's tuples declare the policy's (ts, csn) and follow it in the channel.
    line = tuple_line(
        "prices",
        "ed",
        body["last_seq"] + 1,
        1,
        {"id": 1, "symbol": "A", "price": 1.0},
        ts=body["ts"],
        csn=1,
    )
    appended = ed.post("/streams/prices/elements", content=line).json()
    assert appended["accepted"] == 1, appended
    assert "sp1" not in _names(ed)  # an sp script registers no query


def test_a_schemas_not_null_attributes_are_refused_missing_per_line(server, world) -> None:
    """The schema decides which attributes may be null: a tuple without a NOT NULL one
    (left out or null) is refused by line, naming it; the stream shows the mark."""
    schema = {
        "name": "checked_quotes",
        "attributes": [["id", "bigint"], ["symbol", "string"], ["price", "double"]],
        "tid": "id",
        "not_null": ["price"],
    }
    assert world.post("/schemas", json={**schema, "not_null": ["nope"]}).status_code == 422
    assert world.post("/schemas", json=schema).status_code == 201
    created = world.post("/streams", json={"name": "checked", "schema": "checked_quotes"})
    assert created.status_code == 201 and created.json()["not_null"] == ["price"], created.text
    assert world.get("/streams/checked").json()["not_null"] == ["price"]
    assert world.get("/streams/prices").json()["not_null"] == []
    lines = [
        tuple_line("checked", "joe", 1, 1, {"id": 1, "symbol": "A"}),
        tuple_line("checked", "joe", 2, 2, {"id": 2, "symbol": "A", "price": None}),
        tuple_line("checked", "joe", 3, 3, {"id": 3, "price": 1.5}),  # symbol may be null
    ]
    answer = world.post("/streams/checked/elements", content="\n".join(lines)).json()
    assert answer["accepted"] == 1, answer
    assert [(r["line"], r["reason"]) for r in answer["rejections"]] == [
        (1, "missing_attribute"),
        (2, "missing_attribute"),
    ], answer
    assert all("values.price" in r["message"] for r in answer["rejections"])


def test_insert_sp_with_unknown_roles_is_refused(server, world) -> None:
    ed = server.login("ed", ["INFO_PROVIDER"])
    before = server.service.catalog.last_seq(Channel("prices", "ed"))
    script = "INSERT SP INTO STREAM prices LET DDP = TUPLES: *, SRP = rbac:NO_SUCH_ROLE"
    answer = _register(ed, "sp2", script)
    assert answer.status_code == 422 and answer.json()["error"].startswith("query_rejected")
    assert server.service.catalog.last_seq(Channel("prices", "ed")) == before


# -- system settings and operator limits ---------------------------------------------------------


def test_settings_need_change_system(server, world) -> None:
    al = server.login("al", ["CUSTOMER1"])
    assert al.get("/system/settings").status_code == 403
    answer = al.put("/system/settings", json={"values": {"quota.max_running_queries": 999}})
    assert answer.status_code == 403
    settings = world.get("/system/settings")
    assert settings.status_code == 200
    assert settings.json()["quota.max_running_queries"] != 999
    bad = {"operator_limits": {"default": {"max_rows": "lots"}}}
    answer = world.put("/system/settings", json={"values": bad})
    assert answer.status_code == 422, answer.text
    assert "operator_limits" not in world.get("/system/settings").json()


def test_operator_limits_changed_at_run_time_apply_to_the_next_registration(server, world) -> None:
    al = server.login("al", ["CUSTOMER1"])
    plain = "SELECT symbol, price FROM prices"

    def limits(**rule) -> None:
        setting = {"roles": {"CUSTOMER1": rule}}
        answer = world.put("/system/settings", json={"values": {"operator_limits": setting}})
        assert answer.status_code == 200, answer.text

    try:
        limits(max_rows=10, max_queries=1)
        assert _register(al, "lim_a", plain).status_code == 201
        rows = _register(al, "lim_b", "SELECT symbol FROM prices [ROWS 100]")
        assert rows.status_code == 422 and rows.json()["error"] == "limit_exceeded", rows.text
        more = _register(al, "lim_c", plain)
        assert more.status_code == 422 and more.json()["error"] == "limit_exceeded"
        assert not {"lim_b", "lim_c"} & _names(al)  # refused before the catalog records it
        limits(max_rows=10, max_queries=2)  # raised: the very next registration passes
        assert _register(al, "lim_c", plain).status_code == 201
        assert al.post("/queries/lim_a/stop").status_code == 200
        limits(max_rows=10, max_queries=1)  # lowered: lim_c runs, lim_a may not start
        again = al.post("/queries/lim_a/start")
        assert again.status_code == 422 and again.json()["error"] == "limit_exceeded"
        assert not server.service.queries.get("lim_a").running
        statuses = {q.name: str(q.status) for q in server.service.security.queries(None)}
        assert statuses["lim_a"] == "stopped"  # the refused start is not recorded as running
    finally:
        default = {"operator_limits": OperatorLimits().to_dict()}
        assert world.put("/system/settings", json={"values": default}).status_code == 200
        for name in ("lim_a", "lim_c"):
            al.delete(f"/queries/{name}")


# -- query status --------------------------------------------------------------------------------


def test_only_who_may_set_query_status_stops_and_starts_a_query(server, world) -> None:
    al = server.login("al", ["CUSTOMER1"])
    answer = _register(al, "mine", "SELECT symbol, price FROM prices", "mine_out")
    assert answer.status_code == 201, answer.text
    query = server.service.queries.get("mine")
    internal, query_id = query.internal, query.handle.handle.id
    mallory = server.login("mallory", ["OTHER"])
    assert mallory.post("/queries/mine/stop").status_code == 404  # cannot see it
    _grant(al, "VIEW OBJECT", "query", "mine", "OTHER")
    assert mallory.post("/queries/mine/stop").status_code == 403  # sees it, no right
    assert query.running
    stopped = al.post("/queries/mine/stop")
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
    assert not query.running
    started = al.post("/queries/mine/start")
    assert started.status_code == 200 and started.json()["status"] == "running"
    # Resumed under the same internal name, so from the same checkpoint (same query id).
    assert query.internal == internal and query.handle.handle.id == query_id


# -- audit ---------------------------------------------------------------------------------------


def test_audit_shows_own_entries_and_drops_carry_ids_and_counts_only(server, world) -> None:
    al, mallory = server.login("al", ["CUSTOMER1"]), server.login("mallory", ["OTHER"])
    _grant(al, "VIEW OBJECT", "stream", "mine_out", "OTHER")
    _grant(al, "SUBSCRIBE", "stream", "mine_out", "OTHER")
    subscriber = Subscriber(mallory, "mine_out")  # no READ on prices: SecFilter drops
    assert subscriber.status == 200
    ed = server.login("ed", ["INFO_PROVIDER"])
    lines = [sp_line("prices", "ed.feed", 1, "{CUSTOMER1}")]
    lines += [
        tuple_line(
            "prices", "ed.feed", 1 + i, 100 + i, {"id": 100 + i, "symbol": SECRET, "price": 4242.5}
        )
        for i in (1, 2)
    ]
    assert ed.post("/streams/prices/elements", content="\n".join(lines)).json()["accepted"] == 3

    def drops() -> list[dict]:
        answer = world.get("/audit", params={"action": "data_dropped", "user": "mallory"})
        return answer.json()["entries"]

    entries = poll(drops)
    detail = entries[0]["detail"]
    assert detail["dropped"] >= 1 and detail["policy_ids"], detail
    assert not subscriber.rows()
    subscriber.close()
    everything = world.get("/audit", params={"limit": 1000}).json()["entries"]
    assert SECRET not in audit_text(everything) and "4242" not in audit_text(everything)
    assert {"joe", "al", "ed", "mallory"} <= {e["actor"] for e in everything}
    own = al.get("/audit", params={"limit": 1000}).json()["entries"]
    assert own and {e["actor"] for e in own} == {"al"}
    assert al.get("/audit", params={"user": "mallory"}).json()["entries"] == []


# -- live revocation (SecFilter with current rights) ---------------------------------------------


def test_revocation_stops_a_live_subscriber_within_a_micro_batch(server, world) -> None:
    al, bob = server.login("al", ["CUSTOMER1"]), server.login("bob", ["CUSTOMER2"])
    _grant(world, "VIEW CATALOG", "system", "system", "CUSTOMER2")
    _grant(world, "VIEW OBJECT", "stream", "prices", "CUSTOMER2")
    _grant(world, "READ TUPLE", "stream", "prices", "CUSTOMER2")
    _grant(al, "VIEW OBJECT", "stream", "mine_out", "CUSTOMER2")
    _grant(al, "SUBSCRIBE", "stream", "mine_out", "CUSTOMER2")
    control, watched = Subscriber(al, "mine_out"), Subscriber(bob, "mine_out")
    assert control.status == watched.status == 200
    ed = server.login("ed", ["INFO_PROVIDER"])
    seq = iter(range(1, 10_000))
    ed.post(
        "/streams/prices/elements",
        # Bob reads these tuples himself: only his stream-level right is revoked below
        content=sp_line("prices", "ed.rev", next(seq), "{CUSTOMER1, CUSTOMER2}"),
    )

    def send(symbol: str) -> None:
        n = next(seq)
        line = tuple_line("prices", "ed.rev", n, n, {"id": n, "symbol": symbol, "price": 1.0})
        assert ed.post("/streams/prices/elements", content=line).json()["accepted"] == 1

    def got(sub: Subscriber, symbol: str) -> bool:
        return any(r["symbol"] == symbol for r in sub.rows())

    send("before")
    poll(lambda: got(watched, "before"))
    revoked_at = time.monotonic()
    _grant(world, "READ TUPLE", "stream", "prices", "CUSTOMER2", revoke=True)
    send("after")
    poll(lambda: got(control, "after"))  # the batch ran, with Bob's rights read after revoke
    latency = time.monotonic() - revoked_at
    assert not got(watched, "after")
    _grant(world, "READ TUPLE", "stream", "prices", "CUSTOMER2")
    granted_at = time.monotonic()
    send("again")
    poll(lambda: got(watched, "again"))
    print(
        f"\nrevocation effective for the first batch after it: {latency:.2f} s from revoke "
        f"to that batch delivered; resumed {time.monotonic() - granted_at:.2f} s after grant"
    )
    assert not got(watched, "after")
    control.close()
    watched.close()


# -- the CLI client against the real server ------------------------------------------------------


def _cli(home, *args: str, password: str = PASSWORD, timeout: float = 120) -> str:
    env = {**os.environ, "STREAMSHIELD_HOME": str(home), "STREAMSHIELD_PASSWORD": password}
    done = subprocess.run(
        [sys.executable, "-m", "streamshield.cli", "client", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_cli_client_commands(server, world, tmp_path) -> None:
    joe_home, ed_home, al_home, bob_home = (tmp_path / u for u in ("joe", "ed", "al", "bob"))
    for home, user, role in (
        (joe_home, "joe", "ADMIN"),
        (ed_home, "ed", "INFO_PROVIDER"),
        (al_home, "al", "CUSTOMER1"),
        (bob_home, "bob", "CUSTOMER2"),
    ):
        login = ["login", "--url", server.url, "--ca", str(server.cert), "--user", user]
        said = _cli(home, *login, "--role", role)
        assert f"logged in as {user}" in said
        assert re.search(r"expires at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", said), said
        assert (home / "session.json").stat().st_mode & 0o777 == 0o600
    assert "prices" in _cli(al_home, "catalog")
    elements = tmp_path / "elements.jsonl"
    lines = [sp_line("prices", "ed.cli", 1, "{CUSTOMER1, CUSTOMER2}")]  # Bob reads them too
    lines += [
        tuple_line("prices", "ed.cli", 1 + i, i, {"id": i, "symbol": f"CLI{i}", "price": 2.0})
        for i in (1, 2, 3)
    ]
    elements.write_text("\n".join(lines) + "\n")
    text = "SELECT symbol, price FROM prices WHERE symbol LIKE 'CLI%'"  # not the history
    out = _cli(al_home, "query", "register", "cli_q", text)
    assert "name=cli_q" in out and "output=cli_q_out" in out
    _cli(joe_home, "grant", "READ TUPLE", "stream", "prices", "--user", "bob")
    for permission in ("VIEW OBJECT", "SUBSCRIBE"):
        _cli(al_home, "grant", permission, "stream", "cli_q_out", "--user", "bob")
    env = {**os.environ, "STREAMSHIELD_HOME": str(bob_home)}
    subscriber = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamshield.cli",
            "client",
            "subscribe",
            "cli_q_out",
            "--limit",
            "1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        delivery = server.service.queries.get("cli_q").delivery
        poll(lambda: len(delivery.subscriptions) == 1 or subscriber.poll() is not None, 120)
        assert subscriber.poll() is None, subscriber.communicate()  # subscribed, not refused
        assert "accepted 4, rejected 0" in _cli(ed_home, "ingest", "prices", str(elements))
        out, err = subscriber.communicate(timeout=120)
    finally:
        subscriber.kill()
    assert subscriber.returncode == 0, err
    assert "CLI" in out and "_ss_" not in out
    refused = subprocess.run(
        [sys.executable, "-m", "streamshield.cli", "client", "settings"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0 and "403" in refused.stderr
    assert "revoked" in _cli(al_home, "revoke", "SUBSCRIBE", "stream", "cli_q_out", "--user", "bob")
    assert not server.service.security.can_subscribe(
        server.service.security.login("bob", PASSWORD, ["CUSTOMER2"]), "cli_q_out"
    )
