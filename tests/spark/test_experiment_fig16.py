"""Smoke test of the Fig. 16 experiment (SCJoin plans) in quick mode.

The full run takes minutes and its numbers are read by people; this only makes sure
that the command still runs end to end on the current engine: real ingest, the three
SCJoin plans agreeing on the result (the benchmark asserts it) and plain Spark, one
plot per sub-figure, a table of positive times. It shares the session's SparkSession.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import paper_fig16
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_fig16_quick(spark: SparkSession, tmp_path: Path) -> None:
    paper_fig16.main(["--quick", "--out", str(tmp_path)])
    assert (tmp_path / "img" / "fig16.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "results" / "fig16.json").exists()  # the samples the plot was drawn from
    table = (tmp_path / "fig16.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "sweep" not in line]
    assert len(rows) == 3, table  # quick: one configuration, shown in each sweep
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        times = [float(c) for c in cells[5:9]]  # PF, FP, ADAPTIVE, plain ms per tuple
        assert all(t > 0 for t in times), row
    assert "adaptive_pairs" in table
