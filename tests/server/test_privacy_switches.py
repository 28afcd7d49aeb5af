"""Privacy switches on a real server (docs/query-sharing.md).

Al's two selections over one stream run as one shared network, her two windowed queries
(``[ROWS 100]``: the new rows, and their count) as one window network sharing one window
node. Bob receives the second selection and the new rows (al shared their outputs with
him), Al the first selection and the count. Revoking Bob's SUBSCRIBE ends his
subscriptions; the server injects ``-`` query-scoped sps, the queries' switches close and
their branches run no Spark job while Al's queries go on, every row of them; when Bob may
subscribe again and does, the branches resume within a micro-batch and Bob gets the new
rows only. Al's self-join of the stream (a shared SCJoin, one subscription) has no
receiver until the end: its windows take every tuple but it computes and stores no pair;
once she subscribes (its first opening), she gets every pair of its windows at once,
without an append, and its next micro-batch gives her exactly the pairs new then. The
switch state is shown by ``GET /networks`` as each caller may see it, and bad or
unmatched sps open nothing.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from streamshield.cli import main
from tests.server.conftest import PASSWORD, Subscriber, poll, start_server, stop_server
from tests.spark.delivery_groups import record_groups

pytestmark = pytest.mark.spark

USERS = {"joe": ["ADMIN"], "al": ["CUSTOMER1"], "bob": ["OTHER"], "ward": ["INFO_PROVIDER"]}
SCHEMA = {"name": "v", "attributes": [["id", "bigint"], ["pid", "bigint"], ["hr", "bigint"]]}
QUERIES = {
    "mine": "SELECT pid, hr FROM vitals WHERE pid >= 2",
    "shared": "SELECT pid, hr FROM vitals WHERE pid >= 2 AND hr > 0",
}
WINDOWED = {  # one window node (same window, same reader): a branch each
    "count": "SELECT count(*) AS n FROM vitals [ROWS 100]",
    "recent": "SELECT pid, hr FROM vitals [ROWS 100]",
}
PAIRED = (  # a shared join (SCJoin): the stream with itself, on the patient
    "SELECT a.pid AS pid, a.hr AS left_hr, b.hr AS right_hr "
    "FROM vitals [ROWS 10] a JOIN vitals [ROWS 10] b ON a.pid = b.pid"
)


def _ok(answer, status: int = 200) -> dict:
    assert answer.status_code == status, answer.text
    return answer.json()


def _grants(client, permissions, kind, obj, role, revoke=False):
    for permission in permissions:
        body = {"permission": permission, "kind": kind, "object": obj, "role": role}
        answer = client.request("DELETE" if revoke else "POST", "/grants", json=body)
        _ok(answer)


def _elements(seqs: range, first: bool = False) -> str:
    lines = []
    if first:
        for sn, role in enumerate(("{CUSTOMER1}", "{OTHER}"), start=1):
            sp = {
                "type": "sp",
                "stream": "vitals",
                "provider": "ward",
                "seq": sn,
                "ts": 100,
                "sn": sn,
                "ddp": {"streams": "vitals", "tuples": "*", "attributes": "*"},
                "srp": {"roles": role, "grant_option": False},
                "sign": "+",
                "immutable": False,
            }
            lines.append(json.dumps(sp))
    for seq in seqs:
        values = {"id": seq, "pid": 1 + seq % 4, "hr": 60 + seq}
        tuple_ = {"type": "tuple", "stream": "vitals", "provider": "ward", "seq": seq}
        tuple_ |= {"tid": seq, "policy": {"ts": 100, "csn": 2}, "values": values}
        lines.append(json.dumps(tuple_))
    return "\n".join(lines)


def _cli(home, *args: str, code: int = 0):
    env = {"STREAMSHIELD_HOME": str(home), "STREAMSHIELD_PASSWORD": PASSWORD}
    if args[0] == "login":
        args = (*args, "--role", "ADMIN")
    result = CliRunner().invoke(main, ["client", *args], env=env, catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result


def _switches(client, query: str) -> dict[str, dict]:
    networks = _ok(client.get("/networks"))["networks"]
    return {
        s["kind"]: s
        for n in networks
        for s in n["switches"]
        if s["queries"] == [query] or (s["kind"] != "terminal" and query in s["queries"])
    }


def _count(subscriber: Subscriber) -> int | None:
    """The newest count an aggregate's subscriber got (None: none yet)."""
    rows = subscriber.rows()
    return rows[-1]["n"] if rows else None


def test_revoking_every_receiver_shuts_a_branch_and_a_new_one_resumes_it(
    spark, tmp_path, monkeypatch
):
    server = start_server(tmp_path, spark, USERS)
    try:
        joe = server.login("joe", ["ADMIN"])
        _ok(joe.post("/schemas", json=SCHEMA | {"tid": "id"}), 201)
        _ok(joe.post("/streams", json={"name": "vitals", "schema": "v"}), 201)
        _grants(joe, ("VIEW OBJECT", "WRITE", "INJECT SP"), "stream", "vitals", "INFO_PROVIDER")
        _grants(joe, ("VIEW OBJECT", "READ TUPLE"), "stream", "vitals", "CUSTOMER1")
        _grants(joe, ("ADD", "VIEW CATALOG"), "system", "system", "CUSTOMER1")
        _grants(joe, ("VIEW CATALOG",), "system", "system", "OTHER")
        _grants(joe, ("VIEW OBJECT", "READ TUPLE"), "stream", "vitals", "OTHER")  # the source
        al, bob = server.login("al", ["CUSTOMER1"]), server.login("bob", ["OTHER"])
        for name, text in (QUERIES | WINDOWED).items():
            _ok(al.post("/queries", json={"name": name, "text": text}), 201)
        joins = {"roles": {"CUSTOMER1": {"operators": ["join"], "max_queries": None}}}
        _ok(joe.put("/system/settings", json={"values": {"operator_limits": joins}}))
        _ok(al.post("/queries", json={"name": "paired", "text": PAIRED}), 201)
        share = ("VIEW OBJECT", "SUBSCRIBE")
        _grants(al, share, "stream", "shared_out", "OTHER")
        _grants(al, share, "stream", "recent_out", "OTHER")
        engine = server.service.cql
        internal = {
            n: server.service.queries.get(n).internal for n in [*QUERIES, *WINDOWED, "paired"]
        }
        assert set(engine.branches) == {internal[n] for n in QUERIES}
        one = {("vitals", "unlevelled")}
        assert set(engine.networks) == one, "both selections run in one network"
        assert set(engine.window_branches) == {internal[n] for n in WINDOWED}
        assert set(engine.window_networks) == one, "both windowed queries run in one network"
        assert len(engine.window_networks[("vitals", "unlevelled")].nodes()) == 1
        [join] = engine.joins.values()
        assert set(join.branches) == {internal["paired"]}, "the join's one branch"

        # Nobody receives yet: every switch is closed (deny by default).
        closed = _switches(joe, "shared")
        assert closed["terminal"]["open"] is False and closed["terminal"]["receivers"] == 0
        assert closed["terminal"]["users"] == []
        paired = _switches(joe, "paired")
        assert set(paired) == {"initial", "terminal"}, "one input (a self-join), one query"
        assert not paired["initial"]["open"] and not paired["terminal"]["open"]

        mine, theirs = Subscriber(al, "mine"), Subscriber(bob, "shared_out")
        counts, recent = Subscriber(al, "count"), Subscriber(bob, "recent_out")
        assert mine.status == theirs.status == counts.status == recent.status == 200
        ward = server.login("ward", ["INFO_PROVIDER"])
        report = ward.post("/streams/vitals/elements", content=_elements(range(3, 11), True))
        _ok(report)
        poll(lambda: len(theirs.rows()) == 6 and len(mine.rows()) == 6, timeout=120)
        poll(lambda: len(recent.rows()) == 8 and _count(counts) == 8, timeout=120)
        opened = _switches(joe, "shared")
        assert opened["terminal"]["open"] and opened["terminal"]["users"] == ["bob"]
        assert opened["initial"]["counter"] == 2, "al and bob receive a query behind it"
        window = _switches(joe, "recent")
        assert window["terminal"]["users"] == ["bob"] and window["in-network"]["open"]
        assert window["initial"]["counter"] == 2, "al (count) and bob (recent) read the node"

        # Revoke: Bob's subscriptions end, '-' sps close the queries' switches.
        for output in ("shared_out", "recent_out"):
            _grants(al, ("SUBSCRIBE",), "stream", output, "OTHER", revoke=True)
        poll(lambda: any(e == "closed" for e, _ in theirs.events), timeout=60)
        poll(lambda: any(e == "closed" for e, _ in recent.events), timeout=60)
        refused = Subscriber(bob, "recent_out")
        assert refused.status == 403, "no SUBSCRIBE: no new subscription either"
        tracker = spark.sparkContext.statusTracker()
        for running in (engine.networks, engine.window_networks):  # idle: round 1 is done
            handle = running[("vitals", "unlevelled")].handle
            poll(lambda h=handle: not h.status["isTriggerActive"], timeout=60, every=0.05)
        group, its_group, window_group, together = (
            f"network-vitals:{internal['shared']}",
            f"network-vitals:{internal['mine']}",
            f"windows-vitals:{internal['recent']}",
            "network-vitals:(delivery)",  # several listening branches: one delivery job
        )
        before, its_before, window_before, together_before = (
            set(tracker.getJobIdsForGroup(g)) for g in (group, its_group, window_group, together)
        )
        recent_store = server.service.queries.get("recent").store
        stored_before = recent_store.batches()
        delivered = record_groups(monkeypatch, spark.sparkContext)
        _ok(ward.post("/streams/vitals/elements", content=_elements(range(11, 19))))
        poll(lambda: len(mine.rows()) == 12 and _count(counts) == 16, timeout=120)
        assert set(tracker.getJobIdsForGroup(group)) == before, "an off branch runs no job"
        assert group not in delivered, "and delivers nothing"
        # The other one delivers: in a Spark job of its own or in the one delivery job, or with
        # no job at all, from the driver (a small pass: engine/frames/driver_rows.py).
        assert (
            set(tracker.getJobIdsForGroup(its_group)) > its_before
            or set(tracker.getJobIdsForGroup(together)) > together_before
            or {its_group, together} & set(delivered)
        ), "the other one runs"
        assert set(tracker.getJobIdsForGroup(window_group)) == window_before, "nor a window one"
        assert recent_store.batches() == stored_before, "it computed and stored nothing"
        assert len(recent.rows()) == 8, "bob got nothing after the revoke"
        # The join nobody receives: its windows took both rounds, no pair was computed.
        poll(lambda: sum(s.new_rows[0] for s in join.stats) == 16, timeout=120)
        assert tracker.getJobIdsForGroup(f"{join.name}:{internal['paired']}") == []
        assert all(s.computed == () and s.joined_rows == 0 for s in join.stats)
        assert server.service.queries.get("paired").store.batches() == []
        # The sp took effect in band, at that micro-batch: closed, counters down.
        off = _switches(joe, "shared")
        assert not off["terminal"]["open"] and off["terminal"]["users"] == []
        assert off["initial"]["counter"] == 1, "only al receives a query behind it now"
        assert _switches(al, "shared")["terminal"]["receivers"] == 0
        window = _switches(joe, "recent")
        assert not window["terminal"]["open"] and not window["in-network"]["open"]
        assert window["initial"]["counter"] == 1, "only al (count) reads the node now"

        # Bob may subscribe again: the branches resume within a micro-batch, new rows only.
        for output in ("shared_out", "recent_out"):
            _grants(al, ("SUBSCRIBE",), "stream", output, "OTHER")
        again, recent_again = Subscriber(bob, "shared_out"), Subscriber(bob, "recent_out")
        assert again.status == recent_again.status == 200
        _ok(ward.post("/streams/vitals/elements", content=_elements(range(19, 27))))
        poll(lambda: len(again.rows()) == 6 and len(recent_again.rows()) == 8, timeout=120)
        assert sorted(r["hr"] for r in again.rows()) == sorted(
            60 + s for s in range(19, 27) if 1 + s % 4 >= 2
        )
        assert sorted(r["hr"] for r in recent_again.rows()) == [60 + s for s in range(19, 27)]
        assert (
            set(tracker.getJobIdsForGroup(group)) != before
            or set(tracker.getJobIdsForGroup(together)) != together_before
            or {group, together} & set(delivered)
        ), "its own job, or one delivery job with al's branch, or from the driver"
        assert set(tracker.getJobIdsForGroup(window_group)) != window_before
        poll(lambda: len(mine.rows()) == 18 and _count(counts) == 24, timeout=60)
        # Al kept access throughout: her count saw every round's rows, none twice.
        totals = [r["n"] for r in counts.rows()]
        assert totals == sorted(totals) and {8, 16, 24} <= set(totals), totals
        assert len(recent.rows()) == 8, "the closed subscription got nothing more"

        # Who sees what: the owner her queries' switches without names; others nothing.
        seen = _ok(al.get("/networks"))["networks"]
        assert [(n["stream"], n["kind"], n["queries"]) for n in seen] == [
            ("vitals", "selections", ["mine", "shared"]),
            ("vitals", "windows", ["count", "recent"]),
            ("vitals JOIN vitals", "joins", ["paired"]),
        ]
        assert all(s["users"] is None for n in seen for s in n["switches"])
        assert _ok(bob.get("/networks"))["networks"] == []

        # Query-scoped sps by hand: administrators only; bad ones open nothing.
        sp = {"query": "shared", "user": "mallory", "sign": "+"}
        assert al.post("/networks/sps", json=sp).status_code == 403
        assert joe.post("/networks/sps", json=sp | {"query": "nope"}).status_code == 404
        assert joe.post("/networks/sps", json=sp | {"sign": "x"}).status_code == 422
        assert joe.post("/networks/sps", json=sp | {"user": ""}).status_code == 422
        _ok(joe.post("/networks/sps", json=sp | {"user": "nobody", "sign": "-"}))
        poll(lambda: sum(s.new_rows[0] for s in join.stats) == 24, timeout=120)  # 3 rounds
        pairs = Subscriber(al, "paired")  # never received: its history comes at once
        assert pairs.status == 200
        # Its first instant, with no append: every pair of the windows (seqs 17-26).
        held = [60 + s for s in range(17, 27)]
        first = sorted((a, b) for a in held for b in held if a % 4 == b % 4)
        poll(lambda: len(pairs.rows()) >= len(first), timeout=120)
        history = sorted((r["left_hr"], r["right_hr"]) for r in pairs.rows())
        assert history == first, "every pair of windows that took every tuple"
        _ok(ward.post("/streams/vitals/elements", content=_elements(range(27, 31))))
        poll(lambda: len(again.rows()) == 9, timeout=120)  # a micro-batch applied the sp
        # The window holds seqs 21-30 (hr 81-90); new are 27-30: per patient with k
        # tuples there, m of them new, k*k - (k-m)*(k-m) pairs; 16 in all.
        poll(lambda: len(pairs.rows()) >= len(first) + 16, timeout=120)
        got = sorted((r["left_hr"], r["right_hr"]) for r in pairs.rows()[len(first) :])
        window = [60 + s for s in range(21, 31)]
        assert got == sorted(
            (a, b) for a in window for b in window if a % 4 == b % 4 and max(a, b) >= 87
        ), "then the pairs new at the next instant"
        opened = _switches(joe, "paired")
        assert opened["terminal"]["users"] == ["al"] and opened["initial"]["counter"] == 1
        paired_store = server.service.queries.get("paired").store
        poll(lambda: bool(paired_store.batches()), timeout=60)  # stored after its delivery
        entries = _ok(joe.get("/audit", params={"action": "query_sp"}))["entries"]
        assert [e["detail"]["outcome"] for e in entries] == ["unmatched-revoke"]
        assert _switches(joe, "shared")["terminal"]["users"] == ["bob"], "it changed nothing"

        # The CLI shows the same state and injects the same sps.
        home = tmp_path / "joe_home"
        _cli(home, "login", "--url", server.url, "--ca", str(server.cert), "--user", "joe")
        listed = json.loads(_cli(home, "network", "list", "--output", "json").output)
        assert listed == _ok(joe.get("/networks"))
        table = _cli(home, "network", "list").output
        assert "terminal" in table and "bob" in table and "windows" in table
        assert "queued" in _cli(home, "network", "sp", "shared", "nobody", "-").output
        refused = _cli(home, "network", "sp", "nope", "bob", "+", code=1)
        assert "Traceback" not in refused.output + refused.stderr
        for subscriber in (mine, theirs, again, counts, recent, recent_again, pairs):
            subscriber.close()
    finally:
        stop_server(server)
