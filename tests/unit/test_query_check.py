"""User SQL is checked before Spark sees it (DESIGN.md section 4): every rule gets a hostile
query that must be refused, next to legitimate queries that must pass and be rewritten onto
the secured views."""

from __future__ import annotations

import logging

import pytest
import sqlglot
from sqlglot import exp

from streamshield.lang.query_check import (
    ALLOWED_UNKNOWN_FUNCTIONS,
    FORBIDDEN_FUNCTIONS,
    MAX_QUERY_CHARS,
    CheckedQuery,
    QueryRejected,
    check_query,
)

STREAMS = ("HeartRate", "BloodPressure", "Location")
VIEWS = {"HeartRate": "ss_view_hr", "BloodPressure": "ss_view_bp", "Location": "ss_view_loc"}


@pytest.fixture(autouse=True)
def _quiet_sqlglot(caplog: pytest.LogCaptureFixture) -> None:
    # sqlglot warns when it falls back to parsing a statement as a Command; expected here.
    caplog.set_level(logging.ERROR, logger="sqlglot")


def rejected(sql: str, rule: str, **kwargs: int) -> QueryRejected:
    with pytest.raises(QueryRejected) as info:
        check_query(sql, STREAMS, **kwargs)
    assert info.value.rule == rule, f"{sql!r}: {info.value}"
    assert rule in str(info.value)
    return info.value


def tables_in(sql: str) -> set[str]:
    """Names of every relation reference in Spark SQL, read by an independent parse."""
    return {t.name for t in sqlglot.parse_one(sql, read="spark").find_all(exp.Table)}


def cte_names(sql: str) -> set[str]:
    return {c.alias_or_name for c in sqlglot.parse_one(sql, read="spark").find_all(exp.CTE)}


# --- accepted queries ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "streams"),
    [
        ("SELECT beats, beats * 2 + 1 AS b2 FROM HeartRate WHERE beats > 100", ("HeartRate",)),
        ("SELECT * FROM HeartRate", ("HeartRate",)),
        (
            "SELECT window(ts, '1 minute') AS w, count(*) FROM HeartRate "
            "GROUP BY window(ts, '1 minute')",
            ("HeartRate",),
        ),
        (
            "SELECT id, avg(beats) FROM HeartRate "
            "GROUP BY window(ts, '10 minutes', '5 minutes'), id",
            ("HeartRate",),
        ),
        (
            "SELECT session_window(ts, '5 minutes'), count(*) FROM HeartRate "
            "GROUP BY session_window(ts, '5 minutes')",
            ("HeartRate",),
        ),
        (
            "SELECT h.beats, b.sys FROM HeartRate h JOIN BloodPressure AS b ON h.id = b.id "
            "AND h.ts BETWEEN b.ts AND b.ts + INTERVAL 1 MINUTE",
            ("BloodPressure", "HeartRate"),
        ),
        (
            "WITH hi AS (SELECT * FROM HeartRate WHERE beats > 100) SELECT id FROM hi",
            ("HeartRate",),
        ),
        (
            "WITH a AS (SELECT id FROM HeartRate), b AS (SELECT id FROM a) SELECT * FROM b",
            ("HeartRate",),
        ),
        ("SELECT id FROM HeartRate UNION ALL SELECT id FROM BloodPressure", None),
        ("SELECT id FROM HeartRate INTERSECT SELECT id FROM BloodPressure", None),
        ("SELECT id FROM HeartRate EXCEPT SELECT id FROM Location", ("HeartRate", "Location")),
        (
            "SELECT * FROM HeartRate WHERE id IN (SELECT id FROM Location) "
            "AND EXISTS (SELECT 1 FROM BloodPressure b WHERE b.id = HeartRate.id)",
            ("BloodPressure", "HeartRate", "Location"),
        ),
        ("SELECT (SELECT max(beats) FROM HeartRate) AS m", ("HeartRate",)),
        (
            "SELECT id, count(*) AS n FROM HeartRate GROUP BY id HAVING count(*) > 1 "
            "ORDER BY n DESC LIMIT 10",
            ("HeartRate",),
        ),
        ("SELECT * FROM heartrate JOIN HEARTRATE h2 ON true", ("HeartRate",)),
        ("SELECT * FROM `HeartRate`", ("HeartRate",)),
        ("SELECT 1;", ()),
        ("SELECT 1 /* ; DROP TABLE x */ -- ; SET a=b", ()),
        ("SELECT '/*+ BROADCAST(h) */ ; DROP TABLE x' AS s FROM HeartRate", ("HeartRate",)),
        ("SELECT row_number() OVER (PARTITION BY id ORDER BY ts) FROM HeartRate", None),
        ("SELECT transform(arr, x -> x + 1), explode(arr) FROM HeartRate", ("HeartRate",)),
        ("SELECT * FROM HeartRate h, LATERAL (SELECT h.beats AS b)", ("HeartRate",)),
        ("SELECT * FROM VALUES (1), (2) AS t(a)", ()),
        ("SELECT uuid(), monotonically_increasing_id(), url_decode(s) FROM Location", None),
        ("SELECT * FROM HeartRate TABLESAMPLE (10 PERCENT)", ("HeartRate",)),
    ],
)
def test_accepts_queries(sql: str, streams: tuple[str, ...] | None) -> None:
    checked = check_query(sql, STREAMS)
    assert isinstance(checked, CheckedQuery)
    assert checked.sql == sql
    if streams is not None:
        assert checked.streams == streams


def test_streams_are_canonical_sorted_and_unique() -> None:
    checked = check_query(
        "SELECT * FROM location l JOIN HEARTRATE a ON true JOIN heartRate b ON true", STREAMS
    )
    assert checked.streams == ("HeartRate", "Location")


@pytest.mark.parametrize(
    "function",
    sorted(
        {
            "window_time",
            "date_format",
            "from_unixtime",
            "to_timestamp",
            "approx_count_distinct",
            "percentile_approx",
            "collect_list",
            "every",
            "count_if",
            "bround",
            "nvl",
            "concat_ws",
            "regexp_extract",
            "timestamp_seconds",
            "hash",
            "now",
        }
    ),
)
def test_allow_listed_functions_pass(function: str) -> None:
    assert function in ALLOWED_UNKNOWN_FUNCTIONS
    args = {
        "now": "",
        "timestamp_seconds": "beats",
        "bround": "beats",
        "regexp_extract": "beats, 'x'",  # a regex must be a safe string literal
    }.get(function, "beats, 1")
    checked = check_query(f"SELECT {function}({args}) FROM HeartRate", STREAMS)
    assert checked.streams == ("HeartRate",)


def test_allow_and_deny_lists_do_not_overlap() -> None:
    assert not ALLOWED_UNKNOWN_FUNCTIONS & FORBIDDEN_FUNCTIONS


# --- rule 1: one statement, and it is a query -----------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO HeartRate SELECT * FROM BloodPressure",
        "INSERT OVERWRITE TABLE HeartRate SELECT 1",
        "UPDATE HeartRate SET beats = 0",
        "DELETE FROM HeartRate WHERE beats > 0",
        "MERGE INTO HeartRate t USING BloodPressure s ON t.id = s.id WHEN MATCHED THEN DELETE",
        "CREATE TABLE x AS SELECT * FROM HeartRate",
        "CREATE TEMPORARY VIEW x AS SELECT * FROM HeartRate",
        "CREATE OR REPLACE TEMPORARY FUNCTION f AS 'com.example.F'",
        "DROP TABLE HeartRate",
        "ALTER TABLE HeartRate ADD COLUMNS (x INT)",
        "USE other_db",
        "CACHE TABLE HeartRate",
        "UNCACHE TABLE HeartRate",
        "ADD JAR /tmp/evil.jar",
        "ADD FILE /tmp/evil.py",
        "REFRESH TABLE HeartRate",
        "MSCK REPAIR TABLE HeartRate",
        "ANALYZE TABLE HeartRate COMPUTE STATISTICS",
        "EXPLAIN SELECT * FROM HeartRate",
        "SHOW TABLES",
        "DESCRIBE HeartRate",
        "TRUNCATE TABLE HeartRate",
        "LOAD DATA INPATH '/tmp/x' INTO TABLE HeartRate",
        "EXECUTE IMMEDIATE 'SELECT 1'",
        "VALUES (1)",
        "TABLE HeartRate",
        "FROM HeartRate INSERT INTO x SELECT *",
        "WITH a AS (SELECT * FROM HeartRate) INSERT INTO x SELECT * FROM a",
        "SELECT * INTO x FROM HeartRate",
    ],
)
def test_rejects_statements_that_are_not_queries(sql: str) -> None:
    rejected(sql, "not_select")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1; DROP TABLE x",
        "SELECT * FROM HeartRate; SELECT * FROM BloodPressure",
        "SELECT 1 -- harmless comment\n; DROP TABLE x",
        "SELECT 1 /* a comment */; DROP TABLE x",
        "SELECT 1 /* nested /* comment */ still */; ADD JAR /tmp/evil.jar",
        "BEGIN SELECT 1; END",
    ],
)
def test_rejects_multiple_statements(sql: str) -> None:
    rejected(sql, "multiple_statements")


@pytest.mark.parametrize("sql", ["", "   ", ";", "-- only a comment", "SELECT", "SELECT * FROM"])
def test_rejects_empty_or_incomplete_queries(sql: str) -> None:
    rejected(sql, "parse_error")


def test_parse_error_reports_position() -> None:
    error = rejected("SELECT beats\nFROM HeartRate WHERE beats >", "parse_error")
    assert (error.line, error.column) == (2, 28)
    assert "line 2, column 28 near '>'" in str(error)


@pytest.mark.parametrize(
    ("sql", "line", "column"),
    [
        ("SELEC patient_id FROM HeartRate", 1, 1),
        ("  \n  selec patient_id FROM HeartRate", 2, 3),
        ("SELECT patient_id FROM WHERE beats > 1", 1, 24),
        ("SELECT patient_id\nFROM HeartRate\nWHERE beats = = 1", 3, 15),
    ],
)
def test_parse_error_points_at_the_first_character_of_the_offending_token(
    sql: str, line: int, column: int
) -> None:
    """Not at the token's last character, nor (for a misspelt first keyword) at the
    token where the parser noticed: the position a user looks at to fix the query."""
    error = rejected(sql, "parse_error")
    assert (error.line, error.column) == (line, column), str(error)
    assert f"line {line}, column {column}" in str(error)


def test_a_misspelt_first_keyword_says_how_a_query_starts() -> None:
    error = rejected("SELEC patient_id FROM HeartRate", "parse_error")
    assert "a query starts with SELECT (or WITH), not 'SELEC'" in str(error)


@pytest.mark.parametrize("sql", ["SELECT 'unterminated", "SELECT 1 /* unterminated"])
def test_rejects_text_that_cannot_be_tokenized(sql: str) -> None:
    rejected(sql, "parse_error")


# --- rule 2: relations are catalog streams or CTEs ----------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM Nope",
        "SELECT * FROM HeartRate JOIN Nope ON true",
        "SELECT * FROM HeartRate WHERE id IN (SELECT id FROM Nope)",
        "SELECT * FROM default.HeartRate",
        "SELECT * FROM `default`.`HeartRate`",
        "SELECT * FROM global_temp.HeartRate",
        "SELECT * FROM spark_catalog.default.HeartRate",
        "SELECT * FROM `default.HeartRate`",
        # a CTE is visible only in its own query: not in an outer one, not before it is defined
        "SELECT * FROM (WITH c AS (SELECT 1 AS x) SELECT * FROM c) t JOIN c ON true",
        "WITH a AS (SELECT * FROM b), b AS (SELECT 1 AS x) SELECT * FROM a",
    ],
)
def test_rejects_unknown_relations(sql: str) -> None:
    rejected(sql, "unknown_relation")


def test_streams_outside_the_catalog_are_unknown() -> None:
    with pytest.raises(QueryRejected) as info:
        check_query("SELECT * FROM HeartRate", ["BloodPressure"])
    assert info.value.rule == "unknown_relation"


def test_cte_shadowing_a_stream_is_only_a_cte() -> None:
    checked = check_query("WITH HeartRate AS (SELECT 1 AS beats) SELECT * FROM HeartRate", STREAMS)
    assert checked.streams == ()
    out = checked.rewrite(VIEWS)
    assert "ss_view_hr" not in out


def test_cte_reading_its_own_name_reads_the_stream() -> None:
    # Spark resolves a non-recursive CTE's self-reference to the outer relation; leaving it
    # un-rewritten would read the raw stream instead of the secured view.
    checked = check_query(
        "WITH HeartRate AS (SELECT * FROM HeartRate WHERE beats > 1) SELECT * FROM HeartRate",
        STREAMS,
    )
    assert checked.streams == ("HeartRate",)
    out = checked.rewrite(VIEWS)
    assert tables_in(out) == {"ss_view_hr", "HeartRate"}
    assert cte_names(out) == {"HeartRate"}


def test_rejects_recursive_and_duplicate_ctes() -> None:
    rejected("WITH RECURSIVE t AS (SELECT 1) SELECT * FROM t", "recursive_cte")
    rejected("WITH c AS (SELECT 1 AS x), c AS (SELECT 2 AS x) SELECT * FROM c", "duplicate_cte")


def test_catalog_must_be_unambiguous() -> None:
    with pytest.raises(ValueError, match="differ only in case"):
        check_query("SELECT 1", ["HeartRate", "heartrate"])
    with pytest.raises(TypeError):
        check_query("SELECT * FROM HeartRate", "HeartRate")


# --- rule 3: no file paths, no table-valued functions -------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM parquet.`/etc/passwd`",
        "SELECT * FROM json.`/tmp/x`",
        "SELECT * FROM csv.`file:///tmp/x.csv`",
        "SELECT * FROM delta.`/data/raw`",
        "SELECT * FROM text.`/etc/shadow`",
        "SELECT * FROM orc.`/tmp/x`",
        "SELECT * FROM binaryFile.`/`",
        "SELECT * FROM PARQUET.`/etc/passwd`",
        "SELECT * FROM `parquet`.`/etc/passwd`",
        "SELECT * FROM HeartRate JOIN parquet.`/etc/passwd` p ON true",
        "SELECT * FROM HeartRate WHERE id IN (SELECT id FROM json.`/tmp/ids`)",
        "SELECT * FROM someformat.`/tmp/x`",
        "SELECT * FROM parquet.`relative_file`",
    ],
)
def test_rejects_file_paths(sql: str) -> None:
    rejected(sql, "file_path")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM range(10)",
        "SELECT * FROM RANGE(0, 10)",
        "SELECT * FROM read_files('/tmp')",
        "SELECT * FROM explode(array(1, 2))",
        "SELECT * FROM inline(array(struct(1)))",
        "SELECT * FROM stack(2, 1, 2)",
        "SELECT * FROM json_tuple('{}', 'a')",
        "SELECT * FROM sql_keywords()",
        "SELECT * FROM TABLE(HeartRate)",
        "SELECT * FROM IDENTIFIER('HeartRate')",
        "SELECT * FROM HeartRate h JOIN range(5) r ON true",
        "SELECT * FROM HeartRate, explode(arr)",
        "SELECT * FROM HeartRate LATERAL VIEW explode(arr) t AS x",
        "SELECT * FROM HeartRate LATERAL VIEW OUTER posexplode(arr) t AS p, x",
        "SELECT * FROM HeartRate h, LATERAL explode(h.arr)",
        "WITH c AS (SELECT * FROM range(3)) SELECT * FROM c",
        "SELECT * FROM (range(10))",
        "SELECT * FROM HeartRate JOIN ((explode(array(1)))) ON true",
    ],
)
def test_rejects_table_functions(sql: str) -> None:
    rejected(sql, "table_function")


# --- rule 4: forbidden and unknown functions ----------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT java_method('java.lang.Runtime', 'getRuntime')",
        "SELECT reflect('java.lang.Runtime', 'getRuntime')",
        "SELECT ReFlEcT('java.lang.Runtime', 'getRuntime')",
        "SELECT REFLECT('java.lang.Runtime', 'getRuntime')",
        "SELECT `reflect`('java.lang.Runtime', 'getRuntime')",
        "SELECT try_reflect('java.lang.Runtime', 'getRuntime')",
        "SELECT java_anything(1)",
        "SELECT reflect2(1)",
        "SELECT read_parquet('/etc/passwd')",
        "SELECT input_file_name() FROM HeartRate",
        "SELECT input_file_block_start(), input_file_block_length() FROM HeartRate",
        "SELECT current_user",
        "SELECT CURRENT_USER() AS u FROM HeartRate",
        "SELECT user()",
        "SELECT session_user",
        "SELECT current_database()",
        "SELECT current_schema()",
        "SELECT current_catalog()",
        "SELECT version()",
        "SELECT spark_partition_id() FROM HeartRate",
        "SELECT assert_true(beats > 0) FROM HeartRate",
        "SELECT raise_error('boom')",
        "SELECT aes_decrypt(s, 'key') FROM Location",
        "SELECT aes_encrypt(s, 'key') FROM Location",
        "SELECT try_aes_decrypt(s, 'key') FROM Location",
        "SELECT secret('scope', 'key')",
        "SELECT try_secret('scope', 'key')",
        # unknown functions (UDFs, anything not allow-listed) are denied by default
        "SELECT my_udf(beats) FROM HeartRate",
        "SELECT xpath_string(s, 'a') FROM Location",
        "SELECT from_protobuf(b, 'M', '/etc/passwd') FROM Location",
        # qualified names reach persistent functions or built-ins under another name
        "SELECT default.upper(s) FROM Location",
        "SELECT system.builtin.reflect('java.lang.Runtime', 'getRuntime')",
        # anywhere in the tree: WHERE, subquery, CTE, ORDER BY, HAVING, GROUP BY, ON, OVER,
        # lambda bodies, CASE, hidden inside allowed functions
        "SELECT * FROM HeartRate WHERE reflect('a', 'b') IS NOT NULL",
        "SELECT * FROM HeartRate WHERE beats IN (SELECT java_method('a', 'b'))",
        "WITH c AS (SELECT current_user() AS u) SELECT * FROM c",
        "SELECT * FROM HeartRate ORDER BY reflect('a', 'b')",
        "SELECT id FROM HeartRate GROUP BY id HAVING max(length(input_file_name())) > 0",
        "SELECT count(*) FROM HeartRate GROUP BY spark_partition_id()",
        "SELECT * FROM HeartRate h JOIN Location l ON h.id = l.id AND assert_true(true) IS NULL",
        "SELECT sum(beats) OVER (PARTITION BY version()) FROM HeartRate",
        "SELECT transform(arr, x -> reflect('a', x)) FROM HeartRate",
        "SELECT CASE WHEN beats > 1 THEN upper(java_method('a', 'b')) END FROM HeartRate",
        "SELECT * FROM (SELECT * FROM (SELECT reflect('a', 'b') AS r) t) u",
    ],
)
def test_rejects_forbidden_functions(sql: str) -> None:
    rejected(sql, "forbidden_function")


def test_forbidden_function_is_named() -> None:
    error = rejected("SELECT ReFlEcT('java.lang.Runtime', 'getRuntime')", "forbidden_function")
    assert "reflect" in error.message.lower()
    assert "java.lang" not in str(error)


# --- rules 5 and 6: hints, configuration, script transforms -------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT /*+ BROADCAST(h) */ * FROM HeartRate h",
        "SELECT /*+ REPARTITION(3) */ * FROM HeartRate",
        "SELECT * FROM (SELECT /*+ COALESCE(1) */ * FROM HeartRate)",
        "SELECT * /*+ REPARTITION(3) */ FROM HeartRate",
        "SELECT * FROM HeartRate /*+ BROADCAST(HeartRate) */",
    ],
)
def test_rejects_hints(sql: str) -> None:
    rejected(sql, "hint")


@pytest.mark.parametrize(
    "sql",
    [
        "SET spark.sql.ansi.enabled=false",
        "set spark.sql.shuffle.partitions = 1",
        "SET",
        "RESET",
        "RESET spark.sql.ansi.enabled",
        "SELECT 1; SET spark.sql.ansi.enabled=false",
        "SELECT 1 /* c */ ; reset",
    ],
)
def test_rejects_configuration_changes(sql: str) -> None:
    rejected(sql, "config")


def test_rejects_script_transform() -> None:
    rejected(
        "SELECT TRANSFORM(beats) USING '/bin/sh -c id' AS (out) FROM HeartRate", "script_transform"
    )


# --- rule 7: limits -----------------------------------------------------------------------


def _joined(n: int) -> str:
    joins = "".join(f" JOIN HeartRate h{i} ON h{i}.id = h.id" for i in range(n))
    return f"SELECT h.id FROM HeartRate h{joins}"


def test_join_limit() -> None:
    assert check_query(_joined(4), STREAMS).streams == ("HeartRate",)
    error = rejected(_joined(5), "too_many_joins")
    assert "5" in error.message
    rejected("SELECT * FROM HeartRate, BloodPressure", "too_many_joins", max_joins=0)
    rejected(
        "SELECT * FROM HeartRate WHERE id IN (SELECT l.id FROM Location l JOIN BloodPressure b "
        "ON l.id = b.id)",
        "too_many_joins",
        max_joins=0,
    )
    assert check_query(_joined(5), STREAMS, max_joins=5).streams == ("HeartRate",)


def test_window_limit() -> None:
    one = "SELECT window(ts, '1 minute'), count(*) FROM HeartRate GROUP BY window(ts, '1 minute')"
    assert check_query(one, STREAMS, max_windows=1).streams == ("HeartRate",)
    two = (
        "SELECT count(*) FROM HeartRate GROUP BY window(ts, '1 minute') UNION ALL "
        "SELECT count(*) FROM HeartRate GROUP BY session_window(ts, '5 minutes')"
    )
    rejected(two, "too_many_windows", max_windows=1)


def test_length_limit() -> None:
    rejected("SELECT " + "1 + " * (MAX_QUERY_CHARS // 4) + "1", "too_long")


def test_deep_nesting_is_refused_not_crashing() -> None:
    # sqlglot parses recursively; a query nested past Python's recursion limit is refused.
    rejected("SELECT " + "(" * 5000 + "1" + ")" * 5000, "too_complex")
    subqueries = "SELECT * FROM " + "(SELECT * FROM " * 2000 + "HeartRate" + ")" * 2000
    rejected(subqueries, "too_complex")


def test_moderate_nesting_is_fine() -> None:
    assert check_query("SELECT " + "(" * 20 + "1" + ")" * 20, STREAMS).streams == ()
    nested = "SELECT * FROM " + "(SELECT * FROM " * 20 + "HeartRate" + ")" * 20
    checked = check_query(nested, STREAMS)
    assert tables_in(checked.rewrite(VIEWS)) == {"ss_view_hr"}


# --- rule 8: messages never echo literal values -------------------------------------------

SECRET = "123-45-6789"


@pytest.mark.parametrize(
    ("sql", "rule"),
    [
        (f"SELECT * FROM secret_table WHERE ssn = '{SECRET}'", "unknown_relation"),
        (f"SELECT * FROM HeartRate WHERE ssn = '{SECRET}' AND", "parse_error"),
        (f"SELECT * FROM HeartRate WHERE ssn = '{SECRET}", "parse_error"),
        (f"SELECT * FROM HeartRate WHERE ssn = '{SECRET}' FROM", "parse_error"),
        (f"SELECT * FROM '{SECRET}'", "parse_error"),
        (f'SELECT * FROM "{SECRET}"', "parse_error"),
        (f"SELECT * FROM global_temp.HeartRate WHERE ssn = '{SECRET}'", "unknown_relation"),
        (f"SELECT * FROM HeartRate WHERE ssn = {SECRET.replace('-', '')} FROM", "parse_error"),
        (f"SELECT * FROM '{SECRET}'.HeartRate", "parse_error"),
        (
            f"WITH c AS (SELECT 1), '{SECRET}' AS (SELECT 2), c AS (SELECT 3) SELECT 1",
            "duplicate_cte",
        ),
        (f"WITH '{SECRET}' AS (SELECT 1), '{SECRET}' AS (SELECT 2) SELECT 1", "duplicate_cte"),
        (f"SELECT reflect('{SECRET}', 'x')", "forbidden_function"),
        (f"SELECT my_udf('{SECRET}')", "forbidden_function"),
        (f"SELECT * FROM parquet.`/data/{SECRET}`", "file_path"),
        (f"SELECT * FROM range({SECRET.replace('-', '')})", "table_function"),
        (f"INSERT INTO HeartRate VALUES ('{SECRET}')", "not_select"),
        (f"ADD JAR /tmp/{SECRET}.jar", "not_select"),
        (f"SELECT '{SECRET}'; DROP TABLE x", "multiple_statements"),
        (f"SET spark.secret='{SECRET}'", "config"),
        (f"SELECT /*+ {SECRET} */ 1", "hint"),
        (f"SELECT TRANSFORM(a) USING '{SECRET}' FROM HeartRate", "script_transform"),
    ],
)
def test_messages_never_contain_literal_values(sql: str, rule: str) -> None:
    error = rejected(sql, rule)
    for text in (str(error), error.message, repr(error)):
        assert SECRET not in text
        assert SECRET.replace("-", "") not in text


def test_unknown_relation_is_named() -> None:
    error = rejected(f"SELECT * FROM secret_table WHERE ssn = '{SECRET}'", "unknown_relation")
    assert "secret_table" in error.message


# --- rewrite onto secured views ----------------------------------------------------------


def test_rewrite_replaces_streams_and_keeps_aliases() -> None:
    checked = check_query(
        "SELECT h.beats, b.sys FROM HeartRate h JOIN BloodPressure AS b ON h.id = b.id", STREAMS
    )
    out = checked.rewrite(VIEWS)
    tree = sqlglot.parse_one(out, read="spark")
    tables = {t.name: t.alias for t in tree.find_all(exp.Table)}
    assert tables == {"ss_view_hr": "h", "ss_view_bp": "b"}


def test_rewrite_aliases_unaliased_streams_with_their_name() -> None:
    out = check_query("SELECT HeartRate.beats FROM HeartRate", STREAMS).rewrite(VIEWS)
    tree = sqlglot.parse_one(out, read="spark")
    (table,) = tree.find_all(exp.Table)
    assert (table.name, table.alias) == ("ss_view_hr", "HeartRate")
    assert tree.selects[0].table == "HeartRate"


def test_rewrite_leaves_cte_references_alone() -> None:
    out = check_query(
        "WITH hi AS (SELECT * FROM HeartRate WHERE beats > 100) SELECT hi.id FROM hi", STREAMS
    ).rewrite(VIEWS)
    assert tables_in(out) == {"ss_view_hr", "hi"}
    assert cte_names(out) == {"hi"}


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM HeartRate",
        "SELECT * FROM heartrate h WHERE h.beats > 1",
        "SELECT window(ts, '1 minute') AS w, count(*) FROM HeartRate "
        "GROUP BY window(ts, '1 minute')",
        "SELECT * FROM (HeartRate JOIN BloodPressure ON HeartRate.id = BloodPressure.id)",
        "SELECT * FROM HeartRate WHERE id IN (SELECT id FROM Location) "
        "AND EXISTS (SELECT 1 FROM BloodPressure b WHERE b.id = HeartRate.id)",
        "SELECT id FROM HeartRate UNION SELECT id FROM (SELECT id FROM Location) t",
        "WITH a AS (SELECT * FROM HeartRate) SELECT * FROM a JOIN BloodPressure ON true",
        "SELECT * FROM HeartRate TABLESAMPLE (10 PERCENT)",
        "SELECT * FROM HeartRate h, LATERAL (SELECT * FROM Location l WHERE l.id = h.id)",
        "SELECT * FROM HeartRate PIVOT (sum(beats) FOR id IN (1, 2))",
    ],
)
def test_rewrite_round_trips_and_reads_only_views(sql: str) -> None:
    checked = check_query(sql, STREAMS)
    out = checked.rewrite(VIEWS)
    tree = sqlglot.parse_one(out, read="spark")
    ctes = cte_names(out)
    views = {VIEWS[s] for s in checked.streams}
    assert {t.name for t in tree.find_all(exp.Table)} - ctes == views
    # the output is itself acceptable, reading exactly the views
    assert set(check_query(out, views.copy()).streams) == views


def test_rewrite_drops_comments() -> None:
    out = check_query("SELECT beats /* note */ FROM HeartRate -- tail", STREAMS).rewrite(VIEWS)
    assert "note" not in out
    assert "tail" not in out


def test_rewrite_does_not_change_the_checked_query() -> None:
    checked = check_query("SELECT * FROM HeartRate", STREAMS)
    first = checked.rewrite(VIEWS)
    second = checked.rewrite({"heartrate": "other_view"})
    assert "ss_view_hr" in first
    assert "other_view" in second
    assert "ss_view_hr" not in second
    assert checked.rewrite(VIEWS) == first


def test_rewrite_requires_a_plain_view_for_every_stream() -> None:
    checked = check_query("SELECT * FROM HeartRate JOIN Location ON true", STREAMS)
    with pytest.raises(ValueError, match="no view"):
        checked.rewrite({"HeartRate": "ss_view_hr"})
    with pytest.raises(ValueError, match="plain identifier"):
        checked.rewrite({"HeartRate": "v` JOIN secret", "Location": "ss_view_loc"})


def test_rewrite_refuses_a_cte_shadowing_a_view() -> None:
    checked = check_query(
        "WITH ss_view_hr AS (SELECT 1 AS x) SELECT * FROM HeartRate, ss_view_hr", STREAMS
    )
    with pytest.raises(ValueError, match="shadow"):
        checked.rewrite(VIEWS)
