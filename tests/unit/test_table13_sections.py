"""``bench.table13 --sections``: a partial re-run says which rows it replaced."""

from __future__ import annotations

import pytest
from bench import table13


def test_a_remeasured_section_is_named_with_its_command_and_load() -> None:
    result = {
        "remeasured": {
            "scans": {
                "command": "python -m bench.table13 --sections scans",
                "started": "t0",
                "finished": "t1",
                "load_before": "1.00 1.00 1.00",
                "load_after": "2.00 2.00 2.00",
            }
        }
    }
    [line, blank] = table13.remeasured_lines(result)
    assert "`scans`" in line and "--sections scans" in line and "2.00 2.00 2.00" in line
    assert blank == "" and table13.remeasured_lines({}) == []


def test_unknown_sections_are_refused_before_any_work() -> None:
    assert table13.parse(["--sections", "scans,latency"]).sections == "scans,latency"
    with pytest.raises(SystemExit):
        table13.parse(["--sections", "scans,nothing"])
