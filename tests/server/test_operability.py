"""Operating the server over TLS: /queries with statuses and progress, /healthz, /readyz,
/metrics (parsed by prometheus-client), the audit log's paging, filters and admin_only
stripping, and the system settings' schema. One server for the module; tests run in
file order and share its world.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamshield.catalog.audit import Event, Outcome
from streamshield.policy.elements import Channel
from streamshield.server.app import create_app
from streamshield.server.runner import serve_in_thread
from streamshield.server.service import ServerService
from streamshield.server.tls import ensure_self_signed
from tests.server.conftest import Server, Subscriber, audit_text, poll, sp_line, tuple_line

pytestmark = pytest.mark.spark

SCRAPE = "scrape-token-0123456789abcdef"
LITERAL = "XYZZY_LITERAL"


def _grant(client, permission, kind, obj, role=None, user=None) -> None:
    body = {"permission": permission, "kind": kind, "object": obj, "role": role, "user": user}
    answer = client.post("/grants", json=body)
    assert answer.status_code == 200, answer.text


def _rows(start: int, symbols: list[str]) -> str:
    lines = [sp_line("ticks", "ed", start, "{CUSTOMER1}")]
    lines += [
        tuple_line("ticks", "ed", start + 1 + i, start + i, {"id": start + i, "sym": s, "px": 1.5})
        for i, s in enumerate(symbols)
    ]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def world(server):
    """Joe's stream ``ticks``: Ed writes, Al reads and registers three queries: ``fine``
    (running, subscribed), ``broken`` (fails on its first bad row), ``idle`` (stopped).
    Mallory may view ``fine`` but is not its owner; Bob sees none of them."""
    joe = server.login("joe", ["ADMIN"])
    schema = {
        "name": "tick",
        "attributes": [["id", "bigint"], ["sym", "string"], ["px", "double"]],
        "tid": "id",
    }
    assert joe.post("/schemas", json=schema).status_code == 201
    assert joe.post("/streams", json={"name": "ticks", "schema": "tick"}).status_code == 201
    for role in ("INFO_PROVIDER", "CUSTOMER1"):
        _grant(joe, "VIEW CATALOG", "system", "system", role)
        _grant(joe, "VIEW OBJECT", "stream", "ticks", role)
    _grant(joe, "WRITE", "stream", "ticks", "INFO_PROVIDER")
    _grant(joe, "INJECT SP", "stream", "ticks", "INFO_PROVIDER")
    _grant(joe, "READ TUPLE", "stream", "ticks", "CUSTOMER1")
    _grant(joe, "ADD", "system", "system", "CUSTOMER1")
    al = server.login("al", ["CUSTOMER1"])
    texts = {
        "fine": f"SELECT sym, px FROM ticks WHERE sym <> '{LITERAL}'",
        "broken": "SELECT CAST(sym AS INT) AS n FROM ticks",
        "idle": "SELECT id FROM ticks",
    }
    for name, text in texts.items():
        answer = al.post("/queries", json={"name": name, "text": text})
        assert answer.status_code == 201, answer.text
    assert al.post("/queries/idle/stop").status_code == 200
    _grant(al, "VIEW OBJECT", "query", "fine", "OTHER")
    subscribers = [Subscriber(al, "fine"), Subscriber(al, "broken")]
    ed = server.login("ed", ["INFO_PROVIDER"])
    sent = ed.post("/streams/ticks/elements", content=_rows(1, ["10", "11", "abc"]))
    assert sent.json()["accepted"] == 4, sent.text
    yield {"joe": joe, "al": al, "ed": ed, "subscribers": subscribers}
    for subscriber in subscribers:
        subscriber.close()


def _by_name(client) -> dict[str, dict]:
    answer = client.get("/queries")
    assert answer.status_code == 200, answer.text
    return {q["name"]: q for q in answer.json()["queries"]}


def test_queries_show_status_progress_and_only_what_the_caller_may_view(server, world) -> None:
    al = world["al"]

    def settled() -> dict | None:
        queries = _by_name(al)
        done = (
            queries["broken"]["status"] == "failed"
            and queries["fine"]["last_batch"] is not None
            and queries["fine"]["processed_rows_per_second"] is not None
        )
        return queries if done else None

    queries = poll(settled, timeout=120)
    assert set(queries) == {"fine", "broken", "idle"}
    fine, broken, idle = queries["fine"], queries["broken"], queries["idle"]
    assert fine["status"] == "running" and fine["subscribers"] == 1
    assert fine["owner"] == "al" and fine["inputs"] == ["ticks"] and fine["output"] == "fine_out"
    assert fine["batch_duration_ms"] is not None and fine["error_class"] is None
    assert broken["error_class"] == "CAST_INVALID_INPUT", broken
    assert "abc" not in json.dumps(broken)
    if broken["failed_at"] is not None:  # kept by the query registry when it records it
        datetime.fromisoformat(broken["failed_at"])
    assert idle["status"] == "stopped" and idle["last_batch"] is None

    shown = al.get("/queries/fine").json()
    assert shown["text"].startswith("SELECT sym") and shown["status"] == "running"
    mallory = server.login("mallory", ["OTHER"])  # may view fine, is not its owner
    assert set(_by_name(mallory)) == {"fine"}
    assert mallory.get("/queries/fine").json()["text"] is None  # literals stay the owner's
    assert mallory.get("/queries/fine/explain").status_code == 403
    bob = server.login("bob", ["CUSTOMER2"])
    assert _by_name(bob) == {}
    hidden, missing = bob.get("/queries/fine"), bob.get("/queries/no_such")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()
    assert server.client().get("/queries").status_code == 401


def test_explain_names_shape_engine_and_checked_sql_only(server, world) -> None:
    answer = world["al"].get("/queries/fine/explain")
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    assert (plan["kind"], plan["engine"], plan["streams"]) == (
        "stream",
        "spark-streaming",
        ["ticks"],
    )
    assert plan["aggregate"] is False and plan["operators"] == [] and plan["windows"] == []
    assert "ticks" in plan["sql"] and LITERAL in plan["sql"]
    assert "_ss_" not in plan["sql"] and "ss_" not in plan["sql"].replace("ticks", "")
    # what Spark parsed: the owner's query over its one secured view, labels carried on;
    # the view's name is the only random word (no salt, no label value is SQL)
    secured = plan["secured_sql"]
    (view,) = set(re.findall(r"`(ss_[0-9a-f]{32}_ticks)`", secured))
    assert LITERAL in secured and "_ss_r0_0" in secured
    assert re.findall(r"[0-9a-f]{16,}", json.dumps(plan)) == [view[3:35]] * secured.count(view)
    assert world["joe"].get("/queries/fine/explain").status_code == 200  # administrator


def test_health_and_readiness(server, spark, tmp_path) -> None:
    with server.client() as anonymous:  # no token needed
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        ready = anonymous.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {
        "status": "ready",
        "checks": {
            "catalog": True,
            "ingest": True,
            "ingest_state": True,
            "queries_restored": True,
        },
        "detail": {},
    }
    # A server whose service has not started yet: alive, not ready; the scrape token works.
    other = _unstarted(spark, server, tmp_path)
    try:
        with other.client() as anonymous:
            assert anonymous.get("/healthz").status_code == 200
            starting = anonymous.get("/readyz")
            assert starting.status_code == 503
            assert starting.json()["status"] == "starting"
            assert starting.json()["checks"]["ingest"] is False
            scraped = anonymous.get("/metrics", headers={"Authorization": f"Bearer {SCRAPE}"})
            assert scraped.status_code == 200
            assert "streamshield_queries" in scraped.text
            wrong = anonymous.get("/metrics", headers={"Authorization": "Bearer wrong-token"})
            assert wrong.status_code == 401
    finally:
        other.running.stop()


def _unstarted(spark, server, tmp_path) -> Server:
    service = ServerService(spark, tmp_path, server.service.security)
    tls = ensure_self_signed(tmp_path / "tls")
    running = serve_in_thread(create_app(service, metrics_token=SCRAPE), "127.0.0.1", 0, tls)
    return Server(running.url, tls.cert, service, running)


def _metrics(client) -> dict[str, list]:
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    families = text_string_to_metric_families(answer.text)
    return {family.name: family.samples for family in families}


def _value(samples: list, name: str, **labels: str) -> float | None:
    for sample in samples:
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    return None


def test_metrics_are_for_administrators_and_parse(server, world) -> None:
    assert server.client().get("/metrics").status_code == 401
    assert world["al"].get("/metrics").status_code == 403
    bare = tuple_line("ticks", "ed.bare", 1, 500, {"id": 500, "sym": "9", "px": 2.5})  # no sp
    lines = f"not json\n{_rows(10, ['12'])}\n{bare}"
    bad = world["ed"].post("/streams/ticks/elements", content=lines)
    assert (bad.json()["accepted"], bad.json()["rejected"]) == (3, 1), bad.text

    def scraped() -> dict | None:
        families = _metrics(world["joe"])
        lags = families["streamshield_delivery_lag_seconds"]
        shield = families.get("streamshield_shield_tuples", [])
        done = _value(lags, "streamshield_delivery_lag_seconds_count", query="fine") and (
            _value(shield, "streamshield_shield_tuples_total", stream="ticks", decision="denied")
        )
        return families if done else None

    families = poll(scraped, timeout=90)
    elements = families["streamshield_ingest_elements"]
    total = "streamshield_ingest_elements_total"
    assert _value(elements, total, stream="ticks", outcome="accepted") == 7
    assert _value(elements, total, stream="ticks", outcome="rejected") == 1
    shield, labelled = families["streamshield_shield_tuples"], "streamshield_shield_tuples_total"
    assert _value(shield, labelled, stream="ticks", decision="accepted") == 4  # 10, 11, abc, 12
    assert _value(shield, labelled, stream="ticks", decision="denied") == 1  # the bare tuple
    queries = families["streamshield_queries"]
    assert _value(queries, "streamshield_queries", status="running") >= 1
    assert _value(queries, "streamshield_queries", status="failed") == 1
    assert _value(queries, "streamshield_queries", status="stopped") == 1
    subscribers = families["streamshield_query_subscribers"]
    assert _value(subscribers, "streamshield_query_subscribers", query="fine") == 1
    assert _value(subscribers, "streamshield_query_subscribers", query="idle") == 0
    durations = families["streamshield_query_batch_duration_seconds"]
    assert _value(durations, "streamshield_query_batch_duration_seconds", query="fine") >= 0
    rates = families["streamshield_ingest_rows_per_second"]
    assert _value(rates, "streamshield_ingest_rows_per_second", stream="ticks") > 0
    assert _value(families["streamshield_ingest_active"], "streamshield_ingest_active") == 1
    backlog = "streamshield_ingest_backlog_elements"
    assert _value(families[backlog], backlog) >= 0
    heap, kinds = families["streamshield_jvm_heap_bytes"], ("used", "committed", "max", "retained")
    figures = {kind: _value(heap, "streamshield_jvm_heap_bytes", kind=kind) for kind in kinds}
    assert 0 < figures["retained"] <= figures["max"] and figures["used"] > 0, figures
    text = world["joe"].get("/metrics").text
    assert LITERAL not in text and "abc" not in text


def test_audit_is_newest_first_paged_filtered_and_strips_admin_only(server, world) -> None:
    joe, al = world["joe"], world["al"]
    security = server.service.security
    security._audit(
        Event.SET_QUERY_STATUS,
        Outcome.FAILED,
        actor="al",
        detail={"query": "broken", "admin_only": {"message": "value 4242 in row"}},
    )
    first = joe.get("/audit", params={"limit": 3}).json()
    ids = [e["id"] for e in first["entries"]]
    assert ids == sorted(ids, reverse=True) and len(ids) == 3
    assert first["next_before_id"] == ids[-1]
    second = joe.get("/audit", params={"limit": 3, "before_id": ids[-1]}).json()
    assert all(e["id"] < ids[-1] for e in second["entries"])
    assert first["entries"][0]["at"].endswith("Z")
    datetime.fromisoformat(first["entries"][0]["at"])

    failures = {"action": "set_query_status", "user": "al"}
    as_admin = joe.get("/audit", params=failures).json()["entries"]
    assert as_admin[0]["detail"]["admin_only"] == {"message": "value 4242 in row"}
    as_al = al.get("/audit", params=failures).json()["entries"]
    assert as_al and as_al[0]["id"] == as_admin[0]["id"]
    assert "admin_only" not in as_al[0]["detail"] and "4242" not in audit_text(as_al)
    assert {e["actor"] for e in al.get("/audit", params={"limit": 1000}).json()["entries"]} == {
        "al"
    }
    assert al.get("/audit", params={"user": "joe"}).json()["entries"] == []

    later = datetime.now(UTC).isoformat()
    assert joe.get("/audit", params={"since": later}).json()["entries"] == []
    everything = joe.get("/audit", params={"until": later, "limit": 1000}).json()
    assert everything["next_before_id"] is None and len(everything["entries"]) > 3
    logins = joe.get("/audit", params={"action": "login", "limit": 1000}).json()["entries"]
    assert logins and {e["action"] for e in logins} == {"login"}
    for params, field in [
        ({"action": "no_such"}, "action"),
        ({"limit": 0}, "limit"),
        ({"since": "yesterday"}, "since"),
    ]:
        refused = joe.get("/audit", params=params)
        assert refused.status_code == 422, params
        assert field in refused.text and "yesterday" not in refused.text


def test_system_settings_refuse_unknown_keys_and_wrong_types_and_store_nothing(
    server, world
) -> None:
    joe = world["joe"]
    before = joe.get("/system/settings").json()
    for values, key in [
        (
            {"quota.max_running_queries": 4, "quota.max_runing_queries": 5},
            "quota.max_runing_queries",
        ),
        ({"quota.max_running_queries": "abc"}, "quota.max_running_queries"),
        (
            {"quota.max_state_rows": 7, "operator_limits": {"default": {"max_rows": "lots"}}},
            "operator_limits",
        ),
    ]:
        answer = joe.put("/system/settings", json={"values": values})
        assert answer.status_code == 422, answer.text
        assert key in answer.json()["message"]
        assert "abc" not in answer.text and "lots" not in answer.text
        assert joe.get("/system/settings").json() == before  # nothing stored, not even the good key
    answer = joe.put("/system/settings", json={"values": {"quota.max_running_queries": 12}})
    assert answer.status_code == 200 and answer.json()["quota.max_running_queries"] == 12
    stored = joe.get("/audit", params={"action": "set_setting"}).json()["entries"]
    assert [e["detail"]["key"] for e in stored] == ["quota.max_running_queries"]


def test_cli_query_and_audit_commands(server, world, tmp_path, monkeypatch) -> None:
    from click.testing import CliRunner

    from streamshield.cli import main
    from streamshield.client import Saved, save

    for _ in range(2):  # two more logins of al's own for the audit pages below
        server.login("al", ["CUSTOMER1"]).close()
    token = world["al"].headers["Authorization"].split()[1]
    save(Saved(server.url, token, str(server.cert), "al"), tmp_path)
    monkeypatch.setenv("STREAMSHIELD_HOME", str(tmp_path))
    runner = CliRunner()

    listed = runner.invoke(main, ["client", "query", "list", "--output", "json"])
    assert listed.exit_code == 0, listed.output
    assert {q["name"] for q in json.loads(listed.output)["queries"]} == {"fine", "broken", "idle"}
    table = runner.invoke(main, ["client", "query", "list"], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "CAST_INVALID_INPUT" in table.output
    shown = runner.invoke(main, ["client", "query", "show", "fine", "-o", "json"])
    assert json.loads(shown.output)["text"].startswith("SELECT sym")
    plan = runner.invoke(main, ["client", "query", "explain", "fine", "-o", "json"])
    assert json.loads(plan.output)["engine"] == "spark-streaming"
    missing = runner.invoke(main, ["client", "query", "show", "no_such"])
    assert missing.exit_code == 1 and "404" in missing.output and "Traceback" not in missing.output

    audit = runner.invoke(
        main, ["client", "audit", "--action", "login", "--limit", "2", "-o", "json"]
    )
    assert audit.exit_code == 0, audit.output
    page = json.loads(audit.output)
    assert [e["actor"] for e in page["entries"]] == ["al", "al"] and page["next_before_id"]
    older = runner.invoke(
        main, ["client", "audit", "--action", "login", "--before-id", str(page["next_before_id"])]
    )
    assert older.exit_code == 0 and "login" in older.output
    bad = runner.invoke(main, ["client", "audit", "--since", "yesterday"])
    assert bad.exit_code == 2 and "ISO-8601" in bad.output


def test_appends_are_refused_while_ingest_is_far_behind_and_accepted_once_it_drains(
    server, world
) -> None:
    """Admission control (flat memory under overload): over the backlog bound an
    append is a 503 ``ingest_backlog`` with Retry-After and lands nothing (its seqs stay
    free); once secure ingest has read the backlog the very same lines land."""
    ed, backlog = world["ed"], server.service.backlog
    before = backlog.limit
    backlog.limit = 3
    try:
        first = [sp_line("ticks", "ed.bl", 1, "{CUSTOMER1}")]
        first += [
            tuple_line("ticks", "ed.bl", s, 900 + s, {"id": 900 + s, "sym": "7", "px": 1.0})
            for s in range(2, 8)
        ]
        answer = ed.post("/streams/ticks/elements", content="\n".join(first))
        assert answer.status_code == 200 and answer.json()["accepted"] == 7, answer.text
        again = "\n".join(
            tuple_line("ticks", "ed.bl", s, 900 + s, {"id": 900 + s, "sym": "7", "px": 1.0})
            for s in (8, 9)
        )
        # Ingest needs a trigger and a batch before the watch reads its progress: the
        # next append comes well before that.
        refused = ed.post("/streams/ticks/elements", content=again)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"] == "ingest_backlog"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        landed = server.service.pipeline.landing.last_seq(Channel("ticks", "ed.bl"))
        assert landed == 7  # nothing of the refused append landed

        def resent() -> dict | None:
            answer = ed.post("/streams/ticks/elements", content=again)
            return answer.json() if answer.status_code == 200 else None

        accepted = poll(resent, timeout=120, every=1.0)
        assert accepted["accepted"] == 2 and accepted["rejected"] == 0  # seqs were free
    finally:
        backlog.limit = before


def test_appends_are_refused_while_the_backlog_exceeds_its_latency_budget(server, world) -> None:
    """A stalled ingest (simulated by moving the backlog's clock on, as if what landed had
    waited 30 s): far below the element bound, an append is a 503 ``ingest_backlog`` with
    Retry-After and lands nothing; once ingest has read what waited, the same lines land."""
    ed, backlog = world["ed"], server.service.backlog
    limit, budget, clock = backlog.limit, backlog.budget, backlog.clock
    backlog.limit, backlog.budget = 10**6, 2.0
    try:
        first = [sp_line("ticks", "ed.lb", 1, "{CUSTOMER1}")]
        first += [
            tuple_line("ticks", "ed.lb", s, 800 + s, {"id": 800 + s, "sym": "8", "px": 1.0})
            for s in range(2, 5)
        ]
        answer = ed.post("/streams/ticks/elements", content="\n".join(first))
        assert answer.status_code == 200 and answer.json()["accepted"] == 4, answer.text
        backlog.clock = lambda: clock() + 30.0
        again = tuple_line("ticks", "ed.lb", 5, 805, {"id": 805, "sym": "8", "px": 1.0})
        refused = ed.post("/streams/ticks/elements", content=again)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"] == "ingest_backlog"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        landed = server.service.pipeline.landing.last_seq(Channel("ticks", "ed.lb"))
        assert landed == 4  # nothing of the refused append landed

        def resent() -> dict | None:
            answer = ed.post("/streams/ticks/elements", content=again)
            return answer.json() if answer.status_code == 200 else None

        accepted = poll(resent, timeout=120, every=1.0)
        assert accepted["accepted"] == 1 and accepted["rejected"] == 0  # its seq was free
    finally:
        backlog.limit, backlog.budget, backlog.clock = limit, budget, clock


def test_four_mib_bodies_back_to_back_leave_the_server_responsive(server, world) -> None:
    """A provider posting bodies at the 4 MiB limit back to back: /healthz keeps
    answering at once (the body is decoded, split and landed in a worker thread), every
    acknowledged line is ingested, and one byte over the limit is a 413 ``too_large``."""
    import threading
    import time

    from streamshield.server.body_limit import ELEMENTS_LIMIT

    joe, ed = world["joe"], world["ed"]
    assert joe.post("/streams", json={"name": "bulk", "schema": "tick"}).status_code == 201
    for permission in ("WRITE", "INJECT SP", "VIEW OBJECT"):
        _grant(joe, permission, "stream", "bulk", "INFO_PROVIDER")
    pad = "x" * 1000
    sp = json.dumps(
        {
            "type": "sp",
            "provider": "ed.bulk",
            "ddp": {"streams": "bulk", "tuples": "*", "attributes": "*"},
            "srp": {"roles": "{CUSTOMER1}", "grant_option": False},
            "sign": "+",
            "immutable": False,
        }
    )

    def body(start: int) -> tuple[str, int]:
        lines = [sp] if start == 0 else []
        size, n = len(sp) + 1, start
        while True:
            row = {"provider": "ed.bulk", "values": {"id": n, "sym": pad, "px": 1.0}}
            line = json.dumps(row)
            if size + len(line) + 1 > ELEMENTS_LIMIT:
                return "\n".join(lines), n
            lines.append(line)
            size, n = size + len(line) + 1, n + 1

    acknowledged, answers = 0, []
    done = threading.Event()

    def provider() -> None:
        nonlocal acknowledged
        start = 0
        with server.client(ed.headers["Authorization"].split()[1]) as http:
            for _ in range(3):
                text, end = body(start)
                assert len(text.encode()) <= ELEMENTS_LIMIT
                answer = http.post("/streams/bulk/elements", params={"assign": "seq"}, content=text)
                answers.append(answer)
                if answer.status_code == 200:
                    assert answer.json()["rejected"] == 0, answer.text[:300]
                    acknowledged += answer.json()["accepted"]
                    start = end
        done.set()

    thread = threading.Thread(target=provider)
    thread.start()
    took: list[float] = []
    with server.client() as anonymous:
        while not done.is_set():
            began = time.perf_counter()
            assert anonymous.get("/healthz").status_code == 200
            took.append(time.perf_counter() - began)
    thread.join(60)
    for answer in answers:  # landed, or refused whole with a clear code (nothing landed)
        assert answer.status_code == 200 or (
            answer.status_code == 503 and answer.json()["error"] == "ingest_backlog"
        ), (answer.status_code, answer.text[:200])
    took.sort()
    print(
        f"/healthz during 4 MiB posts: n={len(took)} median={took[len(took) // 2]:.4f} "
        f"max={took[-1]:.4f}"
    )
    assert took[len(took) // 2] < 0.1 and took[int(len(took) * 0.9)] < 0.25, took[-10:]
    over = ed.post("/streams/bulk/elements", content=b"x" * (ELEMENTS_LIMIT + 1))
    assert (over.status_code, over.json()["error"]) == (413, "too_large")

    def ingested() -> dict | None:
        counts = joe.get("/streams/bulk/ingest").json()["counts"]
        labelled = counts["tuples_accepted"] + counts["tuples_denied"]
        return counts if labelled >= acknowledged - 1 else None  # the sp is no tuple

    assert acknowledged > 3000
    counts = poll(ingested, timeout=240, every=1.0)
    assert counts["tuples_accepted"] == acknowledged - 1
