"""The pipeline on a real Spark standalone cluster gives local mode's per-role results.

A master and a worker run as their own JVMs on loopback; the pipeline's driver runs in a
third process and its executor in a JVM the worker starts. They share only the storage
location (a temporary directory here). The reference shield must agree with it tuple by
tuple for every role set, as it agrees with local mode (tests/spark/test_ingest_job.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamshield.examples import hospital
from tests.cluster.run_pipeline import ROLE_SETS, role_key, to_json
from tests.cluster.standalone import standalone_cluster
from tests.spark.conformance import reference
from tests.spark.test_ingest_job import chunks, land

pytestmark = pytest.mark.spark  # the "cluster" marker is not registered (strict markers)
REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 300  # seconds per pipeline run


def pipeline(master: str, landing: Path, root: Path, out: Path) -> subprocess.Popen:
    """Start the pipeline script in its own process (one SparkContext per process)."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("STREAMSHIELD_SPARK_MASTER", None)
    log = out.with_suffix(".log").open("wb")
    command = [sys.executable, "-m", "tests.cluster.run_pipeline", "--master", master]
    command += ["--out", str(out), "--landing", str(landing), "--root", str(root)]
    try:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log)
    finally:
        log.close()


def result(process: subprocess.Popen, out: Path, deadline: float) -> dict:
    try:
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        code = "timeout"
    if code != 0:
        log = out.with_suffix(".log").read_text(errors="replace")
        pytest.fail(f"pipeline {out.stem} failed ({code}):\n{log[-4000:]}")
    return json.loads(out.read_text())


def test_standalone_cluster_matches_the_reference(tmp_path) -> None:
    """The cluster's per-role outcomes equal the reference shield's. Local mode's equal
    them too (tests/spark/test_ingest_job.py, the same elements and pipeline), so the
    cluster gives local mode's results without a second pipeline process here: it ran
    beside the cluster's three JVMs on the same two cores."""
    elements = hospital.elements()
    landing = tmp_path / "landing"
    for i, part in enumerate(chunks(elements, 9)):
        land(landing, part, i)
    with standalone_cluster(tmp_path / "cluster") as master:
        remote = pipeline(master, landing, tmp_path / "remote", tmp_path / "remote.json")
        try:
            on_cluster = result(remote, tmp_path / "remote.json", time.monotonic() + TIMEOUT)
        finally:
            if remote.poll() is None:
                remote.kill()
                remote.wait()

    # the cluster run really ran elsewhere: an executor the worker launched, not the driver
    assert on_cluster["master"] == master
    assert on_cluster["executors"], "no executor registered with the cluster application"
    assert list((tmp_path / "cluster" / "worker").glob("app-*/*/stderr"))

    expected = {role_key(r): to_json(reference(elements, r)) for r in ROLE_SETS}
    assert on_cluster["outcomes"] == expected
