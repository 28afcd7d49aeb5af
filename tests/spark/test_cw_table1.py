"""bench.cw_table1 in quick mode: it runs end to end, and the level-aware arm returns the
rows the dominance rule of the pure lattice (policy/lattice.py) allows, no more, no less.
Speed is not asserted (the full run's numbers are read by people)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench import cw_paced, cw_table1
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_quick_runs_and_checks_every_experiment(spark: SparkSession, tmp_path: Path) -> None:
    results = tmp_path / "experiments.md"
    result = cw_table1.main(
        [
            "--quick",
            "--before",
            "--bare",
            "--json",
            str(tmp_path / "r.json"),
            "--plot",
            str(tmp_path / "t.png"),
            "--results",
            str(results),
        ]
    )
    rows = {r["experiment"]: r for r in result["rows"]}
    assert sorted(rows) == [1, 2, 3, 4, 5, 6]
    # the bench compared every level-aware arm's output (level, before, bare) with the
    # lattice oracle (it raises on a difference); the counts have the shapes the
    # paper's experiments ask for
    n = result["sizes"][0]
    assert rows[1]["checked_rows"] == n  # Exp 1: 100% selectivity
    assert 0.35 * n < rows[2]["checked_rows"] < 0.65 * n  # Exp 2: ~50%
    assert 0.1 * n < rows[3]["checked_rows"] < 0.3 * n  # Exp 3: only [⊥, B], ~20%
    assert 0.5 * n < rows[4]["checked_rows"] < 0.7 * n  # Exp 4: [⊥, A/B/C], ~60%
    assert rows[5]["checked_rows"] == n // 100  # one row per [ROWS 100]
    assert rows[6]["checked_rows"] > 0
    for r in rows.values():
        assert all(t > 0 for k in ("vanilla_s", "level_s", "before_s", "bare_s") for t in r[k])
        assert {"pct", "low", "high", "verdict"} <= set(r["level_cpu_overhead"])
        assert {"pct", "low", "high", "verdict"} <= set(r["before_cpu_overhead"])
    assert set(result["pooled"]["level"]) == {"1", "2", "3", "4", "5", "6"}
    assert json.loads((tmp_path / "r.json").read_text())["rows"] == result["rows"]
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert cw_table1.HEADING in results.read_text()
    assert "before: CPU %" in results.read_text() and "| verdict |" in results.read_text()


def test_the_arms_plans_differ_where_the_engine_changed(spark: SparkSession) -> None:
    """The before arm carries the old guard and assertion; the engine's own forms do
    not: one bit_or per word, no assertion anywhere (the aggregate and the join are
    written at their query's level instead)."""
    frame = cw_table1.dataset(spark, "cloud", 200)

    def plan(number: int, kind: str) -> str:
        built = cw_table1.arm(cw_table1.EXPERIMENTS[number - 1], kind)(frame)
        return built._jdf.queryExecution().executedPlan().toString()

    assert "count(" not in plan(5, "level") and "count(" in plan(5, "before")
    assert "raise_error" not in plan(1, "level") and "raise_error" in plan(1, "before")
    assert "raise_error" not in plan(5, "level") and "raise_error" not in plan(6, "level")
    assert "raise_error" in plan(5, "before")


def test_the_check_fails_without_the_level_conjunct(spark: SparkSession) -> None:
    """The oracle comparison can fail: Q3 and Q5 without the level conjunct and LUB
    (the vanilla arm, minus the paper's explicit level condition) do not match it."""
    for number, data in ((3, "service"), (5, "cloud")):
        e = cw_table1.EXPERIMENTS[number - 1]
        frame = cw_table1.dataset(spark, data, 1_000).cache()
        assert cw_table1.check(frame, e) > 0
        if number == 3:  # every receiver = CompanyB failure, whatever its level
            wrong = frame.filter(cw_table1.fails("failure", ["CompanyB"])())
            got = sorted(tuple(r) for r in wrong.select("timestamp", "_ss_lvl_0").collect())
        else:  # the window's level: one contributor's, not the LUB
            wrong = cw_table1.window_aggregate(frame, None).join(
                frame.groupBy((frame.timestamp / 100).cast("long").alias("w")).agg(
                    {"_ss_lvl_0": "min"}
                ),
                "w",
            )
            got = sorted(
                tuple(r)
                for r in wrong.select("serviceId", "w", "first", "last", "min(_ss_lvl_0)").collect()
            )
        expected = cw_table1.oracle_rows(e, [r.asDict() for r in frame.collect()])
        assert got != expected
        frame.unpersist()


def test_paced_mode_runs_at_the_papers_kind_of_rate(spark: SparkSession, tmp_path: Path) -> None:
    """bench.cw_paced --quick: both arms run as paced streams; a run cannot end before
    its last tuple has arrived (2,000 tuples at 1,000 per second), which is what makes
    it the paper's execution time and not a drain."""
    results = tmp_path / "experiments.md"
    result = cw_paced.main(["--quick", "--json", "-", "--results", str(results)])
    rows = {r["experiment"]: r for r in result["rows"]}
    assert sorted(rows) == [1, 5]
    for r in rows.values():
        for kind in ("vanilla", "level"):
            assert all(t >= (r["tuples"] - 1) / r["rate"] for t in r["wall_s"][kind])
        assert r["time_overhead"]["verdict"] in ("met", "not met", "not resolved")
    assert cw_paced.HEADING in results.read_text()
