"""Errors leaving a ``foreachBatch`` function, kept short for the regex Spark runs on them.

When a streaming query is being stopped, Spark decides whether the Python batch
function failed *because of the stop* by matching the Py4J error text (the whole Python
traceback, Java stack traces included: easily 10-50 KB) with ``StreamExecution.
PROXY_ERROR``::

    py4j.protocol.Py4JJavaError: An error occurred while calling((.|\\r\\n|\\r|\\n)*)(
    java.lang.InterruptedException|java.io.InterruptedIOException|...)

``java.util.regex`` runs ``(x|y)*`` by recursion, one nest of Loop/GroupHead/Branch
frames per character, so about 2,000 characters after that prefix overflow the stream
thread's stack: the ``StackOverflowError`` once logged by the ingest stream thread at
shutdown. The thread then dies without recording the stop or the failure.

:func:`bounded` wraps a batch function so that what reaches the JVM is one short line:
an interruption (by Spark's own rule, checked here in linear time) as a line Spark's
regex still recognises, anything else as its type, the first characters of its message
and the Spark error classes of its chain (what
:func:`~streamshield.engine.queries.streaming_queries.safe_error` reads). The whole
original is logged first, so nothing is lost to operators.
"""

from __future__ import annotations

import functools
import logging
import re
import traceback
from collections.abc import Callable

from pyspark.sql import DataFrame

from streamshield.engine.spark_errors.error_conditions import is_condition

log = logging.getLogger("streamshield.engine")

PROXY_PREFIX = "py4j.protocol.Py4JJavaError: An error occurred while calling"
INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
MAX_MESSAGE = 400
"""Characters of the original message kept: far below the ~2,000 that overflow."""
STORAGE_CAUSES = ("No space left on device", "Read-only file system", "Disk quota exceeded")
"""The OS's words for storage that cannot be written: kept in the short message (they
sit deep in a Java cause chain, far past :data:`MAX_MESSAGE`), so that the server can
tell a full disk from a bad query (``server.queries.failure_class``)."""
_ERROR_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")

BatchFunction = Callable[[DataFrame, int], None]


class BatchInterrupted(RuntimeError):
    """The batch was interrupted (the query is stopping); Spark treats it as a stop."""


class BatchFailed(RuntimeError):
    """The batch failed; the message is the original's type, head and error classes."""


def interrupted(text: str) -> bool:
    """Spark's PROXY_ERROR test, without regex: the prefix, then an interruption."""
    start = text.find(PROXY_PREFIX)
    return start >= 0 and any(name in text[start:] for name in INTERRUPTIONS)


def compact(err: BaseException) -> RuntimeError:
    """A one-line stand-in for ``err`` that no regex can choke on."""
    text = "".join(traceback.format_exception(err))
    if interrupted(text):
        return BatchInterrupted(f"{PROXY_PREFIX} foreachBatch: {INTERRUPTIONS[0]}")
    head = " ".join(str(err).split())[:MAX_MESSAGE]
    head = head.replace(PROXY_PREFIX, "Py4JJavaError calling")
    classes = [c for c in dict.fromkeys(_ERROR_CLASS.findall(text)) if is_condition(c)]
    named = f" [{'] ['.join(classes[:4])}]" if classes else ""
    storage = next((f" ({cause})" for cause in STORAGE_CAUSES if cause in text), "")
    kind = type(err)  # "ShieldStateError: why" stays greppable (server/ingest_guard.py)
    return BatchFailed(f"{kind.__module__}.{kind.__qualname__}: {head}{named}{storage}")


def jvm_gone(err: BaseException) -> bool:
    """Whether ``err`` is the Python side losing Spark's JVM (its gateway refused or cut):
    the JVM stopped or was killed under a running batch, say by a signal sent to the
    server's whole process group. Nothing of the batch was committed, and nothing more
    can be said about it than that."""
    from py4j.protocol import Py4JNetworkError

    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, (Py4JNetworkError, ConnectionRefusedError)):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def bounded(process: BatchFunction) -> BatchFunction:
    """``process`` raising only :class:`BatchInterrupted` or :class:`BatchFailed`.

    A failure is logged whole first; an interruption is the query being stopped (the
    server's stop interrupts a batch that does not reach its end in time; Spark redoes
    it from the checkpoint at the next start), so it is one line, not a traceback on
    every clean stop of a busy server. So is a batch cut by the JVM's exit
    (:func:`jvm_gone`): its traceback is pages of Py4J reconnection attempts."""

    @functools.wraps(process)
    def run(frame: DataFrame, batch_id: int) -> None:
        try:
            process(frame, batch_id)
        except Exception as err:
            if jvm_gone(err):
                log.warning(
                    "micro-batch %d cut: Spark's JVM is gone (redone from the checkpoint at "
                    "the next start)",
                    batch_id,
                )
                raise BatchInterrupted(f"{PROXY_PREFIX} foreachBatch: JVM gone") from None
            stand_in = compact(err)
            if isinstance(stand_in, BatchInterrupted):
                log.warning(
                    "micro-batch %d interrupted: its query is stopping (redone from the "
                    "checkpoint at the next start)",
                    batch_id,
                )
            else:
                log.error("micro-batch %d failed", batch_id, exc_info=err)
            raise stand_in from None

    return run


class _StopsAreNotErrors(logging.Filter):
    """py4j logs every exception a Python callback raises, traceback and all, before it
    hands it to the JVM; a :class:`BatchInterrupted` is a stop, logged above in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        raised = record.exc_info[1] if record.exc_info else None
        return not isinstance(raised, BatchInterrupted)


for _name in ("py4j.clientserver", "py4j.java_gateway"):
    logging.getLogger(_name).addFilter(_StopsAreNotErrors())
