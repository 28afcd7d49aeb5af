"""The StackOverflowError in java.util.regex in the ingest stream thread at
shutdown (see :mod:`streamshield.engine.spark_errors.batch_errors`).

A batch that fails while the query stops sends Spark a Py4J error text that Spark matches
with a ``(.|\\r\\n|\\r|\\n)*`` regex; a text of a few thousand characters overflowed the
stream thread's stack, and the thread died without recording the stop or the failure.
Both tests fail on the unwrapped batch function: the status is not ``Stopped`` and the
failure is not recorded (``exception()`` is None).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.examples import hospital
from tests.polling import poll
from tests.spark.conformance import STREAMS
from tests.spark.test_ingest_job import chunks, land

pytestmark = pytest.mark.spark
LONG = "; ".join(f"column c{i} is missing" for i in range(300))  # ~6,000 characters


def _interrupted_call(spark) -> None:
    """A real Py4JJavaError of a java.lang.InterruptedException, as a stop causes one."""
    thread = spark._jvm.java.lang.Thread
    thread.currentThread().interrupt()
    thread.sleep(1000)


def _stop_during_a_failing_batch(spark, tmp_path: Path, fail) -> object:
    """Ingest whose first batch blocks until ``stop()`` has begun, then calls ``fail``."""
    land(tmp_path / "landing", chunks(hospital.elements(), 9)[0], 0)
    job = IngestJob(
        Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies()),
        tmp_path / "landing",
        tmp_path / "root",
    )
    entered, go = threading.Event(), threading.Event()

    def write_batch(batch_id, frames, check=None, small=False, tables=None):
        entered.set()
        go.wait(60)
        fail()

    job.store.write_batch = write_batch
    query = job.start(available_now=False)
    assert entered.wait(60)
    stopper = threading.Thread(target=query.stop)
    stopper.start()
    poll(lambda: not query.isActive, 60.0, 0.05)  # stop() has begun: Spark now runs its regex
    go.set()
    stopper.join(60)
    assert not stopper.is_alive()
    return query


def test_an_interruption_with_a_long_traceback_is_a_clean_stop(spark, tmp_path) -> None:
    def fail() -> None:
        try:
            _interrupted_call(spark)
        except Exception as err:
            raise RuntimeError(f"the batch could not be written: {LONG}") from err

    query = _stop_during_a_failing_batch(spark, tmp_path, fail)
    assert query.status["message"] == "Stopped", (query.status, query.exception())
    assert query.exception() is None


def test_a_failure_with_a_long_traceback_at_shutdown_is_recorded(spark, tmp_path) -> None:
    def fail() -> None:
        try:
            spark._jvm.java.lang.Class.forName("no.such.Klass")
        except Exception as err:
            raise ValueError(f"the batch could not be written: {LONG}") from err

    query = _stop_during_a_failing_batch(spark, tmp_path, fail)
    failure = query.exception()
    assert failure is not None
    assert "builtins.ValueError: the batch could not be written" in str(failure)
    assert len(str(failure)) < 20_000  # the long message was cut, not forwarded whole
