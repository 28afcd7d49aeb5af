"""Per-channel shield state between micro-batches, saved next to the checkpoint.

The state of batch N is written as ``<dir>/<N>.json`` (atomically) after the batch's
output is committed, and batch N+1 starts from it. A replayed batch N therefore starts
from the state of N-1 again and reaches the same decisions: nothing is decided twice
differently after a restart. A missing state for a batch that is not the first is an
error, never an empty (permissive or inconsistent) state, and never an older snapshot:
batch N starts from snapshot N-1 or not at all.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from streamshield.durable import write_atomic
from streamshield.engine.store.snapshots import ShieldStateError, Snapshots
from streamshield.lang.wire import sp_from_line, sp_line
from streamshield.policy.elements import Channel
from streamshield.policy.policy import Policy
from streamshield.policy.shield import PolicyTracker

__all__ = ["ChannelState", "ShieldStateError", "StateStore"]


@dataclass
class ChannelState:
    tracker: PolicyTracker = field(default_factory=PolicyTracker)
    last_seq: int = -1  # highest seq processed on the channel

    def to_json(self) -> dict:
        return {**self.tracker.snapshot(sp_line), "last_seq": self.last_seq}

    @classmethod
    def from_json(cls, data: dict) -> ChannelState:
        return cls(PolicyTracker.restore(data, sp_from_line), data["last_seq"])


class StateStore:
    """Versioned per-batch snapshots of every channel's state.

    A snapshot names its batch and carries a SHA-256 of its channels, so a truncated,
    altered, renamed or copied file is told apart from the state batch N-1 saved.
    """

    def __init__(self, directory: str | Path) -> None:
        self.snapshots = Snapshots(directory)
        self.directory = self.snapshots.directory

    def load(self, batch_id: int) -> dict[Channel, ChannelState]:
        """The state batch ``batch_id`` starts from: exactly the snapshot of batch N-1."""
        if batch_id == 0:
            return {}
        return self._decode(self.read(batch_id - 1))

    def read(self, batch_id: int) -> dict:
        """Snapshot ``batch_id``'s channels, checked; ShieldStateError when it is not there
        or not what batch ``batch_id`` saved."""
        path = self.directory / f"{batch_id}.json"
        where = f"shield state snapshot {path.name} (after batch {batch_id})"
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            raise ShieldStateError(f"{where} is missing") from None
        except (OSError, ValueError):
            raise ShieldStateError(f"{where} is unreadable (not complete JSON)") from None
        if not isinstance(data, dict) or data.get("batch") != batch_id:
            raise ShieldStateError(f"{where} does not belong to batch {batch_id}")
        channels = data.get("channels")
        if not isinstance(channels, dict) or data.get("sha256") != _digest(channels):
            raise ShieldStateError(f"{where} fails its checksum (truncated or altered)")
        return channels

    def batches(self) -> list[int]:
        """The batch ids that have a snapshot file (read or not), oldest first."""
        return sorted(int(p.stem) for p in self.directory.glob("*.json") if p.stem.isdigit())

    def policies_in_force(self) -> dict[str, list[Policy]]:
        """Per stream, the policy each channel holds after the newest committed batch."""
        in_force: dict[str, list[Policy]] = {}
        for channel, policy in self.channel_policies().items():
            in_force.setdefault(channel.stream, []).append(policy)
        return in_force

    def channel_policies(self) -> dict[Channel, Policy]:
        """The policy each channel holds after the newest committed batch (channels
        without one, or whose sps conflict, are left out)."""
        held: dict[Channel, Policy] = {}
        data = self.read(self.committed()) if self._pointer.exists() else {}
        for channel, state in self._decode(data).items():
            tracker = state.tracker
            pending = tracker.current and not tracker.conflict
            policy = tracker.frozen or (Policy.of(tracker.current) if pending else None)
            if policy is not None:
                held[channel] = policy
        return held

    @property
    def _pointer(self) -> Path:
        return self.directory / "newest"

    def committed(self) -> int:
        """The newest batch whose snapshot is committed, for readers running beside
        ingest (API views, delegation checks): the one the newest-batch record names.
        A snapshot file past it is a save in progress (written just before the record
        moves), not yet in force; :meth:`newest` refuses that state, which is right for
        a restart and wrong for a reader (seen as a 500 while ingest was saving)."""
        try:
            newest = json.loads(self._pointer.read_bytes())["batch"]
        except (OSError, ValueError, KeyError, TypeError):
            raise ShieldStateError("the shield state's newest-batch record is unreadable") from None
        if not isinstance(newest, int):
            raise ShieldStateError("the shield state's newest-batch record is unreadable")
        return newest

    def newest(self) -> int:
        """The newest saved batch, as recorded at its save (a pointer file, so a deleted
        newest snapshot is an error, not a fallback to the one before)."""
        try:
            newest = json.loads(self._pointer.read_bytes())["batch"]
        except (OSError, ValueError, KeyError, TypeError):
            raise ShieldStateError("the shield state's newest-batch record is unreadable") from None
        if not isinstance(newest, int) or newest < max(self.batches(), default=-1):
            raise ShieldStateError("the shield state's newest-batch record is out of step")
        return newest

    @staticmethod
    def _decode(data: dict) -> dict[Channel, ChannelState]:
        try:
            return {
                Channel(*key.split("\x1f")): ChannelState.from_json(value)
                for key, value in data.items()
            }
        except (KeyError, TypeError, ValueError) as err:
            raise ShieldStateError(f"shield state does not decode ({type(err).__name__})") from None

    def save(self, batch_id: int, states: dict[Channel, ChannelState]) -> None:
        channels = {f"{c.stream}\x1f{c.provider}": s.to_json() for c, s in sorted(states.items())}
        self.snapshots.save(
            batch_id, {"batch": batch_id, "sha256": _digest(channels), "channels": channels}
        )
        write_atomic(self._pointer, json.dumps({"batch": batch_id}))


def _digest(channels: dict) -> str:
    return hashlib.sha256(json.dumps(channels, sort_keys=True).encode()).hexdigest()
