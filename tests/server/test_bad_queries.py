"""A corpus of bad queries registered through the real server: each is a clear 4xx.

Every answer must have the expected status, a JSON error body whose message names the
column, clause, function or field at fault, and never a data value: each query carries
the literal ``SECRET_VALUE_7`` somewhere, and no message may contain it. One server
for the module; a query that was refused leaves nothing behind (the same name is
registered again by the next case).
"""

from __future__ import annotations

import logging
import re

import pytest

from tests.server.conftest import PASSWORD

pytestmark = pytest.mark.spark

SECRET = "SECRET_VALUE_7"
WHERE_SECRET = f"name = '{SECRET}'"

# (id, text, status, words the message must contain: at least one of each tuple)
CORPUS: list[tuple[str, str, int, tuple[str, ...]]] = [
    # unknown columns, in every clause and shape
    ("col_select", f"SELECT nope FROM vitals WHERE {WHERE_SECRET}", 422, ("nope",)),
    ("col_where", f"SELECT hr FROM vitals WHERE nope > 1 AND {WHERE_SECRET}", 422, ("nope",)),
    (
        "col_group",
        f"SELECT count(*) AS n FROM vitals WHERE {WHERE_SECRET} GROUP BY nope",
        422,
        ("nope",),
    ),
    (
        "col_having",
        f"SELECT id, count(*) AS n FROM vitals WHERE {WHERE_SECRET} GROUP BY id "
        "HAVING max(nope) > 1",
        422,
        ("nope",),
    ),
    ("col_qualified", f"SELECT v.nope FROM vitals v WHERE {WHERE_SECRET}", 422, ("nope",)),
    ("col_rows_window", f"SELECT nope FROM vitals [ROWS 5] WHERE {WHERE_SECRET}", 422, ("nope",)),
    (
        "col_range_window",
        f"SELECT count(nope) AS n FROM vitals [RANGE 10 SECONDS] WHERE {WHERE_SECRET}",
        422,
        ("nope",),
    ),
    (
        "col_sliding",
        f"SELECT max(nope) AS m FROM ticks [RANGE 10 SECONDS SLIDE 5 SECONDS] "
        f"WHERE label = '{SECRET}'",
        422,
        ("nope",),
    ),
    (
        "col_join_key",
        "SELECT a.hr FROM vitals [RANGE 10 SECONDS] a "
        f"JOIN ticks [RANGE 10 SECONDS] b ON a.nope = b.id WHERE a.{WHERE_SECRET}",
        422,
        ("nope",),
    ),
    (
        "col_join_select",
        "SELECT a.nope FROM vitals [RANGE 10 SECONDS] a "
        f"JOIN ticks [RANGE 10 SECONDS] b ON a.id = b.id WHERE a.{WHERE_SECRET}",
        422,
        ("nope",),
    ),
    ("col_reserved", f"SELECT _ss_r0_0 FROM vitals WHERE {WHERE_SECRET}", 422, ("_ss_",)),
    # unknown streams
    ("stream_unknown", f"SELECT * FROM nostream WHERE {WHERE_SECRET}", 422, ("nostream",)),
    (
        "stream_join_unknown",
        "SELECT a.hr FROM vitals [RANGE 10 SECONDS] a "
        "JOIN nostream [RANGE 10 SECONDS] b ON a.id = b.id",
        422,
        ("nostream",),
    ),
    # windows on what is no event time
    (
        "window_no_event_time",
        f"SELECT count(*) AS n FROM plain [RANGE 10 SECONDS SLIDE 5 SECONDS] WHERE {WHERE_SECRET}",
        422,
        ("event time",),
    ),
    (
        "window_fn_bigint",
        f"SELECT count(*) AS n FROM vitals WHERE {WHERE_SECRET} GROUP BY window(hr, '10 seconds')",
        422,
        ("window", "hr", "DATATYPE"),
    ),
    (
        "window_bad_duration",
        f"SELECT count(*) AS n FROM ticks WHERE label = '{SECRET}' "
        "GROUP BY window(at, 'ten seconds')",
        422,
        ("window", "duration", "interval", "INTERVAL"),
    ),
    ("window_zero_rows", "SELECT hr FROM vitals [ROWS 0]", 422, ("ROWS", "window")),
    # type errors found by analysis
    (
        "type_struct_compare",
        f"SELECT hr FROM vitals WHERE named_struct('a', hr) > 1 AND {WHERE_SECRET}",
        422,
        ("DATATYPE", "type"),
    ),
    (
        "type_bool_plus",
        f"SELECT (hr > 1) + 1 AS x FROM vitals WHERE {WHERE_SECRET}",
        422,
        ("DATATYPE", "type"),
    ),
    (
        "type_where_not_bool",
        f"SELECT hr FROM vitals WHERE concat(name, '{SECRET}')",
        422,
        ("DATATYPE", "type", "boolean", "BOOLEAN"),
    ),
    (
        "type_sum_string",
        f"SELECT sum(named_struct('a', hr)) AS s FROM vitals WHERE {WHERE_SECRET}",
        422,
        ("DATATYPE", "type", "sum"),
    ),
    # what streaming or the query shape does not support
    (
        "sort_stream",
        f"SELECT hr FROM vitals WHERE {WHERE_SECRET} ORDER BY hr",
        422,
        ("sort", "Sort", "ORDER", "not supported", "NOT_SUPPORTED", "UNSUPPORTED"),
    ),
    (
        "join_unwindowed",
        f"SELECT a.hr FROM vitals a JOIN ticks b ON a.id = b.id WHERE a.{WHERE_SECRET}",
        422,
        ("window", "join"),
    ),
    (
        "distinct_agg_stream",
        f"SELECT count(DISTINCT hr) AS n FROM vitals WHERE {WHERE_SECRET}",
        422,
        ("distinct", "DISTINCT", "not supported", "NOT_SUPPORTED", "UNSUPPORTED"),
    ),
    (
        "scalar_subquery",
        f"SELECT hr FROM vitals WHERE hr > (SELECT max(hr) FROM vitals) AND {WHERE_SECRET}",
        422,
        ("subquer", "SUBQUER", "not supported", "UNSUPPORTED"),
    ),
    ("window_in_subquery", "SELECT * FROM (SELECT hr FROM vitals [ROWS 3]) s", 422, ("window",)),
    (
        "bracket_garbage",
        f"SELECT hr FROM vitals [FOO 3] WHERE {WHERE_SECRET}",
        422,
        ("window", "parse", "["),
    ),
    ("parse_error", f"SELEC hr FROM vitals WHERE {WHERE_SECRET}", 422, ("parse",)),
    ("unterminated", "SELECT hr FROM vitals WHERE name = 'SECRET_VALUE_7", 422, ("read", "parse")),
    # empty and oversized texts
    ("empty", "", 422, ("text",)),
    ("whitespace", "   \n\t ", 422, ("empty", "text")),
    ("comment_only", f"-- {SECRET}\n/* nothing */", 422, ("empty",)),
    (
        "huge",
        "SELECT hr FROM vitals WHERE " + " OR ".join([WHERE_SECRET] * 2000),
        422,
        ("text", "long", "characters"),
    ),
    # hostile SQL
    ("ddl_drop", "DROP TABLE vitals", 422, ("DROP", "queries")),
    ("ddl_create", f"CREATE TABLE t AS SELECT '{SECRET}' AS x", 422, ("CREATE", "queries")),
    (
        "stacked_drop",
        f"SELECT hr FROM vitals WHERE {WHERE_SECRET}; DROP TABLE vitals",
        422,
        ("statement",),
    ),
    ("insert", "INSERT INTO vitals SELECT * FROM vitals", 422, ("INSERT", "queries")),
    ("set_conf", "SET spark.sql.ansi.enabled=false", 422, ("SET", "configuration")),
    ("read_file", "SELECT * FROM parquet.`/etc`", 422, ("file",)),
    ("read_file_json", "SELECT * FROM json.`/etc/passwd`", 422, ("file",)),
    (
        "reflect",
        f"SELECT reflect('java.lang.Runtime', 'getRuntime') FROM vitals WHERE {WHERE_SECRET}",
        422,
        ("reflect",),
    ),
    (
        "java_method",
        "SELECT java_method('java.lang.System', 'exit', 0) FROM vitals",
        422,
        ("java_method",),
    ),
    ("udf", f"SELECT my_udf(hr) FROM vitals WHERE {WHERE_SECRET}", 422, ("my_udf",)),
    ("create_function", "CREATE TEMPORARY FUNCTION f AS 'com.evil.F'", 422, ("CREATE", "queries")),
    ("input_file_name", "SELECT input_file_name() FROM vitals", 422, ("input_file_name",)),
    ("table_function", "SELECT * FROM range(10)", 422, ("range", "function")),
    ("hint", "SELECT /*+ BROADCAST(vitals) */ hr FROM vitals", 422, ("hint",)),
    ("qualified_table", "SELECT * FROM default.vitals", 422, ("qualified", "default")),
    # numbers past what their type holds (each was a 500 that also cut the next request
    # on the same connection): refused by bound, never echoed
    (
        "number_wide",
        f"SELECT hr FROM vitals WHERE hr > 1{'0' * 50} AND {WHERE_SECRET}",
        422,
        ("38 digits",),
    ),
    ("number_huge", f"SELECT hr FROM vitals WHERE hr > 1{'0' * 5000}", 422, ("38 digits",)),
    (
        "number_infinite",
        f"SELECT hr FROM vitals WHERE hr > 1e400 AND {WHERE_SECRET}",
        422,
        ("finite",),
    ),
    ("number_fraction", f"SELECT hr FROM vitals WHERE hr > 0.{'1' * 60}", 422, ("38 digits",)),
    ("number_bigint", "SELECT hr FROM vitals WHERE hr > 99999999999999999999L", 422, ("BIGINT",)),
    ("number_decimal_bd", f"SELECT hr FROM vitals WHERE hr > 1{'0' * 50}BD", 422, ("38",)),
    (
        "number_decimal_type",
        "SELECT CAST(hr AS DECIMAL(99, 0)) AS d FROM vitals",
        422,
        ("DECIMAL", "precision"),
    ),
    (
        "number_rows",
        "SELECT hr FROM vitals [ROWS 99999999999999999999999]",
        422,
        ("at most 2147483647",),
    ),
    (
        "number_range",
        "SELECT hr FROM vitals [RANGE 99999999999999 HOURS]",
        422,
        ("at most 2147483647",),
    ),
]


@pytest.fixture(scope="module")
def admin(server):
    """Joe (SYSTEM owner): streams with a bigint and a timestamp event time, and one without."""
    joe = server.login("joe", ["ADMIN"])
    schemas = [
        (
            "vitals_s",
            [["id", "bigint"], ["hr", "bigint"], ["name", "string"], ["t", "bigint"]],
            "t",
        ),
        (
            "ticks_s",
            [["id", "bigint"], ["v", "double"], ["label", "string"], ["at", "timestamp"]],
            "at",
        ),
        ("plain_s", [["id", "bigint"], ["name", "string"]], None),
    ]
    for name, attributes, event_time in schemas:
        body = {"name": name, "attributes": attributes, "tid": "id", "event_time": event_time}
        assert joe.post("/schemas", json=body).status_code == 201
    for stream, schema in (("vitals", "vitals_s"), ("ticks", "ticks_s"), ("plain", "plain_s")):
        answer = joe.post("/streams", json={"name": stream, "schema": schema})
        assert answer.status_code == 201, answer.text
    limits = {"roles": {"ADMIN": {"operators": ["join", "sort"], "max_queries": 50}}}
    answer = joe.put("/system/settings", json={"values": {"operator_limits": limits}})
    assert answer.status_code == 200, answer.text
    return joe


@pytest.mark.parametrize(("case", "text", "status", "words"), CORPUS, ids=[c[0] for c in CORPUS])
def test_a_bad_query_is_a_clear_4xx(admin, case, text, status, words) -> None:
    answer = admin.post("/queries", json={"name": f"bad_{case}", "text": text})
    assert answer.status_code == status, f"{case}: {answer.status_code} {answer.text}"
    body = answer.json()
    assert set(body) <= {"error", "message", "problems"}, body
    assert body["error"] and body["message"], body
    shown = body["message"] + " ".join(
        f"{p['field']} {p['problem']}" for p in body.get("problems", [])
    )
    assert any(word in shown for word in words), f"{case}: {shown!r} names none of {words}"
    assert SECRET not in answer.text, f"{case} echoes a value: {answer.text}"
    assert "SECRET" not in answer.text.upper() or SECRET[:6] not in answer.text


@pytest.mark.parametrize(
    "text",
    [
        "SELECT patient FROM vitals",
        "SELECT nosuchcol FROM vitals WHERE hr > 1",
        "SELECT count(nosuchcol) AS n FROM vitals [RANGE 10 SECONDS]",
    ],
)
def test_an_unknown_column_lists_every_column_of_the_stream(admin, text) -> None:
    """Not Spark's nearest few of the secured plan minus its label columns (which left
    out real columns and showed none at all for a name near no column)."""
    answer = admin.post("/queries", json={"name": "bad_column", "text": text})
    assert answer.status_code == 422, answer.text
    message = answer.json()["message"]
    assert "(columns of vitals: `id`, `hr`, `name`, `t`)" in message, message
    assert not re.search(r"_ss_|ss_[0-9a-f]{32}", message), message


def test_a_parse_error_points_at_the_misspelt_word(admin) -> None:
    answer = admin.post("/queries", json={"name": "bad_parse", "text": "SELEC hr FROM vitals"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "query_rejected.parse_error"
    assert "at line 1, column 1: a query starts with SELECT" in answer.json()["message"]


def _registrations(admin, name: str) -> list[tuple[str, str, dict]]:
    """The audit entries of the query ``name``, oldest first: (action, outcome, detail)."""
    entries = admin.get("/audit", params={"limit": 1000}).json()["entries"]
    named = [e for e in entries if (e["object"] or {}).get("name") == name]
    return [(e["action"], e["outcome"], e["detail"]) for e in reversed(named)]


@pytest.mark.parametrize(
    ("name", "text", "code"),
    [
        ("refused_by_spark", "SELECT nope FROM vitals", "query_rejected.unresolved_column"),
        ("refused_by_gate", "SELEC hr FROM vitals", "query_rejected.parse_error"),
        ("refused_by_shape", "SELECT hr FROM vitals [ROWS 0]", None),
    ],
)
def test_a_refused_registration_is_one_refused_entry_and_no_log_noise(
    admin, name, text, code
) -> None:
    """Not ``add_query ok`` followed by a ``remove_query`` its author never asked for;
    and PySpark's record of the analysis error (its Java stack trace, the secured plan
    with its label constants) reaches no log handler."""
    from pyspark.logger import PySparkLogger

    from streamshield.engine.spark_errors.analysis_errors import QUERY_CONTEXT_LOGGERS

    heard: list[logging.LogRecord] = []
    listener = logging.Handler()
    listener.emit = heard.append  # type: ignore[method-assign]
    loggers = [PySparkLogger.getLogger(n) for n in QUERY_CONTEXT_LOGGERS]
    for logger in loggers:
        logger.addHandler(listener)
    try:
        answer = admin.post("/queries", json={"name": name, "text": text})
    finally:
        for logger in loggers:
            logger.removeHandler(listener)
    assert answer.status_code == 422, answer.text
    code = code or answer.json()["error"]
    assert answer.json()["error"] == code
    assert _registrations(admin, name) == [("add_query", "refused", {"error": code})]
    assert not heard, [r.getMessage()[:200] for r in heard]


def test_a_registered_query_is_one_add_query_ok_entry(admin) -> None:
    assert (
        admin.post(
            "/queries", json={"name": "audited", "text": "SELECT hr FROM vitals"}
        ).status_code
        == 201
    )
    (entry,) = _registrations(admin, "audited")
    assert entry[:2] == ("add_query", "ok") and entry[2]["inputs"] == ["vitals"], entry
    assert admin.delete("/queries/audited").status_code == 200
    assert [e[:2] for e in _registrations(admin, "audited")][1:] == [("remove_query", "ok")]


def test_refused_queries_leave_nothing_behind(admin) -> None:
    names = {q["name"] for q in admin.get("/catalog").json()["queries"]}
    assert not {n for n in names if n.startswith("bad")}, names
    good = admin.post("/queries", json={"name": "bad", "text": "SELECT hr FROM vitals"})
    assert good.status_code == 201, good.text
    assert admin.delete("/queries/bad").status_code == 200


def test_a_refused_registration_under_a_taken_name_leaves_that_query_alone(admin) -> None:
    """A refusal removes what its own registration recorded, never the query already
    registered under that name: a typo in a second registration of ``kept`` must not
    delete the running ``kept``, its output stream or its grants."""
    answer = admin.post("/queries", json={"name": "kept", "text": "SELECT hr FROM vitals"})
    assert answer.status_code == 201, answer.text
    body = {"permission": "READ TUPLE", "kind": "stream", "object": "kept_out", "role": "OTHER"}
    assert admin.post("/grants", json=body).status_code == 200
    try:
        refused = [
            "SELEC hr FROM vitals",  # by the gate, before the name is looked at
            "SELECT hr FROM vitals [ROWS 0]",  # by the shape
            "SELECT nope FROM vitals",  # the name is taken (Spark would refuse it too)
            "SELECT hr FROM vitals",  # the name is taken
        ]
        for text in refused:
            again = admin.post("/queries", json={"name": "kept", "text": text})
            assert again.status_code in (409, 422), (text, again.text)
        kept = admin.get("/queries/kept")
        assert kept.status_code == 200 and kept.json()["status"] == "running", kept.text
        catalog = admin.get("/catalog").json()
        assert "kept" in {q["name"] for q in catalog["queries"]}
        assert "kept_out" in {s["name"] for s in catalog["streams"]}, catalog["streams"]
        grants = admin.get("/grants", params={"kind": "stream", "object": "kept_out"})
        assert grants.status_code == 200 and "OTHER" in grants.text, grants.text
    finally:
        admin.delete("/queries/kept")


def test_a_sliding_window_over_a_bigint_event_time_runs(admin) -> None:
    """Bigint event times count seconds (as in window_state): the window converts them."""
    text = "SELECT count(*) AS n FROM vitals [RANGE 10 SECONDS SLIDE 5 SECONDS]"
    answer = admin.post("/queries", json={"name": "slide_bigint", "text": text})
    assert answer.status_code == 201, answer.text
    assert admin.delete("/queries/slide_bigint").status_code == 200


def test_revoking_a_grant_that_does_not_exist_is_404(admin) -> None:
    body = {"permission": "READ TUPLE", "kind": "stream", "object": "vitals", "role": "OTHER"}
    answer = admin.request("DELETE", "/grants", json=body)
    assert answer.status_code == 404, answer.text
    assert "READ TUPLE" in answer.json()["message"]
    assert admin.post("/grants", json=body).status_code == 200
    assert admin.request("DELETE", "/grants", json=body).status_code == 200
    assert admin.request("DELETE", "/grants", json=body).status_code == 404


# -- the OpenAPI contract -------------------------------------------------------------------


def test_the_openapi_document_is_the_contract(server) -> None:
    with server.client() as anonymous:
        document = anonymous.get("/openapi.json").json()
    components = document["components"]["schemas"]
    assert "HTTPValidationError" not in components and "ValidationError" not in components
    assert "HTTPValidationError" not in str(document["paths"])
    assert {"error", "message", "problems"} <= set(components["ErrorBody"]["properties"])
    error_ref = "#/components/schemas/ErrorBody"
    operations = [
        (path, method, op)
        for path, methods in document["paths"].items()
        for method, op in methods.items()
        if path not in ("/healthz", "/readyz", "/metrics", "/schema/wire")
    ]
    assert len(operations) >= 17
    for path, method, op in operations:
        where = f"{method.upper()} {path}"
        responses = op["responses"]
        ok = responses.get("200") or responses.get("201")
        assert ok is not None, where
        content = ok.get("content", {})
        if path.endswith("/subscribe"):
            assert list(content) == ["text/event-stream"], where
        else:
            schema = content["application/json"]["schema"]
            assert schema.get("$ref") or schema.get("anyOf") or schema.get("oneOf"), where
            assert schema != {}, where
        if op.get("security"):  # the bearer-token dependency: 401 must be documented
            assert responses["401"]["content"]["application/json"]["schema"]["$ref"] == error_ref
        takes_input = "{" in path or "requestBody" in op or op.get("parameters")
        if takes_input:
            assert responses["422"]["content"]["application/json"]["schema"]["$ref"] == (
                error_ref
            ), where
        for code, answer in responses.items():
            if code.startswith("4"):
                assert answer["content"]["application/json"]["schema"]["$ref"] == error_ref
    assert sum(1 for _path, _method, op in operations if op.get("security")) >= 16
    login = document["paths"]["/login"]["post"]["responses"]
    assert {"401", "422", "429"} <= set(login)
    elements = document["paths"]["/streams/{name}/elements"]["post"]
    ndjson = elements["requestBody"]["content"]["application/x-ndjson"]
    assert '"type": "tuple"' in ndjson["example"] and "schema" in ndjson
    assert "/schema/wire" in elements["requestBody"]["description"]
    revoke = document["paths"]["/grants"]["delete"]["responses"]
    assert "404" in revoke


def test_answers_match_their_models(server, admin) -> None:
    with server.client() as anonymous:
        answer = anonymous.post(
            "/login", json={"user": "joe", "password": PASSWORD, "roles": ["ADMIN"]}
        )
    login = answer.json()
    assert set(login) == {"token", "user", "roles", "expires_at", "level"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", login["expires_at"]), login
    stream = admin.get("/streams/vitals").json()
    assert stream["kind"] == "input" and stream["event_time"] == "t"
    catalog = admin.get("/catalog").json()
    assert {"schemas", "streams", "queries"} == set(catalog)
    invalid = admin.post("/queries", json={"name": "x", "text": "SELECT 1", "extra": 1}).json()
    assert invalid["error"] == "invalid" and invalid["problems"][0]["field"] == "body.extra"
