"""The command line end to end (in-process, sharing the test session's Spark)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from streamshield.cli import main
from streamshield.examples import hospital
from streamshield.lang.wire import to_line

pytestmark = pytest.mark.spark


def test_init_land_ingest_query(spark, tmp_path) -> None:
    runner = CliRunner()
    root = str(tmp_path / "root")
    assert runner.invoke(main, ["init", "--root", root]).exit_code == 0
    feed = tmp_path / "feed.jsonl"
    lines = [to_line(e) for e in hospital.elements() if e.channel.stream == "HeartRate"]
    feed.write_text("\n".join([*lines, '{"type": "tuple"}']) + "\n")
    landed = runner.invoke(main, ["land", "--root", root, str(feed)])
    assert landed.exit_code == 0, landed.output
    assert f"accepted {len(lines)}, rejected 1" in landed.output
    assert runner.invoke(main, ["ingest", "--root", root]).exit_code == 0
    out = tmp_path / "out"
    sql = "SELECT patient_id, beats_per_min FROM HeartRate"
    result = runner.invoke(
        main,
        [
            "query",
            "--root",
            root,
            "--role",
            "ND",
            "--sql",
            sql,
            "--out",
            str(out),
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for f in out.glob("*.json") for x in f.read_text().splitlines()]
    assert len(rows) == 6 and all("patient_id" in r for r in rows)


def test_hostile_query_fails_with_a_clear_message(spark, tmp_path) -> None:
    runner = CliRunner()
    root = str(tmp_path / "root")
    runner.invoke(main, ["init", "--root", root])
    sql = "SELECT reflect('java.lang.System', 'exit', '0') FROM HeartRate"
    result = runner.invoke(main, ["query", "--root", root, "--role", "C", "--sql", sql])
    assert result.exit_code == 1
    assert "reflect" in result.output
