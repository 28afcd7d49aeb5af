"""Run the same element sequences through the reference shield and the Spark engine."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import ELEMENT_SCHEMA, Ingest
from streamshield.engine.ingest.tracker_state import StateStore
from streamshield.engine.store.labelled_store import LabelledStore, restored
from streamshield.engine.views import labels, scan_summary
from streamshield.examples import hospital
from streamshield.examples.hospital_catalog import stream_definitions
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Element
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.privileges import Privilege
from streamshield.policy.reader_range import reader_range
from streamshield.policy.shield import Reason, Schema, SecurityShield

STREAMS = {d.name: d for d in stream_definitions()}

LABELS_ALLOW_A_DENIED_TUPLE = "labels allow a denied tuple"
"""What an outcome says of a tuple that did not pass but whose labels allow the roles: the
secured view reads labels only (not ``reason``), so ingest must write such a tuple with
reader words that allow nobody; the reference never gives this reason."""

SCAN_SUMMARY_DISAGREES = "scan summary disagrees with the label words"
PREFILTER_DROPS_A_READABLE_TUPLE = "the range pre-filter drops a tuple the roles may read"
"""Outcomes the reference never gives: a stored ``_ss_scan_*`` summary that is not what
the row's words say, or a row the view's range test (a Parquet pre-filter) would skip
although its tuple test passes."""

Outcome = dict[tuple[str, str, int], tuple[str, frozenset[str], str | None]]


def reference(elements: Sequence[Element], roles: Iterable[str], server=None) -> Outcome:
    return reference_batches([elements], roles, server)


def shield_schemas(definitions: Mapping[str, StreamDefinition]) -> dict[str, Schema]:
    """What the reference shield knows of each stream: its attributes and their tags."""
    return {n: Schema(d.names, d.tags_of) for n, d in definitions.items()}


def reference_batches(
    batches: Sequence[Sequence[Element]],
    roles: Iterable[str],
    server=None,
    definitions: Sequence[Mapping[str, StreamDefinition]] = (),
) -> Outcome:
    """The reference's decisions over the batches in order, one shield throughout;
    ``definitions``: the stream definitions in force for each batch (tags may change
    between batches), the hospital's own when not given."""
    shield = SecurityShield(
        hospital.hierarchy(), list(roles), hospital.SCHEMAS, server or hospital.server_policies()
    )
    out: Outcome = {}
    for index, batch in enumerate(batches):
        if definitions:
            shield.schemas = shield_schemas(definitions[index])
        out.update(_outcome(shield.decisions(batch)))
    return out


def _outcome(decisions) -> Outcome:
    out: Outcome = {}
    for d in decisions:
        key = (d.element.channel.stream, d.element.channel.provider, d.element.seq)
        policy = (
            d.policy_id
            if d.reason in (Reason.PASS, Reason.NOT_AUTHORIZED, Reason.INVALID_POLICY)
            else None
        )
        out[key] = (d.reason.value, d.attributes, policy)
    return out


def spark_labelled(
    spark: SparkSession,
    tmp: Path,
    batches: Sequence[Sequence[Element]],
    server=None,
    flat: bool | None = None,
    definitions: Sequence[Mapping[str, StreamDefinition]] = (),
) -> dict[str, list]:
    """Labelled rows per stream after feeding the batches in order (collected).

    Between batches the shield state goes through its store and back, as on a restart.
    ``flat``: how every batch's tuples are collected (``Ingest.flat``: on the driver from
    one row per tuple, or grouped in Spark); None: the ways alternate, grouped first, so
    that every multi-batch conformance test decides through both. ``definitions``: the
    stream definitions in force for each batch, put into the ingest's mapping before it
    as the server does when an administrator retags a stream.
    """
    streams = dict(STREAMS)
    ingest = Ingest(spark, hospital.hierarchy(), streams, server or hospital.server_policies())
    store = StateStore(tmp / "state")
    width = RoleCodec(hospital.hierarchy()).width
    collected: dict[str, list] = {name: [] for name in STREAMS}
    for index, batch in enumerate(batches):
        path = tmp / f"batch-{index}.jsonl"
        path.write_text("\n".join(to_line(e) for e in batch) + "\n")
        frame = spark.read.schema(ELEMENT_SCHEMA).json(str(path))
        states = store.load(index)
        if definitions:
            streams.update(definitions[index])
        ingest.flat = bool(index % 2) if flat is None else flat
        for stream, labelled in ingest.label_batch(frame, states).items():
            # as every engine reads it, each left-out label word back; evaluated once
            words = labels.label_names(len(STREAMS[stream].names) + 1, width)
            layout = [*labelled.columns, *(w for w in words if w not in labelled.columns)]
            collected[stream].append(restored(labelled, layout).localCheckpoint())
        store.save(index, states)
    return {s: frames for s, frames in collected.items()}


def stored(spark: SparkSession, store: LabelledStore) -> dict[str, list]:
    """What an ingest job stored, per stream, read back as every engine reads it."""
    width = RoleCodec(hospital.hierarchy()).width
    return {
        s: [store.read(spark, STREAMS[s], width, summaries=True)]
        for s in STREAMS
        if store.path(s).exists()
    }


def any_reader(n_attributes: int, width: int) -> Column:
    """Whether any reader word of the tuple or an attribute, any privilege, is non-zero."""
    words = [
        F.col(labels.reader_column(obj, w)) != 0
        for obj in range(n_attributes + 1)
        for w in range(width)
    ]
    return reduce(lambda a, b: a | b, words)


def summary_disagrees(row, n_objects: int, codec: RoleCodec) -> bool:
    """Whether a row's scan summaries differ from what its label words say (the pure
    reference of policy.reader_range), when the row has them."""
    if row[scan_summary.LO] is None:
        return False  # read from files without summaries: nothing to check
    read = tuple(row[labels.reader_column(0, w)] for w in codec.block(Privilege.READ))
    return (row[scan_summary.LO], row[scan_summary.HI]) != reader_range(read)


def spark_outcome(labelled: dict[str, list], roles: Iterable[str]) -> Outcome:
    """Per element, what the Spark labels give ``roles``; also checks, on every row, the
    scan summaries against the label words and that the secured view's range test
    (``scan_summary.prefilter``) keeps every row the tuple test passes."""
    hierarchy = hospital.hierarchy()
    codec = RoleCodec(hierarchy)
    query = codec.query(roles)
    out: Outcome = {}
    for stream, frames in labelled.items():
        names = STREAMS[stream].names
        for frame in frames:
            summarised = scan_summary.LO in frame.columns
            kept = scan_summary.prefilter(query, frame.columns, len(hierarchy.roles))
            rows = frame.select(
                "stream",
                "provider",
                "seq",
                "reason",
                "policy_id",
                labels.allows(0, query).alias("_visible"),
                *(labels.allows(i, query).alias(f"_a{i}") for i in range(1, len(names) + 1)),
                any_reader(len(names), codec.width).alias("_any_reader"),
                F.coalesce(kept if kept is not None else F.lit(True), F.lit(False)).alias("_kept"),
                *(c for c in frame.columns if c.startswith(("_ss_r", "_ss_d"))),
                *(
                    (scan_summary.LO, scan_summary.HI)
                    if summarised
                    else (F.lit(None).alias(scan_summary.LO),)
                ),
            ).collect()
            for r in rows:
                if summary_disagrees(r, len(names) + 1, codec):
                    reason = SCAN_SUMMARY_DISAGREES
                elif r["_visible"] and not r["_kept"]:
                    reason = PREFILTER_DROPS_A_READABLE_TUPLE
                else:
                    reason = r["reason"]
                attrs: frozenset[str] = frozenset()
                if reason in (SCAN_SUMMARY_DISAGREES, PREFILTER_DROPS_A_READABLE_TUPLE):
                    pass
                elif reason == Reason.PASS.value:
                    if r["_visible"]:
                        attrs = frozenset(n for i, n in enumerate(names, 1) if r[f"_a{i}"])
                    else:
                        reason = Reason.NOT_AUTHORIZED.value
                elif r["_any_reader"]:
                    reason = LABELS_ALLOW_A_DENIED_TUPLE
                out[(r["stream"], r["provider"], r["seq"])] = (reason, attrs, r["policy_id"])
    return out
