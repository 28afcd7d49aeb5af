"""The query interface's front end (paper 1, §4): sp scripts, CQL windows, ON RESULT, shapes.

Windows and ON RESULT are found on tokens; every test that a ``[`` or an ``ON RESULT``
in the wrong place is *not* syntax sits next to one showing that the right place is.
"""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamshield.lang.continuous import (
    ContinuousQuery,
    JoinKey,
    ShapeKind,
    SpInsert,
    parse_request,
    plan_shape,
    sliding_window_sql,
)
from streamshield.lang.query_check import QueryRejected, check_query
from streamshield.lang.windows import (
    NOW,
    WindowKind,
    WindowSpec,
    duration_seconds,
    range_,
    rows,
    spark_duration,
)
from streamshield.policy.punctuation import Sign
from streamshield.policy.sp_patterns import ANY, Literal, Range

STREAMS = ("vitals", "beds", "s")

FIG_8B = """SELECT Patient_id, Beats_per_min, Timestamp FROM vitals
WHERE Beats_per_min > 80
ON RESULT
INSERT SP AS sp_result INTO STREAM
LET
sp_result.DDP = TUPLES:ALL,
sp_result.SRP = frbac:Cardiologist,
sp_result.SIGN = POSITIVE,
sp_result.IMMUTABLE = TRUE;"""


@pytest.fixture(autouse=True)
def _quiet_sqlglot(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="sqlglot")


def query(text: str) -> ContinuousQuery:
    result = parse_request(text)
    assert isinstance(result, ContinuousQuery)
    return result


def rejected(text: str, rule: str) -> QueryRejected:
    with pytest.raises(QueryRejected) as info:
        parse_request(text)
    assert info.value.rule == rule, f"{text!r}: {info.value}"
    return info.value


def shape_rejected(text: str) -> QueryRejected:
    with pytest.raises(QueryRejected) as info:
        plan_shape(query(text))
    assert info.value.rule == "query_shape", str(info.value)
    return info.value


def words(sql: str) -> list[str]:
    return sql.split()


# ------------------------------------------------------------------------- sp scripts


def test_sp_script_gives_its_stream_and_statements() -> None:
    text = (
        "INSERT SP INTO STREAM vitals LET DDP = TUPLES: [1, 5], SRP = rbac:Doctor;\n"
        "insert security punctuation into stream vitals LET DDP = ATTRIBUTES: hr, "
        "SRP = rbac:Nurse, SIGN = NEGATIVE"
    )
    result = parse_request(text)
    assert isinstance(result, SpInsert)
    assert result.stream == "vitals"
    first, second = result.statements
    assert first.ddp.tuples == Range(1, 5) and first.srp.roles == Literal("Doctor")
    assert second.sign is Sign.DENY and second.ddp.attributes == Literal("hr")


def test_sp_script_after_a_comment_is_still_a_script() -> None:
    result = parse_request(
        "-- policy for vitals\nINSERT SP INTO STREAM vitals LET DDP = TUPLES: 1, SRP = rbac:Doctor"
    )
    assert isinstance(result, SpInsert) and result.stream == "vitals"


def test_sp_script_into_two_streams_is_refused_naming_the_statement() -> None:
    error = rejected(
        "INSERT SP INTO STREAM vitals LET DDP = TUPLES: 1, SRP = rbac:A;"
        "INSERT SP INTO STREAM beds LET DDP = TUPLES: 1, SRP = rbac:A",
        "sp_stream",
    )
    assert "statement 2" in error.message and "'beds'" in error.message


def test_sp_script_without_a_stream_is_refused() -> None:
    error = rejected("INSERT SP INTO STREAM LET DDP = TUPLES: 1, SRP = rbac:A", "sp_stream")
    assert "statement 1" in error.message


def test_malformed_sp_script_says_where_and_does_not_echo_the_text() -> None:
    error = rejected(
        "INSERT SP INTO STREAM vitals LET DDP = TUPLES: 1, SRP = rbac:A, SECRET_4711", "sp_syntax"
    )
    assert error.line == 1 and error.column is not None
    assert "4711" not in str(error)


@pytest.mark.parametrize("attributes", ["TAGGED PHI", "NOT TAGGED {PHI, PII}"])
def test_a_users_sp_cannot_name_attributes_by_tag(attributes: str) -> None:
    """Tags resolve against a stream for server policies; a provider's sp names them."""
    error = rejected(
        "INSERT SP INTO STREAM vitals LET DDP = TUPLES: 1, SRP = rbac:A;"
        f"INSERT SP INTO STREAM vitals LET DDP = ATTRIBUTES: {attributes}, SRP = rbac:A",
        "sp_syntax",
    )
    assert "statement 2" in error.message and "TAGGED" in error.message


@pytest.mark.parametrize(
    "tail",
    [
        "; DROP TABLE vitals",
        "; SELECT * FROM vitals",
        " -- \nSELECT 1",
        "' OR '1'='1",
        "`; SET spark.x=1`",
    ],
)
def test_sql_smuggled_into_an_sp_script_is_an_sp_error(tail: str) -> None:
    text = "INSERT SP INTO STREAM vitals LET DDP = TUPLES: 1, SRP = rbac:A" + tail
    with pytest.raises(QueryRejected) as info:
        parse_request(text)
    assert info.value.rule in {"sp_syntax", "parse_error"}


# ---------------------------------------------------------------------------- windows


@pytest.mark.parametrize(
    ("window", "spec"),
    [
        ("[NOW]", NOW),
        ("[now]", NOW),
        ("[ROWS 100]", rows(100)),
        ("[RANGE 60]", range_(60)),
        ("[RANGE 1 SECOND]", range_(1)),
        ("[RANGE 60 SECONDS]", range_(60)),
        ("[RANGE 1 MINUTE]", range_(60)),
        ("[RANGE 5 MINUTES]", range_(300)),
        ("[RANGE 1 HOUR]", range_(3600)),
        ("[RANGE 2 hours SLIDE 30 minutes]", range_(7200, 1800)),
        ("[RANGE 1 MINUTE SLIDE 10 SECONDS]", range_(60, 10)),
        ("[RANGE 60 SLIDE 60]", range_(60, 60)),
        ("[ ROWS\n 7 ]", rows(7)),
    ],
)
def test_every_window_form_and_unit(window: str, spec: WindowSpec) -> None:
    q = query(f"SELECT * FROM s {window}")
    assert q.windows == {"s": ("s", spec)}
    assert words(q.sql) == ["SELECT", "*", "FROM", "s"]


@pytest.mark.parametrize(
    ("from_clause", "key"),
    [("s [ROWS 3] AS x", "x"), ("s [ROWS 3] x", "x"), ("`s` [ROWS 3]", "s"), ("s[ROWS 3]x", "x")],
)
def test_window_keys_are_aliases_or_stream_names(from_clause: str, key: str) -> None:
    assert query(f"SELECT * FROM {from_clause}").windows == {key: ("s", rows(3))}


def test_join_of_two_windows() -> None:
    q = query(
        "SELECT v.pid, b.bed FROM vitals [RANGE 60 SECONDS] v "
        "JOIN beds [ROWS 10] b ON v.pid = b.pid"
    )
    assert q.windows == {"v": ("vitals", range_(60)), "b": ("beds", rows(10))}
    assert words(q.sql) == words("SELECT v.pid, b.bed FROM vitals v JOIN beds b ON v.pid = b.pid")
    assert check_query(q.sql, STREAMS).streams == ("beds", "vitals")


def test_blanking_keeps_positions_for_later_errors() -> None:
    text = "SELECT *\nFROM s [ROWS 10]\nWHERE x = 1"
    q = query(text)
    assert len(q.sql) == len(text) and q.sql.splitlines()[2] == "WHERE x = 1"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT arr[0], m['k'] FROM s",
        "SELECT * FROM s WHERE arr[1] = 2",
        "SELECT '[ROWS 10]' AS x FROM s",
        "SELECT * FROM s -- [ROWS 10]",
        "SELECT * FROM s /* [ROWS 10] */",
        "SELECT `a[ROWS 1]` FROM s",
        "SELECT * FROM s JOIN beds ON s.arr[0] = beds.pid",
        "SELECT * FROM s GROUP BY arr[0]",
        'SELECT "FROM s [NOW]" FROM s',
    ],
)
def test_brackets_that_are_not_windows(sql: str) -> None:
    q = query(sql)
    assert q.windows == {}
    assert q.sql == sql


@pytest.mark.parametrize(
    ("sql", "rule"),
    [
        ("SELECT * FROM (SELECT * FROM s [ROWS 10]) t", "window_place"),
        ("WITH c AS (SELECT * FROM s [NOW]) SELECT * FROM c", "window_place"),
        ("SELECT * FROM s WHERE x IN (SELECT y FROM beds [ROWS 1])", "window_place"),
        ("SELECT * FROM (SELECT * FROM s) [ROWS 10]", "window_place"),
        ("SELECT * FROM s AS x [ROWS 10]", "window_place"),
        ("SELECT * FROM db.s [ROWS 10]", "window_place"),
        ("SELECT * FROM s [ROWS 1] a, s [ROWS 1] A", "window_place"),
        ("SELECT * FROM s [ROWS 10", "window_syntax"),
        ("SELECT * FROM s [ROWS [10]]", "window_syntax"),
        ("SELECT * FROM s []", "window_syntax"),
        ("SELECT * FROM s [ROWS]", "window_syntax"),
        ("SELECT * FROM s [ROWS 0]", "window_syntax"),
        ("SELECT * FROM s [ROWS -1]", "window_syntax"),
        ("SELECT * FROM s [ROWS 1.5]", "window_syntax"),
        ("SELECT * FROM s [ROWS 1e3]", "window_syntax"),
        ("SELECT * FROM s [ROWS 10 SECONDS]", "window_syntax"),
        ("SELECT * FROM s [ROWS 10 SLIDE 2]", "window_syntax"),
        ("SELECT * FROM s [RANGE 10 DAYS]", "window_syntax"),
        ("SELECT * FROM s [RANGE 10 SLIDE 20]", "window_syntax"),
        ("SELECT * FROM s [RANGE 10 SLIDE]", "window_syntax"),
        ("SELECT * FROM s [RANGE 99999999999 HOURS]", "window_syntax"),
        ("SELECT * FROM s [RANGE 9999999999999]", "window_syntax"),
        ("SELECT * FROM s [NOW 1]", "window_syntax"),
        ("SELECT * FROM s ['ROWS' 10]", "window_syntax"),
        ("SELECT * FROM s [`ROWS` 10]", "window_syntax"),
        ("SELECT * FROM s [ROWS '10']", "window_syntax"),
        ("SELECT * FROM s [PARTITION BY x ROWS 1]", "window_syntax"),
        ("SELECT * FROM s [RANGE UNBOUNDED]", "window_syntax"),
    ],
)
def test_malformed_or_misplaced_windows_are_refused(sql: str, rule: str) -> None:
    error = rejected(sql, rule)
    assert error.line == 1 and error.column is not None
    assert f"line 1, column {error.column}" in error.message


def test_window_errors_point_at_the_problem() -> None:
    text = "SELECT *\nFROM s [ROWS ten]"
    error = rejected(text, "window_syntax")
    assert (error.line, error.column) == (2, text.splitlines()[1].index("ten") + 1)


def test_window_errors_do_not_echo_what_is_inside() -> None:
    error = rejected("SELECT * FROM s [ROWS 'patient-4711']", "window_syntax")
    assert "4711" not in str(error)
    error = rejected("SELECT * FROM s [SECRET4711]", "window_syntax")
    assert "4711" not in str(error)


@settings(max_examples=200, deadline=None)
@given(
    spec=st.one_of(
        st.just(NOW),
        st.integers(1, 10**6).map(rows),
        st.integers(1, 10**6).flatmap(
            lambda t: st.one_of(st.none(), st.integers(1, t)).map(lambda s: range_(t, s))
        ),
    ),
    alias=st.one_of(st.none(), st.sampled_from(["x", "v1", "`odd name`"])),
)
def test_window_text_round_trips(spec: WindowSpec, alias: str | None) -> None:
    text = f"SELECT * FROM vitals {spec.text()}" + (f" AS {alias}" if alias else "")
    q = query(text)
    key = alias.strip("`") if alias else "vitals"
    assert q.windows == {key: ("vitals", spec)}
    assert words(q.sql) == words(text.replace(spec.text(), ""))


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("[]()'\"`;-/*, \nSELCTFROMNWsx0123ONRESULTINSP")), max_size=60
    )
)
def test_any_text_is_parsed_or_rejected_never_crashes(text: str) -> None:
    try:
        result = parse_request(text)
        if isinstance(result, ContinuousQuery):
            plan_shape(result)
    except QueryRejected as error:
        assert error.rule


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="'\\", codec="ascii"), max_size=40))
def test_brackets_inside_strings_are_never_windows(inside: str) -> None:
    sql = f"SELECT '{inside}' AS c FROM s"
    q = query(sql)
    assert q.windows == {} and q.on_result == () and q.sql == sql


# -------------------------------------------------------------------------- ON RESULT


def test_fig_8b_on_result() -> None:
    q = query(FIG_8B)
    assert "ON RESULT" not in q.sql and q.sql.endswith("Beats_per_min > 80")
    (sp,) = q.on_result
    assert sp.name == "sp_result" and sp.stream is None
    assert sp.ddp.streams == ANY and sp.ddp.tuples == ANY
    assert sp.srp.roles == Literal("Cardiologist") and sp.immutable
    check_query(q.sql, STREAMS)


@pytest.mark.parametrize(
    "clause",
    [
        "ON RESULT (INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A)",
        "ON RESULT (INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A);",
        "on result INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A;;",
        "ON\n  RESULT -- sps follow\n INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A",
    ],
)
def test_on_result_with_or_without_parentheses(clause: str) -> None:
    q = query("SELECT * FROM vitals [NOW] " + clause)
    assert len(q.on_result) == 1 and q.windows == {"vitals": ("vitals", NOW)}
    assert words(q.sql) == ["SELECT", "*", "FROM", "vitals"]


@pytest.mark.parametrize("separator", [",", ";"])
def test_several_on_result_sps(separator: str) -> None:
    q = query(
        "SELECT * FROM vitals ON RESULT (INSERT SP INTO STREAM LET DDP = TUPLES: ALL, "
        f"SRP = rbac:A{separator} INSERT SP INTO STREAM LET DDP = ATTRIBUTES: hr, SRP = rbac:B, "
        "SIGN = NEGATIVE)"
    )
    first, second = q.on_result
    assert first.sign is Sign.GRANT and second.sign is Sign.DENY
    assert second.ddp.attributes == Literal("hr")


def test_on_result_may_name_the_output_stream() -> None:
    q = query(
        "SELECT * FROM vitals ON RESULT INSERT SP INTO STREAM out LET DDP = TUPLES: ALL, "
        "SRP = rbac:A"
    )
    assert q.on_result[0].stream == "out"


def test_on_result_sps_naming_two_streams_are_refused() -> None:
    rejected(
        "SELECT * FROM vitals ON RESULT INSERT SP INTO STREAM a LET DDP = TUPLES: ALL, "
        "SRP = rbac:A; INSERT SP INTO STREAM b LET DDP = TUPLES: ALL, SRP = rbac:A",
        "on_result",
    )


def test_a_join_on_a_column_called_result_is_not_on_result() -> None:
    sql = "SELECT * FROM vitals JOIN beds ON result = beds.pid"
    q = query(sql)
    assert q.sql == sql and q.on_result == ()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A' FROM s",
        "SELECT * FROM s -- ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL",
        "SELECT * FROM s /* ON RESULT INSERT SP */",
        "SELECT `ON RESULT` FROM s",
    ],
)
def test_on_result_in_strings_and_comments_is_not_a_clause(sql: str) -> None:
    q = query(sql)
    assert q.sql == sql and q.on_result == ()


@pytest.mark.parametrize(
    "text",
    [
        # twice
        "SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A "
        "ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:B",
        # inside a subquery
        "SELECT * FROM (SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, "
        "SRP = rbac:A) t",
        # not followed by sps
        "SELECT * FROM s ON RESULT",
        "SELECT * FROM s ON RESULT DROP TABLE s",
        "SELECT * FROM s ON RESULT ()",
        # unbalanced or trailing text after the parentheses
        "SELECT * FROM s ON RESULT (INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A",
        "SELECT * FROM s ON RESULT (INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A) "
        "UNION SELECT * FROM beds",
        # malformed sps
        "SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL",
        "SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET SRP = rbac:A",
        "SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = ldap:A",
        "SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A; "
        "DROP TABLE s",
        "SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A "
        "UNION SELECT * FROM beds",
        "SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, "
        "SRP = rbac:A /* , B */",
    ],
)
def test_hostile_or_malformed_on_result_is_refused(text: str) -> None:
    error = rejected(text, "on_result")
    assert error.line is not None


def test_on_result_sql_injection_never_reaches_the_sql() -> None:
    """Whatever follows ON RESULT is parsed as sps only; the SQL ends before it."""
    q = query(
        "SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, "
        'SRP = rbac:"x; DROP TABLE s; --"'
    )
    assert words(q.sql) == ["SELECT", "*", "FROM", "s"]
    assert q.on_result[0].srp.roles == Literal("x; DROP TABLE s; --")


def test_on_result_errors_point_into_the_whole_text_and_hide_the_input() -> None:
    text = (
        "SELECT * FROM s\nON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A,"
        " SECRET_4711"
    )
    error = rejected(text, "on_result")
    assert error.line == 2 and "4711" not in str(error)


def test_on_result_keeps_deny_sps_as_denials() -> None:
    q = query(
        "SELECT * FROM s ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A, "
        "SIGN = -"
    )
    assert q.on_result[0].sign is Sign.DENY


def test_plain_sql_passes_through_untouched() -> None:
    sql = "SELECT pid, count(*) FROM vitals WHERE hr > 80 GROUP BY pid"
    assert parse_request(sql) == ContinuousQuery(sql)


def test_untokenisable_text_is_a_parse_error() -> None:
    rejected("SELECT 'unterminated FROM s", "parse_error")
    rejected("   ", "parse_error")
    rejected("ON RESULT INSERT SP INTO STREAM LET DDP = TUPLES: ALL, SRP = rbac:A", "parse_error")


def test_too_long_text_is_refused_before_parsing() -> None:
    rejected("SELECT * FROM s " + " " * 100_001, "too_long")


# ----------------------------------------------------------------------------- shapes


def test_shape_of_a_plain_query_is_the_native_stream_path() -> None:
    shape = plan_shape(query("SELECT pid FROM vitals WHERE hr > 80"))
    assert shape.kind is ShapeKind.STREAM and not shape.aggregate and shape.windows == ()


def test_shape_of_a_sliding_aggregate() -> None:
    shape = plan_shape(
        query("SELECT pid, avg(hr) FROM vitals [RANGE 1 MINUTE SLIDE 10 SECONDS] GROUP BY pid")
    )
    assert shape.kind is ShapeKind.SLIDING_AGGREGATE and shape.aggregate
    assert shape.windows == (("vitals", "vitals", range_(60, 10)),)


def test_range_without_slide_aggregates_every_second() -> None:
    shape = plan_shape(query("SELECT count(*) FROM vitals [RANGE 30] v"))
    assert shape.kind is ShapeKind.SLIDING_AGGREGATE
    assert shape.windows[0][2].hop == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM vitals [ROWS 10]",
        "SELECT avg(hr) FROM vitals [ROWS 10]",
        "SELECT * FROM vitals [NOW]",
        "SELECT * FROM vitals [RANGE 60]",
    ],
)
def test_shape_of_window_relations(sql: str) -> None:
    assert plan_shape(query(sql)).kind is ShapeKind.WINDOW_RELATION


def test_shape_of_a_two_stream_equi_join() -> None:
    shape = plan_shape(
        query(
            "SELECT v.pid FROM vitals [RANGE 60 SECONDS] v JOIN beds [ROWS 10] b "
            "ON v.pid = b.pid AND b.ward = v.ward"
        )
    )
    assert shape.kind is ShapeKind.JOIN and "join" in shape.operators
    assert shape.join_keys == (JoinKey("v", "pid", "b", "pid"), JoinKey("v", "ward", "b", "ward"))
    assert [item for item, _, _ in shape.windows] == ["v", "b"]


def test_join_using_and_self_join() -> None:
    shape = plan_shape(
        query("SELECT * FROM vitals [NOW] a INNER JOIN vitals [ROWS 5] b USING (pid)")
    )
    assert shape.join_keys == (JoinKey("a", "pid", "b", "pid"),)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM vitals v JOIN beds b ON v.pid = b.pid",  # no windows
        "SELECT * FROM vitals [ROWS 1] v JOIN beds b ON v.pid = b.pid",  # one side only
        "SELECT * FROM vitals [ROWS 1] v JOIN beds [ROWS 1] b ON v.pid > b.pid",
        "SELECT * FROM vitals [ROWS 1] v JOIN beds [ROWS 1] b ON v.pid = b.pid OR v.x = b.x",
        "SELECT * FROM vitals [ROWS 1] v JOIN beds [ROWS 1] b ON v.pid = b.pid AND v.hr > 3",
        "SELECT * FROM vitals [ROWS 1] v JOIN beds [ROWS 1] b ON pid = bid",
        "SELECT * FROM vitals [ROWS 1] v JOIN beds [ROWS 1] b ON v.pid = v.x",
        "SELECT * FROM vitals [ROWS 1] v LEFT JOIN beds [ROWS 1] b ON v.pid = b.pid",
        "SELECT * FROM vitals [ROWS 1] v NATURAL JOIN beds [ROWS 1] b",
        "SELECT * FROM vitals [ROWS 1] v CROSS JOIN beds [ROWS 1] b",
        "SELECT * FROM vitals [ROWS 1] v, beds [ROWS 1] b WHERE v.pid = b.pid",
        "SELECT * FROM vitals [ROWS 1] v JOIN beds [ROWS 1] b ON v.pid = b.pid "
        "JOIN s [ROWS 1] c ON c.pid = b.pid",
        "SELECT * FROM vitals [ROWS 1] v JOIN (SELECT * FROM beds) b ON v.pid = b.pid",
        "SELECT * FROM vitals [ROWS 1] v WHERE v.pid IN (SELECT a.pid FROM beds a JOIN s "
        "ON a.pid = s.pid)",
        "SELECT * FROM vitals [ROWS 1] UNION SELECT * FROM beds [ROWS 1]",
        "SELECT * FROM vitals [ROWS 1] WHERE pid IN (SELECT pid FROM beds)",
        "SELECT (SELECT max(x) FROM beds) FROM vitals [NOW]",
        "SELECT * FROM vitals [RANGE 60 SLIDE 10]",  # slide without aggregate
        "SELECT * FROM vitals [RANGE 60 SLIDE 10] v JOIN beds [ROWS 1] b ON v.pid = b.pid",
        "SELECT count(*) FROM vitals [RANGE 60] GROUP BY window(ts, '1 minute')",
        "WITH vitals AS (SELECT * FROM beds) SELECT * FROM vitals [ROWS 1]",
    ],
)
def test_unsupported_shapes_are_refused(sql: str) -> None:
    shape_rejected(sql)


def test_shape_records_user_window_calls_and_sorts() -> None:
    shape = plan_shape(
        query(
            "SELECT window(ts, '10 minutes', '1 minute'), count(*) FROM vitals "
            "GROUP BY window(ts, '10 minutes', '1 minute') ORDER BY 1"
        )
    )
    assert shape.kind is ShapeKind.STREAM and shape.aggregate
    assert shape.time_windows == (600.0, 600.0) and shape.operators == {"sort"}
    unknown = plan_shape(query("SELECT count(*) FROM vitals GROUP BY session_window(ts, '5 s')"))
    assert unknown.time_windows == (None,)


def test_window_rows_counts_declared_rows() -> None:
    shape = plan_shape(
        query("SELECT * FROM vitals [ROWS 10] v JOIN beds [ROWS 5] b ON v.pid = b.pid")
    )
    assert shape.window_rows == 15


# ------------------------------------------------------------------ sliding rewrite


def test_sliding_window_rewrite_groups_by_spark_window() -> None:
    q = query("SELECT pid, avg(hr) AS m FROM vitals [RANGE 1 MINUTE SLIDE 10 SECONDS] GROUP BY pid")
    (_, _, spec) = plan_shape(q).windows[0]
    sql = sliding_window_sql(q.sql, "event_time", spec)
    assert re.search(
        r"GROUP BY pid, `?WINDOW`?\(`event_time`, '60 seconds', '10 seconds'\)", sql, re.IGNORECASE
    )
    assert sql.upper().startswith("SELECT `WINDOW`(")
    checked = check_query(sql, STREAMS)
    assert checked.streams == ("vitals",)
    assert "ss_v" in checked.rewrite({"vitals": "ss_v"})


def test_sliding_window_rewrite_without_group_by_hops_every_second() -> None:
    sql = sliding_window_sql("SELECT count(*) FROM vitals", "ts", range_(30))
    assert "'30 seconds', '1 second'" in sql and "GROUP BY" in sql.upper()


@pytest.mark.parametrize(
    ("sql", "event_time", "spec"),
    [
        ("SELECT count(*) FROM vitals", "ts", rows(3)),
        ("SELECT count(*) FROM vitals", "ts) , reflect('x", range_(3)),
        ("SELECT count(*) AS window FROM vitals", "ts", range_(3)),
        ("SELECT 1 UNION SELECT 2", "ts", range_(3)),
    ],
)
def test_sliding_window_rewrite_refuses_bad_input(
    sql: str, event_time: str, spec: WindowSpec
) -> None:
    with pytest.raises(ValueError):
        sliding_window_sql(sql, event_time, spec)


# ----------------------------------------------------------------------------- windows


def test_window_spec_rules() -> None:
    with pytest.raises(ValueError):
        WindowSpec(WindowKind.RANGE, 10, 20)
    with pytest.raises(ValueError):
        WindowSpec(WindowKind.ROWS, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        WindowSpec(WindowKind.ROWS, 2**31)
    assert rows(3).hop is None and range_(5).hop == 1 and range_(5, 2).hop == 2


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10 seconds", 10),
        ("1 second", 1),
        ("10 minutes", 600),
        ("1 hour 30 minutes", 5400),
        ("INTERVAL 2 days", 172800),
        ("1 week", 604800),
        ("500 milliseconds", 0.5),
        ("10", None),
        ("ten minutes", None),
        ("1 fortnight", None),
        ("1 hour, 2 minutes", None),
        ("", None),
    ],
)
def test_duration_seconds(text: str, seconds: float | None) -> None:
    assert duration_seconds(text) == seconds


def test_spark_duration() -> None:
    assert spark_duration(1) == "1 second" and spark_duration(60) == "60 seconds"
