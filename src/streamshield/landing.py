"""The landing zone: where providers' elements become durable, validated, ordered files.

Providers append tuples and sps per channel (stream, provider). What lands here is what
the trusted Spark ingest reads, so this module checks everything it can check without
Spark (wire format, schema, known roles, channel order) and writes only whole files.

The on-disk contract (the Spark ingest relies on it; keep it exactly):

* accepted elements go to ``<root>/<stream>/<provider>-<first_seq:012d>-<uuid8>.jsonl``,
  one element per line in the wire format (:func:`~streamshield.lang.wire.to_line`),
  sorted by ``seq``; one file per channel per append call;
* a file is written and fsynced under ``<root>/_tmp/`` (as a dot file, so no reader
  glob picks it up) and then ``os.replace``\\d into place, so no reader ever sees a
  partial file; Spark's file source ignores names starting with ``_`` or ``.``;
* the catalog's ``last_seq`` of a channel is advanced only after its file is in place.

A rejected element is rejected alone (the rest of the call still lands), counted in
the catalog, and explained by a message that names fields and positions but never a
tuple's data values. Order is protected by refusing any seq that is not greater than
the channel's last accepted one: the shield decides which policy governs a tuple from
the seqs, so a replayed or reordered element must not land.

No timestamp a provider chooses may lie more than ``max_future_skew`` seconds (default
:data:`DEFAULT_MAX_FUTURE_SKEW`) ahead of the server's clock: an sp's ``ts`` and a tuple's
``policy.ts`` (microseconds since the epoch) and the stream's event-time value. The
channel's policy timestamp only grows, so one far-future sp would make every later sp
of its channel "older" and lock the channel for good; a far-future event time would move
the watermark of every windowed query over the stream and drop all other providers'
tuples as late. Past timestamps stay valid.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from enum import StrEnum
from pathlib import Path

from streamshield.catalog.store import Catalog, named_roles
from streamshield.catalog.streams import StreamDefinition
from streamshield.durable import replace_durably
from streamshield.faults import crash_point
from streamshield.lang.wire import (
    ReservedFieldError,
    WireFormatError,
    parse_element,
    reserved_field,
    reserved_message,
    to_line,
)
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.roles import RoleHierarchy

TMP_DIR = "_tmp"
LOCK_FILE = "_landing.lock"
FILE_NAME = re.compile(r"(?P<provider>.+)-(?P<seq>[0-9]{12,})-(?P<uid>[0-9a-f]{8})\.jsonl\Z")
_PROVIDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}\Z")
_ISO_8601 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?\Z"
)
_INT64 = (-(2**63), 2**63 - 1)
_INT32 = (-(2**31), 2**31 - 1)
DEFAULT_MAX_FUTURE_SKEW = 300.0
"""Seconds an sp's ts may be ahead of the server's clock (providers' clocks drift a little)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_SECONDS = (_INT64[0] // 1_000_000, _INT64[1] // 1_000_000)  # Spark keeps microseconds


class Reason(StrEnum):
    """Why an element was rejected; the codes are counted in the catalog."""

    MALFORMED = "malformed"  # not a valid wire-format element
    UNKNOWN_STREAM = "unknown_stream"
    INVALID_PROVIDER = "invalid_provider"  # not usable in a file name
    OUT_OF_RANGE = "out_of_range"  # seq/ts/csn/sn beyond Spark's bigint
    UNKNOWN_ATTRIBUTE = "unknown_attribute"
    TYPE_MISMATCH = "type_mismatch"
    TID_MISMATCH = "tid_mismatch"  # tid attribute missing or not the element's tid
    MISSING_ATTRIBUTE = "missing_attribute"  # the event time, or a NOT NULL attribute
    UNKNOWN_ROLE = "unknown_role"
    SEQ_NOT_INCREASING = "seq_not_increasing"
    FUTURE_TIMESTAMP = "future_timestamp"  # sp ts beyond the allowed clock skew
    RESERVED_FIELD = "reserved_field"  # a level or label field: only the system sets them
    WRITE_FAILED = "write_failed"  # the file could not be written; nothing of it is visible


@dataclass(frozen=True)
class Rejection:
    """One rejected element: ``line`` is 1-based (text line, Parquet row or element index)."""

    line: int
    reason: Reason
    message: str


@dataclass
class AppendResult:
    """What one append call did: elements landed, elements rejected, files written."""

    accepted: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


class LandingUnavailable(OSError):
    """The landing zone cannot be written at all (read-only, gone): nothing was accepted.

    The API answers 503 with the OS's reason and a Retry-After; a full disk is instead
    a ``write_failed`` rejection per line (the lock can still be taken)."""

    retry_after = 4

    def __init__(self, reason: str) -> None:
        super().__init__(f"the landing zone cannot be written ({reason}); nothing was accepted")


class _Reject(Exception):
    def __init__(self, reason: Reason, message: str, stream: str | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.stream = reason, message, stream


@dataclass(frozen=True)
class Parsed:
    """A line as sent with the element read from it: the API's gate
    (server/element_gate.py) parses every line to check who may send it, and the
    assigner (server/provider_assign.py) builds the common tuple of an ``assign=seq``
    line (:func:`~streamshield.lang.wire.tuple_of_dict`); either hands its elements on
    rather than have the landing zone parse each line again."""

    line: str
    element: Element


Candidate = tuple[int, str | Parsed | WireFormatError]  # (1-based position, line or why none)
Checked = tuple[int, Element, str]  # (1-based position, element, its wire line)


class LandingZone:
    """Validates appended elements and lands the accepted ones atomically under ``root``.

    Appends to one root are serialised by an exclusive lock file, so two writers can
    never both accept the same seq of a channel.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        catalog: Catalog,
        *,
        max_future_skew: float = DEFAULT_MAX_FUTURE_SKEW,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = Path(root)
        self.catalog = catalog
        self.max_future_skew = max_future_skew
        """Seconds an sp's ts may be ahead of ``clock``; settable (``serve`` does)."""
        self.clock = clock
        self._listeners: list[Callable[[list[Path]], None]] = []
        self._known_seq: dict[Channel, int] = {}
        """Channels' last seqs as this zone last checked or landed them: valid only while
        no other writer held the lock since (:meth:`_lock`'s epoch)."""
        self._epoch: int | None = None
        """The lock file's epoch this zone wrote when it last held the lock."""
        (self.root / TMP_DIR).mkdir(parents=True, exist_ok=True)
        for definition in catalog.streams():
            self.stream_dir(definition.name).mkdir(exist_ok=True)

    def stream_dir(self, stream: str) -> Path:
        """Directory of a stream's landed files (what the Spark ingest reads)."""
        return self.root / stream

    def listen(self, landed: Callable[[list[Path]], None]) -> None:
        """``landed`` is told the files of each append that landed some, after they are
        in place (secure ingest starts its micro-batch at once instead of finding them at
        its next look). It must be quick and must not raise: it runs in the append."""
        self._listeners.append(landed)

    # -- inputs ----------------------------------------------------------------------------

    def append(self, elements: Iterable[Element]) -> AppendResult:
        """Lands elements, validated exactly as if they had arrived as wire text."""
        return self._append(_element_lines(elements))

    def append_lines(self, lines: Iterable[str]) -> AppendResult:
        """Lands wire-format lines; blank lines are skipped but still counted as lines."""
        return self._append((n, line) for n, line in enumerate(lines, 1) if line.strip())

    def append_parsed(self, lines: Iterable[str | Parsed]) -> AppendResult:
        """Lands lines of which some were parsed already (:class:`Parsed`); the others are
        parsed here. Every element is checked as :meth:`append_lines` checks it."""
        return self._append(enumerate(lines, 1))

    def append_parquet(self, path: str | os.PathLike[str]) -> AppendResult:
        """Lands the rows of a Parquet file whose columns are the wire fields.

        ``policy``, ``ddp`` and ``srp`` are structs; ``values`` is a JSON string or a
        struct. Null columns count as absent (rows of both kinds share one schema), so
        a required field that is null is reported as missing.
        """
        return self._append(_parquet_lines(Path(path)))

    # -- the pipeline ----------------------------------------------------------------------

    def _append(self, candidates: Iterable[Candidate]) -> AppendResult:
        streams = {definition.name: definition for definition in self.catalog.streams()}
        hierarchy = self.catalog.hierarchy()
        types = {name: definition.types for name, definition in streams.items()}
        result, counts = AppendResult(), Counter[tuple[str | None, Reason]]()
        checked: list[Checked] = []
        latest_ts = int((self.clock() + self.max_future_skew) * 1_000_000)
        for position, line in candidates:
            try:
                element = _check(position, line, streams, hierarchy, types)
                future = _future_field(element, streams, latest_ts)
                if future is not None:
                    raise _Reject(
                        Reason.FUTURE_TIMESTAMP,
                        f"{future} is more than {self.max_future_skew:g} s ahead of the "
                        "server's clock",
                        element.channel.stream,
                    )
                # Written out here, not under the lock: other appends land meanwhile.
                checked.append((position, element, to_line(element)))
            except _Reject as reject:
                _reject(result, counts, position, reject)
        with self._lock():
            self._clear_tmp()
            groups = self._in_order(checked, result, counts)
            self._count(counts)
            failed = Counter[tuple[str | None, Reason]]()
            for channel, items in groups.items():
                self._land(channel, items, result, failed)
            self._count(failed)
        result.rejected.sort(key=lambda rejection: rejection.line)
        if result.files:
            for landed in self._listeners:
                landed(list(result.files))
        return result

    def _in_order(
        self,
        checked: list[Checked],
        result: AppendResult,
        counts: Counter[tuple[str | None, Reason]],
    ) -> dict[Channel, list[Checked]]:
        """Accepted elements per channel; each seq must exceed the channel's last one."""
        last: dict[Channel, int] = {}
        groups: dict[Channel, list[Checked]] = defaultdict(list)
        for item in checked:
            position, element, _ = item
            channel = element.channel
            if channel not in last:
                last[channel] = self._last_seq(channel)
            if element.seq <= last[channel]:
                message = f"seq {element.seq} is not greater than {last[channel]} (last accepted)"
                reject = _Reject(Reason.SEQ_NOT_INCREASING, message, channel.stream)
                _reject(result, counts, position, reject)
                continue
            last[channel] = element.seq
            groups[channel].append(item)
        return groups

    def last_seq(self, channel: Channel) -> int:
        """The channel's last landed seq (0 for a new channel), under the landing lock."""
        with self._lock():
            return max(self._last_seq(channel), 0)

    def _last_seq(self, channel: Channel) -> int:
        """The catalog's last seq, first catching up with a file already landed beyond it.

        A writer that died between ``os.replace`` and ``advance_seq`` left a visible file
        the catalog does not know; accepting its seqs again would duplicate elements.
        """
        known = self._known_seq.get(channel)
        if known is not None:  # nobody else landed since: no catalog read, no listing
            return known
        recorded = self.catalog.last_seq(channel)
        newest = _newest_file(self.stream_dir(channel.stream), channel.provider)
        if newest is not None and newest[0] > recorded:
            landed = _last_line_seq(newest[1])
            if landed > recorded:
                self.catalog.advance_seq(channel, landed)
                recorded = landed
        self._known_seq[channel] = recorded
        return recorded

    def _land(
        self,
        channel: Channel,
        items: list[Checked],
        result: AppendResult,
        failed: Counter[tuple[str | None, Reason]],
    ) -> None:
        ordered = sorted(items, key=lambda item: item[1].seq)
        try:
            path = self._write(channel, ordered[0][1].seq, [line for _, _, line in ordered])
        except OSError as err:
            message = f"could not write the file of channel {channel}: {err.strerror or 'error'}"
            for position, _, _ in items:
                reject = _Reject(Reason.WRITE_FAILED, message, channel.stream)
                _reject(result, failed, position, reject)
            return
        crash_point("landing.before_seq")
        self.catalog.advance_seq(channel, ordered[-1][1].seq)
        self._known_seq[channel] = ordered[-1][1].seq
        result.accepted += len(ordered)
        result.files.append(path)

    def _write(self, channel: Channel, first_seq: int, lines: list[str]) -> Path:
        """Writes one file in ``_tmp``, fsyncs it and moves it into place in one step."""
        name = f"{channel.provider}-{first_seq:012d}-{uuid.uuid4().hex[:8]}.jsonl"
        directory = self.stream_dir(channel.stream)
        directory.mkdir(exist_ok=True)
        tmp = self.root / TMP_DIR / f".{name}.tmp"
        try:
            with open(tmp, "x", encoding="utf-8") as out:
                out.write("\n".join(lines) + "\n")
            crash_point("landing.before_rename")
            replace_durably(tmp, directory / name)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return directory / name

    def _count(self, counts: Counter[tuple[str | None, Reason]]) -> None:
        for (stream, reason), n in sorted(counts.items(), key=str):
            self.catalog.count_rejection(stream, reason.value, n)

    @contextmanager
    def _lock(self) -> Iterator[None]:
        """Exclusive across processes and threads (flock is per open file description).

        Every holder moves the lock file's epoch (a number in the file). What this zone
        knows of channels' last seqs (:attr:`_known_seq`) is kept only while the epoch it
        finds is the one it wrote itself when it last held the lock: then no other writer
        (another process, another zone) landed or crashed mid-landing in between, and the
        check for a file landed beyond the catalog's seq (:meth:`_last_seq`), a listing
        of the stream's files, need not run again at every append. The epoch is not
        fsynced: after a power cut every process starts without knowledge anyway.
        """
        try:
            fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:  # a read-only or vanished landing zone: nothing can land
            raise LandingUnavailable(err.strerror or type(err).__name__) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            done = False
            try:
                self._claim(fd)
                yield
                done = True
            finally:
                if not done:  # what it knew may be half true now: check afresh
                    self._known_seq.clear()
                    self._epoch = None
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _claim(self, fd: int) -> None:
        """Under the lock: forgets what it knew when another writer held the lock since,
        then writes the next epoch (a zone that cannot write it keeps nothing)."""
        try:
            epoch = int(os.pread(fd, 32, 0).strip() or 0)
        except ValueError:  # an old lock file (empty) or garbage: nothing is known
            epoch = -1
        if self._epoch is None or epoch != self._epoch:
            self._known_seq.clear()
        try:
            written = max(epoch, 0) + 1
            os.pwrite(fd, str(written).encode().ljust(32), 0)
            self._epoch = written
        except OSError:
            self._known_seq.clear()
            self._epoch = None

    def _clear_tmp(self) -> None:
        """Removes files a crashed writer left; only lock holders write there, so all are stale."""
        for entry in os.scandir(self.root / TMP_DIR):
            if entry.is_file():
                with suppress(FileNotFoundError):
                    os.unlink(entry.path)


# -- checks (pure) ---------------------------------------------------------------------------


def _check(
    position: int,
    line: str | Parsed | WireFormatError,
    streams: Mapping[str, StreamDefinition],
    hierarchy: RoleHierarchy,
    types: Mapping[str, Mapping[str, str]],
) -> Element:
    """The element of one candidate line, or _Reject saying why it cannot land
    (``types``: each stream's attribute types)."""
    if isinstance(line, WireFormatError):
        raise _Reject(Reason.MALFORMED, _redact(line.problem))
    if isinstance(line, Parsed):
        element = line.element
    else:
        try:
            element = parse_element(line, position)
        except ReservedFieldError as err:
            raise _Reject(Reason.RESERVED_FIELD, err.problem) from None
        except WireFormatError as err:
            raise _Reject(Reason.MALFORMED, _redact(err.problem)) from None
    stream = element.channel.stream
    definition = streams.get(stream)
    if definition is None:
        # Not attributed to the name: counting arbitrary names would let anyone grow the table.
        raise _Reject(Reason.UNKNOWN_STREAM, f"stream {stream!r} is not registered")
    if not _PROVIDER.match(element.channel.provider):
        raise _Reject(
            Reason.INVALID_PROVIDER,
            "provider must match [A-Za-z0-9][A-Za-z0-9_.-]{0,127}",
            stream,
        )
    if isinstance(element, TupleElement):
        _check_tuple(element, definition, types[stream])
    else:
        _check_sp(element, hierarchy)
    return element


def _future_field(
    element: Element, streams: Mapping[str, StreamDefinition], latest_ts: int
) -> str | None:
    """The name of a timestamp the provider chose that lies beyond ``latest_ts`` (µs).

    Every such timestamp moves state that only grows: an sp's ``ts`` the channel's policy
    time, a tuple's ``policy.ts`` the policy it waits for, and the stream's event-time
    value the watermark of every windowed query over the stream (all providers' tuples
    behind a far-future one would be dropped as late).
    """
    if isinstance(element, SpElement):
        return "ts (microseconds since the epoch)" if element.sp.ts > latest_ts else None
    if element.policy_ts > latest_ts:
        return "policy.ts (microseconds since the epoch)"
    event_time = streams[element.channel.stream].event_time
    value = element.values.get(event_time) if event_time else None
    if value is not None and _timestamp_micros(value) > latest_ts:
        return f"values.{event_time} (the event time)"
    return None


def _timestamp_micros(value: object) -> int:
    """A valid timestamp value (:func:`fits`) in microseconds; naive ISO times are UTC,
    the Spark session's time zone."""
    if isinstance(value, int):
        return value * 1_000_000
    parsed = datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int((parsed - _EPOCH).total_seconds()) * 1_000_000


def _check_bigints(fields: Mapping[str, int], stream: str) -> None:
    for name, value in fields.items():
        if not _INT64[0] <= value <= _INT64[1]:
            raise _Reject(Reason.OUT_OF_RANGE, f"{name} does not fit a bigint", stream)


def _check_tuple(
    element: TupleElement, definition: StreamDefinition, types: Mapping[str, str]
) -> None:
    """``types``: ``definition.types``, built once per append rather than per tuple.

    Which attributes may be null: every one but the tuple id and the event time (the
    stream's ``tid`` and ``event_time``), which are refused when absent or null; any
    other attribute left out of ``values`` reads as null."""
    stream = definition.name
    low, high = _INT64
    if not (
        low <= element.seq <= high
        and low <= element.policy_ts <= high
        and low <= element.policy_csn <= high
    ):
        bigints = {"seq": element.seq, "policy.ts": element.policy_ts}
        _check_bigints({**bigints, "policy.csn": element.policy_csn}, stream)
    if not types.keys() >= element.values.keys():
        for name in element.values:
            if name not in types and reserved_field(name):  # a stream may have a "level"
                raise _Reject(Reason.RESERVED_FIELD, reserved_message(f"values.{name}"), stream)
            if name not in types:
                message = f"values.{name}: not an attribute"
                raise _Reject(Reason.UNKNOWN_ATTRIBUTE, message, stream)
    for name, value in element.values.items():
        if value is not None and not fits(types[name], value):
            message = f"values.{name}: not a valid {types[name]}"
            raise _Reject(Reason.TYPE_MISMATCH, message, stream)
    tid = element.values.get(definition.tid)
    if tid is None:
        message = f"values.{definition.tid}: the tuple id attribute is missing"
        raise _Reject(Reason.TID_MISMATCH, message, stream)
    if str(tid) != str(element.tid):
        message = f"values.{definition.tid} differs from the element's tid"
        raise _Reject(Reason.TID_MISMATCH, message, stream)
    event_time = definition.event_time
    if event_time is not None and element.values.get(event_time) is None:
        # Windows and the watermark order tuples by it: a null would be dropped from
        # every window without a word.
        message = f"values.{event_time}: the event time is missing (it may not be null)"
        raise _Reject(Reason.MISSING_ATTRIBUTE, message, stream)
    for name in definition.not_null:
        if element.values.get(name) is None:
            message = f"values.{name}: missing (the stream's schema marks it NOT NULL)"
            raise _Reject(Reason.MISSING_ATTRIBUTE, message, stream)


def _check_sp(element: SpElement, hierarchy: RoleHierarchy) -> None:
    stream = element.channel.stream
    _check_bigints({"seq": element.seq, "ts": element.sp.ts, "sn": element.sp.sn}, stream)
    unknown = [r for r in named_roles(element.sp.srp.roles) if r not in hierarchy.juniors]
    if unknown:
        message = f"srp.roles names unknown roles {unknown}"
        raise _Reject(Reason.UNKNOWN_ROLE, message, stream)


def fits(spark_type: str, value: object) -> bool:
    """Whether a non-null JSON value reads into the Spark type without loss or null.

    Booleans are never numbers here, although Python treats them as ints.
    """
    whole = value if isinstance(value, int) and not isinstance(value, bool) else None
    if spark_type == "bigint":
        return whole is not None and _INT64[0] <= whole <= _INT64[1]
    if spark_type == "int":
        return whole is not None and _INT32[0] <= whole <= _INT32[1]
    if spark_type == "double":
        return whole is not None or isinstance(value, float)
    if spark_type == "string":
        return isinstance(value, str)
    if spark_type == "boolean":
        return isinstance(value, bool)
    if spark_type == "timestamp":
        if whole is not None:
            return _EPOCH_SECONDS[0] <= whole <= _EPOCH_SECONDS[1]
        return isinstance(value, str) and _is_iso_8601(value)
    return False


def _is_iso_8601(text: str) -> bool:
    """Extended ISO-8601 dates and date-times, the forms Spark's JSON reader takes."""
    if not _ISO_8601.match(text):
        return False
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _redact(problem: str) -> str:
    """Pydantic quotes an unknown ``type`` tag; keep field names, drop the input itself."""
    return re.sub(r"Input tag '.*?' found", "Input tag found", problem)


def _reject(
    result: AppendResult,
    counts: Counter[tuple[str | None, Reason]],
    position: int,
    reject: _Reject,
) -> None:
    result.rejected.append(Rejection(position, reject.reason, reject.message))
    counts[(reject.stream, reject.reason)] += 1


# -- landed files ----------------------------------------------------------------------------


def _newest_file(directory: Path, provider: str) -> tuple[int, Path] | None:
    """The landed file of ``provider`` with the largest first seq, if any."""
    newest: tuple[int, Path] | None = None
    if not directory.is_dir():
        return None
    prefix = provider + "-"  # others' files are told apart without the regex
    for entry in os.scandir(directory):
        if not entry.name.startswith(prefix):
            continue
        match = FILE_NAME.match(entry.name)
        if match and match["provider"] == provider:
            first = int(match["seq"])
            if newest is None or first > newest[0]:
                newest = (first, Path(entry.path))
    return newest


def _last_line_seq(path: Path) -> int:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return int(json.loads(lines[-1])["seq"])


# -- input adapters --------------------------------------------------------------------------


def _element_lines(elements: Iterable[Element]) -> Iterator[Candidate]:
    for position, element in enumerate(elements, 1):
        try:
            yield position, to_line(element)
        except (TypeError, ValueError, AttributeError) as err:
            problem = f"not writable in the wire format ({type(err).__name__})"
            yield position, WireFormatError(problem, position)


def _parquet_lines(path: Path) -> Iterator[Candidate]:
    import pyarrow.parquet as pq  # only Parquet callers pay for the import

    position = 0
    for batch in pq.ParquetFile(path).iter_batches():
        for row in batch.to_pylist():
            position += 1
            try:
                yield position, json.dumps(_wire_dict(row), default=_json_value)
            except WireFormatError as err:
                yield position, WireFormatError(err.problem, position)
            except (TypeError, ValueError) as err:
                yield position, WireFormatError(f"unsupported value ({type(err).__name__})")


def _wire_dict(row: dict[str, object]) -> dict[str, object]:
    """A Parquet row as the wire dict: nulls are absent, ``values`` becomes an object."""
    wire = {name: value for name, value in row.items() if value is not None}
    values = wire.get("values")
    if isinstance(values, str):
        try:
            wire["values"] = json.loads(values)
        except json.JSONDecodeError:
            raise WireFormatError("values: not valid JSON") from None
    elif isinstance(values, dict):
        # A struct has every attribute of every stream in the file: null means absent.
        wire["values"] = {name: v for name, v in values.items() if v is not None}
    return wire


def _json_value(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(type(value).__name__)
