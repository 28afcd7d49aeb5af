"""The MQTT source's turns without a broker (connectors/mqtt_source.py): acks only after
landing, and every crash window between landing, state and ack neither loses nor repeats.

A kill is a ``BaseException`` raised out of a landing or an ack (nothing after it runs);
the restarted source is a new :class:`MqttSource` on the same state file and landing,
and the broker's redelivery is the same messages again with DUP set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from streamshield.connectors.mqtt_binding import MqttBinding
from streamshield.connectors.mqtt_source import BATCH_SECONDS, Message, MqttSource

BINDING = MqttBinding.model_validate(
    {
        "name": "plant_feed",
        "stream": "readings",
        "host": "127.0.0.1",
        "topic_filter": "plant/+/reading",
        "provider_level": 1,
        "providers": {"m1": {"user": "ed", "provider": "ed.m1"}, "m2": {"user": "fay"}},
    }
)


class Killed(BaseException):
    """The process dies here."""


class Forbidden(Exception):
    code = "forbidden"


@dataclass
class Report:
    accepted: int
    rejected: list = field(default_factory=list)


class Landing:
    """Channels' landed values and last seqs; ``refuse`` / ``kill`` the next landing."""

    def __init__(self) -> None:
        self.lines: dict[str, list[int]] = {}
        self.refuse = False
        self.kill_before = False

    def last_seq(self, provider: str) -> int:
        return len(self.lines.get(provider, []))

    def land(self, user: str, lines: list[str], seqs: None) -> Report:
        assert seqs is None
        if self.kill_before:
            raise Killed()
        if self.refuse:
            raise Forbidden()
        for line in lines:
            element = json.loads(line)
            self.lines.setdefault(element["provider"], []).append(element["values"]["n"])
        return Report(len(lines))


class Client:
    def __init__(self, kill_on_ack: bool = False) -> None:
        self.acked: list[int] = []
        self.kill_on_ack = kill_on_ack

    def ack(self, mid: int, qos: int) -> None:
        assert qos == 1
        if self.kill_on_ack:
            raise Killed()
        self.acked.append(mid)


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def _message(mid: int, n: int, device: str = "m1", dup: bool = False) -> Message:
    payload = json.dumps({"type": "tuple", "values": {"n": n}}).encode()
    return Message(f"plant/{device}/reading", payload, mid, dup)


def _source(tmp_path, landing: Landing, clock: Clock, refused: list | None = None) -> MqttSource:
    source = MqttSource(
        BINDING,
        landing.land,
        landing.last_seq,
        lambda user, reason, count: (refused if refused is not None else []).append(
            (user, reason, count)
        ),
        tmp_path / "plant_feed.state",
        clock=clock,
    )
    source.recover()
    return source


def _deliver(source: MqttSource, clock: Clock, client: Client, messages: list[Message]) -> None:
    for message in messages:
        source._received(message)
    source.turn(client)
    clock.now += 2 * BATCH_SECONDS
    source.turn(client)


def test_what_arrives_lands_per_device_and_is_acked_after(tmp_path) -> None:
    landing, clock, client, refused = Landing(), Clock(), Client(), []
    source = _source(tmp_path, landing, clock, refused)
    source._received(_message(1, 10))
    source._received(_message(2, 20, "m2"))
    source._received(_message(3, 30, "m9"))  # unbound: refused at once, never lands
    source._received(Message("plant/m1/reading", b"not json", 4, False))
    source.turn(client)
    assert landing.lines == {} and sorted(client.acked) == [3, 4]
    clock.now += 2 * BATCH_SECONDS
    source.turn(client)
    assert landing.lines == {"ed.m1": [10], "fay": [20]}
    assert sorted(client.acked) == [1, 2, 3, 4]
    assert set(refused) == {("ed", "malformed_record", 1), (None, "unbound_device", 1)}
    assert source.unbound == 1


@pytest.mark.parametrize("window", ["before_landing", "before_ack"])
def test_a_kill_in_either_window_lands_each_message_once(tmp_path, window: str) -> None:
    landing, clock = Landing(), Clock()
    first = _source(tmp_path, landing, clock)
    _deliver(first, clock, Client(), [_message(1, 1)])
    landing.kill_before = window == "before_landing"
    with pytest.raises(Killed):
        _deliver(first, clock, Client(kill_on_ack=True), [_message(2, 2), _message(3, 3)])
    landing.kill_before = False
    landed_before = list(landing.lines["ed.m1"])

    again, client = _source(tmp_path, landing, clock), Client()
    _deliver(again, clock, client, [_message(2, 2, dup=True), _message(3, 3, dup=True)])
    assert landing.lines["ed.m1"] == [1, 2, 3]
    assert landed_before == ([1] if window == "before_landing" else [1, 2, 3])
    assert sorted(client.acked) == [2, 3]  # acked either way: the broker stops resending
    dropped = again.channel_states()[0]["duplicates"]
    assert dropped == (0 if window == "before_landing" else 2)


def test_a_first_delivery_is_never_taken_for_a_duplicate(tmp_path) -> None:
    landing, clock, client = Landing(), Clock(), Client()
    source = _source(tmp_path, landing, clock)
    _deliver(source, clock, client, [_message(5, 1)])
    _deliver(source, clock, client, [_message(5, 1)])  # the same reading, the id reused
    assert landing.lines["ed.m1"] == [1, 1]


def test_a_refused_landing_holds_messages_unacked_and_lands_them_later(tmp_path) -> None:
    landing, clock, client = Landing(), Clock(), Client()
    source = _source(tmp_path, landing, clock)
    landing.refuse = True
    _deliver(source, clock, client, [_message(1, 1), _message(2, 2, "m2")])
    assert client.acked == [] and source.channel_states()[0]["held"] == "forbidden"
    landing.refuse = False
    source.turn(client)  # the back-off has not passed
    assert client.acked == []
    clock.now += 60
    source.turn(client)
    assert landing.lines == {"ed.m1": [1], "fay": [2]} and sorted(client.acked) == [1, 2]
    assert all(d["held"] is None for d in source.channel_states())


def test_a_redelivery_while_the_original_waits_lands_once(tmp_path) -> None:
    landing, clock, client = Landing(), Clock(), Client()
    source = _source(tmp_path, landing, clock)
    source._received(_message(1, 1))
    source._received(_message(1, 1, dup=True))
    source.turn(client)
    clock.now += 2 * BATCH_SECONDS
    source.turn(client)
    assert landing.lines["ed.m1"] == [1] and client.acked == [1]


def test_nothing_lands_unrecorded_when_the_state_cannot_be_written(tmp_path, monkeypatch) -> None:
    landing, clock, client = Landing(), Clock(), Client()
    source = _source(tmp_path, landing, clock)

    def full(*_args, **_kwargs) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("streamshield.connectors.mqtt_source.write_atomic", full)
    _deliver(source, clock, client, [_message(1, 1)])
    assert landing.lines == {} and client.acked == []
    assert source.channel_states()[0]["held"] == "write_failed"
    monkeypatch.undo()
    clock.now += 60
    source.turn(client)
    assert landing.lines == {"ed.m1": [1]} and client.acked == [1]


def test_an_unreadable_state_keeps_the_source_stopped(tmp_path) -> None:
    landing = Landing()
    (tmp_path / "plant_feed.state").write_text("{not json")
    source = MqttSource(
        BINDING, landing.land, landing.last_seq, lambda *_: None, tmp_path / "plant_feed.state"
    )
    source.start()
    assert not source.running and source.status() == "state_unreadable"
