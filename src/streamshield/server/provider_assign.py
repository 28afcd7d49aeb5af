"""Server-assigned ``seq`` (and sp ``ts``/``sn``, tuple ``policy``) for plain provider rows.

A provider with no sequence numbers of its own sends ``POST /streams/S/elements?assign=seq``
and lines such as ``{"tid": 7, "values": {...}}``. Per channel (stream, provider) the
server continues from the channel's last landed seq. Missing fields are filled so:

* ``stream``: the request path's; ``provider``: the caller; ``type``: ``tuple`` when the
  line has ``values``; ``tid``: the stream's tid attribute from ``values``;
* ``seq``: always assigned (a line that brings its own is rejected: mixing the two would
  let a provider's seq collide with an assigned one);
* an sp without ``ts`` is stamped now (microseconds, above the channel's current policy),
  one stamp for a run of ts-less sps, and numbered ``sn`` 1.. within its run;
* a tuple without ``policy`` declares the channel's current policy (ts, csn): the newest
  policy landed on the channel, including sps earlier in the same request. A channel with
  no policy at all gets a reference to none (``ts`` 1, ``csn`` 0), which the shield denies
  (``no_policy``): deny by default, never granted by a guess.

Races: every append on a channel through this server holds its provider family's lock
(:meth:`SeqAssigner.lock`) while it reads the channel's last seq and policy, assigns, and
lands (the landing zone has its own lock across processes, so an outside writer can at
worst make assigned lines stale: rejected and reported, never landed twice or out of
order). Different providers' appends hold different locks and overlap.

The current policy is read from the landed files themselves (the truth the ingest
reads), newest first, with a cache of what was already read (landed files never
change); while the channel's last seq is the one the cached policy was derived at
(after a clean append through this server), nothing else landed on it and the files
are not listed at all.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from streamshield.landing import FILE_NAME, LandingZone, Parsed
from streamshield.lang.wire import interned_channel, tuple_of_dict
from streamshield.policy.elements import Channel

SP_MARK = '"type":"sp"'
"""In every landed sp line (``to_line`` writes compact JSON): a line or file without it
holds no sp, so the newest policy is found without decoding the tuples before it."""
NO_POLICY = {"ts": 1, "csn": 0}
"""What a plain tuple declares on a channel without any policy: denied (no_policy)."""


@dataclass
class _Known:
    newest_file: int = 0  # first seq of the newest file read
    policy: tuple[int, int] | None = None
    last_seq: int | None = None  # the channel's last seq while ``policy`` was its current one


@dataclass
class _Channel:
    """A channel while one request is assigned: its last seq, its policy, and the
    (stamped ts, last sn) of the run of ts-less sps it is in, if any."""

    seq: int
    policy: tuple[int, int] | None
    run: tuple[int, int] | None = None


@dataclass
class Assigned:
    """Lines ready for the gate (rejected ones blanked, keeping line numbers), the
    rejections, and the last seq assigned per provider."""

    lines: list[str | Parsed]
    rejected: list[tuple[int, str, str]] = field(default_factory=list)
    last_seq: dict[str, int] = field(default_factory=dict)
    channels: dict[Channel, _Channel] = field(default_factory=dict)


class SeqAssigner:
    def __init__(self, landing: LandingZone, clock: Callable[[], int] = time.time_ns) -> None:
        self.landing, self.clock = landing, clock
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._known: dict[Channel, _Known] = {}

    def lock(self, stream: str, user: str) -> threading.Lock:
        """The lock an append by ``user`` on ``stream`` through this server holds.

        One per stream and provider family (the user name up to its first dot): every
        channel ``user`` may write (``user`` and ``user.*``, see
        :func:`~streamshield.server.element_gate.owns_provider`) is in its family, and
        so is every other user who may write one of those channels
        (``a`` and ``a.b`` may both write ``a.b``), so no two appends on one channel
        assign at once, while different providers' appends run side by side.
        """
        key = (stream, user.split(".", 1)[0])
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def assign(
        self,
        stream: str,
        user: str,
        tid: str,
        lines: Sequence[str],
        seqs: Sequence[int] | None = None,
    ) -> Assigned:
        """Fills the lines (call with :meth:`lock` held until they have landed).

        ``seqs``: each line's seq, given by the caller (a Kafka record's offset), where
        the channel's next seq would be assigned otherwise; the landing zone refuses one
        that does not exceed the channel's last (``seq_not_increasing``)."""
        out = Assigned([])
        channels = out.channels
        for number, line in enumerate(lines, 1):
            raw = line.strip()
            element = _object(raw)
            if element is None:
                out.lines.append(line)  # not a JSON object: the landing zone says why
                for other in channels.values():
                    other.run = None
                continue
            if "seq" in element:
                out.lines.append("")
                out.rejected.append(
                    (number, "seq_given", "with assign=seq the server assigns seq; omit it")
                )
                continue
            element.setdefault("stream", stream)
            element.setdefault("provider", user)
            values = element.get("values")
            if "type" not in element and isinstance(values, dict):
                element["type"] = "tuple"
            channel = _channel(element)
            if channel is None:
                out.lines.append(json.dumps(element))
                continue
            state = channels.get(channel)
            if state is None:
                last_seq = self.landing.last_seq(channel)
                state = channels[channel] = _Channel(last_seq, self.policy(channel, last_seq))
            state.seq = seqs[number - 1] if seqs is not None else state.seq + 1
            element["seq"] = state.seq
            out.last_seq[channel.provider] = state.seq
            kind = element.get("type")
            if kind == "sp":
                self._sp(element, state)
            else:
                state.run = None
                if kind == "tuple":
                    if "tid" not in element and isinstance(values, dict) and tid in values:
                        element["tid"] = values[tid]
                    if "policy" not in element:
                        current = state.policy
                        element["policy"] = (
                            {"ts": current[0], "csn": current[1]} if current else dict(NO_POLICY)
                        )
            parsed = tuple_of_dict(element, "\\" in raw) if kind == "tuple" else None
            if parsed is None:
                out.lines.append(json.dumps(element, separators=(",", ":")))
            else:  # the common tuple: the gate and the landing zone need not parse it again
                out.lines.append(Parsed(line, parsed))
        return out

    def _sp(self, element: dict, state: _Channel) -> None:
        """Stamps ``ts``/``sn`` when missing; moves the channel's policy past this sp."""
        ts: object  # stamped here, else the element's own: checked below
        sn: object
        current = state.policy
        if "ts" not in element:
            if state.run is not None:
                ts, sn = state.run
            else:
                floor = current[0] + 1 if current else 1
                ts, sn = max(self.clock() // 1000, floor), 0
            element["ts"] = ts
            element.setdefault("sn", sn + 1)
            sn_now = element["sn"] if isinstance(element["sn"], int) else sn + 1
            state.run = (ts, sn_now)
        else:
            state.run = None
            if "sn" not in element:
                same = current is not None and current[0] == element["ts"]
                element["sn"] = current[1] + 1 if same and current else 1
        ts, sn = element.get("ts"), element.get("sn")
        if not (isinstance(ts, int) and isinstance(sn, int)):
            return  # malformed: the landing zone rejects it, the policy stays
        if current is not None and current[0] == ts:
            state.policy = ts, max(current[1], sn)
        else:
            state.policy = ts, sn

    def landed(self, assigned: Assigned, clean: bool) -> None:
        """The assigned lines were landed (the lock still held); ``clean``: every one of
        them. Then each channel's policy is the one :meth:`assign` derived, at the last
        seq it assigned, and the next append on it need not read its files again."""
        if not clean:
            return  # a rejected sp must not count: the files are read again
        for channel, state in assigned.channels.items():
            known = self._known.setdefault(channel, _Known())
            known.policy, known.last_seq = state.policy, state.seq

    def policy(self, channel: Channel, last_seq: int | None = None) -> tuple[int, int] | None:
        """The newest policy (ts, csn) landed on ``channel``, or None; ``last_seq``: the
        channel's last landed seq. While it is the one the known policy was derived at,
        nothing has landed on the channel since (seqs only grow), and the landed files,
        as many as the landing zone keeps, are not listed."""
        known = self._known.setdefault(channel, _Known())
        if last_seq is not None and known.last_seq == last_seq:
            return known.policy
        files = _files(self.landing.stream_dir(channel.stream), channel.provider)
        fresh = [(first, path) for first, path in files if first > known.newest_file]
        if not fresh:
            known.last_seq = last_seq
            return known.policy
        found: tuple[int, int] | None = None
        for _first, path in sorted(fresh, reverse=True):
            found, complete = _newest_policy(path, found)
            if complete:
                break
        else:
            if found is not None and known.policy is not None and known.policy[0] == found[0]:
                found = (found[0], max(found[1], known.policy[1]))
            elif found is None:
                found = known.policy
        known.newest_file = max(first for first, _ in fresh)
        known.policy, known.last_seq = found, last_seq
        return found


_decode = json.JSONDecoder().raw_decode


def _object(raw: str) -> dict | None:
    """``json.loads(raw)`` when it is an object (``raw`` is stripped: nothing may follow
    the value), else None."""
    if not raw:
        return None
    try:
        value, end = _decode(raw)
    except (ValueError, RecursionError):
        return None
    return value if end == len(raw) and isinstance(value, dict) else None


def _channel(element: dict) -> Channel | None:
    stream, provider = element.get("stream"), element.get("provider")
    if isinstance(stream, str) and isinstance(provider, str) and stream and provider:
        return interned_channel(stream, provider)
    return None


def _files(directory: Path, provider: str) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    found = []
    prefix = provider + "-"  # others' files are told apart without the regex
    for entry in os.scandir(directory):
        if not entry.name.startswith(prefix):
            continue
        match = FILE_NAME.match(entry.name)
        if match and match["provider"] == provider:
            found.append((int(match["seq"]), Path(entry.path)))
    return found


def _newest_policy(
    path: Path, found: tuple[int, int] | None
) -> tuple[tuple[int, int] | None, bool]:
    """Continues the newest-first search in one file: (policy so far, whether it is whole).

    The policy is the newest sp's ts; its csn the largest sn of that ts. It is whole once
    an element older than its run of sps is seen.
    """
    text = path.read_text(encoding="utf-8")
    if SP_MARK not in text:  # only tuples: nothing to read line by line
        return found, found is not None
    for line in reversed(text.splitlines()):
        if not line.strip():
            continue
        if SP_MARK not in line:  # a tuple (every landed sp line has the mark)
            if found is not None:
                return found, True
            continue
        element = json.loads(line)
        if element.get("type") != "sp":
            if found is not None:
                return found, True
            continue
        ts, sn = int(element["ts"]), int(element["sn"])
        if found is None:
            found = (ts, sn)
        elif ts == found[0]:
            found = (ts, max(found[1], sn))
        else:
            return found, True
    return found, False
