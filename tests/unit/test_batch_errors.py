"""The stand-ins :mod:`streamshield.engine.spark_errors.batch_errors` hands the JVM (no JVM
here)."""

from __future__ import annotations

import logging

import pytest

from streamshield.engine.ingest.tracker_state import ShieldStateError
from streamshield.engine.spark_errors.batch_errors import (
    MAX_MESSAGE,
    PROXY_PREFIX,
    BatchFailed,
    BatchInterrupted,
    bounded,
    compact,
    interrupted,
    jvm_gone,
)
from streamshield.server.ingest_guard import is_state_failure, reason_of

TRACE = "\n".join("\tat org.apache.spark.Some.method(Some.scala:1)" for _ in range(2000))


def test_interruption_follows_sparks_rule() -> None:
    assert interrupted(f"x\n{PROXY_PREFIX} o1.collect.\n: java.lang.InterruptedException\n")
    assert interrupted(f"{PROXY_PREFIX} o9.x\n{TRACE}\njava.io.InterruptedIOException")
    assert not interrupted(f"{PROXY_PREFIX} o1.x\n{TRACE}")  # no interruption named
    assert not interrupted(f"java.lang.InterruptedException {PROXY_PREFIX}")  # wrong order


def test_an_interruption_becomes_one_short_line_spark_still_recognises() -> None:
    err = RuntimeError(f"{PROXY_PREFIX} o1.collect.\n: java.lang.InterruptedException\n{TRACE}")
    short = compact(err)
    assert isinstance(short, BatchInterrupted)
    text = str(short)
    assert interrupted(text) and len(text) < 200


def test_a_failure_keeps_its_type_head_and_error_classes_only() -> None:
    err = ValueError(f"{PROXY_PREFIX} o3.parquet: [TASK_WRITE_FAILED] oops\n{TRACE}")
    short = compact(err)
    assert isinstance(short, BatchFailed)
    text = str(short)
    assert text.startswith("builtins.ValueError: Py4JJavaError calling o3.parquet")
    assert "[TASK_WRITE_FAILED]" in text and len(text) < MAX_MESSAGE + 200
    assert PROXY_PREFIX not in text  # Spark's regex never runs over it


def test_a_full_disk_deep_in_the_java_causes_is_kept() -> None:
    """The OS's words sit far past the head kept; the server needs them to tell a full
    disk (restarted when writable) from a bad query."""
    deep = f"{TRACE * 20}Caused by: java.io.IOException: No space left on device\n"
    err = ValueError(f"{PROXY_PREFIX} o3.parquet: [TASK_WRITE_FAILED] oops\n{deep}")
    text = str(compact(err))
    assert text.endswith("[TASK_WRITE_FAILED] (No space left on device)")
    assert len(text) < MAX_MESSAGE + 200


def test_a_shield_state_failure_still_halts_ingest_with_its_reason() -> None:
    short = compact(ShieldStateError("batch 7's shield state is missing"))
    assert is_state_failure(short)
    assert reason_of(short) == "batch 7's shield state is missing"


def test_bounded_raises_the_stand_in_without_the_chain() -> None:
    def process(frame, batch_id) -> None:
        raise KeyError(TRACE)

    with pytest.raises(BatchFailed) as caught:
        bounded(process)(None, 3)
    assert caught.value.__suppress_context__ and caught.value.__cause__ is None


def test_an_interruption_is_one_line_and_py4j_does_not_print_its_traceback(caplog) -> None:
    """A stop interrupting a batch is no error: no traceback from the wrapper, none from
    py4j's callback server (which logs whatever a callback raises), one warning line."""

    def process(frame, batch_id) -> None:
        raise RuntimeError(f"{PROXY_PREFIX} o1.collect.\n: java.lang.InterruptedException\n")

    caplog.set_level(logging.INFO)
    with pytest.raises(BatchInterrupted) as caught:
        bounded(process)(None, 4)
    try:  # what py4j's ClientServer does with it (``logger.exception`` in _call_proxy)
        raise caught.value
    except BatchInterrupted:
        logging.getLogger("py4j.clientserver").exception("There was an exception ...")
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "micro-batch 4 interrupted" in caplog.records[0].getMessage()
    assert not any(r.exc_info for r in caplog.records), "a warning line, no traceback"


def test_a_batch_cut_by_the_jvms_exit_is_one_warning_line(caplog) -> None:
    """The JVM stopping under a batch (a signal to the server's whole process group) is
    pages of Py4J reconnection tracebacks; it is one line, and a stop for Spark."""
    from py4j.protocol import Py4JJavaError, Py4JNetworkError

    def process(frame, batch_id) -> None:
        try:
            raise Py4JNetworkError("Answer from Java side is empty")
        except Py4JNetworkError:
            try:
                raise ConnectionRefusedError(111, "Connection refused")
            except ConnectionRefusedError as refused:
                raise ValueError("reading the batch's Arrow stream") from refused

    caplog.set_level(logging.INFO)
    with pytest.raises(BatchInterrupted):
        bounded(process)(None, 2)
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "micro-batch 2 cut: Spark's JVM is gone" in caplog.records[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)
    assert not jvm_gone(RuntimeError("a bad query"))  # anything else is still a failure
    assert not jvm_gone(Py4JJavaError.__new__(Py4JJavaError))


def test_a_real_failure_keeps_its_traceback_in_both_logs(caplog) -> None:
    def process(frame, batch_id) -> None:
        raise KeyError("boom")

    with pytest.raises(BatchFailed) as caught:
        bounded(process)(None, 5)
    try:
        raise caught.value
    except BatchFailed:
        logging.getLogger("py4j.clientserver").exception("There was an exception ...")
    assert [r.levelname for r in caplog.records] == ["ERROR", "ERROR"]
    # Formatted here, not via caplog.text: the server's JSON log format, once set up by
    # an earlier test in the same process, renders a traceback as a list of frames.
    plain = logging.Formatter()
    assert all("Traceback" in plain.format(r) for r in caplog.records)
