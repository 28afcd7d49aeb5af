"""bench.rule_time's reading of Spark's rule table (the table's format is Spark's)."""

from __future__ import annotations

from bench.rule_time import by_kind

DUMP = """
=== Metrics of Analyzer/Optimizer Rules ===
Total number of runs: 9
Total time: 3.5 seconds

Rule                                     Effective Time / Total Time     Effective Runs / Total Runs

org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation   994005742 / 1000000000   78 / 231
org.apache.spark.sql.catalyst.analysis.Analyzer$ResolveReferences 507132811 / 2000000000 240 / 731
org.apache.spark.sql.execution.datasources.ResolveSQLOnFile   0 / 250000000   0 / 731
org.apache.spark.sql.execution.exchange.EnsureRequirements   66302342 / 250000000   16 / 86
"""


def test_rule_seconds_are_summed_by_kind() -> None:
    assert by_kind(DUMP) == {
        "optimizer": 1.0,
        "analysis": 2.25,
        "physical planning and other": 0.25,
    }


def test_lines_that_are_not_rules_count_nothing() -> None:
    assert by_kind("Total time: 7.7 seconds\nRule  Effective Time / Total Time\n") == {}
