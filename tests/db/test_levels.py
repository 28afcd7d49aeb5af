"""Chinese-Wall classes, levels and clearances in the security catalog, on SQLite and
PostgreSQL (paper 2, sections 3-4).

Each rule has a test that tries to break it: non-administrators defining classes or
levels, a session activating a level above its clearance, a CI class with two companies
of one COI class, unknown companies, malformed level text, capacity, a stream level
below its channels'. The paper's cloud-auditing classes: COI1 = {1, 2}, COI2 = {A, B, C}.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from argon2 import PasswordHasher, Type
from sqlalchemy import Engine

from streamshield.catalog import levels as lv
from streamshield.catalog.audit import AuditFilter, Event, Outcome
from streamshield.catalog.bootstrap import init_admin
from streamshield.catalog.errors import AuthError, NotFound, PermissionDenied
from streamshield.catalog.security import SecurityCatalog, Session
from streamshield.catalog.streams import StreamDefinition
from streamshield.policy.lattice import Lattice

CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, type=Type.ID)
ADMIN_PW = "the administrator's passphrase"
PW = "a perfectly long password"
CLOUD = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})


@pytest.fixture
def sec(db_target: str | Path | Engine) -> SecurityCatalog:
    catalog = SecurityCatalog(db_target, password_hasher=CHEAP)
    init_admin(catalog, "root", ADMIN_PW)
    return catalog


@pytest.fixture
def root(sec: SecurityCatalog) -> Session:
    return sec.login("root", ADMIN_PW)


@pytest.fixture
def cloud(sec: SecurityCatalog, root: Session) -> SecurityCatalog:
    """The paper's classes, a MessageLog input stream and two users."""
    sec.define_coi_class(root, "COI1", ["1", "2"])
    sec.define_coi_class(root, "COI2", ["A", "B", "C"])
    sec.add_schema(root, "audit")
    definition = StreamDefinition("MessageLog", (("id", "bigint"), ("msgType", "string")), "id")
    sec.add_stream(root, "audit", definition)
    sec.create_role(root, "STAFF")
    for name in ("ann", "company1"):
        sec.add_user(root, name, PW, ["STAFF"])
    return sec


def _events(sec: SecurityCatalog, root: Session, event: Event) -> list:
    return [e for e in sec.audit_entries(root, AuditFilter()) if e.event is event]


def test_classes_are_stored_in_order_and_give_the_papers_lattice(sec, root) -> None:
    assert sec.lattice() is None and sec.level_assignment() is None  # levels are off
    assert sec.define_coi_class(root, "COI1", ["1", "2"]) == lv.CoiInfo("COI1", ("1", "2"))
    sec.define_coi_class(root, "COI2", ["A", "B", "C"])
    ci = sec.define_ci_class(root, "service5", ["B", "1"])
    assert ci == lv.CiInfo("service5", ("B", "1"), "[1, B]")
    lattice = sec.lattice()
    assert lattice is not None
    for text in ("[1, B]", "[⊥, T]", "[2, _]", "[T, T]"):
        assert lattice.encode(lattice.parse(text)) == CLOUD.encode(CLOUD.parse(text))
    info = sec.classes_info(root)
    assert [(c.name, c.companies) for c in info.coi] == [
        ("COI1", ("1", "2")),
        ("COI2", ("A", "B", "C")),
    ]
    assert info.ci == (lv.CiInfo("service5", ("1", "B"), "[1, B]"),)
    assert (info.capacity, info.public, info.trusted) == (64, "[⊥, ⊥]", "[T, T]")
    # appending a company and a class moves no existing bit
    before = lattice.encode(lattice.parse("[2, C]"))
    sec.add_company(root, "COI1", "3")
    sec.define_coi_class(root, "COI3", ["x1", "x2"])
    after = sec.lattice()
    assert after is not None and after.encode(after.parse("[2, C, _]")) == before
    assert after.dominated(after.parse("[3, _, _]"), after.parse("[T, _, _]"))
    assert [e.detail["coi_class"] for e in _events(sec, root, Event.DEFINE_COI_CLASS)] == [
        "COI1",
        "COI2",
        "COI3",
    ]
    assert _events(sec, root, Event.ADD_COMPANY)[0].detail == {
        "coi_class": "COI1",
        "company": "3",
        "bit": 5,
    }


def test_non_administrators_change_nothing_and_are_audited(cloud, root) -> None:
    ann = cloud.login("ann", PW)
    attempts = [
        lambda: cloud.define_coi_class(ann, "COI9", ["p", "q"]),
        lambda: cloud.add_company(ann, "COI1", "9"),
        lambda: cloud.define_ci_class(ann, "mine", ["1"]),
        lambda: cloud.set_stream_level(ann, "MessageLog", "[_, _]"),
        lambda: cloud.set_channel_level(ann, "MessageLog", "ann", "[1, _]"),
        lambda: cloud.remove_channel_level(ann, "MessageLog", "ann"),
        lambda: cloud.set_clearance(ann, "ann", "[T, T]"),
        lambda: cloud.clearance_of(ann, "root"),
        # refused before any lookup: unknown targets read the same
        lambda: cloud.set_stream_level(ann, "nothing", "[_, _]"),
        lambda: cloud.set_clearance(ann, "nobody", "[T, T]"),
    ]
    for attempt in attempts:
        with pytest.raises(PermissionDenied, match="CHANGE SYSTEM"):
            attempt()
    assert len(_events(cloud, root, Event.DENIED)) >= len(attempts)
    info = cloud.classes_info(ann)  # reading the classes is for everyone
    assert [c.name for c in info.coi] == ["COI1", "COI2"] and info.ci == ()
    assert cloud.clearance_of(ann, "ann") == "[⊥, ⊥]"  # no clearance was set
    assert cloud.stream_level("MessageLog") == CLOUD.public  # nothing was set
    with pytest.raises(NotFound):  # ann may not see the stream: as if it did not exist
        cloud.stream_level_info(ann, "MessageLog")


def test_bad_class_definitions_are_refused_naming_the_field(cloud, root) -> None:
    def refused(error: type, field: str, call, *words: str) -> None:
        with pytest.raises(error) as caught:
            call()
        assert caught.value.field == field, caught.value
        for word in words:
            assert word in caught.value.message, caught.value.message

    coi, ci = cloud.define_coi_class, cloud.define_ci_class
    refused(lv.InvalidLevel, "companies", lambda: coi(root, "COI9", ["p"]), "at least two")
    refused(lv.InvalidLevel, "companies", lambda: coi(root, "COI9", ["p", "p"]), "'p'")
    refused(lv.InvalidLevel, "name", lambda: coi(root, "T", ["p", "q"]), "not allowed")
    refused(lv.InvalidLevel, "companies", lambda: coi(root, "COI9", ["p", "a b"]), "'a b'")
    refused(lv.LevelExists, "name", lambda: coi(root, "coi1", ["p", "q"]), "'COI1'")
    refused(lv.LevelExists, "companies", lambda: coi(root, "COI9", ["p", "b"]), "'B'", "COI2")
    refused(lv.LevelConflict, "capacity", lambda: coi(root, "COI9", ["p", "q"], 128), "fixed")
    refused(lv.InvalidLevel, "companies", lambda: ci(root, "x", ["1", "2"]), "COI1", "'1'", "'2'")
    refused(lv.InvalidLevel, "companies", lambda: ci(root, "x", ["1", "Z"]), "unknown", "'Z'")
    refused(lv.UnknownLevelObject, "name", lambda: cloud.add_company(root, "NOPE", "q"), "NOPE")
    refused(lv.LevelExists, "company", lambda: cloud.add_company(root, "COI1", "A"), "COI2")
    ci(root, "service5", ["1", "B"])
    refused(lv.LevelExists, "name", lambda: ci(root, "SERVICE5", ["2"]), "service5")
    assert [c.name for c in cloud.classes_info(root).coi] == ["COI1", "COI2"]
    assert [c.name for c in cloud.classes_info(root).ci] == ["service5"]


def test_the_label_capacity_is_fixed_by_the_first_class(sec, root) -> None:
    with pytest.raises(lv.InvalidLevel, match="multiple of 64"):
        sec.define_coi_class(root, "BIG", ["a", "b"], capacity=100)
    many = [f"c{i:03d}" for i in range(64)]
    sec.define_coi_class(root, "BIG", many)
    with pytest.raises(lv.LevelConflict, match="capacity"):
        sec.define_coi_class(root, "MORE", ["x", "y"])
    with pytest.raises(lv.LevelConflict, match="capacity"):
        sec.add_company(root, "BIG", "c064")
    lattice = sec.lattice()
    assert lattice is not None and lattice.width == 1


def test_a_wider_first_class_spans_words(sec, root) -> None:
    sec.define_coi_class(root, "W", [f"w{i}" for i in range(70)], capacity=128)
    lattice = sec.lattice()
    assert lattice is not None and lattice.width == 2
    assert lattice.encode(lattice.parse("[w69]")) == (0, 1 << 5)


def test_stream_and_channel_levels(cloud, root) -> None:
    info = cloud.stream_level_info(root, "MessageLog")
    assert info == lv.StreamLevelInfo("MessageLog", "[⊥, ⊥]", False, ())  # public by default
    with pytest.raises(lv.InvalidLevel, match=r"\[1, ⊥\] is not dominated"):
        cloud.set_channel_level(root, "MessageLog", "company1", "[1, _]")  # above public
    cloud.set_stream_level(root, "MessageLog", "[T, T]")
    cloud.set_channel_level(root, "MessageLog", "company1", "[1, _]")
    info = cloud.set_stream_level(root, "MessageLog", "[1, T]")
    assert info == lv.StreamLevelInfo("MessageLog", "[1, T]", True, (("company1", "[1, ⊥]"),))
    with pytest.raises(lv.InvalidLevel, match=r"\[2, ⊥\] is not dominated .* \[1, T\]"):
        cloud.set_channel_level(root, "MessageLog", "ann", "[2, _]")
    with pytest.raises(lv.LevelConflict, match="'company1'"):
        cloud.set_stream_level(root, "MessageLog", "[_, T]")
    for unknown in ("nobody", "nobody.east", "company", ".company1", "company1x.east"):
        with pytest.raises(lv.UnknownLevelObject, match="provider"):
            cloud.set_channel_level(root, "MessageLog", unknown, "[1, _]")
    east = cloud.set_channel_level(root, "MessageLog", "company1.east", "[1, B]")  # her channel
    assert east.channels == (("company1", "[1, ⊥]"), ("company1.east", "[1, B]"))
    cloud.remove_channel_level(root, "MessageLog", "company1.east")
    with pytest.raises(lv.UnknownLevelObject, match="'nothing'") as caught:
        cloud.set_stream_level(root, "nothing", "[1, B]")
    assert caught.value.field == "stream"
    assignment = cloud.level_assignment()
    assert assignment is not None
    assert assignment.tuple_level("MessageLog", "company1") == CLOUD.parse("[1, _]")
    assert assignment.tuple_level("MessageLog", "ann") == CLOUD.parse("[1, T]")
    assert assignment.tuple_words("MessageLog", "company1") == CLOUD.encode(CLOUD.parse("[1,_]"))
    assert assignment.stream_level("other") == CLOUD.public
    after = cloud.remove_channel_level(root, "MessageLog", "company1")
    assert after.channels == ()
    with pytest.raises(lv.UnknownLevelObject, match="no level of its own"):
        cloud.remove_channel_level(root, "MessageLog", "company1")
    cloud.set_stream_level(root, "MessageLog", "[_, T]")  # no channel is in the way now
    assert cloud.stream_level("MessageLog") == CLOUD.parse("[_, T]")
    details = [e.detail for e in _events(cloud, root, Event.SET_STREAM_LEVEL)]
    assert details == [{"level": "[T, T]"}, {"level": "[1, T]"}, {"level": "[_, T]"}]  # ASCII
    assert [e.detail for e in _events(cloud, root, Event.SET_CHANNEL_LEVEL)] == [
        {"provider": "company1", "level": "[1, _]"},
        {"provider": "company1.east", "level": "[1, B]"},
    ]
    assert [e.detail for e in _events(cloud, root, Event.REMOVE_CHANNEL_LEVEL)] == [
        {"provider": "company1.east"},
        {"provider": "company1"},
    ]
    # the stream's owner (root) and whoever may see it read its level; ann may not
    cloud.grant(root, "VIEW OBJECT", _stream("MessageLog"), _user("ann"))
    cloud.set_channel_level(root, "MessageLog", "company1", "[_, B]")
    seen = cloud.stream_level_info(cloud.login("ann", PW), "MessageLog")
    assert (seen.level, seen.channels) == ("[⊥, T]", ())  # providers: administrators only
    assert cloud.stream_level_info(root, "MessageLog").channels == (("company1", "[⊥, B]"),)


def _stream(name: str):
    from streamshield.catalog.oxrbac import Kind, ObjectRef

    return ObjectRef(Kind.STREAM, name)


def _user(name: str):
    from streamshield.catalog.oxrbac import Grantee, GranteeKind

    return Grantee(GranteeKind.USER, name)


MALFORMED = [
    ("1, B", "syntax", "brackets"),
    ("[1,, B]", "syntax", "component 2 is empty"),
    ("[1]", "arity", "2 components"),
    ("[1, B, C]", "arity", "got 3"),
    ("[A, 1]", "wrong_class", "'A' is in class 'COI2'"),
    ("[1, Z]", "unknown_company", "unknown company 'Z'"),
    ("[1 2, B]", "syntax", "component 1"),
    ("[" + "x" * 500 + "]", "syntax", "too long"),
]


def test_malformed_levels_are_refused_with_the_lattice_kind(cloud, root) -> None:
    ann = cloud.login("ann", PW)
    for text, kind, words in MALFORMED:
        for call, *args in (
            (cloud.set_stream_level, root, "MessageLog"),
            (cloud.set_channel_level, root, "MessageLog", "ann"),
            (cloud.set_clearance, root, "ann"),
            (cloud.activate_level, ann),
        ):
            with pytest.raises(lv.InvalidLevel) as caught:
                call(*args, text)
            assert (caught.value.kind, caught.value.field) == (kind, "level"), text
            assert caught.value.message.startswith("level: ") and words in caught.value.message
    assert cloud.stream_level_info(root, "MessageLog").assigned is False


def test_levels_need_a_class_first(sec, root) -> None:
    with pytest.raises(lv.LevelConflict, match="no COI class"):
        sec.activate_level(root, "[_]")
    with pytest.raises(lv.LevelConflict, match="no COI class"):
        sec.set_clearance(root, "root", "[_]")
    with pytest.raises(lv.LevelConflict, match="no COI class"):
        sec.define_ci_class(root, "x", ["a"])
    assert sec.session_level(root) is None


def test_a_session_runs_at_most_at_its_clearance(cloud, root) -> None:
    ann = cloud.login("ann", PW)
    assert cloud.session_level(ann) == CLOUD.public  # deny by default
    with pytest.raises(lv.AboveClearance, match=r"\[1, ⊥\] is not dominated .* \[⊥, ⊥\]"):
        cloud.activate_level(ann, "[1, _]")
    assert cloud.set_clearance(root, "ann", "[1, T]") == ("[1, T]", 0)
    assert cloud.activate_level(ann, "[1, B]") == lv.SessionLevelInfo("ann", "[1, T]", "[1, B]")
    for above in ("[2, B]", "[T, _]", "[T, T]"):
        with pytest.raises(lv.AboveClearance):
            cloud.activate_level(ann, above)
    assert cloud.session_level(ann) == CLOUD.parse("[1, B]")  # refusals changed nothing
    other = cloud.login("ann", PW)
    cloud.activate_level(other, "[_, C]")
    assert cloud.session_level(other.token) == CLOUD.parse("[_, C]")  # per session
    denied = [e for e in _events(cloud, root, Event.DENIED) if e.actor == "ann"]
    assert len(denied) == 4 and denied[0].outcome is Outcome.DENIED
    assert denied[0].detail == {
        "request": "activate_level",
        "reason": "above clearance",
        "level": "[1, _]",
    }
    assert [e.detail["level"] for e in _events(cloud, root, Event.ACTIVATE_LEVEL)] == [
        "[1, B]",
        "[_, C]",
    ]
    # lowering the clearance lowers the sessions it no longer dominates, at once
    assert cloud.set_clearance(root, "ann", "[1, B]") == ("[1, B]", 1)
    assert cloud.session_level(ann) == CLOUD.parse("[1, B]")
    assert cloud.session_level(other) == CLOUD.public
    assert cloud.session_level_info(other) == lv.SessionLevelInfo("ann", "[1, B]", "[⊥, ⊥]")
    assert _events(cloud, root, Event.SET_CLEARANCE)[-1].detail == {
        "user": "ann",
        "clearance": "[1, B]",
        "sessions_lowered": 1,
    }
    cloud.logout(ann.token)
    with pytest.raises(AuthError):
        cloud.session_level(ann)
    with pytest.raises(AuthError):
        cloud.activate_level(ann, "[_, _]")


def test_stored_levels_keep_their_meaning_when_a_class_is_added(cloud, root) -> None:
    cloud.set_clearance(root, "ann", "[1, B]")
    cloud.set_stream_level(root, "MessageLog", "[T, B]")
    ann = cloud.login("ann", PW)
    cloud.activate_level(ann, "[1, _]")
    cloud.define_coi_class(root, "COI3", ["x1", "x2"])
    assert cloud.clearance_of(ann, "ann") == "[1, B, ⊥]"
    assert cloud.stream_level_info(root, "MessageLog").level == "[T, B, ⊥]"
    assert cloud.session_level_info(ann).level == "[1, ⊥, ⊥]"
    with pytest.raises(lv.AboveClearance):
        cloud.activate_level(ann, "[1, B, x1]")


def test_an_administrator_reads_any_clearance_others_only_their_own(cloud, root) -> None:
    cloud.set_clearance(root, "company1", "[1, _]")
    assert cloud.clearance_of(root, "company1") == "[1, ⊥]"
    with pytest.raises(lv.UnknownLevelObject):
        cloud.clearance_of(root, "nobody")
    with pytest.raises(lv.UnknownLevelObject):
        cloud.set_clearance(root, "nobody", "[1, _]")
    company1 = cloud.login("company1", PW)
    assert cloud.clearance_of(company1, "company1") == "[1, ⊥]"
    with pytest.raises(PermissionDenied):
        cloud.clearance_of(company1, "ann")
