"""One source binding's thread: started and stopped by the server, its broker session
opened again with a back-off whenever it is lost, its state summed up for ``/readyz``.

Kafka's consumer and MQTT's subscriber differ in how they read and when a message
counts as landed (:mod:`.kafka_source`, :mod:`.mqtt_source`); they share this life.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from streamshield.connectors.source_binding import SourceBinding

log = logging.getLogger("streamshield.connectors")

BACKOFF_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0)
"""Waits before a held-back channel is landed again, or the broker connected to again."""
RETRIED = frozenset({"write_failed"})
"""Landing rejections that say nothing about the message (the disk refused the file):
the channel waits and lands them again, never moves past them."""


class Landed(Protocol):
    """What a landing reports back (:class:`~streamshield.server.element_gate.AppendReport`)."""

    accepted: int
    rejected: list[Any]


def backoff(failures: int) -> float:
    """The wait after ``failures`` failures in a row (at least one)."""
    return BACKOFF_SECONDS[min(max(failures, 1), len(BACKOFF_SECONDS)) - 1]


class SourceThread:
    """Runs :meth:`_session` until :meth:`stop`, again after each failure, with a back-off."""

    kind: ClassVar[str]
    """``kafka`` or ``mqtt``: the thread's name and log lines."""

    def __init__(self, binding: SourceBinding) -> None:
        self.binding = binding
        self.name = binding.name
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._broker: str | None = "starting"  # why the broker is not answering, or None
        self._failures = 0

    def start(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"{self.kind}-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0, forget: bool = False) -> None:
        """Ends the thread; ``forget``: the binding is gone, the broker may stop keeping
        anything for it."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def status(self) -> str:
        """``ok``, or why messages do not land now (``/readyz`` detail)."""
        if not self.running:
            return "stopped"
        if self._broker is not None:
            return self._broker
        held = sorted({reason for reason in self._held() if reason})
        return "held_back: " + ", ".join(held) if held else "ok"

    def channel_states(self) -> list[dict[str, Any]]:
        """Each channel's position, counts and state, as the API shows them."""
        raise NotImplementedError

    def view(self) -> dict[str, Any]:
        """The binding (no password), its status and each channel's state."""
        return {
            **self.binding.public(),
            "status": self.status(),
            f"{self.binding.CHANNEL}s_state": self.channel_states(),
        }

    def feed(self, providers: Callable[[str], bool] | None = None) -> dict[str, Any] | None:
        """What ``GET /streams/{name}/ingest`` shows of this source: only the channels
        whose provider ``providers(provider)`` accepts, if given; None if none is."""
        channels = [
            c for c in self.channel_states() if providers is None or providers(c["provider"])
        ]
        if not channels:
            return None
        source = self.binding.SOURCE
        return {
            "binding": self.name,
            source: getattr(self.binding, source),
            "status": self.status(),
            f"{self.binding.CHANNEL}s": channels,
        }

    def _held(self) -> Iterable[str | None]:
        """Why each channel's messages wait, or None where they do not."""
        raise NotImplementedError

    def _session(self) -> None:
        """Connects, calls :meth:`_connected`, reads until stopped; raises when the
        session is lost, and closes what it opened either way."""
        raise NotImplementedError

    def _broker_status(self, err: Exception) -> tuple[str, str] | None:
        """(status, what to log) for an error that says the broker is unreachable or
        refuses; None for anything else (logged with its traceback)."""
        raise NotImplementedError

    def _connected(self) -> None:
        self._broker = None
        self._failures = 0

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._session()
            except Exception as err:  # the source must outlive any one bad session
                known = self._broker_status(err)
                if known is None:
                    self._broker = f"failed: {type(err).__name__}"
                    log.exception("%s %s stopped a turn", self.kind, self.name)
                else:
                    self._broker = known[0]
                    log.warning("%s %s: %s", self.kind, self.name, known[1])
            if self._stopping.is_set():
                break
            self._failures += 1
            self._stopping.wait(backoff(self._failures))
