"""Threat: a query user's SQL escaping the secured views (no JVM; the check is pure).

The class: any SQL that reaches something other than the secured views of the user's
streams, or that Spark reads differently from what was checked: the JVM (``reflect``,
``java_method`` under any spelling or qualification), the host (file names, files,
table functions), the catalog and other sessions' views, the session's settings
(``SET``, hints, variables), the server's environment through Spark's
``${...}`` variable substitution, and the engine's own columns (``_ss_`` names, also
made from strings). tests/unit/test_query_check.py holds the first-line cases; these
are the disguised ones an attacker tries next.
"""

from __future__ import annotations

import pytest

from streamshield.lang.label_propagation import uses_reserved_names
from streamshield.lang.query_check import QueryRejected, check_query

STREAMS = ["HeartRate", "BodyTemperature"]

ATTACKS = {
    # Spark replaces ${...} in the SQL text, string literals included, before parsing
    "SELECT '${env:STREAMSHIELD_DATABASE_URL}' AS x FROM HeartRate": "substitution",
    "SELECT patient_id FROM HeartRate WHERE '${system:user.home}' <> ''": "substitution",
    "SELECT `${spark.driver.memory}` FROM HeartRate": "substitution",
    "SELECT 1 AS x FROM HeartRate -- ${hiveconf:x}": "substitution",
    # the JVM, by another spelling or through a qualified name
    "SELECT ReFlEcT('java.lang.Runtime', 'getRuntime') FROM HeartRate": "forbidden_function",
    "SELECT `java_method`('java.lang.System', 'exit', 0) FROM HeartRate": "forbidden_function",
    "SELECT system.builtin.try_reflect('a', 'b') FROM HeartRate": "forbidden_function",
    "SELECT patient_id FROM HeartRate WHERE reflect('a', 'b') IS NULL": "forbidden_function",
    "SELECT transform(array(1), x -> java_method('a', 'b')) FROM HeartRate": "forbidden_function",
    "SELECT re\u0066lect('a', 'b') FROM HeartRate": "forbidden_function",
    "SELECT r\u0435flect('a', 'b') FROM HeartRate": "forbidden_function",  # Cyrillic e
    # user-defined functions: none can be made, none but allow-listed ones called
    "CREATE TEMPORARY FUNCTION f AS 'com.x.Evil' USING JAR '/tmp/x.jar'": "not_select",
    "SELECT default.f(patient_id) FROM HeartRate": "forbidden_function",
    "SELECT evil_udf(patient_id) FROM HeartRate": "forbidden_function",
    # the host: file names and files
    "SELECT patient_id FROM HeartRate ORDER BY input_file_name()": "forbidden_function",
    "SELECT (SELECT max(input_file_block_start()) FROM HeartRate) AS x": "forbidden_function",
    "SELECT * FROM read_files('/etc/passwd', format => 'text')": "table_function",
    "WITH f AS (SELECT * FROM text.`/etc/passwd`) SELECT * FROM f": "file_path",
    "SELECT * FROM HeartRate h WHERE EXISTS (SELECT 1 FROM csv.`/tmp/x`)": "file_path",
    # statements hidden where a query is expected
    "EXECUTE IMMEDIATE 'SELECT reflect(1)'": "not_select",
    "DECLARE VARIABLE v STRING DEFAULT 'x'": "not_select",
    "SET VAR v = 'x'": "config",
    "SET spark.sql.variable.substitute=true": "config",
    "RESET spark.sql.ansi.enabled": "config",
    # hints, wherever they hide
    "SELECT /*+ REPARTITION(100000) */ * FROM HeartRate": "hint",
    "SELECT * FROM (SELECT /*+ COALESCE(1) */ * FROM HeartRate) t": "hint",
    "WITH c AS (SELECT /*+ BROADCAST(h) */ * FROM HeartRate h) SELECT * FROM c": "hint",
    # table-valued functions and catalogs
    "SELECT * FROM TABLE(HeartRate)": "table_function",
    "SELECT * FROM HeartRate JOIN range(1000000000) r ON true": "table_function",
    "SELECT * FROM spark_catalog.default.HeartRate": "unknown_relation",
    "SELECT * FROM information_schema.tables": "unknown_relation",
    "SELECT * FROM system.information_schema.columns": "unknown_relation",
    "SELECT * FROM global_temp.ss_0123456789abcdef0123456789abcdef_HeartRate": "unknown_relation",
    # another user's secured view, by its internal name
    "SELECT * FROM ss_0123456789abcdef0123456789abcdef_HeartRate": "unknown_relation",
    "SELECT * FROM HeartRate h JOIN `ss_0123456789abcdef0123456789abcdef_HeartRate` o "
    "ON h.patient_id = o.patient_id": "unknown_relation",
    # the engine's own columns: forged labels, origin or masks
    "SELECT patient_id, 0 AS `_SS_R0_0` FROM HeartRate": "reserved_name",
    "SELECT patient_id, array() AS _ss_masked FROM HeartRate": "reserved_name",
    "WITH _ss_v AS (SELECT * FROM HeartRate) SELECT * FROM _ss_v": "reserved_name",
    "SELECT f.* FROM (SELECT from_json('{}', '_ss_tid STRING, _ss_policy STRING') AS f "
    "FROM HeartRate) t": "reserved_name",
    "SELECT from_csv('1', 'a INT, `_ss_r0_0` INT').* FROM HeartRate": "reserved_name",
    "SELECT inline(array(named_struct('_ss_masked', array('x')))) FROM HeartRate": "reserved_name",
    "SELECT s.* FROM (SELECT from_json('{}', 'struct<_SS_SEQ:bigint>') AS s "
    "FROM HeartRate) t": "reserved_name",
}


@pytest.mark.parametrize("sql", list(ATTACKS))
def test_hostile_sql_is_refused_by_its_rule(sql: str) -> None:
    with pytest.raises(QueryRejected) as refused:
        check_query(sql, STREAMS)
    assert refused.value.rule == ATTACKS[sql], refused.value
    assert "passwd" not in refused.value.message and "DATABASE_URL" not in refused.value.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT patient_id, 'a$b{c}' AS x FROM HeartRate",  # '$' and '{' apart are data
        "SELECT patient_id FROM HeartRate WHERE 'boss_ss_x' <> ''",  # not a name start
        "SELECT named_struct('a', patient_id).a AS a FROM HeartRate",
        "SELECT h.* FROM HeartRate h",
    ],
)
def test_lookalikes_of_the_attacks_still_pass(sql: str) -> None:
    check_query(sql, STREAMS)


def test_the_rewrite_hands_spark_no_substitution_or_reserved_name() -> None:
    """Adjacent literals are joined by the rewrite: the joined text is checked again."""
    checked = check_query("SELECT '$' '{env:HOME}' AS x, '_s' 's_x' AS y FROM HeartRate", STREAMS)
    text = checked.rewrite({"HeartRate": "ss_0_HeartRate"})
    assert "${" not in text and not uses_reserved_names(text)
