"""An MQTT topic filter's messages landing in a stream: one subscriber thread per binding.

Why a subscriber in the server: what a message becomes must pass the same gate as an
appended element (see :mod:`.kafka_source`). MQTT has no offsets: a QoS 1 message is
delivered at least once, and what the broker keeps for a client is its session. So the
source subscribes at QoS 1 in a persistent session (``clean_session`` false, the same
client id every time): while the server is down the broker queues what the devices
publish, and on reconnect it sends again, with the DUP flag and the same packet id,
every message the source had not acknowledged. Acknowledgements are manual: a message
is acked only once it has landed, been refused, or been known again as landed, so a
message that has not landed yet is never lost. Seqs are the channel's next ones
(as with ``?assign=seq``); what arrives within ``BATCH_SECONDS`` lands per channel in
one call.

Exactly once. A message landed but not acked comes back after a crash; to know it
again the source keeps, in ``<root>/connectors/mqtt/<name>.state`` (written with
:func:`~streamshield.durable.write_atomic`), the keys
(:func:`~streamshield.connectors.mqtt_messages.message_key`: packet id and digest) of the
last ``RECENT`` messages that landed, and before each landing the batch about to land:
per channel its keys and the channel's last seq before it (``pending``). A message
redelivered (DUP set) whose key is known is acked and dropped. The windows:

* killed before the state is written: nothing landed, nothing acked; the broker sends
  the batch again and it lands;
* killed after the state, before or during the landing: the channel's last seq is still
  the one recorded (a landing is one file per channel, renamed into place whole), so on
  restart the pending batch is known not to have landed and its redelivery lands;
* killed after the landing, before the acks (crash point ``mqtt.before_ack``): the
  channel's last seq has grown past the recorded one, so on restart the pending batch's
  keys count as landed and its redelivery is dropped;
* killed after the acks: the broker does not send the batch again (an ack lost on the
  wire is the previous case: its keys are remembered).

A message delivered for the first time never has DUP set, so two messages with equal
payloads both land; a later message that reuses a packet id differs in its key unless
its topic and payload are the same too, and a broker reuses an id only after it has
cycled through the others (MQTT allows 65535 in flight; ``RECENT`` bounds the keys
kept, and the broker's in-flight window must stay below it). This relies on the
binding's channels being written by the binding alone (the service refuses a second
binding on a channel; an API append by the provider to the same channel would move its
last seq and make a pending batch look landed).

Retained copies (the RETAIN flag on a message sent because the source subscribed) are
acked and skipped: they repeat what was published before, not a new publication, and
the source subscribes again on every connection.

Bad input never halts a device: a message of an unbound device or topic, too large,
not a JSON object, bringing its own seq or naming another channel is refused with a
reason, counted and (for bound devices) audited; so is a line the gate refuses. A
landing refused whole (the provider without rights or disabled, ingest halted or far
behind, a disk error) holds that channel's messages unacked and lands them again after
a back-off. A broker that cannot be reached is connected to again with a back-off and
shown as ``broker_unreachable`` in :meth:`MqttSource.status`.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from streamshield.connectors.mqtt_binding import MqttBinding
from streamshield.connectors.mqtt_messages import device_of, message_key, message_line
from streamshield.connectors.record_lines import Refused
from streamshield.connectors.source_thread import RETRIED, Landed, SourceThread, backoff
from streamshield.durable import write_atomic
from streamshield.faults import crash_point

log = logging.getLogger("streamshield.connectors")

BATCH_SECONDS = 0.05
"""How long a channel's first waiting message waits for others to land with it."""
MAX_BATCH = 5000
"""Messages of one channel per landing."""
UNBOUND = frozenset({"unbound_device", "unbound_topic"})
RECENT = 1024
"""Keys of landed messages remembered to know a redelivery again."""
KEEPALIVE_SECONDS = 30
CONNECT_SECONDS = 10.0
"""How long a connection waits for the broker's CONNACK and SUBACK."""

Land = Callable[[str, list[str], None], Landed]
"""``land(user, lines, None)``: lands the lines on the user's behalf with the channel's
next seqs, or raises (held back)."""


class Client(Protocol):
    """What a turn needs of the MQTT client (paho's, or a test's)."""

    def ack(self, mid: int, qos: int) -> Any: ...


@dataclass
class Message:
    topic: str
    payload: bytes
    mid: int
    dup: bool
    retain: bool = False


@dataclass
class _Waiting:
    message: Message
    line: str
    key: str


@dataclass
class _Device:
    device: str
    user: str
    provider: str
    waiting: list[_Waiting] = field(default_factory=list)
    since: float = 0.0  # when the first waiting message arrived
    held: str | None = None
    resume_at: float = 0.0
    failures: int = 0
    landed: int = 0
    refused: int = 0
    duplicates: int = 0


class MqttSource(SourceThread):
    """Subscribes one binding's filter and lands its devices' messages until :meth:`stop`."""

    kind = "mqtt"

    def __init__(
        self,
        binding: MqttBinding,
        land: Land,
        last_seq: Callable[[str], int],
        on_refused: Callable[[str | None, str, int], None],
        state_path: Path,
        client: Callable[[MqttBinding], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``last_seq(provider)``: the channel's last landed seq (0: none);
        ``on_refused(user, reason, count)``: counts and audits refused messages (user
        None: no bound device); ``client(binding)``: a new paho client (tests)."""
        super().__init__(binding)
        self.binding: MqttBinding = binding
        self._land, self._last_seq, self._on_refused = land, last_seq, on_refused
        self.state_path = state_path
        self._client_of = client or _paho_client
        self._clock = clock
        self._devices = {
            device: _Device(device, source.user, source.channel_provider)
            for device, source in binding.providers.items()
        }
        self._by_provider = {d.provider: d for d in self._devices.values()}
        self._recent: deque[str] = deque(maxlen=RECENT)
        self._known: Counter[str] = Counter()  # the keys in _recent, for lookups
        self._pending: dict[str, dict[str, Any]] = {}
        self._inbox: list[Message] = []
        self._forget = False
        self.unbound = 0  # messages of no bound device or topic
        self.retained = 0

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Recovers the kept state and subscribes. A state that cannot be read leaves the
        source stopped (``state_unreadable``): without it a redelivery could land twice,
        and the broker keeps the messages meanwhile."""
        try:
            self.recover()
        except (OSError, ValueError, KeyError, TypeError) as err:
            self._broker = "state_unreadable"
            log.error("mqtt %s: state not read (%s)", self.binding.name, type(err).__name__)
            return
        super().start()

    def stop(self, timeout: float = 10.0, forget: bool = False) -> None:
        """Ends the thread; ``forget``: unsubscribe first, so the broker stops queueing
        for the session (the binding is gone)."""
        self._forget = forget
        super().stop(timeout)

    def recover(self) -> None:
        """Reads the kept keys and settles the batch that was landing when the server
        stopped: landed if its channel's last seq has passed the one recorded before it."""
        self._recent.clear()
        self._known.clear()
        self._pending = {}
        try:
            state = json.loads(self.state_path.read_text("utf-8"))
        except FileNotFoundError:
            return
        for key in state.get("recent", []):
            self._remember(key)
        for provider, batch in state.get("pending", {}).items():
            if self._last_seq(provider) > batch["after"]:
                for key in batch["keys"]:
                    self._remember(key)

    # -- what the server shows ---------------------------------------------------------------

    def status(self) -> str:
        if self._broker == "state_unreadable":
            return self._broker
        return super().status()

    def _held(self) -> list[str | None]:
        return [d.held for d in self._devices.values()]

    def view(self) -> dict[str, Any]:
        return {**super().view(), "unbound": self.unbound, "retained": self.retained}

    def channel_states(self) -> list[dict[str, Any]]:
        """Each device's channel, counts and state."""
        return [
            {
                "device": d.device,
                "provider": d.provider,
                "waiting": len(d.waiting),
                "landed": d.landed,
                "refused": d.refused,
                "duplicates": d.duplicates,
                "held": d.held,
            }
            for _, d in sorted(self._devices.items())
        ]

    # -- the subscriber ----------------------------------------------------------------------

    def _session(self) -> None:
        client = None
        try:
            client = self._connect()
            self._connected()
            self._serve(client)
        finally:
            self._drop_unacked()
            if client is not None:
                self._close(client)

    def _broker_status(self, err: Exception) -> tuple[str, str] | None:
        if isinstance(err, _Broker):
            return err.status, err.status
        if isinstance(err, OSError):
            return "broker_unreachable", type(err).__name__
        return None

    def _connect(self) -> Any:
        """A client connected in the binding's persistent session and subscribed at QoS 1."""
        answers: dict[str, Any] = {}
        client = self._client_of(self.binding)
        client.on_connect = lambda _c, _u, flags, code, _p: answers.update(connack=code)
        client.on_subscribe = lambda _c, _u, _mid, codes, _p: answers.update(suback=codes)
        client.on_message = lambda _c, _u, message: self._received(
            Message(message.topic, message.payload, message.mid, message.dup, message.retain)
        )
        client.connect(self.binding.host, self.binding.port, KEEPALIVE_SECONDS)
        self._wait(client, answers, "connack")
        if answers["connack"].is_failure:
            raise _Broker(f"broker_refused: {answers['connack']}")
        client.subscribe(self.binding.topic_filter, qos=1)
        self._wait(client, answers, "suback")
        granted = answers["suback"][0]
        if granted.is_failure or granted.value != 1:  # QoS 0 would lose messages
            raise _Broker("subscription_refused")
        return client

    def _wait(self, client: Any, answers: dict[str, Any], name: str) -> None:
        deadline = self._clock() + CONNECT_SECONDS
        while name not in answers:
            if client.loop(0.1) != 0 or self._clock() > deadline:
                raise _Broker("broker_unreachable")

    def _serve(self, client: Any) -> None:
        while not self._stopping.is_set():
            if client.loop(BATCH_SECONDS) != 0:
                raise _Broker("broker_unreachable")
            self.turn(client)

    def _close(self, client: Any) -> None:
        try:
            if self._forget and client.is_connected():
                client.unsubscribe(self.binding.topic_filter)
                client.loop(0.5)
            client.disconnect()
            client.loop(0.1)  # the DISCONNECT out: the broker keeps the session, acks sent
        except Exception:  # a broken connection is closed either way
            log.debug("mqtt %s: disconnect failed", self.binding.name, exc_info=True)

    def _drop_unacked(self) -> None:
        """On a lost connection the broker sends every unacked message again: what waits
        here would arrive twice, so it is dropped (it has not landed)."""
        self._inbox.clear()
        for device in self._devices.values():
            device.waiting.clear()

    # -- one turn: sort what arrived, land what is due, ack ---------------------------------

    def _received(self, message: Message) -> None:
        self._inbox.append(message)

    def turn(self, client: Client) -> None:
        """Sorts the messages received since the last turn and lands every channel whose
        first waiting message is older than ``BATCH_SECONDS`` (and not held back)."""
        now = self._clock()
        acks: list[int] = []
        refused: Counter[tuple[str | None, str]] = Counter()
        for message in self._inbox:
            self._sort(message, now, acks, refused)
        self._inbox.clear()
        due = [
            d
            for d in self._devices.values()
            if d.waiting
            and now - d.since >= BATCH_SECONDS
            and (d.held is None or now >= d.resume_at)
        ]
        if due:
            self._land_due(due, acks, refused)
        for (user, reason), count in refused.items():
            self._on_refused(user, reason, count)
        if acks:
            crash_point("mqtt.before_ack")
            for mid in acks:
                client.ack(mid, 1)

    def _sort(
        self,
        message: Message,
        now: float,
        acks: list[int],
        refused: Counter[tuple[str | None, str]],
    ) -> None:
        if message.retain:
            self.retained += 1
            acks.append(message.mid)
            return
        got = message_line(message.topic, message.payload, self.binding)
        if isinstance(got, Refused):
            acks.append(message.mid)
            if got.reason in UNBOUND:
                self.unbound += 1
                refused[None, got.reason] += 1
                return
            device = self._devices[device_of(message.topic, self.binding.provider_level) or ""]
            device.refused += 1
            refused[device.user, got.reason] += 1
            return
        name, line = got
        device = self._devices[name]
        key = message_key(message.mid, message.topic, message.payload)
        if message.dup and (self._known[key] or any(w.key == key for w in device.waiting)):
            device.duplicates += 1
            if self._known[key]:
                acks.append(message.mid)  # landed before; a waiting copy acks itself
            return
        if not device.waiting:
            device.since = now
        device.waiting.append(_Waiting(message, line, key))

    def _land_due(
        self,
        due: list[_Device],
        acks: list[int],
        refused: Counter[tuple[str | None, str]],
    ) -> None:
        batches = {d.provider: d.waiting[:MAX_BATCH] for d in due}
        self._pending = {
            provider: {"after": self._last_seq(provider), "keys": [w.key for w in batch]}
            for provider, batch in batches.items()
        }
        try:
            self._save()
        except OSError as err:  # nothing lands unrecorded: the devices wait, unacked
            for device in due:
                self._hold(device, "write_failed")
            log.warning("mqtt %s: state not written (%s)", self.binding.name, err.strerror)
            return
        for provider, batch in batches.items():
            device = self._by_provider[provider]
            report: Landed | None = None
            try:
                report = self._land(device.user, [w.line for w in batch], None)
                if any(r.reason in RETRIED for r in report.rejected):
                    raise _NotWritten()
            except Exception as err:  # refused whole: the same messages again, later
                if self._last_seq(provider) <= self._pending[provider]["after"]:
                    self._hold(device, getattr(err, "code", None) or type(err).__name__)
                    continue
                # the lines landed and something after failed: landed is what counts
                log.exception("mqtt %s: a landing failed after its file", self.binding.name)
                report = None
            device.held, device.failures = None, 0
            if report is not None:
                device.landed += report.accepted
                device.refused += len(report.rejected)
                for rejection in report.rejected:
                    refused[device.user, rejection.reason] += 1
            if report is None or report.accepted:
                for waiting in batch:
                    self._remember(waiting.key)
            acks.extend(w.message.mid for w in batch)
            del device.waiting[: len(batch)]
            if device.waiting:
                device.since = self._clock() - BATCH_SECONDS  # the rest is due at once

    def _hold(self, device: _Device, code: str) -> None:
        """Keeps the device's messages waiting (unacked) until a back-off has passed."""
        device.failures += 1
        device.held = code
        device.resume_at = self._clock() + backoff(device.failures)
        log.warning("mqtt %s device %s held back: %s", self.binding.name, device.device, code)

    def _remember(self, key: str) -> None:
        if len(self._recent) == self._recent.maxlen:
            oldest = self._recent[0]
            self._known[oldest] -= 1
            if self._known[oldest] <= 0:
                del self._known[oldest]
        self._recent.append(key)
        self._known[key] += 1

    def _save(self) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        state = {"recent": list(self._recent), "pending": self._pending}
        write_atomic(self.state_path, json.dumps(state, separators=(",", ":")), mode=0o600)


class _Broker(Exception):
    """The broker cannot be used now; ``status`` says why."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class _NotWritten(Exception):
    code = "write_failed"


def _paho_client(binding: MqttBinding) -> Any:
    """A paho client for the binding's persistent session (MQTT 3.1.1, manual acks)."""
    from paho.mqtt.client import Client as Paho
    from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

    client = Paho(
        CallbackAPIVersion.VERSION2,
        client_id=binding.client,
        clean_session=False,
        protocol=MQTTProtocolVersion.MQTTv311,
        reconnect_on_failure=False,
        manual_ack=True,
    )
    client.connect_timeout = CONNECT_SECONDS
    if binding.username:
        password = binding.password.get_secret_value() if binding.password else None
        client.username_pw_set(binding.username, password)
    if binding.ca_file:
        client.tls_set(ca_certs=binding.ca_file)
    return client
