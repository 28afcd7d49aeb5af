"""The landing zone: validation per element, channel order, and the atomic file contract."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.examples import hospital
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.landing import (
    FILE_NAME,
    LOCK_FILE,
    TMP_DIR,
    AppendResult,
    LandingZone,
    Parsed,
    Reason,
    fits,
)
from streamshield.lang.cql import parse_pattern
from streamshield.lang.wire import WireFormatError, parse_element, to_dict, to_line
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
)

VITALS = StreamDefinition(
    "Vitals",
    (
        ("id", "bigint"),
        ("n", "int"),
        ("x", "double"),
        ("name", "string"),
        ("ok", "boolean"),
        ("at", "timestamp"),
    ),
    tid="id",
    event_time="at",
)
SECRET = "s3cr3t-patient-Jane"


@pytest.fixture
def catalog(tmp_path: Path) -> SqliteCatalog:
    catalog = SqliteCatalog(tmp_path / "catalog.db")
    catalog.register_stream(VITALS)
    catalog.set_roles(["E", "D"], [("D", "E")])
    return catalog


@pytest.fixture
def zone(tmp_path: Path, catalog: SqliteCatalog) -> LandingZone:
    return LandingZone(tmp_path / "land", catalog)


def tup(seq: int, tid: object = 1, provider: str = "p1", stream: str = "Vitals", **values: Any):
    values = {"id": tid, "at": 1, **values}  # the event time may not be left out
    return TupleElement(Channel(stream, provider), seq, tid, 10, 1, values)


def sp(seq: int, roles: str = "D", provider: str = "p1", stream: str = "Vitals") -> SpElement:
    punctuation = SecurityPunctuation(
        DataDescription(), SecurityRestriction(parse_pattern(roles)), ts=10, sn=1
    )
    return SpElement(Channel(stream, provider), seq, punctuation)


def landed(zone: LandingZone, stream: str = "Vitals") -> list[Path]:
    return sorted(zone.stream_dir(stream).iterdir())


def read(path: Path) -> list[Element]:
    return [parse_element(line) for line in path.read_text().splitlines()]


def reasons(result: AppendResult) -> list[tuple[int, str]]:
    return [(r.line, r.reason.value) for r in result.rejected]


# --- accepted elements ------------------------------------------------------------------


def test_round_trip_one_file_per_channel(zone: LandingZone, catalog: SqliteCatalog) -> None:
    p1 = [sp(0), tup(1, x=1.5, name="a"), tup(2, tid=2, ok=True, at="2024-01-01T10:00:00Z")]
    p2 = [tup(7, provider="p2", n=3), tup(9, provider="p2", at=1_700_000_000)]
    result = zone.append([p1[0], p2[0], p1[1], p2[1], p1[2]])
    assert (result.accepted, result.rejected) == (5, [])
    assert sorted(result.files) == landed(zone)
    by_provider = {FILE_NAME.match(p.name)["provider"]: p for p in result.files}
    assert read(by_provider["p1"]) == p1
    assert read(by_provider["p2"]) == p2
    assert FILE_NAME.match(by_provider["p2"].name)["seq"] == "000000000007"
    assert catalog.last_seq(Channel("Vitals", "p1")) == 2
    assert catalog.last_seq(Channel("Vitals", "p2")) == 9


def test_files_hold_wire_lines_sorted_by_seq(zone: LandingZone) -> None:
    elements = [sp(3), tup(5), tup(8, tid=2)]
    (path,) = zone.append(elements).files
    assert path.read_text() == "".join(to_line(e) + "\n" for e in elements)
    assert path.parent == zone.root / "Vitals"


def test_append_lines_skips_blank_lines_but_counts_them(zone: LandingZone) -> None:
    lines = [to_line(tup(1)), "", "   ", "not json", to_line(tup(2))]
    result = zone.append_lines(lines)
    assert result.accepted == 2
    assert reasons(result) == [(4, "malformed")]


def test_each_call_writes_new_files(zone: LandingZone) -> None:
    zone.append([tup(1)])
    zone.append([tup(2), tup(3)])
    files = landed(zone)
    assert [len(read(p)) for p in files] == [1, 2]


def test_null_values_other_than_tid_are_accepted(zone: LandingZone) -> None:
    assert zone.append([tup(1, x=None, name=None)]).accepted == 1


def test_a_tuple_without_its_event_time_is_refused_by_line(
    zone: LandingZone, catalog: SqliteCatalog, tmp_path: Path
) -> None:
    """Absent or null, the event time would put the tuple in no window, silently; other
    attributes may be left out (they read as null)."""
    without = TupleElement(Channel("Vitals", "p1"), 1, 1, 10, 1, {"id": 1, "x": 2.0})
    null = TupleElement(Channel("Vitals", "p1"), 2, 1, 10, 1, {"id": 1, "at": None})
    result = zone.append([without, null, tup(3, x=None)])
    assert (result.accepted, reasons(result)) == (
        1,
        [(1, "missing_attribute"), (2, "missing_attribute")],
    )
    assert all(r.message.startswith("values.at: the event time") for r in result.rejected)
    assert catalog.rejections()[("Vitals", "missing_attribute")] == 2
    values_type = pa.struct([("id", pa.int64()), ("at", pa.timestamp("us"))])
    rows = parquet_rows([tup(4)])
    rows[0]["values"] = {"id": 1, "at": None}
    parquet = zone.append_parquet(write_parquet(tmp_path / "in.parquet", rows, values_type))
    assert (parquet.accepted, reasons(parquet)) == (0, [(1, "missing_attribute")])


def test_a_tuple_without_an_attribute_its_schema_marks_not_null_is_refused(
    tmp_path: Path, catalog: SqliteCatalog
) -> None:
    """NOT NULL is the schema's: left out or null, the tuple is refused by line, naming
    the attribute; the catalog keeps the mark across a reopening."""
    checked = StreamDefinition(
        "Checked", (("id", "bigint"), ("x", "double"), ("note", "string")), "id", None, ("x",)
    )
    catalog.register_stream(checked)
    assert SqliteCatalog(tmp_path / "catalog.db").stream("Checked").not_null == ("x",)
    assert catalog.stream("Vitals").not_null == ()
    zone = LandingZone(tmp_path / "land", catalog)

    def element(seq: int, values: dict) -> TupleElement:
        return TupleElement(Channel("Checked", "p1"), seq, 1, 10, 1, values)

    result = zone.append(
        [
            element(1, {"id": 1, "note": "x left out"}),
            element(2, {"id": 1, "x": None}),
            element(3, {"id": 1, "x": 2.5}),  # the note may be left out
        ]
    )
    assert (result.accepted, reasons(result)) == (
        1,
        [(1, "missing_attribute"), (2, "missing_attribute")],
    )
    assert all("values.x: missing" in r.message for r in result.rejected)
    with pytest.raises(ValueError, match="not attributes"):
        StreamDefinition("Bad", (("id", "bigint"),), "id", None, ("nope",))


def test_stream_directories_exist_before_any_append(zone: LandingZone) -> None:
    """Spark's file source needs its input directory to exist when the query starts."""
    assert zone.stream_dir("Vitals").is_dir()
    assert (zone.root / TMP_DIR).is_dir()


def test_hospital_example_lands_completely(tmp_path: Path) -> None:
    zone = LandingZone(tmp_path / "land", hospital_catalog(tmp_path / "catalog.db"))
    result = zone.append(hospital.elements())
    assert (result.accepted, result.rejected, len(result.files)) == (35, [], 3)
    again = zone.append(hospital.elements())
    assert again.accepted == 0
    assert {r.reason for r in again.rejected} == {Reason.SEQ_NOT_INCREASING}


# --- rejections -------------------------------------------------------------------------


def line_of(element: Element, **changes: Any) -> str:
    return json.dumps({**to_dict(element), **changes})


@pytest.mark.parametrize(
    "line",
    [
        "{",
        "[1, 2]",
        json.dumps({k: v for k, v in to_dict(tup(1)).items() if k != "policy"}),
        line_of(tup(1), seq=-1),
        line_of(tup(1), type="row"),
        line_of(tup(1), extra=1),
        line_of(sp(1), ddp={"streams": "*", "tuples": "[", "attributes": "*"}),
    ],
)
def test_malformed_lines(zone: LandingZone, catalog: SqliteCatalog, line: str) -> None:
    result = zone.append_lines([to_line(tup(1)), line, to_line(tup(2))])
    assert (result.accepted, reasons(result)) == (2, [(2, "malformed")])
    assert catalog.rejections() == {("", "malformed"): 1}


def test_unknown_stream(zone: LandingZone, catalog: SqliteCatalog) -> None:
    result = zone.append([tup(1, stream="Other"), sp(1, stream="vitals"), tup(1)])
    assert (result.accepted, reasons(result)) == (1, [(1, "unknown_stream"), (2, "unknown_stream")])
    assert catalog.rejections() == {("", "unknown_stream"): 2}
    assert not (zone.root / "Other").exists()


@pytest.mark.parametrize("provider", ["../escape", "a/b", "_hidden", ".dot", "a b", "x" * 129])
def test_providers_that_are_not_safe_file_names(zone: LandingZone, provider: str) -> None:
    """A provider name becomes a file name: no traversal, and nothing Spark would skip."""
    result = zone.append([tup(1, provider=provider), tup(1, provider="ward-A.2")])
    assert (result.accepted, reasons(result)) == (1, [(1, "invalid_provider")])
    assert [p.name.startswith("ward-A.2-") for p in landed(zone)] == [True]


@pytest.mark.parametrize(
    "element",
    [
        tup(2**63),
        TupleElement(Channel("Vitals", "p1"), 1, 1, 2**63, 1, {"id": 1}),
        TupleElement(Channel("Vitals", "p1"), 1, 1, 10, 2**63, {"id": 1}),
    ],
)
def test_numbers_beyond_bigint(zone: LandingZone, element: Element) -> None:
    """Spark would read them as null, and the shield would lose the tuple's order or policy."""
    result = zone.append([element, tup(2**63 - 1)])
    assert (result.accepted, reasons(result)) == (1, [(1, "out_of_range")])


def test_unknown_attribute(zone: LandingZone, catalog: SqliteCatalog) -> None:
    result = zone.append([tup(1, pulse=80), tup(2, x=80)])
    assert (result.accepted, reasons(result)) == (1, [(1, "unknown_attribute")])
    assert catalog.rejections() == {("Vitals", "unknown_attribute"): 1}


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("id", 1.0),
        ("n", True),
        ("n", "3"),
        ("n", 1.5),
        ("n", 2**31),
        ("n", -(2**31) - 1),
        ("x", True),
        ("x", "1.5"),
        ("name", 1),
        ("name", False),
        ("ok", 1),
        ("ok", "true"),
        ("at", "yesterday"),
        ("at", "2024-13-01T00:00:00"),
        ("at", "20240101T000000"),
        ("at", "2024-01-01T10:00:00.1234567"),
        ("at", True),
        ("at", 1.5),
        ("at", 2**62),
        ("at", {"nested": 1}),
        ("name", [1]),
    ],
)
def test_values_must_fit_their_type(zone: LandingZone, attribute: str, value: object) -> None:
    result = zone.append([tup(1, **{attribute: value}), tup(2)])
    assert (result.accepted, reasons(result)) == (1, [(1, "type_mismatch")])


@pytest.mark.parametrize(
    ("spark_type", "value"),
    [
        ("bigint", -(2**63)),
        ("bigint", 2**63 - 1),
        ("int", 2**31 - 1),
        ("int", -(2**31)),
        ("double", 1),
        ("double", -1.5e300),
        ("string", ""),
        ("boolean", False),
        ("timestamp", "2024-01-01"),
        ("timestamp", "2024-01-01T10:00"),
        ("timestamp", "2024-01-01 10:00:00.123456+01:00"),
        ("timestamp", "2024-02-29T23:59:59Z"),
        ("timestamp", 0),
        ("timestamp", -1_700_000_000),
    ],
)
def test_values_that_fit(spark_type: str, value: object) -> None:
    assert fits(spark_type, value)


def test_bigint_bounds() -> None:
    assert not fits("bigint", 2**63)
    assert not fits("bigint", -(2**63) - 1)
    assert not fits("bigint", True)


@pytest.mark.parametrize(
    "element",
    [
        TupleElement(Channel("Vitals", "p1"), 1, 1, 10, 1, {"x": 1.0}),  # missing
        TupleElement(Channel("Vitals", "p1"), 1, 1, 10, 1, {"id": None}),  # null
        TupleElement(Channel("Vitals", "p1"), 1, "None", 10, 1, {"id": None}),  # null as text
        TupleElement(Channel("Vitals", "p1"), 1, 1, 10, 1, {"id": 2}),  # another tuple's id
    ],
)
def test_tid_attribute_must_match_the_tid(zone: LandingZone, element: Element) -> None:
    result = zone.append([element, tup(2)])
    assert (result.accepted, reasons(result)) == (1, [(1, "tid_mismatch")])


def test_tid_compares_as_text(zone: LandingZone) -> None:
    element = TupleElement(Channel("Vitals", "p1"), 1, "7", 10, 1, {"id": 7, "at": 1})
    assert zone.append([element]).accepted == 1


@pytest.mark.parametrize("roles", ["Ghost", "{D, Ghost}", '{Ghost, "E"}'])
def test_sps_may_only_name_known_roles(zone: LandingZone, roles: str) -> None:
    result = zone.append([sp(1, roles=roles), tup(2)])
    assert (result.accepted, reasons(result)) == (1, [(1, "unknown_role")])


@pytest.mark.parametrize("roles", ["*", "D", "{D, E}", "G*"])
def test_role_patterns_without_unknown_literals_land(zone: LandingZone, roles: str) -> None:
    assert zone.append([sp(1, roles=roles)]).accepted == 1


def test_seq_must_increase_within_a_call(zone: LandingZone, catalog: SqliteCatalog) -> None:
    result = zone.append([tup(3), tup(3), tup(2), tup(5), tup(4, provider="p2")])
    assert result.accepted == 3
    assert reasons(result) == [(2, "seq_not_increasing"), (3, "seq_not_increasing")]
    assert [e.seq for e in read(landed(zone)[0])] == [3, 5]
    assert catalog.rejections() == {("Vitals", "seq_not_increasing"): 2}


def test_seq_must_increase_across_calls(zone: LandingZone, catalog: SqliteCatalog) -> None:
    zone.append([tup(4)])
    result = zone.append([tup(4), tup(0), tup(5)])
    assert result.accepted == 1
    assert reasons(result) == [(1, "seq_not_increasing"), (2, "seq_not_increasing")]
    assert catalog.last_seq(Channel("Vitals", "p1")) == 5


def test_rejected_elements_do_not_take_their_seq(zone: LandingZone) -> None:
    """A provider can fix a rejected element and resend it with the same seq."""
    result = zone.append([tup(1, x="bad"), tup(1, x=1.0)])
    assert (result.accepted, reasons(result)) == (1, [(1, "type_mismatch")])


def test_order_is_checked_against_the_catalog(tmp_path: Path, catalog: SqliteCatalog) -> None:
    catalog.advance_seq(Channel("Vitals", "p1"), 10)
    zone = LandingZone(tmp_path / "land", catalog)
    assert reasons(zone.append([tup(10), tup(11)])) == [(1, "seq_not_increasing")]


def test_messages_carry_no_data_values(zone: LandingZone) -> None:
    secret_lines = [
        line_of(tup(1), seq=SECRET),
        line_of(tup(1), type=SECRET),
        line_of(tup(1), values={"id": 1, "x": SECRET}),
        line_of(tup(1), values={"id": SECRET}),
        line_of(tup(1), values={"id": 1, "pulse": SECRET}),
        line_of(tup(1), tid=SECRET),
        line_of(tup(1, name=SECRET), stream="Other"),
        '{"values": {"name": "' + SECRET + '"',
        line_of(tup(0, name=SECRET)),
        line_of(tup(0, name=SECRET)),
    ]
    result = zone.append_lines(secret_lines)
    assert result.accepted == 1
    assert len(result.rejected) == len(secret_lines) - 1
    for rejection in result.rejected:
        assert SECRET not in rejection.message
        assert "Jane" not in rejection.message


def test_unwritable_elements_are_malformed(zone: LandingZone) -> None:
    result = zone.append([tup(1, x=object()), "not an element", tup(2)])  # type: ignore[list-item]
    assert (result.accepted, reasons(result)) == (1, [(1, "malformed"), (2, "malformed")])


# --- the atomic-write contract ------------------------------------------------------------


def test_nothing_is_visible_before_the_rename(
    zone: LandingZone, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_replace = os.replace
    seen: list[tuple[list[Path], Path, str]] = []

    def replace(src: Any, dst: Any) -> None:
        seen.append((landed(zone), Path(src), Path(src).read_text()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    elements = [tup(1), tup(2)]
    (path,) = zone.append(elements).files
    [(visible, src, text)] = seen
    assert visible == [], "no file in <root>/<stream>/ before os.replace"
    assert src.parent == zone.root / TMP_DIR
    assert src.name.startswith("."), "hidden from any reader glob while it is written"
    assert text == "".join(to_line(e) + "\n" for e in elements), "complete before the rename"
    assert landed(zone) == [path]
    assert list((zone.root / TMP_DIR).iterdir()) == []


def test_a_failed_rename_leaves_nothing_and_keeps_the_seq(
    zone: LandingZone, catalog: SqliteCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    result = zone.append([tup(1), tup(2)])
    assert (result.accepted, result.files) == (0, [])
    assert reasons(result) == [(1, "write_failed"), (2, "write_failed")]
    assert landed(zone) == []
    assert list((zone.root / TMP_DIR).iterdir()) == []
    assert catalog.last_seq(Channel("Vitals", "p1")) == -1
    assert catalog.rejections() == {("Vitals", "write_failed"): 2}

    monkeypatch.undo()
    assert zone.append([tup(1), tup(2)]).accepted == 2, "the provider can simply retry"


def test_a_crash_during_the_rename_leaves_nothing(
    zone: LandingZone, catalog: SqliteCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(src: Any, dst: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        zone.append([tup(1)])
    assert landed(zone) == []
    assert list((zone.root / TMP_DIR).iterdir()) == []
    assert catalog.last_seq(Channel("Vitals", "p1")) == -1


def test_one_failing_channel_does_not_stop_the_others(
    zone: LandingZone, catalog: SqliteCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst).name.startswith("p2-"):
            raise OSError(5, "I/O error")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    result = zone.append([tup(1), tup(1, provider="p2"), tup(2)])
    assert (result.accepted, reasons(result)) == (2, [(2, "write_failed")])
    assert catalog.last_seq(Channel("Vitals", "p1")) == 2
    assert catalog.last_seq(Channel("Vitals", "p2")) == -1


def test_stale_temporary_files_are_removed(zone: LandingZone) -> None:
    stale = zone.root / TMP_DIR / ".p1-000000000001-deadbeef.jsonl.tmp"
    stale.write_text('{"half": ')
    zone.append([tup(1)])
    assert not stale.exists()


def test_a_file_landed_before_a_crash_is_not_landed_twice(
    tmp_path: Path, catalog: SqliteCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer died between os.replace and advance_seq: the file is visible, the seq not."""
    zone = LandingZone(tmp_path / "land", catalog)

    def die(channel: Channel, seq: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog, "advance_seq", die)
    with pytest.raises(KeyboardInterrupt):
        zone.append([tup(1), tup(2)])
    monkeypatch.undo()
    assert catalog.last_seq(Channel("Vitals", "p1")) == -1
    assert len(landed(zone)) == 1

    restarted = LandingZone(tmp_path / "land", catalog)
    result = restarted.append([tup(1), tup(2), tup(3)])
    assert result.accepted == 1
    assert reasons(result) == [(1, "seq_not_increasing"), (2, "seq_not_increasing")]
    assert catalog.last_seq(Channel("Vitals", "p1")) == 3


def test_recovery_reads_only_its_own_provider(
    zone: LandingZone, catalog: SqliteCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ward-A`` files start with ``ward-``: they must not raise the seq of ``ward``."""
    zone.append([tup(50, provider="ward-A")])
    assert zone.append([tup(1, provider="ward")]).accepted == 1
    assert catalog.last_seq(Channel("Vitals", "ward")) == 1


def test_concurrent_appends_never_accept_a_seq_twice(
    tmp_path: Path, catalog: SqliteCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_last_seq = catalog.last_seq
    together = threading.Barrier(4)

    def racing_last_seq(channel: Channel) -> int:
        # Without the landing lock all four appends read the seq at once; with it the
        # first waiter gives up after the timeout and the barrier lets everyone through.
        with contextlib.suppress(threading.BrokenBarrierError):
            together.wait(timeout=0.5)
        return real_last_seq(channel)

    monkeypatch.setattr(catalog, "last_seq", racing_last_seq)
    zone = LandingZone(tmp_path / "land", catalog)
    batch = [tup(seq) for seq in range(20)]
    results: list[AppendResult] = []

    def run() -> None:
        results.append(LandingZone(tmp_path / "land", catalog).append(batch))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.accepted for r in results) == 20
    seqs = [e.seq for path in landed(zone) for e in read(path)]
    assert sorted(seqs) == list(range(20))


def test_appends_wait_for_the_landing_lock(zone: LandingZone) -> None:
    done = threading.Event()

    def run() -> None:
        zone.append([tup(1)])
        done.set()

    with open(zone.root / LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        thread = threading.Thread(target=run)
        thread.start()
        assert not done.wait(0.3), "another holder of the lock must block the append"
        assert landed(zone) == []
        fcntl.flock(handle, fcntl.LOCK_UN)
    thread.join(timeout=10)
    assert done.is_set()
    assert len(landed(zone)) == 1


# --- Parquet input ------------------------------------------------------------------------

POLICY_TYPE = pa.struct([("ts", pa.int64()), ("csn", pa.int64())])
DDP_TYPE = pa.struct(
    [("streams", pa.string()), ("tuples", pa.string()), ("attributes", pa.string())]
)
SRP_TYPE = pa.struct([("roles", pa.string()), ("grant_option", pa.bool_())])


def parquet_rows(elements: list[Element]) -> list[dict[str, Any]]:
    rows = []
    for element in elements:
        row = to_dict(element)
        if "values" in row:
            row["values"] = json.dumps(row["values"])
        rows.append(row)
    return rows


def write_parquet(path: Path, rows: list[dict[str, Any]], values_type: pa.DataType) -> Path:
    schema = pa.schema(
        [
            ("type", pa.string()),
            ("stream", pa.string()),
            ("provider", pa.string()),
            ("seq", pa.int64()),
            ("tid", pa.int64()),
            ("policy", POLICY_TYPE),
            ("values", values_type),
            ("ts", pa.int64()),
            ("sn", pa.int64()),
            ("ddp", DDP_TYPE),
            ("srp", SRP_TYPE),
            ("sign", pa.string()),
            ("immutable", pa.bool_()),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def test_parquet_with_json_values(zone: LandingZone, tmp_path: Path) -> None:
    elements = [sp(1), tup(2, x=1.5, name="a"), tup(3, tid=2, at="2024-01-01T00:00:00Z")]
    path = write_parquet(tmp_path / "in.parquet", parquet_rows(elements), pa.string())
    result = zone.append_parquet(path)
    assert (result.accepted, result.rejected) == (3, [])
    assert read(result.files[0]) == elements


def test_parquet_with_struct_values(zone: LandingZone, tmp_path: Path) -> None:
    values_type = pa.struct([("id", pa.int64()), ("x", pa.float64()), ("at", pa.timestamp("us"))])
    rows = parquet_rows([tup(1), tup(2, tid=2)])
    rows[0]["values"] = {"id": 1, "x": 2.5, "at": datetime(2024, 5, 1, 12, 0)}
    rows[1]["values"] = {"id": 2, "x": None, "at": datetime(2024, 5, 1, 12, 30)}
    result = zone.append_parquet(write_parquet(tmp_path / "in.parquet", rows, values_type))
    assert (result.accepted, result.rejected) == (2, [])
    first, second = read(result.files[0])
    assert first.values == {"id": 1, "x": 2.5, "at": "2024-05-01T12:00:00"}
    assert second.values == {"id": 2, "at": "2024-05-01T12:30:00"}  # null fields are absent


def test_parquet_rows_are_validated_like_lines(
    zone: LandingZone, tmp_path: Path, catalog: SqliteCatalog
) -> None:
    rows = parquet_rows([tup(1), tup(2), tup(3), tup(4, x="bad"), sp(5, roles="Ghost"), tup(6)])
    rows[1]["policy"] = None  # a required field that is null is missing
    rows[2]["values"] = '{"id": 3,'
    result = zone.append_parquet(write_parquet(tmp_path / "in.parquet", rows, pa.string()))
    assert result.accepted == 2
    assert reasons(result) == [
        (2, "malformed"),
        (3, "malformed"),
        (4, "type_mismatch"),
        (5, "unknown_role"),
    ]
    assert catalog.rejections()[("", "malformed")] == 2


def test_lines_parsed_by_the_caller_are_checked_as_text_is(tmp_path: Path) -> None:
    """The API's gate hands on the elements it parsed (``append_parsed``): each is checked
    and landed exactly as the same line sent as text, rejections and files alike."""
    lines = [
        to_line(tup(1)),
        to_line(tup(1, provider="bad provider!")),
        "{not json",
        to_line(tup(2, stream="Other")),
        to_line(tup(1)),  # seq not increasing
        line_of(tup(3), extra=1),
        to_line(sp(4, roles="NOSUCHROLE")),
        to_line(tup(5, x="not a double")),
        to_line(tup(6)),
    ]
    results = []
    for name, items in (
        ("text", lines),
        ("parsed", [_parsed_or_text(line) for line in lines]),
    ):
        catalog = SqliteCatalog(tmp_path / f"{name}.db")
        catalog.register_stream(VITALS)
        catalog.set_roles(["E", "D"], [("D", "E")])
        zone = LandingZone(tmp_path / name, catalog)
        result = zone.append_lines(items) if name == "text" else zone.append_parsed(items)
        stored = [p.read_text() for p in landed(zone)]
        results.append((result.accepted, reasons(result), stored, catalog.rejections()))
    assert results[0] == results[1]
    assert results[0][0] == 2 and len(results[0][1]) == 7


def _parsed_or_text(line: str) -> str | Parsed:
    try:
        return Parsed(line, parse_element(line))
    except WireFormatError:
        return line


def test_another_writer_in_between_is_seen_through_the_lock_epoch(
    tmp_path: Path, catalog: SqliteCatalog
) -> None:
    """Two zones on one root stand for two processes: what one knows of a channel's
    last seq must not outlive the other's landing on it."""
    one = LandingZone(tmp_path / "land", catalog)
    other = LandingZone(tmp_path / "land", catalog)
    assert one.append([tup(1)]).accepted == 1
    assert other.append([tup(2)]).accepted == 1
    result = one.append([tup(2), tup(3)])
    assert (result.accepted, reasons(result)) == (1, [(1, "seq_not_increasing")])
    assert catalog.last_seq(Channel("Vitals", "p1")) == 3


def test_a_crashed_writer_in_between_is_seen_through_the_lock_epoch(
    tmp_path: Path, catalog: SqliteCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer landed a file and died before its seq reached the catalog: the zone
    that knew the channel's seq must look at the files again."""
    one = LandingZone(tmp_path / "land", catalog)
    assert one.append([tup(1)]).accepted == 1
    crashed = LandingZone(tmp_path / "land", catalog)

    def die(channel: Channel, seq: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog, "advance_seq", die)
    with pytest.raises(KeyboardInterrupt):
        crashed.append([tup(2), tup(3)])
    monkeypatch.undo()
    assert catalog.last_seq(Channel("Vitals", "p1")) == 1
    result = one.append([tup(3), tup(4)])
    assert (result.accepted, reasons(result)) == (1, [(1, "seq_not_increasing")])
    assert catalog.last_seq(Channel("Vitals", "p1")) == 4


def test_appends_alone_on_a_root_list_no_files(
    zone: LandingZone, catalog: SqliteCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check for a file beyond the catalog's seq lists the stream's files: once per
    channel while no other writer comes in between, not at every append."""
    import streamshield.landing as landing

    listings: list[str] = []
    real = landing._newest_file

    def counted(directory: Path, provider: str) -> Any:
        listings.append(provider)
        return real(directory, provider)

    monkeypatch.setattr(landing, "_newest_file", counted)
    for seq in range(1, 6):
        assert zone.append([tup(seq), tup(seq, provider="p2")]).accepted == 2
    assert sorted(listings) == ["p1", "p2"]
    assert catalog.last_seq(Channel("Vitals", "p1")) == 5
