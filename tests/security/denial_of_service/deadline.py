"""Run a possibly stalling computation in a forked child with a deadline.

A backtracking regex does not return and cannot be interrupted from Python, so a test
that measures one must not run it in the test process: on a vulnerable build the test
would hang instead of failing. The child is killed at the deadline and the test fails.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def _child(queue: Any, function: Callable[..., Any], args: tuple) -> None:
    try:
        queue.put(("ok", function(*args)))
    except BaseException as error:
        queue.put(("error", f"{type(error).__name__}: {error}"))


def within(seconds: float, function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` computed in a child process, or AssertionError after ``seconds``."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue, function, args))
    child.start()
    child.join(seconds)
    if child.is_alive():
        child.kill()
        child.join()
        raise AssertionError(f"stalled: not done within {seconds} s")
    status, value = queue.get(timeout=5)
    if status != "ok":
        raise AssertionError(value)
    return value
