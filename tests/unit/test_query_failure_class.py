"""A query that failed on a full or read-only disk is told apart (STORAGE_UNAVAILABLE,
restarted by the server once writing works); any other failure keeps Spark's class."""

from __future__ import annotations

import pytest

from streamshield.server.queries import STORAGE_UNAVAILABLE, failure_class


@pytest.mark.parametrize(
    "text",
    [
        "[STREAM_FAILED] ... Caused by: java.io.IOException: No space left on device",
        "[TASK_WRITE_FAILED] Task failed while writing rows: Read-only file system",
        "OSError: [Errno 122] Disk quota exceeded: '/srv/results/q/_tmp'",
    ],
)
def test_a_full_or_read_only_disk_is_storage_unavailable(text) -> None:
    assert failure_class(RuntimeError(text)) == STORAGE_UNAVAILABLE


def test_other_failures_keep_their_class() -> None:
    assert failure_class(None) == "STOPPED_UNEXPECTEDLY"
    failed = RuntimeError("[STREAM_FAILED] Query [id = 1] terminated: [CAST_INVALID_INPUT] 'x'")
    assert failure_class(failed) == "CAST_INVALID_INPUT"
