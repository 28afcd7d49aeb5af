"""The issue-13 bench (bench.table13) in quick mode, and its do-it-yourself peer checked
against the secured query.

The peer (bench/diy_peer.py: a broadcast join against an ACL built from the same
policies, Python UDFs masking attributes) is only a fair comparison if it computes what
the secured view computes; here both run on the same landing files, with attribute-level
policies so that masks matter, and must return the same rows and the same NULLs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bench import diy_peer, table13
from bench.workload import STREAM, hierarchy, write_landing
from pyspark.sql import DataFrame, SparkSession

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.views.secured_view import secured_view
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    Sign,
)
from streamshield.policy.sp_patterns import ANY, Literal, OneOf

pytestmark = pytest.mark.spark

N_ROLES = 4


def masked_landing(root: Path) -> None:
    """Provider ``q``: policies of two sps each, so attributes differ from the tuple.

    Policy 1: r000 reads the tuple but only ``id`` and ``ts``; r001 reads everything.
    Policy 2: r000 and r002 read everything, but r002 is denied ``value``.
    Policy 3: only r003.
    """
    channel = Channel(STREAM.name, "q")
    some = OneOf(frozenset({Literal("id"), Literal("ts")}))
    policies = [
        [(some, Literal("r000"), Sign.GRANT), (ANY, Literal("r001"), Sign.GRANT)],
        [
            (ANY, OneOf(frozenset({Literal("r000"), Literal("r002")})), Sign.GRANT),
            (Literal("value"), Literal("r002"), Sign.DENY),
        ],
        [(ANY, Literal("r003"), Sign.GRANT)],
    ]
    lines, seq = [], 0
    for ts, sps in enumerate(policies, start=1):
        for sn, (attributes, roles, sign) in enumerate(sps, start=1):
            seq += 1
            sp = SecurityPunctuation(
                DataDescription(ANY, ANY, attributes),
                SecurityRestriction(roles),
                ts=ts,
                sn=sn,
                sign=sign,
            )
            lines.append(to_line(SpElement(channel, seq, sp)))
        for i in range(5):
            seq += 1
            tid = ts * 100 + i
            values = {"id": tid, "value": float(i), "ts": i}
            lines.append(to_line(TupleElement(channel, seq, tid, ts, len(sps), values)))
    (root / STREAM.name / "q-000000000001-masks.jsonl").write_text("\n".join(lines) + "\n")


def rows(frame: DataFrame) -> list[tuple]:
    return sorted(tuple(r) for r in frame.select("seq", *STREAM.names).collect())


def test_diy_peer_returns_the_secured_rows_and_masks(spark: SparkSession, tmp_path: Path) -> None:
    landing = write_landing(tmp_path / "landing", 160, 10, N_ROLES, providers=2)
    masked_landing(landing)
    job = IngestJob(Ingest(spark, hierarchy(N_ROLES), {STREAM.name: STREAM}), landing, tmp_path)
    job.start(available_now=True).awaitTermination()
    codec = RoleCodec(hierarchy(N_ROLES))
    labelled = job.store.read(spark, STREAM, codec.width)
    diy_peer.diy_ingest(spark, landing, tmp_path / "diy")
    data = spark.read.parquet(str(tmp_path / "diy" / "data"))
    seen_masks = 0
    for roles in (["r000"], ["r002"], ["r001", "r003"]):
        view = secured_view(labelled, STREAM, codec, roles).withColumnRenamed("_ss_seq", "seq")
        acl = diy_peer.acl_table(spark, landing, STREAM, hierarchy(N_ROLES), roles)
        diy = diy_peer.diy_view(data, acl, STREAM)
        expected = rows(view)
        assert expected, roles
        assert rows(diy) == expected, roles
        seen_masks += sum(1 for r in expected if None in r)
    assert seen_masks > 0  # the masked policies were exercised, not only whole tuples


def test_diy_acl_rejects_tuple_scoped_policies(tmp_path: Path) -> None:
    landing = write_landing(tmp_path / "landing", 20, 10, 2, providers=1, by_tuple_id=True)
    with pytest.raises(ValueError, match="tuple-scoped"):
        diy_peer.policies(landing)


def test_table13_quick_measures_every_row_and_rewrites_its_doc(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Quick mode (tiny sizes, one round) runs every figure and regenerates the marked
    block and both sections of its doc from its JSON; it says nothing about speed."""
    doc = tmp_path / "performance.md"
    doc.write_text(
        f"# x\n\nKEEP-ABOVE\n\n{table13.MARK_BEGIN}\nSTALE-ROW\n{table13.MARK_END}\n\n"
        "KEEP-BELOW\n\n## Other\n\nkept\n"
    )
    out = tmp_path / "r.json"
    args = ["--quick", "--json", str(out), "--doc", str(doc)]
    result = table13.main(args)
    assert len(result["table"]) == 11
    for row in result["table"]:
        assert re.search(r"[0-9]+\.[0-9]+", row["now"]), row
    floor = [row for row in result["table"] if row["met"] is None]
    assert [row["figure"].split(":")[0] for row in floor] == ["the floor"]  # not a target
    assert all(isinstance(row["met"], bool) for row in result["table"] if row not in floor)
    every = result["scans"]["large"]["cases"]["every row"]
    assert set(every) >= {"plain_s", "secured_s", "diy_s", "diy_over_secured"}
    assert all(t > 0 for k in ("plain_s", "secured_s", "diy_s") for t in every[k])
    assert result["scans"]["large"]["limits"]["rows"] == 2 * result["scans"]["small"]["rows"]
    assert result["latency"]["latency_s"] and result["latency"]["p50_s"] > 0
    plain = result["latency"]["plain"]["shapes"]
    assert set(plain) == {"one query", "two queries"}
    assert all(s["latency_s"] and s["p50_s"] > 0 for s in plain.values())
    assert set(result["load"]) >= {"before", "after", "scans", "ingest", "latency"}
    text = doc.read_text()
    assert "STALE-ROW" not in text and "KEEP-ABOVE" in text and "KEEP-BELOW" in text
    block = text[text.index(table13.MARK_BEGIN) : text.index(table13.MARK_END)]
    assert block.count("\n| ") == 1 + 11  # the header and every row
    assert table13.HEADING in text and table13.GROWTH_HEADING in text and "kept" in text
    # rendering from the JSON alone gives the same block
    doc.write_text(f"{table13.MARK_BEGIN}\n{table13.MARK_END}\n")
    table13.main([*args[1:], "--render"])
    rendered = doc.read_text()
    assert rendered[: rendered.index(table13.MARK_END)].strip() == block.strip()
