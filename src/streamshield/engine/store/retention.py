"""Retention: how long the landing zone and the labelled store keep what was consumed.

Both stores only grew: every landed file and every labelled batch stayed on disk for
the server's life. A server that runs for weeks needs a bound, and the bound must never
cost a tuple. So a file is pruned only when all of these hold:

* it is older than the retention (``max_age`` seconds; None: keep everything);
* every reader of it has *committed* past it. The readers are found on disk, not
  asked: every Spark checkpoint under the storage root (running, stopped or failed
  queries, shared networks, patterns, level applications alike: whatever could be
  restarted from it) lists in its file source log (``sources/<i>/``) the files each of
  its micro-batches read, and ``commits/`` says which micro-batches are done. A file a
  planned but uncommitted micro-batch read is replayed from that list after a crash,
  so it stays. A branch of a shared network reads through its network's checkpoint but
  keeps its own position (engine/sharing/branch_ledger.py): a stopped, restorable branch
  resumes after it from the stored history, so every branch ledger under the store
  holds its stream's labelled batches after its position too;
* for a landing file: secure ingest committed it (a landing file not yet labelled is
  what crash recovery needs), and it is not the newest file of its channel (the landing
  zone recovers a channel's last seq from that file after a crash between the rename
  and the catalog's update: pruning it could accept those seqs twice);
* for a labelled batch: ingest committed the batch in Spark too (a batch before its
  commit may be replayed, which writes a missing directory again with new file names:
  a reader that had read the pruned one would read it twice).

Anything unreadable holds pruning back rather than guessing (a checkpoint whose log
does not parse, a checkpoint started recently that has not yet written which files it
read: its first micro-batch may have listed files a prune would remove under it).

Crash safety: a labelled prune first records, durably, up to which batch each stream is
pruned (``<labelled>/_pruned.json``), then moves each batch directory out of the
stream's directory in one rename (a reader sees the whole batch or none) and deletes it.
A kill in between leaves directories the record already names, which the next prune
removes; ingest's start-up check accepts markers and files missing below the record and
nothing else. Landing files are unlinked one by one (each unlink is atomic) and only
once consumed, so a kill loses nothing not yet consumed. Shield state snapshots older
than the newest committed batch by :data:`KEEP_SNAPSHOTS` go too (a restart reads one).

Pure Python (no Spark): it reads directories and Spark's own text logs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from streamshield.durable import fsync_dir, write_atomic
from streamshield.engine.sharing.branch_ledger import BranchLedger

log = logging.getLogger("streamshield.engine")

LANDING, STORE = "landing", "store"
LABELLED = "labelled"
INGEST_CHECKPOINT = Path("checkpoints") / "ingest"
SHIELD_STATE = "shield_state"
PRUNED = "_pruned.json"
"""In the labelled store: ``{"streams": {stream: through}, "markers": through}``."""
TRASH = "_pruning"
STORES = ("landing", "labelled", "shield_state")
KEEP_SNAPSHOTS = 10
"""Shield state snapshots kept behind the newest committed one (a restart reads one)."""
STARTING_GRACE = 3600.0
"""Seconds a checkpoint that has not yet logged what it read holds labelled pruning
back: its first micro-batch lists the store before it writes the list down."""
_LANDED = re.compile(r"(?P<provider>.+)-(?P<seq>[0-9]{12,})-[0-9a-f]{8}\.jsonl\Z")
_BATCH = re.compile(r"batch=(\d+)\Z")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
FOREVER = ("forever", "off", "none")


def parse_retention(value: object) -> float | None:
    """Seconds from ``"90s"``, ``"10m"``, ``"2h"``, ``"7d"``, ``"1w"`` or a number of
    seconds; None (keep everything) from ``"forever"``. ValueError says what is wrong:
    zero or less would prune data the moment its readers had it, leaving nothing for a
    query registered later, and is refused rather than taken for "off"."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("not a duration (use e.g. 7d, 12h, 30m, 90s, or 'forever')")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip().lower()
        if text in FOREVER:
            return None
        found = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([smhdw]?)", text)
        if not found:
            raise ValueError("not a duration (use e.g. 7d, 12h, 30m, 90s, or 'forever')")
        seconds = float(found.group(1)) * _UNITS[found.group(2) or "s"]
    if not seconds >= 1:
        raise ValueError(
            "less than 1 second; consumed data would be pruned "
            "at once, leaving nothing for a query registered later (use 'forever' to "
            "keep everything)"
        )
    return seconds


@dataclass(frozen=True)
class Figures:
    """Files and bytes of one store."""

    files: int = 0
    bytes: int = 0

    def __add__(self, other: Figures) -> Figures:
        return Figures(self.files + other.files, self.bytes + other.bytes)


@dataclass
class PruneReport:
    """What one prune kept and removed per store, and why parts were held back."""

    kept: dict[str, Figures] = field(default_factory=dict)
    pruned: dict[str, Figures] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)


@dataclass
class SourceFiles:
    """One source of one checkpoint: paths read by committed micro-batches, and paths
    read by a planned micro-batch not yet committed (replayed after a crash)."""

    committed: set[str] = field(default_factory=set)
    planned: set[str] = field(default_factory=set)


class Unreadable(ValueError):
    """A checkpoint whose logs do not parse: it holds pruning back."""


def checkpoint_sources(checkpoint: Path) -> list[SourceFiles]:
    """Per file source of a Spark checkpoint, the files it read, split by commit.

    Spark's formats: ``offsets/<batch>`` is ``v1``, a metadata line, then one line per
    source (``{"logOffset": n}`` for a file source, ``-`` for none yet);
    ``commits/<batch>`` marks a micro-batch done; ``sources/<i>/<n>`` and
    ``<n>.compact`` hold ``v1`` and a JSON line per file with its ``batchId`` (the log
    offset that listed it)."""
    commits = _numbered(checkpoint / "commits")
    done: list[int | None] = []
    if commits:
        try:
            lines = (checkpoint / "offsets" / str(commits[-1])).read_text().splitlines()
        except OSError:
            raise Unreadable(f"{checkpoint}: offsets of committed batch {commits[-1]}") from None
        for line in lines[2:]:
            done.append(_log_offset(line, checkpoint))
    sources: list[SourceFiles] = []
    folder = checkpoint / "sources"
    indexes = (
        sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())
        if (folder.is_dir())
        else []
    )
    for index in indexes:
        committed_offset = done[index] if index < len(done) else None
        files = SourceFiles()
        for path, offset in _log_entries(folder / str(index)):
            if committed_offset is not None and offset <= committed_offset:
                files.committed.add(path)
            else:
                files.planned.add(path)
        sources.append(files)
    return sources


def _log_offset(line: str, checkpoint: Path) -> int | None:
    if line.strip() in ("", "-"):
        return None
    try:
        offset = json.loads(line)["logOffset"]
    except (ValueError, KeyError, TypeError):
        raise Unreadable(f"{checkpoint}: an offset that is not a file source's") from None
    if not isinstance(offset, int):
        raise Unreadable(f"{checkpoint}: a file source offset that is not a number")
    return offset


_ENTRY_CACHE: dict[Path, tuple[int, int, list[tuple[str, int]]]] = {}
_CACHE_LOCK = threading.Lock()


def _log_entries(folder: Path) -> list[tuple[str, int]]:
    """(path, log offset) of every file a file source's log names (compact files fold
    the earlier offsets; a file is parsed again only when it changed)."""
    entries: list[tuple[str, int]] = []
    for item in sorted(folder.iterdir()) if folder.is_dir() else []:
        stem = item.name.removesuffix(".compact")
        if not stem.isdigit():
            continue
        stat = item.stat()
        with _CACHE_LOCK:
            cached = _ENTRY_CACHE.get(item)
        if cached is None or cached[:2] != (stat.st_mtime_ns, stat.st_size):
            cached = (stat.st_mtime_ns, stat.st_size, _parse_log(item))
            with _CACHE_LOCK:
                _ENTRY_CACHE[item] = cached
        entries += cached[2]
    return entries


def _parse_log(path: Path) -> list[tuple[str, int]]:
    lines = path.read_text().splitlines()
    if not lines or lines[0] != "v1":
        raise Unreadable(f"{path}: not a file source log (v1)")
    found = []
    for line in lines[1:]:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            found.append((str(entry["path"]), int(entry["batchId"])))
        except (ValueError, KeyError, TypeError):
            raise Unreadable(f"{path}: an entry that does not parse") from None
    return found


def _numbered(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def find_checkpoints(root: Path) -> Iterator[Path]:
    """Every Spark checkpoint under ``root`` (a directory with ``metadata`` and
    ``offsets`` or ``sources``), without descending into data: landed files, batch
    directories, Spark's sink logs, and ``quarantine`` (set aside for good)."""
    skip = {LANDING, "quarantine", "_spark_metadata", TRASH, "_staging", "_tmp", "_commits"}
    for directory, subdirs, files in os.walk(root):
        here = Path(directory)
        if "metadata" in files and ({"offsets", "sources"} & set(subdirs)):
            subdirs.clear()
            yield here
            continue
        subdirs[:] = [
            d
            for d in subdirs
            if d not in skip and not d.startswith("batch=") and here / d != root / STORE / LABELLED
        ]


class Pruner:
    """Prunes one storage root (``landing/``, ``store/``) by the rules above."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        max_age: float | None,
        clock: Callable[[], float] = time.time,
        starting_grace: float = STARTING_GRACE,
        ignore: Callable[[Path], bool] = lambda _checkpoint: False,
    ) -> None:
        """``ignore``: checkpoints nothing can restart from (the server's removed
        queries'); they read nothing any more."""
        self.root = Path(root).resolve()
        self.ignore = ignore
        self.max_age = max_age
        self.clock = clock
        self.starting_grace = starting_grace
        self.landing = self.root / LANDING
        self.labelled = self.root / STORE / LABELLED
        self.ingest_checkpoint = self.root / STORE / INGEST_CHECKPOINT
        self.shield_state = self.root / STORE / SHIELD_STATE
        self.total_pruned: dict[str, Figures] = {store: Figures() for store in STORES}
        self.last: PruneReport | None = None
        self._lock = threading.Lock()

    # -- the one entry point -----------------------------------------------------------

    def run(self) -> PruneReport:
        """One prune (serialised); the report also feeds ``/metrics``."""
        with self._lock:
            report = PruneReport(pruned={store: Figures() for store in STORES})
            self._finish_interrupted(report)
            if self.max_age is not None:
                self._prune(report)
            report.kept = {
                "landing": _measure(self.landing, _is_landed),
                "labelled": _measure(self.labelled, lambda p: not _hidden(p, self.labelled)),
                "shield_state": _measure(self.shield_state, lambda p: p.suffix == ".json"),
            }
            for store, figures in report.pruned.items():
                self.total_pruned[store] = self.total_pruned[store] + figures
            self.last = report
            for why in report.held:
                log.info("retention: %s", why)
            return report

    def _prune(self, report: PruneReport) -> None:
        consumers = self._consumers(report)
        if consumers is None:
            return
        landing_done, labelled_floor, starting = consumers
        cutoff = self.clock() - (self.max_age or 0)
        upcoming = _ingest_upcoming(self.ingest_checkpoint)
        report.pruned["landing"] = self._prune_landing(landing_done, cutoff)
        if starting:
            report.held.append(f"labelled store held: {starting} has not logged its reads yet")
        elif upcoming is None:
            report.held.append("labelled store held: secure ingest has committed nothing")
        else:
            report.pruned["labelled"] = self._prune_labelled(labelled_floor, cutoff, upcoming)
        if upcoming is not None:
            report.pruned["shield_state"] = self._prune_snapshots(upcoming)

    # -- who read what -----------------------------------------------------------------

    def _consumers(
        self, report: PruneReport
    ) -> tuple[set[Path] | None, dict[str, int], str | None] | None:
        """(landing files every landing reader committed, or None when none reads them;
        per labelled stream the newest batch every reader of it committed; a checkpoint
        that may be listing the store now, or None). None: a checkpoint is unreadable."""
        landing_done: set[Path] | None = None
        floor: dict[str, int] = {}
        starting: str | None = None
        now = self.clock()
        for checkpoint in find_checkpoints(self.root):
            if self.ignore(checkpoint):
                continue
            try:
                sources = checkpoint_sources(checkpoint)
            except (Unreadable, OSError) as err:
                report.held.append(f"nothing pruned: checkpoint unreadable ({err})")
                return None
            logged = [s for s in sources if s.committed or s.planned]
            if len(logged) < max(1, len(sources)):
                age = now - _mtime(checkpoint / "metadata")
                if age < self.starting_grace and starting is None:
                    starting = str(checkpoint.relative_to(self.root))
            for source in sources:
                landed = {p for p in map(self._local, source.committed) if _under(p, self.landing)}
                planned = {p for p in map(self._local, source.planned) if _under(p, self.landing)}
                if landed or planned:
                    done = landed - planned
                    landing_done = done if landing_done is None else landing_done & done
                for stream, position in self._positions(source).items():
                    floor[stream] = min(floor.get(stream, position), position)
        for stream, position in self._branch_positions():
            floor[stream] = min(floor.get(stream, position), position)
        return landing_done, floor, starting

    def _branch_positions(self) -> Iterator[tuple[str, int]]:
        """(stream, covered) of every branch ledger of the store's networks, of any
        level (an unreadable entry reads as having covered nothing: it holds all)."""
        store = self.root / STORE
        for pattern in ("*networks/*/branches/*.json", "levels/*/*networks/*/branches/*.json"):
            for entry in store.glob(pattern):
                stream = entry.parent.parent.name
                yield stream, BranchLedger(entry.parent).covered(entry.stem)

    def _positions(self, source: SourceFiles) -> dict[str, int]:
        """Per labelled stream this source reads: the newest ingest batch it committed,
        below the oldest it read without committing (files reach the store in ingest
        order, a batch's files in one rename)."""
        committed: dict[str, int] = {}
        planned: dict[str, int] = {}
        for paths, into, pick in (
            (source.committed, committed, max),
            (source.planned, planned, min),
        ):
            for path in paths:
                found = self._labelled_batch(path)
                if found is not None:
                    stream, batch = found
                    into[stream] = pick(into.get(stream, batch), batch)
        streams = set(committed) | set(planned)
        return {s: min(committed.get(s, -1), planned.get(s, 2**62) - 1) for s in streams}

    def _local(self, uri: str) -> Path:
        parsed = urlparse(uri)
        return Path(unquote(parsed.path if parsed.scheme in ("file", "") else uri))

    def _labelled_batch(self, uri: str) -> tuple[str, int] | None:
        path = self._local(uri)
        if not _under(path, self.labelled):
            return None
        parts = path.relative_to(self.labelled).parts
        found = _BATCH.match(parts[1]) if len(parts) >= 3 else None
        return (parts[0], int(found.group(1))) if found else None

    # -- the landing zone --------------------------------------------------------------

    def _prune_landing(self, done: set[Path] | None, cutoff: float) -> Figures:
        if not done:
            return Figures()
        newest: dict[tuple[str, str], tuple[int, Path]] = {}
        candidates: list[Path] = []
        for stream_dir in _subdirs(self.landing):
            for entry in os.scandir(stream_dir):
                found = _LANDED.match(entry.name)
                if not found:
                    continue
                key, seq = (stream_dir.name, found["provider"]), int(found["seq"])
                if key not in newest or seq > newest[key][0]:
                    newest[key] = (seq, Path(entry.path))
                candidates.append(Path(entry.path))
        keep = {path for _, path in newest.values()}
        pruned = Figures()
        for path in candidates:
            if path in keep or path not in done:
                continue
            try:
                stat = path.stat()
                if stat.st_mtime > cutoff:
                    continue
                path.unlink()
            except FileNotFoundError:
                continue
            pruned = pruned + Figures(1, stat.st_size)
        return pruned

    # -- the labelled store ------------------------------------------------------------

    def record(self) -> dict:
        """The pruned record (empty when nothing was ever pruned)."""
        return read_record(self.labelled)

    def _prune_labelled(self, floor: dict[str, int], cutoff: float, upcoming: int) -> Figures:
        record = self.record()
        through: dict[str, int] = dict(record.get("streams", {}))
        markers = self.labelled / "_commits"
        committed = set(_numbered(markers))
        changed = False
        for stream_dir in _subdirs(self.labelled):
            if stream_dir.name.startswith(("_", ".")):
                continue
            stream = stream_dir.name
            last = through.get(stream, -1)
            limit = min(floor.get(stream, 2**62), upcoming - 1)
            for batch in sorted(_batches(stream_dir)):
                if batch <= last:
                    continue
                old = _mtime(stream_dir / f"batch={batch}") <= cutoff
                if batch > limit or batch not in committed or not old:
                    break
                last = batch
            if last > through.get(stream, -1):
                through[stream], changed = last, True
        markers_through = record.get("markers", -1)
        for batch in sorted(b for b in committed if b > markers_through):
            try:
                listing = json.loads((markers / str(batch)).read_text())["streams"]
            except (OSError, ValueError, KeyError, TypeError):
                break
            if any(batch > through.get(s, -1) for s, files in listing.items() if files):
                break
            markers_through = batch
        if changed or markers_through != record.get("markers", -1):
            write_record(self.labelled, through, markers_through)
        return self._remove_recorded()

    def _remove_recorded(self) -> Figures:
        """Removes what the record names as pruned (also what a killed prune left)."""
        record = self.record()
        pruned = Figures()
        trash = self.labelled / TRASH
        for stream, last in record.get("streams", {}).items():
            stream_dir = self.labelled / stream
            for batch in sorted(b for b in _batches(stream_dir) if b <= last):
                source = stream_dir / f"batch={batch}"
                trash.mkdir(exist_ok=True)
                target = trash / f"{stream}-{batch}"
                shutil.rmtree(target, ignore_errors=True)
                os.replace(source, target)  # one step: a reader lists all of it or none
                pruned = pruned + _measure(target, lambda _: True)
                shutil.rmtree(target, ignore_errors=True)
        for batch in _numbered(self.labelled / "_commits"):
            if batch <= record.get("markers", -1):
                marker = self.labelled / "_commits" / str(batch)
                pruned = pruned + Figures(0, marker.stat().st_size)
                marker.unlink(missing_ok=True)
        shutil.rmtree(trash, ignore_errors=True)
        return pruned

    def _finish_interrupted(self, report: PruneReport) -> None:
        """A prune killed midway left recorded directories or trash: remove them."""
        trash = self.labelled / TRASH
        if trash.is_dir():
            shutil.rmtree(trash, ignore_errors=True)
        if (self.labelled / PRUNED).exists():
            report.pruned["labelled"] = self._remove_recorded()

    # -- shield state ------------------------------------------------------------------

    def _prune_snapshots(self, upcoming: int) -> Figures:
        """Snapshots well behind the one the next batch starts from (``upcoming - 1``)."""
        pruned = Figures()
        keep_from = upcoming - 1 - KEEP_SNAPSHOTS
        for path in self.shield_state.glob("*.json"):
            if path.stem.isdigit() and int(path.stem) < keep_from:
                try:
                    size = path.stat().st_size
                    path.unlink()
                except FileNotFoundError:
                    continue
                pruned = pruned + Figures(1, size)
        return pruned


# -- the record ----------------------------------------------------------------------


def read_record(labelled: Path) -> dict:
    """``{"streams": {stream: newest pruned batch}, "markers": newest pruned marker}``;
    ValueError when it exists but does not parse (never taken for "nothing pruned": the
    start-up check would then call every pruned batch lost)."""
    path = Path(labelled) / PRUNED
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ValueError(f"the labelled store's pruning record {path} is unreadable") from None
    streams = data.get("streams") if isinstance(data, dict) else None
    if not isinstance(streams, dict) or not isinstance(data.get("markers"), int):
        raise ValueError(f"the labelled store's pruning record {path} is malformed")
    return data


def write_record(labelled: Path, streams: dict[str, int], markers: int) -> None:
    write_atomic(Path(labelled) / PRUNED, json.dumps({"streams": streams, "markers": markers}))
    fsync_dir(labelled)


# -- helpers -------------------------------------------------------------------------


def _ingest_upcoming(checkpoint: Path) -> int | None:
    """The batch ingest runs next when it has committed one (None: nothing committed)."""
    commits = _numbered(checkpoint / "commits")
    return commits[-1] + 1 if commits else None


def _is_landed(path: Path) -> bool:
    return bool(_LANDED.match(path.name)) and path.parent.name != "_tmp"


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(("_", ".")) for part in path.relative_to(root).parts)


def _measure(root: Path, wanted: Callable[[Path], bool]) -> Figures:
    files = size = 0
    if not root.exists():
        return Figures()
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            if not wanted(path):
                continue
            try:
                size += path.stat().st_size
            except FileNotFoundError:
                continue
            files += 1
    return Figures(files, size)


def _subdirs(path: Path) -> list[Path]:
    if not path.is_dir():
        return []
    return [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]


def _batches(stream_dir: Path) -> list[int]:
    if not stream_dir.is_dir():
        return []
    found = (_BATCH.match(p.name) for p in stream_dir.iterdir())
    return [int(m.group(1)) for m in found if m]


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
