"""Crash points: off unless the process environment arms one, then a SIGKILL at exactly
the n-th pass; a misspelt point stops the import instead of crashing nowhere."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from streamshield import faults
from streamshield.faults import POINTS, CrashSpecError, parse
from streamshield.server.settings import ServeSettings

SRC = str(Path(faults.__file__).resolve().parents[1])


def _run(spec: str | None, code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != faults.VARIABLE}
    env["PYTHONPATH"] = SRC
    if spec is not None:
        env[faults.VARIABLE] = spec
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


PASSES = (
    "from streamshield.faults import crash_point\n"
    "for i in range(1, 4):\n"
    "    crash_point('landing.before_seq')\n"
    "    crash_point('ingest.before_marker')\n"
    "    print(i, flush=True)\n"
)


def test_unarmed_every_point_is_passed() -> None:
    done = _run(None, PASSES)
    assert done.returncode == 0 and done.stdout.split() == ["1", "2", "3"]


def test_armed_the_nth_pass_of_that_point_kills_the_process() -> None:
    done = _run("ingest.before_marker:2", PASSES)
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split() == ["1"]  # the first pass lived, the second did not


def test_an_unknown_point_stops_the_import() -> None:
    done = _run("landing.before_renam", PASSES)
    assert done.returncode == 1 and "unknown crash point" in done.stderr


@pytest.mark.parametrize("spec", ["landing.before_seq:0", "landing.before_seq:x", "nowhere"])
def test_bad_specs_are_refused(spec: str) -> None:
    with pytest.raises(CrashSpecError):
        parse(spec)


def test_parse_defaults_to_the_first_pass() -> None:
    assert parse("catalog.query") == ("catalog.query", 1)
    assert parse(" result.after_rename:3 ") == ("result.after_rename", 3)


def test_no_setting_or_api_field_can_arm_a_point() -> None:
    """Only the process environment arms a point: no serve setting carries one (the API
    changes settings of the catalog, never the process environment)."""
    assert not any("crash" in name for name in ServeSettings.model_fields)
    assert faults.crash_point is faults._off or os.environ.get(faults.VARIABLE)
    assert all(name.count(".") == 1 for name in POINTS)
