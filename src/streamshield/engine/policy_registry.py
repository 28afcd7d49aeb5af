"""Every policy the ingest put in force, by id, so outputs can be re-punctuated later.

Written by the driver once per policy (not per tuple), as one JSON-lines file of its sps
named after the content-hash policy id; identical policies share one file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from streamshield.lang.wire import parse_element, to_line
from streamshield.policy.elements import Channel, SpElement
from streamshield.policy.policy import Policy

_NOWHERE = Channel("_", "_")


class PolicyRegistry:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def save(self, policy: Policy) -> None:
        path = self.directory / f"{policy.policy_id}.jsonl"
        if path.exists():
            return
        text = "\n".join(to_line(SpElement(_NOWHERE, 0, sp)) for sp in policy.sps) + "\n"
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)

    def load(self, policy_id: str) -> Policy:
        lines = (self.directory / f"{policy_id}.jsonl").read_text().splitlines()
        sps = []
        for line in lines:
            element = parse_element(line)
            assert isinstance(element, SpElement)
            sps.append(element.sp)
        return Policy.of(sps)
