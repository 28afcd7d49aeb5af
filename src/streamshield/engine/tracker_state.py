"""Per-channel shield state between micro-batches, saved next to the checkpoint.

The state of batch N is written as ``<dir>/<N>.json`` (atomically) after the batch's
output is committed, and batch N+1 starts from it. A replayed batch N therefore starts
from the state of N-1 again and reaches the same decisions: nothing is decided twice
differently after a restart. A missing state for a batch that is not the first is an
error, never an empty (permissive or inconsistent) state.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from streamshield.lang.wire import parse_element, to_line
from streamshield.policy.elements import Channel, SpElement
from streamshield.policy.policy import Policy
from streamshield.policy.punctuation import SecurityPunctuation
from streamshield.policy.shield import PolicyTracker

_NOWHERE = Channel("_", "_")


class MissingStateError(RuntimeError):
    """The shield state a batch must start from is gone: refuse to guess it."""


def _sp_to_json(sp: SecurityPunctuation) -> str:
    return to_line(SpElement(_NOWHERE, 0, sp))


def _sp_from_json(line: str) -> SecurityPunctuation:
    element = parse_element(line)
    assert isinstance(element, SpElement)
    return element.sp


@dataclass
class ChannelState:
    tracker: PolicyTracker = field(default_factory=PolicyTracker)
    last_seq: int = -1  # highest seq processed on the channel

    def to_json(self) -> dict:
        t = self.tracker
        return {
            "current": [_sp_to_json(sp) for sp in t.current],
            "current_ts": t.current_ts,
            "first_tuple": t.first_tuple,
            "newest_ts": t.newest_ts,
            "frozen": None if t.frozen is None else [_sp_to_json(sp) for sp in t.frozen.sps],
            "conflict": t.conflict,
            "last_seq": self.last_seq,
        }

    @classmethod
    def from_json(cls, data: dict) -> ChannelState:
        frozen = data["frozen"]
        tracker = PolicyTracker(
            current=[_sp_from_json(x) for x in data["current"]],
            current_ts=data["current_ts"],
            first_tuple=data["first_tuple"],
            newest_ts=data["newest_ts"],
            frozen=None if frozen is None else Policy.of(_sp_from_json(x) for x in frozen),
            conflict=data["conflict"],
        )
        return cls(tracker, data["last_seq"])


class StateStore:
    """Versioned per-batch snapshots of every channel's state."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def load(self, batch_id: int) -> dict[Channel, ChannelState]:
        """The state batch ``batch_id`` starts from (the snapshot of the batch before)."""
        previous = sorted(
            int(p.stem) for p in self.directory.glob("*.json") if int(p.stem) < batch_id
        )
        if not previous:
            if batch_id > 0:
                raise MissingStateError(f"no shield state before batch {batch_id}")
            return {}
        data = json.loads((self.directory / f"{previous[-1]}.json").read_text())
        return {
            Channel(*key.split("\x1f")): ChannelState.from_json(value)
            for key, value in data.items()
        }

    def save(self, batch_id: int, states: dict[Channel, ChannelState]) -> None:
        data = {f"{c.stream}\x1f{c.provider}": s.to_json() for c, s in sorted(states.items())}
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        os.replace(tmp, self.directory / f"{batch_id}.json")
