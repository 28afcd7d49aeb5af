"""Server-assigned seqs (server/provider_assign.py) without a server: which appends
exclude each other, and the channel's current policy read back from the landed files."""

from __future__ import annotations

import json
from pathlib import Path

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.landing import LandingZone
from streamshield.policy.elements import Channel
from streamshield.server.element_gate import append_checked
from streamshield.server.provider_assign import SeqAssigner

KINDS = StreamDefinition("Kinds", (("id", "bigint"), ("type", "string")), tid="id")


def test_appends_exclude_each_other_only_within_a_provider_family(tmp_path: Path) -> None:
    """``a`` and ``a.b`` may both write channel ``a.b``: one lock; ``b`` writes none of
    ``a``'s channels: its appends run beside them."""
    catalog = SqliteCatalog(tmp_path / "catalog.db")
    assigner = SeqAssigner(LandingZone(tmp_path / "land", catalog))
    assert assigner.lock("S", "a") is assigner.lock("S", "a.b") is assigner.lock("S", "a.b.c")
    assert assigner.lock("S", "a") is not assigner.lock("S", "b")
    assert assigner.lock("S", "a") is not assigner.lock("T", "a")


def _post(zone: LandingZone, assigner: SeqAssigner, rows: list[dict]) -> dict:
    lines = [json.dumps(row) for row in rows]
    assigned = assigner.assign("Kinds", "ann", "id", lines)
    report = append_checked(zone, "ann", "Kinds", assigned.lines, may_write=True, may_inject=True)
    assert not assigned.rejected and not report.rejected, report.as_dict()
    return report.as_dict()


def test_the_policy_is_read_past_tuples_that_look_like_sps(tmp_path: Path) -> None:
    """A landed file of tuples only is skipped without decoding it, by the sp's mark in
    its text; a tuple whose values carry the same text (an attribute named ``type``) is
    decoded and seen to be a tuple, so the sp before it stays the channel's policy."""
    catalog = SqliteCatalog(tmp_path / "catalog.db")
    catalog.register_stream(KINDS)
    catalog.set_roles(["R"], [])
    zone = LandingZone(tmp_path / "land", catalog)
    sp = {
        "type": "sp",
        "ts": 1_000_000,
        "ddp": {"streams": "*", "tuples": "*", "attributes": "*"},
        "srp": {"roles": "{R}", "grant_option": False},
        "sign": "+",
        "immutable": False,
    }
    _post(zone, SeqAssigner(zone), [sp, {"values": {"id": 1, "type": "sp"}}])
    _post(zone, SeqAssigner(zone), [{"values": {"id": 2, "type": "x"}}])
    fresh = SeqAssigner(zone)  # reads the landed files, newest first
    assert fresh.policy(Channel("Kinds", "ann")) == (1_000_000, 1)
    _post(zone, fresh, [{"values": {"id": 3, "type": "sp"}}])
    landed = sorted((zone.root / "Kinds").glob("ann-*.jsonl"))
    last = json.loads(landed[-1].read_text())
    assert (last["seq"], last["policy"]) == (4, {"ts": 1_000_000, "csn": 1})


def test_the_landed_files_are_read_again_only_when_another_writer_landed(
    tmp_path: Path, monkeypatch
) -> None:
    """After a clean append the assigner knows the channel's policy at its last seq: the
    next append lists no files (the landing zone keeps days of them). An sp landed on the
    channel by another writer moves the last seq, and the files are read again."""
    from streamshield.server import provider_assign

    catalog = SqliteCatalog(tmp_path / "catalog.db")
    catalog.register_stream(KINDS)
    catalog.set_roles(["R"], [])
    zone = LandingZone(tmp_path / "land", catalog)
    assigner = SeqAssigner(zone)
    listed: list[str] = []
    real = provider_assign._files
    monkeypatch.setattr(provider_assign, "_files", lambda d, p: listed.append(p) or real(d, p))

    def post(rows: list[dict]) -> None:
        lines = [json.dumps(row) for row in rows]
        assigned = assigner.assign("Kinds", "ann", "id", lines)
        report = append_checked(
            zone, "ann", "Kinds", assigned.lines, may_write=True, may_inject=True
        )
        assigner.landed(assigned, clean=not report.rejected)

    post([{"values": {"id": 1, "type": "a"}}])
    post([{"values": {"id": 2, "type": "a"}}])
    assert listed == ["ann"]  # the first append only
    sp = {
        "type": "sp",
        "stream": "Kinds",
        "provider": "ann",
        "seq": 3,
        "ts": 7_000_000,
        "sn": 1,
        "ddp": {"streams": "*", "tuples": "*", "attributes": "*"},
        "srp": {"roles": "{R}", "grant_option": False},
        "sign": "+",
        "immutable": False,
    }
    assert zone.append_lines([json.dumps(sp)]).accepted == 1  # another writer's sp
    post([{"values": {"id": 4, "type": "a"}}])
    assert listed == ["ann", "ann"]
    last = json.loads(sorted((zone.root / "Kinds").glob("ann-*.jsonl"))[-1].read_text())
    assert (last["seq"], last["policy"]) == (4, {"ts": 7_000_000, "csn": 1})


def test_given_seqs_number_the_lines_and_a_seq_that_does_not_grow_is_refused(
    tmp_path: Path,
) -> None:
    """A connector gives each line its record's offset + 1: gaps are kept (a refused
    record leaves one), the current policy is still declared, and a seq at or below the
    channel's last lands nowhere (``seq_not_increasing``): a record never lands twice."""
    catalog = SqliteCatalog(tmp_path / "catalog.db")
    catalog.register_stream(KINDS)
    catalog.set_roles(["R"], [])
    zone = LandingZone(tmp_path / "land", catalog)
    assigner = SeqAssigner(zone)
    sp = {
        "type": "sp",
        "ts": 1_000_000,
        "ddp": {"streams": "*", "tuples": "*", "attributes": "*"},
        "srp": {"roles": "{R}", "grant_option": False},
        "sign": "+",
        "immutable": False,
    }
    rows = [sp, {"values": {"id": 1, "type": "a"}}, {"values": {"id": 2, "type": "b"}}]
    lines = [json.dumps(row) for row in rows]
    assigned = assigner.assign("Kinds", "ann", "id", lines, seqs=[1, 2, 5])
    report = append_checked(zone, "ann", "Kinds", assigned.lines, may_write=True, may_inject=True)
    assert report.accepted == 3 and not report.rejected
    assert zone.last_seq(Channel("Kinds", "ann")) == 5
    landed = [
        json.loads(line)
        for path in sorted((zone.root / "Kinds").glob("ann-*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert [e["seq"] for e in landed] == [1, 2, 5]
    assert landed[2]["policy"] == {"ts": 1_000_000, "csn": 1}

    again = assigner.assign("Kinds", "ann", "id", lines[1:], seqs=[5, 6])
    report = append_checked(zone, "ann", "Kinds", again.lines, may_write=True, may_inject=True)
    assert report.accepted == 1
    assert [r.reason for r in report.rejected] == ["seq_not_increasing"]
    assert zone.last_seq(Channel("Kinds", "ann")) == 6


def test_a_channel_a_connector_feeds_takes_no_line_of_the_api(tmp_path: Path) -> None:
    """Tuples and sps on a fed channel are refused per line (with or without seqs of
    their own); the caller's other channels land, and nothing reaches the fed one."""
    catalog = SqliteCatalog(tmp_path / "catalog.db")
    catalog.register_stream(KINDS)
    zone = LandingZone(tmp_path / "land", catalog)

    def line(provider: str, seq: int, kind: str = "tuple") -> str:
        if kind == "sp":
            return json.dumps(
                {
                    "type": "sp",
                    "stream": "Kinds",
                    "provider": provider,
                    "seq": seq,
                    "ts": 1_000_000,
                    "sn": 1,
                    "ddp": {"streams": "*", "tuples": "*", "attributes": "*"},
                    "srp": {"roles": "{R}", "grant_option": False},
                    "sign": "+",
                    "immutable": False,
                }
            )
        values = {"id": seq, "type": "t"}
        return json.dumps(
            {"type": "tuple", "stream": "Kinds", "provider": provider, "seq": seq, "tid": seq,
             "policy": {"ts": 1_000_000, "csn": 1}, "values": values}
        )  # fmt: skip

    lines = [line("ann.k0", 1, "sp"), line("ann.k0", 2), line("ann.api", 1)]
    fed = frozenset({"ann.k0"})
    report = append_checked(zone, "ann", "Kinds", lines, may_write=True, may_inject=True, fed=fed)
    assert [(r.line, r.reason) for r in report.rejected] == [
        (1, "channel_fed_by_connector"),
        (2, "channel_fed_by_connector"),
    ]
    assert report.accepted == 1
    assert zone.last_seq(Channel("Kinds", "ann.k0")) == 0
    assert zone.last_seq(Channel("Kinds", "ann.api")) == 1
