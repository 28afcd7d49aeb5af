"""Match rows carry the labels of the events they were built from, a pattern at a
Chinese-Wall level runs in its level's processor and matches only events that level
dominates, a NOT match reaches only recipients who could read every event it says is
absent, and a pattern whose Spark query fails shows ``failed`` with the error class
while another goes on (docs/cep.md "Labels of match rows").

Two running patterns at two levels over the same labelled file sources (the layout of
the labelled store): one delivering through :class:`~streamshield.engine.delivery.delivery.Delivery`
to four recipients with fewer rights than its owner in one way each, one whose source
raises on an event of the second batch. Aggregates and NOT matches over batch frames.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.cep.labelled_events import labelled_events
from streamshield.cep.match_labels import Absence, LabelLayout
from streamshield.cep.pattern import compile_pattern
from streamshield.cep.rule_book import RuleBook
from streamshield.cep.running import RunningPattern, Status
from streamshield.cep.spark import compile_pattern as compile_pattern_on_spark
from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.levels.level_processor import LevelProcessor, LevelProcessors
from streamshield.engine.store.labelled_store import labelled_schema
from streamshield.engine.views.labels import denied_column, reader_column
from streamshield.policy.cep_rules_text import loads
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.lattice import Lattice
from streamshield.policy.privileges import Privilege
from streamshield.policy.provenance import ProvenanceCodec
from streamshield.policy.query_level import QueryLevel, level_names
from streamshield.policy.roles import RoleHierarchy

pytestmark = pytest.mark.spark

HIERARCHY = RoleHierarchy.build(["owner", "low"])
CODEC = RoleCodec(HIERARCHY)
LATTICE = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B"]})
STREAMS = {
    "Temp": StreamDefinition(
        "Temp",
        (("id", "bigint"), ("room", "string"), ("celsius", "double"), ("ts", "timestamp")),
        "id",
        "ts",
    ),
    "Smoke": StreamDefinition(
        "Smoke",
        (("id", "bigint"), ("room", "string"), ("level", "bigint"), ("ts", "timestamp")),
        "id",
        "ts",
    ),
}
PROVENANCE = ProvenanceCodec(STREAMS)
TYPES = {
    "Temp": {"ts": "timestamp", "id": "long", "room": "string", "celsius": "double"},
    "Smoke": {"ts": "timestamp", "id": "long", "room": "string", "level": "long"},
}
EVERYTHING = [{"operator": "xi", "attributes": "*"}]
RULES = {
    "event_types": TYPES,
    "roles": {r: {"Temp": EVERYTHING, "Smoke": EVERYTHING} for r in ("owner", "low")},
}
FIRE = (
    "PATTERN SEQ(Temp a, Smoke b) WHERE a.room = b.room WITHIN 1 MINUTE "
    "RETURN a.room, a.celsius, b.level"
)
AT = QueryLevel(LATTICE, LATTICE.parse("[1, A]"))
LAYOUT = LabelLayout(CODEC.width, PROVENANCE.width, LATTICE.width)
BOTH, OWNER = ("owner", "low"), ("owner",)


def event(type_: str, id_: int, place: str, value: float, second: int, **labels) -> dict:
    """A labelled row: tuple readers ``tuple``, per-attribute readers by attribute name
    (default: the tuple's), level ``at`` (default ``[1, A]``)."""
    schema = STREAMS[type_]
    other = "celsius" if type_ == "Temp" else "level"
    row = {
        "stream": type_,
        "provider": "p",
        "seq": id_,
        "tid": str(id_),
        "policy_id": "x",
        "id": id_,
        "room": place,
        other: value if type_ == "Temp" else int(value),
        "ts": f"2026-11-23T10:00:{second:02d}Z",
    }
    tuple_roles = labels.get("tuple", BOTH)
    for obj, name in enumerate(("", *schema.names)):
        readers = CODEC.twins(
            labels.get(name, tuple_roles) if obj else tuple_roles, [Privilege.READ]
        )
        for w in range(CODEC.width):
            row[reader_column(obj, w)] = readers[w]
            row[denied_column(obj, w)] = 0
    level = LATTICE.encode(LATTICE.parse(labels.get("at", "[1, A]")))
    row.update(dict(zip(level_names(LATTICE.width), level, strict=True)))
    return row


def write(root, number: int, rows: list[dict]) -> None:
    for type_ in STREAMS:
        lines = [json.dumps(r) for r in rows if r["stream"] == type_]
        if lines:
            (root / type_ / f"{number}.json").write_text("\n".join(lines) + "\n")


def static_frames(spark, root, rows: list[dict]) -> dict:
    """The labelled events of each type, read once (not streamed) from ``rows``."""
    for type_ in STREAMS:
        (root / type_).mkdir()
    write(root, 0, rows)
    frames = {}
    for type_, schema in STREAMS.items():
        struct = labelled_schema(spark, schema.ddl, len(schema.names), CODEC.width, LATTICE.width)
        raw = spark.read.schema(struct).json(str(root / type_))
        frames[type_] = labelled_events(
            raw, schema, CODEC, OWNER, AT, PROVENANCE.label(type_), LAYOUT
        )
    return frames


def test_match_rows_carry_their_events_labels_and_level(spark, tmp_path) -> None:
    root = tmp_path / "store"
    for type_ in STREAMS:
        (root / type_).mkdir(parents=True)
    processors = LevelProcessors(spark, tmp_path / "queries")

    def sources(processor: LevelProcessor, failing: bool = False) -> dict:
        """Read in the processor's session, through a view *without* a level: only the
        processor's shepherd keeps events above the pattern's level away."""
        session = processor.session
        session.conf.set("spark.sql.shuffle.partitions", "1")  # a handful of rows
        out = {}
        for type_, schema in STREAMS.items():
            struct = labelled_schema(
                session, schema.ddl, len(schema.names), CODEC.width, LATTICE.width
            )
            raw = session.readStream.schema(struct).json(str(root / type_))
            if failing:  # an event this pattern's query cannot evaluate
                room = F.col("room")
                raw = raw.withColumn(
                    "room", F.when(room == "BOOM", F.raise_error(F.lit("no"))).otherwise(room)
                )
            out[type_] = labelled_events(
                raw, schema, CODEC, OWNER, None, PROVENANCE.label(type_), LAYOUT
            )
        return out

    masks = {
        "owner": CODEC.query(OWNER),
        "low": CODEC.query(["low"]),
        "below": CODEC.query(OWNER),  # the owner's roles at a level below [1, A]
        "temp-only": CODEC.query(OWNER),  # READ on Temp only
    }
    levels = {u: LATTICE.encode(AT.level) for u in masks}
    levels["below"] = LATTICE.encode(LATTICE.parse("[1, _]"))
    got: dict[str, list[tuple]] = {u: [] for u in masks}
    delivery = Delivery(
        lambda user: ({"Temp"} if user == "temp-only" else {"Temp", "Smoke"}, set()),
        PROVENANCE,
        roles=lambda s: masks[s.user],
        levels=lambda s: levels[s.user],
    )
    for user in masks:
        delivery.subscribe(
            user,
            lambda rows, u=user: got[u].extend(
                (r["a_room"], r["a_celsius"], r["b_level"], tuple(r.get("_masked") or ()))
                for r in rows
            ),
        )
    book = RuleBook(loads(json.dumps(RULES), HIERARCHY), HIERARCHY)
    pattern = compile_pattern(FIRE, TYPES)

    def running(name: str, failing: bool, sink, level, pattern=pattern) -> RunningPattern:
        return RunningPattern(
            pattern,
            OWNER,
            book,
            lambda processor, _roles: sources(processor, failing),
            lambda _rows: None,
            name=name,
            processors=processors,
            level=level,
            delay=timedelta(seconds=10),
            labels=LAYOUT,
            sink=sink,
        )

    labelled = running("labelled", False, delivery, AT)
    # Stateless (a union): the cheapest query that can fail on an event. At a level
    # dominating [1, A] (it must read the failing event), so another processor.
    rooms = compile_pattern("PATTERN OR(Temp a, Smoke b) WITHIN 1 MINUTE RETURN a.room", TYPES)
    above = QueryLevel(LATTICE, LATTICE.parse("[T, A]"))
    doomed = running("doomed", True, lambda frame, _id: frame.collect(), above, rooms)
    labelled.start()
    doomed.start()
    try:
        # Each in its level's processor: own session, own directory, state inside it.
        at_a, at_top = processors.of(labelled.holder), processors.of(doomed.holder)
        assert at_a is not None and at_top is not None and at_a is not at_top
        assert (at_a.level, at_top.level) == (AT, above)
        assert labelled.checkpoint == at_a.path("patterns", "labelled")
        assert doomed.checkpoint == at_top.path("patterns", "doomed")
        assert at_a.root not in at_top.root.parents and at_top.root not in at_a.root.parents
        assert {q.id for q in at_a.session.streams.active} == {labelled._query.id}
        write(
            root,
            0,
            [
                event("Temp", 1, "L1", 60, 1),  # L1: everyone with READ on both
                event("Smoke", 1, "L1", 3, 5),
                event("Smoke", 9, "L1", 8, 7, at="[1, B]"),  # above the pattern's level
                event("Temp", 2, "L2", 70, 2, celsius=OWNER),  # low: celsius masked
                event("Smoke", 2, "L2", 4, 6),
                event("Temp", 3, "L3", 80, 3, tuple=OWNER),  # low may not read the event
                event("Smoke", 3, "L3", 5, 8),
                event("Temp", 4, "L4", 90, 4, room=OWNER),  # the room chose the match
                event("Smoke", 4, "L4", 6, 9),
                event("Temp", 5, "L5", 95, 4, at="[1, B]"),  # never read at [1, A]
                event("Smoke", 5, "L5", 7, 9),
            ],
        )
        labelled.process()
        doomed.process()
        assert (labelled.checkpoint / "offsets" / "0").is_file()  # its state is there
        owner = sorted(got["owner"])
        assert owner == [
            ("L1", 60.0, 3, ()),
            ("L2", 70.0, 4, ()),
            ("L3", 80.0, 5, ()),
            ("L4", 90.0, 6, ()),
        ]  # not the [1, B] smoke in L1, nor the [1, B] temperature in L5
        assert sorted(got["low"]) == [("L1", 60.0, 3, ()), ("L2", None, 4, ("a_celsius",))]
        assert got["below"] == [] and got["temp-only"] == []
        assert doomed.observed() is Status.RUNNING

        for rows in got.values():
            rows.clear()
        write(
            root,
            1,
            [
                event("Temp", 6, "BOOM", 50, 20),  # fails the doomed pattern's query
                event("Temp", 7, "L7", 51, 21),
                event("Smoke", 7, "L7", 9, 22),
            ],
        )
        doomed.process()
        labelled.process()
        assert doomed.observed() is Status.FAILED
        assert doomed.reason == "USER_RAISED_EXCEPTION"  # the class, not the message
        assert labelled.observed() is Status.RUNNING  # the other goes on
        assert got["owner"] == [("L7", 51.0, 9, ())] == got["low"]
        assert set(processors.active()) == {at_a.name}  # the failed one left its own
    finally:
        labelled.stop()
        doomed.stop()
    assert processors.active() == {}  # gone with their last pattern, storage stays
    assert (tmp_path / "queries" / "levels" / at_a.name / "patterns" / "labelled").is_dir()


def test_aggregate_rows_carry_the_labels_of_all_their_matches(spark, tmp_path) -> None:
    """The same compiler over batch frames (the labels are expressions, whatever the
    trigger): a group is readable only if every match in it is (``bit_and``), an
    average is masked where one of its values is, a GROUP BY attribute chooses."""
    rows = [
        event("Temp", 1, "L1", 60, 1),
        event("Temp", 11, "L1", 62, 2, tuple=OWNER),  # a second L1 match low may not read
        event("Smoke", 1, "L1", 3, 5),
        event("Temp", 2, "L2", 70, 2, celsius=OWNER),
        event("Smoke", 2, "L2", 4, 6),
        event("Temp", 4, "L4", 90, 4, room=OWNER),
        event("Smoke", 4, "L4", 6, 9),
        event("Temp", 5, "L5", 95, 4),
        event("Smoke", 5, "L5", 7, 9, at="[1, B]"),  # the only L5 smoke: above [1, A]
    ]
    frames = static_frames(spark, tmp_path, rows)
    text = (
        "PATTERN SEQ(Temp a, Smoke b) WHERE a.room = b.room WITHIN 1 MINUTE "
        "RETURN a.room, count(*) AS n, avg(a.celsius) AS mean GROUP BY a.room"
    )
    output = compile_pattern_on_spark(
        compile_pattern(text, TYPES), frames, delay=timedelta(seconds=10), labels=LAYOUT
    )
    got: dict[str, list[tuple]] = {"owner": [], "low": []}
    delivery = Delivery(
        lambda _user: ({"Temp", "Smoke"}, set()),
        PROVENANCE,
        roles=lambda s: CODEC.query(OWNER if s.user == "owner" else ["low"]),
        levels=lambda _s: LATTICE.encode(AT.level),
        aggregate=True,
    )
    for user, rows_of in got.items():
        delivery.subscribe(
            user,
            lambda batch, rows_of=rows_of: rows_of.extend(
                (r["a_room"], r["n"], r["mean"], tuple(r.get("_masked") or ())) for r in batch
            ),
        )
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # a handful of rows
    try:
        delivery.deliver_to(output, 0, delivery.subscriptions)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    assert sorted(got["owner"]) == [
        ("L1", 2, 61.0, ()),
        ("L2", 1, 70.0, ()),
        ("L4", 1, 90.0, ()),
    ]
    assert got["low"] == [("L2", 1, None, ("mean",))]


def test_a_not_match_reaches_only_who_could_read_every_absent_event(spark, tmp_path) -> None:
    """A NOT match (no smoke between two temperatures) is information about every smoke
    event the pattern's view held: a recipient who could not read one must not get the
    NOT rows (she would learn of it from the row that is missing), whatever she may read
    of the rows' own events. Only the pattern's exact roles, at a level dominating its level,
    with READ on the negated stream, get them (docs/cep.md "NOT matches")."""
    public = "[1, _]"  # the events' level: below the pattern's [1, A]
    rows = [
        event("Temp", 1, "L1", 60, 1, at=public),
        event("Temp", 2, "L1", 61, 4, at=public),  # L1: no smoke between: a NOT match
        event("Temp", 3, "L2", 70, 1, at=public),
        event("Smoke", 3, "L2", 5, 2, at=public, tuple=OWNER),  # low may not read it
        event("Temp", 4, "L2", 71, 5, at=public),  # L2: the smoke blocks the match
    ]
    frames = static_frames(spark, tmp_path, rows)
    pattern = compile_pattern(
        "PATTERN SEQ(Temp a, NOT Smoke x, Temp b) WHERE a.room = b.room AND x.room = a.room "
        "WITHIN 1 MINUTE RETURN a.room, b.celsius",
        TYPES,
    )
    absence = Absence(
        CODEC.query(OWNER), LATTICE.encode(AT.level), (("Smoke", PROVENANCE.label("Smoke")),)
    )
    recipients = {  # user: (roles, level, streams she may READ)
        "owner": (OWNER, AT.level, {"Temp", "Smoke"}),
        "low": (("low",), AT.level, {"Temp", "Smoke"}),  # reads L1's temperatures
        "senior": (BOTH, AT.level, {"Temp", "Smoke"}),  # more roles: maybe fewer events
        "public": (OWNER, LATTICE.parse(public), {"Temp", "Smoke"}),  # reads every event
        "temp-only": (OWNER, AT.level, {"Temp"}),
    }
    got: dict[str, list[tuple]] = {user: [] for user in recipients}
    delivery = Delivery(
        lambda user: (recipients[user][2], set()),
        PROVENANCE,
        roles=lambda s: CODEC.query(recipients[s.user][0]),
        levels=lambda s: LATTICE.encode(recipients[s.user][1]),
    )
    for user, rows_of in got.items():
        delivery.subscribe(
            user,
            lambda batch, rows_of=rows_of: rows_of.extend(
                (r["a_room"], r["b_celsius"]) for r in batch
            ),
        )
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # a handful of rows
    try:
        for batch, layout in enumerate((replace(LAYOUT, absence=absence), LAYOUT)):
            output = compile_pattern_on_spark(
                pattern, frames, delay=timedelta(seconds=10), labels=layout
            )
            delivery.deliver_to(output, batch, delivery.subscriptions)
            if batch == 0:
                assert got["owner"] == [("L1", 61.0)]
                # low would otherwise get L1 and not L2, and so learn of L2's smoke
                assert got["low"] == got["senior"] == got["public"] == got["temp-only"] == []
                got["owner"].clear()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    assert got == {user: [] for user in recipients}  # no absence label: no one
