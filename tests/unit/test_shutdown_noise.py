"""The server's stop hides py4j's traceback for a command the JVM's exit cut, and
nothing else (``server/main.py``, ``_jvm_gone_noise``)."""

from __future__ import annotations

import logging
import sys

from py4j.protocol import Py4JNetworkError

from streamshield.server.main import _jvm_gone_noise


def _record(msg: str, error: BaseException | None) -> logging.LogRecord:
    exc_info = None
    if error is not None:
        try:
            raise error
        except BaseException:
            exc_info = sys.exc_info()
    return logging.LogRecord("root", logging.INFO, __file__, 1, msg, None, exc_info)


def test_a_command_cut_by_the_jvm_exit_is_dropped() -> None:
    cut = Py4JNetworkError("Error while sending", ConnectionResetError(104, "reset"))
    assert not _jvm_gone_noise(_record("Exception while sending command.", cut))
    assert not _jvm_gone_noise(_record("Exception while sending command.", BrokenPipeError()))


def test_every_other_record_passes() -> None:
    assert _jvm_gone_noise(_record("Exception while sending command.", ValueError("bug")))
    assert _jvm_gone_noise(_record("Exception while sending command.", None))
    assert _jvm_gone_noise(_record("query q failed", ConnectionResetError()))
    assert _jvm_gone_noise(_record("server stopping", None))
