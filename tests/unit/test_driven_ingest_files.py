"""Which landed files a driven ingest's next micro-batch reads (engine/ingest/driven_ingest.py):
what Spark's file source would read, once each, in landing order, without a JVM."""

from __future__ import annotations

import os
from pathlib import Path

from streamshield.engine.ingest import driven_ingest
from streamshield.engine.ingest.driven_ingest import DrivenIngest
from streamshield.engine.ingest.file_source_log import file_uri


def ingest(tmp_path: Path, max_files: int | None = None, poll: float = 0.2) -> DrivenIngest:
    out = DrivenIngest(
        None,  # no Spark: only the choice of files is tested
        tmp_path / "landing",
        tmp_path / "checkpoint",
        None,
        lambda _frame, _batch: None,
        poll_seconds=poll,
        max_files=max_files,
    )
    out.log.prepare()
    return out


def landed(tmp_path: Path, relative: str, lines: int = 2, at: int = 0) -> str:
    path = tmp_path / "landing" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f'{{"n": {i}}}\n' for i in range(lines)))
    os.utime(path, (1_700_000_000 + at, 1_700_000_000 + at))
    return file_uri(path)


def run(driven: DrivenIngest) -> tuple[int, list[str]] | None:
    """Plans and commits the next micro-batch as the step does (no rows read)."""
    found = driven._next()
    if found is None:
        return None
    batch_id, files, stamps = found
    if stamps is not None:
        driven.log.plan(batch_id, files, stamps)
    assert driven._seen is not None
    driven._seen.update(files)
    driven.log.commit(batch_id)
    return batch_id, files


def test_files_are_read_once_in_landing_order_as_the_file_source_reads_them(tmp_path) -> None:
    late = landed(tmp_path, "S/b-late.jsonl", at=5)
    early = landed(tmp_path, "S/z-early.jsonl", at=1)
    top = landed(tmp_path, "top.jsonl", at=3)
    for hidden in ("S/.hidden.jsonl", "_tmp/x.jsonl", ".git/y.jsonl", "S/notes.txt"):
        landed(tmp_path, hidden)
    driven = ingest(tmp_path, max_files=2)
    assert run(driven) == (0, [early, top])
    assert run(driven) == (1, [late])
    assert run(driven) is None
    newer = landed(tmp_path, "T/new.jsonl", at=9)
    assert run(driven) == (2, [newer])
    restarted = ingest(tmp_path)
    assert run(restarted) is None, "the log says what was read"
    assert driven_ingest._lines([early, late, newer]) == 6


def test_a_file_pruned_is_forgotten_and_a_file_not_listed_is_not_read_again(
    tmp_path, monkeypatch
) -> None:
    first = landed(tmp_path, "S/a.jsonl", at=1)
    second = landed(tmp_path, "S/b.jsonl", at=2)
    driven = ingest(tmp_path)
    assert run(driven) == (0, [first, second])
    os.unlink(tmp_path / "landing" / "S" / "a.jsonl")  # retention pruned it
    listing = DrivenIngest._listing

    def without_b(self: DrivenIngest) -> set[str]:
        return listing(self) - {second}

    monkeypatch.setattr(DrivenIngest, "_listing", without_b)  # b's folder unreadable
    assert run(driven) is None
    assert driven._seen == {second}, "the pruned file forgotten, the unlisted one kept"
    monkeypatch.setattr(DrivenIngest, "_listing", listing)
    assert run(driven) is None, "listed again, b is not read twice"
    assert driven.reached({first, second})


def test_a_micro_batch_planned_and_not_committed_is_replayed_first(tmp_path) -> None:
    first = landed(tmp_path, "S/a.jsonl", at=1)
    driven = ingest(tmp_path)
    batch_id, files, stamps = driven._next()  # type: ignore[misc]
    driven.log.plan(batch_id, files, stamps)  # the process dies before the commit
    later = landed(tmp_path, "S/b.jsonl", at=2)
    restarted = ingest(tmp_path)
    assert restarted._next() == (0, [first], None), "replayed with its own files"
    restarted.log.commit(0)
    assert run(restarted) == (1, [later])


def test_told_files_are_read_without_a_listing_until_one_is_due(tmp_path, monkeypatch) -> None:
    """The landing zone says what it landed: read at once, spelt as the listing spells
    it (no file read twice under two names); files landed by other means wait for the
    next full listing, at most ``poll_seconds`` later."""
    first = landed(tmp_path, "S/a.jsonl", at=1)
    driven = ingest(tmp_path, poll=3600)
    assert run(driven) == (0, [first])  # the first look is a full listing
    told = landed(tmp_path, "S/b.jsonl", at=2)
    other = landed(tmp_path, "S/c.jsonl", at=3)  # landed by someone else
    listing = DrivenIngest._listing

    def no_listing(self: DrivenIngest) -> set[str]:
        raise AssertionError("listed although told and no listing was due")

    monkeypatch.setattr(DrivenIngest, "_listing", no_listing)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.symlink_to(tmp_path / "landing")
    driven.tell([elsewhere / "S" / "b.jsonl", elsewhere / "S" / ".hidden.jsonl"])
    assert run(driven) == (1, [told])
    monkeypatch.setattr(DrivenIngest, "_listing", listing)
    driven.poll_seconds = 0.0  # a full listing is due
    driven.tell([tmp_path / "landing" / "S" / "b.jsonl"])
    assert run(driven) == (2, [other]), "b is not read again"


def test_a_full_listing_stamps_only_files_no_batch_read(tmp_path, monkeypatch) -> None:
    """The backstop listing runs over every file kept (days of them): the files read
    before are not stat-ed again, only the new one."""
    old = [landed(tmp_path, f"S/{n}.jsonl", at=n) for n in range(1, 6)]
    driven = ingest(tmp_path, poll=0.0)  # every look is a full listing
    assert run(driven) == (0, old)
    new = landed(tmp_path, "S/6.jsonl", at=6)
    stamped: list[Path] = []
    real = driven_ingest._stamped

    def counted(paths):
        paths = list(paths)
        stamped.extend(paths)
        return real(paths)

    monkeypatch.setattr(driven_ingest, "_stamped", counted)
    assert run(driven) == (1, [new])
    assert [p.name for p in stamped] == ["6.jsonl"]
