"""Every policy the ingest put in force, by id, so outputs can be re-punctuated later.

The driver appends the batch's new policies as one JSON-lines file per call (one line a
policy: its content-hash id and its sps), so the cost is one file per micro-batch, not
one per policy. A replayed batch may write its policies again; ids are content hashes,
so duplicates are harmless.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from pathlib import Path

from streamshield.durable import write_atomic
from streamshield.lang.wire import sp_from_line, sp_line
from streamshield.policy.policy import Policy


class PolicyRegistry:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._known: dict[str, Policy] = {}
        self._read: set[str] = set()

    def save(self, policies: Iterable[Policy]) -> None:
        """Record the policies not recorded yet, atomically, in one new file."""
        self._refresh()
        new = {p.policy_id: p for p in policies if p.policy_id not in self._known}
        if not new:
            return
        lines = [
            json.dumps(
                {
                    "policy_id": pid,
                    "sps": [sp_line(sp) for sp in policy.sps],
                }
            )
            for pid, policy in new.items()
        ]
        name = f"{uuid.uuid4().hex}.jsonl"
        write_atomic(self.directory / name, "\n".join(lines) + "\n")
        self._read.add(name)
        self._known.update(new)

    def load(self, policy_id: str) -> Policy:
        """The policy with this id; KeyError when no ingest recorded it."""
        if policy_id not in self._known:
            self._refresh()
        return self._known[policy_id]

    def _refresh(self) -> None:
        for path in sorted(self.directory.glob("*.jsonl")):
            if path.name in self._read:
                continue
            for line in path.read_text().splitlines():
                record = json.loads(line)
                sps = [sp_from_line(text) for text in record["sps"]]
                self._known[record["policy_id"]] = Policy.of(sps)
            self._read.add(path.name)
