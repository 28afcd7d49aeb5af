"""A Kafka topic's records landing in a stream: one consumer thread per binding.

Why a consumer in the server and not a Spark data source: what a record becomes must
pass the same gate as an appended element (the provider's rights now, the wire format,
the channel's order, its current policy for a tuple that declares none), and the
landing zone is where that gate is; secure ingest then labels Kafka's records and the
API's alike, in one job. The landing is the offset store: a record's seq is its offset
plus one, so the channel's last landed seq says exactly which records have landed.

Exactly once. On start each partition is read from the larger of its channel's last
seq (the next offset after the last landed record) and the group's committed offset (a
record refused is committed past, never retried for ever). After each landing the next
offset is committed to the group, but the commit is only a hint: a kill between the
landing and the commit (crash point ``kafka.before_commit``) restarts at the landed seq,
and the landing zone refuses any seq that does not grow, so nothing lands twice and
nothing landed is skipped.

Bad input never halts a partition: a record that is not a JSON object, too large,
brings its own seq or names another channel is refused with a reason; so is a line the
landing gate refuses; so, for a binding reading Avro or JSON Schema through a schema
registry, is a record not in Confluent's wire format, naming a schema the registry does
not have, or whose body does not decode or validate (:mod:`.registry_decoder`). Each is
counted and audited (reason and count, never the data).
A landing refused whole (the provider disabled or without rights, ingest halted or far
behind, a disk error) pauses only that partition, which is read again from the same
offset after a back-off: nothing is dropped for a state that will pass. So is a batch
whose schema the registry does not give (no connection, a 5xx, the server's credentials
refused), shown as ``registry_unreachable`` or ``registry_error: HTTP <status>``. A
broker that cannot be reached is retried by librdkafka and shown in
:meth:`KafkaSource.status`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from streamshield.connectors.kafka_binding import KafkaBinding
from streamshield.connectors.record_lines import Decode, Refused, json_value, record_line
from streamshield.connectors.registry_decoder import RegistryDecoder, RegistryDown
from streamshield.connectors.source_thread import (
    BACKOFF_SECONDS,
    RETRIED,
    Landed,
    SourceThread,
    backoff,
)
from streamshield.faults import crash_point

log = logging.getLogger("streamshield.connectors")

POLL_SECONDS = 0.2
WATERMARK_SECONDS = 2.0
"""How often the partitions' high watermarks are asked (the lag, and whether the broker
answers)."""
BROKER_ERRORS = {
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TRANSPORT,
    KafkaError._RESOLVE,
    KafkaError._TIMED_OUT,
}


class _NotWritten(Exception):
    code = "write_failed"


Land = Callable[[str, list[str], list[int]], Landed]
"""``land(user, lines, seqs)``: lands the lines on the user's behalf, or raises (held back)."""


@dataclass
class _Partition:
    user: str
    provider: str
    next_offset: int | None = None  # the next offset to read (None: not yet known)
    high: int | None = None  # the high watermark last asked
    held: str | None = None  # why its records did not land, until a landing succeeds
    paused: bool = False  # waiting out a back-off (resumed, it tries the same records)
    resume_at: float = 0.0
    failures: int = 0
    landed: int = 0
    refused: int = 0


class KafkaSource(SourceThread):
    """Consumes one binding's partitions into its stream until :meth:`stop`."""

    kind = "kafka"

    def __init__(
        self,
        binding: KafkaBinding,
        land: Land,
        last_seq: Callable[[str], int],
        on_refused: Callable[[str, str, int], None],
        consumer: Callable[[dict[str, Any]], Any] = Consumer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``last_seq(provider)``: the channel's last landed seq (0: none);
        ``on_refused(user, reason, count)``: counts and audits refused records."""
        super().__init__(binding)
        self.binding: KafkaBinding = binding
        self._land, self._last_seq, self._on_refused = land, last_seq, on_refused
        self._consumer_of, self._clock = consumer, clock
        self._partitions = {
            number: _Partition(source.user, source.channel_provider)
            for number, source in binding.partitions.items()
        }
        self._decode: Decode | None = None if binding.schema_registry else json_value

    # -- what the server shows ---------------------------------------------------------------

    def status(self) -> str:
        """As every source's, with a registry that holds partitions back named as such
        (``registry_unreachable``), as a broker outage is."""
        status = super().status()
        if status.startswith("held_back: "):
            registry = sorted(
                held
                for held in {p.held for p in self._partitions.values()}
                if held and held.startswith("registry_")
            )
            if registry:
                return registry[0]
        return status

    def _held(self) -> list[str | None]:
        return [p.held for p in self._partitions.values()]

    def lags(self) -> dict[int, int]:
        """Records on the broker not yet landed (or refused), per partition."""
        lags = {}
        for number, state in self._partitions.items():
            if state.next_offset is not None and state.high is not None:
                lags[number] = max(0, max(state.high, state.next_offset) - state.next_offset)
        return lags

    def channel_states(self) -> list[dict[str, Any]]:
        """Each partition's channel, position, lag and state."""
        lags = self.lags()
        return [
            {
                "partition": number,
                "provider": state.provider,
                "next_offset": state.next_offset,
                "lag": lags.get(number),
                "landed": state.landed,
                "refused": state.refused,
                "held": state.held,
            }
            for number, state in sorted(self._partitions.items())
        ]

    # -- the consumer ------------------------------------------------------------------------

    def stop(self, timeout: float = 10.0, forget: bool = False) -> None:
        super().stop(timeout, forget)
        if isinstance(self._decode, RegistryDecoder):
            self._decode.close()
            self._decode = None

    def _decoder(self) -> Decode:
        """How a record's value is read: JSON, or through the binding's registry (its
        client made once per start, so the schemas it fetched are kept)."""
        if self._decode is None:
            registry = self.binding.schema_registry
            assert registry is not None  # a binding without one reads JSON
            try:
                self._decode = RegistryDecoder(registry, self.binding.encoding)
            except OSError as err:  # the CA file: a setting to correct, tried again
                raise RegistryDown("registry_error: CA file unreadable") from err
        return self._decode

    def _session(self) -> None:
        self._decoder()
        consumer = self._open()
        try:
            self._connected()
            self._consume(consumer)
        finally:
            consumer.close()

    def _broker_status(self, err: Exception) -> tuple[str, str] | None:
        if isinstance(err, RegistryDown):
            return err.code, err.code
        if isinstance(err, KafkaException):
            return "broker_unreachable", _code_name(err)
        return None

    def _open(self) -> Any:
        """A consumer assigned the bound partitions, each at its next unlanded offset."""
        config = self.binding.client_config()
        config["error_cb"] = self._broker_error
        # librdkafka's own lines go to this logger, and only critical ones: it logs every
        # reconnect attempt; error_cb reports each error, once per change, and status().
        config["logger"], config["log_level"] = log, 2
        consumer = self._consumer_of(config)
        topic = self.binding.topic
        try:
            committed = consumer.committed(
                [TopicPartition(topic, number) for number in self._partitions], timeout=3
            )
            starts = []
            for part in committed:
                state = self._partitions[part.partition]
                landed = self._last_seq(state.provider)  # offset + 1 of the last landed
                start = max(landed, part.offset)
                state.next_offset = start
                starts.append(TopicPartition(topic, part.partition, start or OFFSET_BEGINNING))
            consumer.assign(starts)
        except BaseException:
            consumer.close()
            raise
        return consumer

    def _broker_error(self, error: KafkaError) -> None:
        """librdkafka's error callback: the broker's state for status(), logged when it
        changes (an outage calls it at every reconnect attempt)."""
        state = (
            "broker_unreachable"
            if error.code() in BROKER_ERRORS
            else f"broker_error: {error.name()}"
        )
        if state != self._broker:
            log.warning("kafka %s: %s (%s)", self.binding.name, state, error.name())
        self._broker = state

    def _consume(self, consumer: Any) -> None:
        asked = 0.0
        while not self._stopping.is_set():
            self._resume_due(consumer)
            messages = _available(consumer, self.binding.max_records)
            batches: dict[int, list[Any]] = {}
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.fatal():
                        raise KafkaException(error)
                    continue
                batches.setdefault(message.partition(), []).append(message)
            if batches:
                self._broker = None
            for number, batch in batches.items():
                state = self._partitions.get(number)
                if state is not None and not state.paused:
                    self._land_batch(consumer, number, state, batch)
            if self._clock() - asked >= WATERMARK_SECONDS:
                asked = self._clock()
                self._ask_watermarks(consumer)

    def _land_batch(self, consumer: Any, number: int, state: _Partition, batch: list) -> None:
        binding = self.binding
        refused: Counter[str] = Counter()
        lines: list[str] = []
        seqs: list[int] = []
        first = batch[0].offset()
        for message in batch:
            try:
                line = record_line(
                    message.value(),
                    binding.stream,
                    state.provider,
                    binding.format,
                    binding.fields,
                    decode=self._decoder(),
                )
            except RegistryDown as err:  # the whole batch again, once it answers
                self._hold(consumer, number, state, first, err)
                return
            if isinstance(line, Refused):
                refused[line.reason] += 1
            else:
                lines.append(line)
                seqs.append(message.offset() + 1)
        if lines:
            try:
                report = self._land(state.user, lines, seqs)
                if any(r.reason in RETRIED for r in report.rejected):
                    raise _NotWritten()
            except Exception as err:  # refused whole: the same records again, later
                self._hold(consumer, number, state, first, err)
                return
            state.landed += report.accepted
            refused.update(r.reason for r in report.rejected)
        state.held, state.failures = None, 0
        state.next_offset = batch[-1].offset() + 1
        if refused:
            state.refused += sum(refused.values())
            for reason, count in refused.items():
                self._on_refused(state.user, reason, count)
        crash_point("kafka.before_commit")
        try:
            consumer.commit(
                offsets=[TopicPartition(binding.topic, number, state.next_offset)],
                asynchronous=False,
            )
        except KafkaException as err:  # a hint only: the landing says what landed
            log.warning("kafka %s: commit failed (%s)", binding.name, _code_name(err))

    def _hold(
        self, consumer: Any, number: int, state: _Partition, offset: int, err: Exception
    ) -> None:
        """Pauses the partition at ``offset`` until a back-off has passed."""
        state.failures += 1
        state.held, state.paused = getattr(err, "code", None) or type(err).__name__, True
        hint = getattr(err, "retry_after", None)  # ingest behind: it says when to come back
        wait = min(float(hint), BACKOFF_SECONDS[-1]) if hint else backoff(state.failures)
        state.resume_at = self._clock() + wait
        part = TopicPartition(self.binding.topic, number, offset)
        consumer.pause([part])
        consumer.seek(part)
        log.warning("kafka %s partition %d held back: %s", self.binding.name, number, state.held)

    def _resume_due(self, consumer: Any) -> None:
        now = self._clock()
        due = [
            TopicPartition(self.binding.topic, number)
            for number, state in self._partitions.items()
            if state.paused and now >= state.resume_at
        ]
        if due:
            for part in due:
                self._partitions[part.partition].paused = False
            consumer.resume(due)

    def _ask_watermarks(self, consumer: Any) -> None:
        topic = self.binding.topic
        try:
            for number, state in self._partitions.items():
                _low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, number), timeout=1.0, cached=False
                )
                state.high = high
        except KafkaException:
            self._broker = "broker_unreachable"
            return
        self._broker = None


def _available(consumer: Any, most: int) -> list[Any]:
    """The records fetched by now, at most ``most``: waits up to POLL_SECONDS for the
    first, none for the rest (``consume`` alone waits its whole timeout unless ``most``
    records came, which a landing's latency would pay on every quiet batch)."""
    first = consumer.poll(POLL_SECONDS)
    if first is None:
        return []
    return [first, *consumer.consume(most - 1, 0)] if most > 1 else [first]


def _code_name(err: KafkaException) -> str:
    error = err.args[0] if err.args else None
    return error.name() if isinstance(error, KafkaError) else type(err).__name__
