"""Event patterns with ``level_applications = separate``: a pattern runs in the level's
processor inside the server's own Spark application, which is not where the operator
asked a level's work to run; so a pattern at a level is refused with a 409 naming the
setting, before anything is recorded (never run in the shared application instead).
Without a level, or with levels in process, registration goes on as before."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streamshield.server import security_port as port
from streamshield.server.errors import Conflict, Invalid
from streamshield.server.event_patterns import SEPARATE_LEVELS, PatternService
from tests.unit.test_level_application import HIERARCHY, at


def service(tmp_path, separate: bool) -> PatternService:
    server = SimpleNamespace(
        root=tmp_path,
        pipeline=SimpleNamespace(queries=SimpleNamespace(hierarchy=HIERARCHY)),
        security=None,
        applications=object() if separate else None,
        rights_stamp=lambda: (0, 0),
    )
    return PatternService(server)


@pytest.fixture
def at_level(monkeypatch):
    def level_of(_security, session):
        return None if session == "no level" else at("[1, B]")

    def recorded(*_args):
        raise AssertionError("a refused pattern must not reach the catalog")

    monkeypatch.setattr(port, "session_query_level", level_of)
    monkeypatch.setattr(port, "add_query", recorded)
    monkeypatch.setattr(port, "set_query_status", recorded)


def test_a_pattern_at_a_level_is_refused_when_levels_run_apart(tmp_path, at_level) -> None:
    with pytest.raises(Conflict) as refused:
        service(tmp_path, separate=True).register("ann's session", "p", "PATTERN SEQ(A a)")
    assert refused.value.status == 409 and refused.value.code == "level_applications"
    assert refused.value.message == SEPARATE_LEVELS and "level_applications" in SEPARATE_LEVELS


def test_the_refusal_is_only_for_a_level_in_separate_applications(tmp_path, at_level) -> None:
    # past the refusal: the (unknown) event type is what these are refused for
    for separate, session in ((False, "ann's session"), (True, "no level")):
        with pytest.raises(Invalid, match="pattern"):
            service(tmp_path, separate).register(session, "p", "PATTERN SEQ(A a)")


def test_starting_a_stored_pattern_at_a_level_is_refused_too(tmp_path, at_level) -> None:
    patterns = service(tmp_path, separate=True)
    stored = SimpleNamespace(level=at("[1, B]"))
    patterns._get = lambda _session, _name: stored  # type: ignore[method-assign]
    with pytest.raises(Conflict, match="level_applications"):
        patterns.set_status("ann's session", "p", running=True)
