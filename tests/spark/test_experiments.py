"""Smoke test of the paper experiments (Fig. 13 and 14) and bench.secured_scan in quick mode.

The full runs take minutes and their numbers are read by people; this only makes sure
that the commands still run end to end on the current engine, write their plot and
table, and measure positive times. It shares the session's SparkSession.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bench import paper_fig13, paper_fig14, secured_scan
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def _numbers(table: str) -> list[float]:
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    cells = [cell.strip() for row in rows[1:] for cell in row.strip("|").split("|")]
    return [float(c) for c in cells if re.fullmatch(r"-?[0-9.]+(e[-+]?[0-9]+)?", c)]


def _check(out: Path, name: str) -> None:
    png = out / "img" / f"{name}.png"
    assert png.stat().st_size > 1000
    assert png.read_bytes()[:4] == b"\x89PNG"
    table = (out / f"{name}.md").read_text()
    numbers = _numbers(table)
    assert numbers, table
    assert all(n > 0 for n in numbers), table


def test_fig13_quick(spark: SparkSession, tmp_path: Path) -> None:
    paper_fig13.main(["--quick", "--out", str(tmp_path)])
    _check(tmp_path, "fig13")


def test_fig14_quick(spark: SparkSession, tmp_path: Path) -> None:
    paper_fig14.main(["--quick", "--out", str(tmp_path)])
    _check(tmp_path, "fig14")
    table = (tmp_path / "fig14.md").read_text()
    assert "pushed down: SS first" in table
    assert "pushed up: selection first" in table


def test_secured_scan_quick(spark: SparkSession, tmp_path: Path) -> None:
    """bench.secured_scan runs end to end; the secured rows were checked against an
    independent spelling of the view's tests inside the bench (it raises otherwise)."""
    results = tmp_path / "results.md"
    result = secured_scan.main(
        ["--quick", "--legacy", "--json", str(tmp_path / "r.json"), "--results", str(results)]
    )
    cases = result["cases"]
    assert set(cases) == {"every row", "few rows", "selective"}
    assert 0 < cases["few rows"]["secured_rows"] < cases["every row"]["secured_rows"]
    assert 0 < cases["selective"]["secured_rows"] < cases["every row"]["secured_rows"]
    times = [t for c in cases.values() for k in ("plain_s", "secured_s", "legacy_s") for t in c[k]]
    assert times and all(t > 0 for t in times)
    assert secured_scan.HEADING in results.read_text()
