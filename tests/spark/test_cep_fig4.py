"""The Fig. 4 bench of paper 4 runs end to end in quick mode; the full
run is ``python -m bench.cep_fig4`` (docs/experiments.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench import cep_fig4

pytestmark = pytest.mark.spark


def test_the_bench_runs_in_quick_mode(spark, tmp_path: Path) -> None:
    result = cep_fig4.main(["--quick", "--out", str(tmp_path)])
    [point] = result["points"]
    assert point["experiment"] == "c" and point["rate"] == 1000
    assert point["pattern_ms"] > 0 and "median" in point["pspe_paired_ms"]
    saved = json.loads((tmp_path / "bench" / "results" / "cep-fig4-quick.json").read_text())
    assert saved["points"] == result["points"]
    [large] = saved["per_event"]
    assert large["events"] == 3000 and large["raw_ns_per_event"] > 0
    assert (tmp_path / "docs" / "img" / "cep-fig4-quick.png").stat().st_size > 0
    assert (
        "| c | phi | 1000 |" in (tmp_path / "bench" / "results" / "cep-fig4-quick.md").read_text()
    )


def test_the_protected_bus_is_native(spark) -> None:
    frames = cep_fig4.plans(spark, 3, 2, "phi", 30)
    plan = frames["pattern_protected"]._jdf.queryExecution().toString()
    assert "PythonUDF" not in plan and "EvalPython" not in plan
    assert frames["bus_protected"].columns == ["ts", "a1", "a2"]
