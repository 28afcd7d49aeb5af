"""The wheel a user installs: built from this tree, installed outside it, and run there.

Running from the repository hides packaging mistakes (a grammar, a migration script or a
sample feed missing from the wheel works in an editable install and fails for users),
so the wheel is installed into a fresh directory and imported from a directory that
is not the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [built] = out.glob("streamshield-*.whl")
    return built


def test_the_wheel_carries_its_license_and_data_files(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("licenses/LICENSE") for n in names), "LICENSE missing from the wheel"
    assert "streamshield/lang/cql.lark" in names
    migrations = "streamshield/catalog/migrations/"
    for packaged in ("env.py", "script.py.mako", "versions/0001_initial.py"):
        assert migrations + packaged in names, f"{packaged} missing: catalogs could not open"
    console = "streamshield/server/console/"
    for packaged in ("index.html", "console.css", "js/main.js", "js/views/tail.js"):
        assert console + packaged in names, f"{packaged} missing: the console would not load"
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: Apache-2.0" in text


def test_the_wheel_runs_outside_the_repository(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = (
        "import streamshield, streamshield.cli as c; from click.testing import CliRunner;"
        "from streamshield.lang.cql import parse_policy;"
        "parse_policy('INSERT SP INTO STREAM s LET DDP = STREAMS: s, SRP = rbac:A;', ts=1);"
        "r = CliRunner().invoke(c.main, ['--help']); assert r.exit_code == 0, r.output;"
        "from streamshield.catalog.store import SqlCatalog; SqlCatalog('catalog.db');"
        "print(streamshield.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(target)), "imported the repository, not the wheel"


def test_dependencies_are_ranges_and_pinned_in_the_constraints_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    pins = {
        line.split("==")[0].lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    for requirement in project["dependencies"]:
        assert "==" not in requirement, f"{requirement}: a library pins ranges, not versions"
        name = requirement.split(";")[0]
        for sep in "~=<>[ ":
            name = name.split(sep)[0]
        assert name.lower() in pins, f"{name} has no exact version in constraints.txt"
    assert not any("matplotlib" in r for r in project["dependencies"]), "plotting is an extra"
