"""Per-channel shield state between micro-batches, saved next to the checkpoint.

The state of batch N is written as ``<dir>/<N>.json`` (atomically) after the batch's
output is committed, and batch N+1 starts from it. A replayed batch N therefore starts
from the state of N-1 again and reaches the same decisions: nothing is decided twice
differently after a restart. A missing state for a batch that is not the first is an
error, never an empty (permissive or inconsistent) state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from streamshield.engine.snapshots import Snapshots
from streamshield.lang.wire import sp_from_line, sp_line
from streamshield.policy.elements import Channel
from streamshield.policy.policy import Policy
from streamshield.policy.shield import PolicyTracker


class MissingStateError(RuntimeError):
    """The shield state a batch must start from is gone: refuse to guess it."""


@dataclass
class ChannelState:
    tracker: PolicyTracker = field(default_factory=PolicyTracker)
    last_seq: int = -1  # highest seq processed on the channel

    def to_json(self) -> dict:
        t = self.tracker
        return {
            "current": [sp_line(sp) for sp in t.current],
            "current_ts": t.current_ts,
            "first_tuple": t.first_tuple,
            "newest_ts": t.newest_ts,
            "frozen": None if t.frozen is None else [sp_line(sp) for sp in t.frozen.sps],
            "conflict": t.conflict,
            "last_seq": self.last_seq,
        }

    @classmethod
    def from_json(cls, data: dict) -> ChannelState:
        frozen = data["frozen"]
        tracker = PolicyTracker(
            current=[sp_from_line(x) for x in data["current"]],
            current_ts=data["current_ts"],
            first_tuple=data["first_tuple"],
            newest_ts=data["newest_ts"],
            frozen=None if frozen is None else Policy.of(sp_from_line(x) for x in frozen),
            conflict=data["conflict"],
        )
        return cls(tracker, data["last_seq"])


class StateStore:
    """Versioned per-batch snapshots of every channel's state."""

    def __init__(self, directory: str | Path) -> None:
        self.snapshots = Snapshots(directory)
        self.directory = self.snapshots.directory

    def load(self, batch_id: int) -> dict[Channel, ChannelState]:
        """The state batch ``batch_id`` starts from (the snapshot of the batch before)."""
        data = self.snapshots.before(batch_id)
        if data is None:
            if batch_id > 0:
                raise MissingStateError(f"no shield state before batch {batch_id}")
            return {}
        return self._decode(data)

    def policies_in_force(self) -> dict[str, list[Policy]]:
        """Per stream, the policy each channel holds after the newest committed batch."""
        data = self.snapshots.before(2**62) or {}
        in_force: dict[str, list[Policy]] = {}
        for channel, state in self._decode(data).items():
            tracker = state.tracker
            pending = tracker.current and not tracker.conflict
            policy = tracker.frozen or (Policy.of(tracker.current) if pending else None)
            if policy is not None:
                in_force.setdefault(channel.stream, []).append(policy)
        return in_force

    @staticmethod
    def _decode(data: dict) -> dict[Channel, ChannelState]:
        return {
            Channel(*key.split("\x1f")): ChannelState.from_json(value)
            for key, value in data.items()
        }

    def save(self, batch_id: int, states: dict[Channel, ChannelState]) -> None:
        data = {f"{c.stream}\x1f{c.provider}": s.to_json() for c, s in sorted(states.items())}
        self.snapshots.save(batch_id, data)
