"""The pure level snapshot secure ingest and level-aware queries will read
(:mod:`streamshield.policy.level_assignment`): stored forms and deny-by-default."""

from __future__ import annotations

import pytest

from streamshield.policy.coi import LatticeError
from streamshield.policy.lattice import Lattice
from streamshield.policy.level_assignment import LevelAssignment, from_stored, to_stored

CLOUD = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})
WIDER = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"], "COI3": ["x1", "x2"]})


def test_stored_forms_round_trip_and_leave_bottom_out() -> None:
    for text in ("[_, _]", "[1, B]", "[T, _]", "[2, T]", "[T, T]"):
        level = CLOUD.parse(text)
        assert from_stored(CLOUD, to_stored(CLOUD, level)) == level
    assert to_stored(CLOUD, CLOUD.parse("[1, _]")) == {"COI1": "1"}
    assert to_stored(CLOUD, CLOUD.public) == {}


def test_a_stored_level_means_bottom_in_a_class_added_later() -> None:
    stored = to_stored(CLOUD, CLOUD.parse("[1, T]"))
    assert from_stored(WIDER, stored) == WIDER.parse("[1, T, _]")


def test_a_damaged_stored_level_is_an_error_not_a_guess() -> None:
    with pytest.raises(LatticeError, match="unknown class"):
        from_stored(CLOUD, {"COI9": "1"})
    with pytest.raises(LatticeError, match="unknown company"):
        from_stored(CLOUD, {"COI1": "Z"})
    with pytest.raises(LatticeError, match="is in class"):
        from_stored(CLOUD, {"COI1": "A"})


def test_unlabelled_streams_are_public_and_channels_override_their_stream() -> None:
    assignment = LevelAssignment(
        CLOUD,
        streams={"MessageLog": CLOUD.parse("[T, T]")},
        channels={("MessageLog", "company1"): CLOUD.parse("[1, _]")},
    )
    assert assignment.stream_level("unlabelled") == CLOUD.public
    assert assignment.tuple_level("unlabelled", "anyone") == CLOUD.public
    assert assignment.tuple_level("MessageLog", "company1") == CLOUD.parse("[1, _]")
    assert assignment.tuple_level("MessageLog", "companyB") == CLOUD.trusted
    assert assignment.tuple_words("MessageLog", "company1") == (1,)  # company 1 is bit 0
    assert assignment.tuple_words("MessageLog", "x") == CLOUD.encode(CLOUD.trusted)
