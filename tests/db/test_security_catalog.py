"""The security catalog on SQLite and PostgreSQL: authentication, sessions, OxRBAC, audit.

Each security rule has a test that tries to break it (the paper's scenario: Joe the
administrator, Ed the information provider, Al and Bob customers).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from argon2 import PasswordHasher, Type
from sqlalchemy import Engine, text

from streamshield.catalog import StreamDefinition
from streamshield.catalog.audit import AuditFilter, Event, Outcome
from streamshield.catalog.oxrbac import SYSTEM, Grantee, Kind, ObjectRef, Permission
from streamshield.catalog.refusal_budget import RefusalBudget
from streamshield.catalog.security import (
    AuthError,
    NotFound,
    PermissionDenied,
    QueryStatus,
    QuotaExceeded,
    RoleActivationError,
    SecurityCatalog,
    Session,
    Throttled,
)
from streamshield.catalog.throttle import ThrottlePolicy
from streamshield.policy.policy import Combine

CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, type=Type.ID)
ROLES = ["ADMIN", "CUSTOMER1", "CUSTOMER2", "PROVIDER", "ANALYST"]
EDGES = [("ANALYST", "CUSTOMER1")]  # an analyst is also a customer 1
IN1, IN2 = ObjectRef(Kind.STREAM, "in1"), ObjectRef(Kind.STREAM, "in2")
SCHEMA = ObjectRef(Kind.SCHEMA, "s")


def stream(name: str) -> StreamDefinition:
    return StreamDefinition(name, (("id", "bigint"), ("price", "double")), tid="id")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sec(db_target: str | Path | Engine, clock: Clock) -> SecurityCatalog:
    catalog = SecurityCatalog(
        db_target,
        password_hasher=CHEAP,
        clock=clock,
        throttle=ThrottlePolicy(free_failures=3, window=600, base_delay=10, max_delay=100),
    )
    catalog.catalog.set_roles(ROLES, EDGES)
    catalog.create_user("joe", "joe-pw", ["ADMIN"])  # bootstrap: owns SYSTEM
    joe = catalog.login("joe", "joe-pw")
    for name, roles in [("ed", ["PROVIDER"]), ("al", ["CUSTOMER1"]), ("bob", ["CUSTOMER2"])]:
        catalog.create_user(name, f"{name}-pw", roles, by=joe)
    catalog.create_user("ann", "ann-pw", ["ANALYST", "CUSTOMER2"], by=joe)
    return catalog


@pytest.fixture
def joe(sec: SecurityCatalog) -> Session:
    return sec.login("joe", "joe-pw")


@pytest.fixture
def world(sec: SecurityCatalog, joe: Session) -> SecurityCatalog:
    """Joe's schema s and streams in1, in2; every role may use the catalog."""
    sec.add_schema(joe, "s")
    sec.add_stream(joe, "s", stream("in1"))
    sec.add_stream(joe, "s", stream("in2"))
    for role in ROLES:
        sec.grant(joe, Permission.VIEW_CATALOG, SYSTEM, Grantee.role(role))
    return sec


def login(sec: SecurityCatalog, name: str, roles: list[str] | None = None) -> Session:
    return sec.login(name, f"{name}-pw", roles)


# --- users and authentication -------------------------------------------------------------


def test_only_the_first_user_is_created_without_a_session(sec: SecurityCatalog) -> None:
    with pytest.raises(PermissionDenied):
        sec.create_user("mallory", "pw", [])
    with pytest.raises(PermissionDenied):
        sec.create_user("mallory", "pw", [], by=login(sec, "al"))
    with pytest.raises(AuthError):
        sec.login("mallory", "pw")


def test_passwords_are_stored_as_argon2id_hashes(sec: SecurityCatalog) -> None:
    with sec.engine.connect() as connection:
        stored = connection.execute(text("SELECT password_hash FROM users")).scalars().all()
    assert all(h.startswith("$argon2id$") for h in stored)
    # no plaintext password inside a hash (a bare "pw" could occur in base64 by chance)
    assert not any("-pw" in h for h in stored)


def test_wrong_password_and_unknown_user_are_indistinguishable(sec: SecurityCatalog) -> None:
    with pytest.raises(AuthError) as wrong:
        sec.login("al", "guess")
    with pytest.raises(AuthError) as unknown:
        sec.login("nobody", "guess")
    assert type(wrong.value) is type(unknown.value) is AuthError
    assert str(wrong.value) == str(unknown.value) == "authentication failed"


def test_unknown_users_cost_a_password_check(
    sec: SecurityCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str | None] = []
    real = sec.passwords.verify

    def spy(stored: str | None, password: str) -> bool:
        checked.append(stored)
        return real(stored, password)

    monkeypatch.setattr(sec.passwords, "verify", spy)
    with pytest.raises(AuthError):
        sec.login("nobody", "guess")
    assert checked == [None]  # verified against the dummy hash, not skipped


def test_failed_logins_are_throttled_per_user(sec: SecurityCatalog, clock: Clock) -> None:
    for _ in range(3):
        with pytest.raises(AuthError):
            sec.login("al", "guess")
    with pytest.raises(Throttled) as throttled:
        sec.login("al", "al-pw")  # even the right password waits
    assert throttled.value.retry_after == pytest.approx(10)
    clock.now += 11
    with pytest.raises(AuthError):
        sec.login("al", "guess again")
    clock.now += 11
    with pytest.raises(Throttled):  # the wait doubled after one more failure
        sec.login("al", "al-pw")
    clock.now += 10
    assert sec.login("al", "al-pw").user == "al"
    assert sec.login("al", "al-pw").user == "al"  # success cleared the user's failures


def test_unknown_names_are_throttled_like_known_ones(sec: SecurityCatalog) -> None:
    for name in ("al", "nobody"):
        for _ in range(3):
            with pytest.raises(AuthError):
                sec.login(name, "guess")
        with pytest.raises(Throttled):
            sec.login(name, "guess")


def test_failed_logins_are_throttled_per_client(sec: SecurityCatalog) -> None:
    for name in ("al", "bob", "ed"):
        with pytest.raises(AuthError):
            sec.login(name, "guess", client="10.0.0.9")
    with pytest.raises(Throttled):
        sec.login("joe", "joe-pw", client="10.0.0.9")
    assert sec.login("joe", "joe-pw", client="10.0.0.10").user == "joe"


def test_a_throttled_login_flood_writes_a_bounded_number_of_audit_entries(
    sec: SecurityCatalog, joe: Session, clock: Clock
) -> None:
    """Each throttled attempt is refused; one address writes at most its budget of
    entries a window, and its next entry counts the rest."""
    # a budget window shorter than the throttle's wait (10 s), to see the next window
    sec.refusals = RefusalBudget(per_window=2, window_seconds=5, clock=lambda: clock.now)
    for _ in range(3):
        with pytest.raises(AuthError):
            sec.login("al", "guess", client="10.0.0.7")
    for _ in range(6):
        with pytest.raises(Throttled):
            sec.login("al", "al-pw", client="10.0.0.7")

    def throttled() -> list:
        entries = sec.audit_entries(joe, AuditFilter(event=Event.LOGIN))
        return [e for e in entries if e.outcome == Outcome.THROTTLED]

    assert len(throttled()) == 2 and all("suppressed" not in e.detail for e in throttled())
    clock.now += 5
    with pytest.raises(Throttled):
        sec.login("al", "al-pw", client="10.0.0.7")
    assert throttled()[-1].detail["suppressed"] == 4


def test_sessions_expire(sec: SecurityCatalog, clock: Clock) -> None:
    session = login(sec, "al")
    assert session.expires_at == clock.now + 3600
    assert sec.session(session.token) == session
    clock.now += 3600
    with pytest.raises(AuthError):
        sec.session(session.token)
    with pytest.raises(AuthError):
        sec.visible(session, Kind.STREAM)


def test_forged_tokens_and_hand_made_sessions_carry_no_authority(
    sec: SecurityCatalog, joe: Session
) -> None:
    with pytest.raises(AuthError):
        sec.session("A" * 43)
    with pytest.raises(AuthError):
        sec.session("")
    forged = Session("A" * 43, "joe", frozenset({"ADMIN"}), joe.expires_at)
    with pytest.raises(AuthError):
        sec.add_schema(forged, "x")
    al = login(sec, "al")
    # a real token with a claimed user and roles: the stored ones count
    claimed = Session(al.token, "joe", frozenset({"ADMIN"}), al.expires_at)
    with pytest.raises(PermissionDenied):
        sec.add_schema(claimed, "x")
    with sec.engine.connect() as connection:
        stored = connection.execute(text("SELECT token_hash FROM sessions")).scalars().all()
    assert al.token not in stored


def test_logout_invalidates(sec: SecurityCatalog) -> None:
    session = login(sec, "al")
    sec.logout(session.token)
    with pytest.raises(AuthError):
        sec.session(session.token)
    sec.logout(session.token)  # idempotent


def test_roles_the_user_lacks_cannot_be_activated(sec: SecurityCatalog) -> None:
    with pytest.raises(RoleActivationError):
        login(sec, "al", ["ADMIN"])
    with pytest.raises(RoleActivationError):
        login(sec, "al", ["CUSTOMER1", "ADMIN"])
    with pytest.raises(RoleActivationError):
        login(sec, "al", [])
    assert login(sec, "ann", ["CUSTOMER2"]).roles == {"CUSTOMER2"}
    assert login(sec, "ann").roles == {"ANALYST", "CUSTOMER2"}


def test_a_refused_role_activation_lists_the_roles_held(sec: SecurityCatalog) -> None:
    """Only after the right password: a wrong one says nothing about roles."""
    with pytest.raises(RoleActivationError) as refused:
        login(sec, "ann", ["ADMIN"])
    assert str(refused.value).endswith("you hold: ANALYST, CUSTOMER2")
    with pytest.raises(AuthError) as wrong:
        sec.login("ann", "not the password", ["ADMIN"], client="t")
    assert not isinstance(wrong.value, RoleActivationError)
    assert "ANALYST" not in str(wrong.value)


def test_role_names_at_login_are_matched_ignoring_case(sec: SecurityCatalog) -> None:
    assert login(sec, "ann", ["customer2"]).roles == {"CUSTOMER2"}
    assert login(sec, "ann", ["Analyst", "CUSTOMER2"]).roles == {"ANALYST", "CUSTOMER2"}
    with pytest.raises(RoleActivationError):
        login(sec, "ann", ["admin"])  # a role of the hierarchy she does not hold


def test_taking_a_role_away_ends_its_use_in_open_sessions(
    world: SecurityCatalog, joe: Session
) -> None:
    world.grant(joe, Permission.READ_TUPLE, IN1, Grantee.role("CUSTOMER2"))
    ann = login(world, "ann", ["CUSTOMER2"])
    assert world.check(ann, Permission.READ_TUPLE, IN1)
    world.set_user_roles(joe, "ann", ["ANALYST"])
    with pytest.raises(AuthError):  # no activated role is held any more
        world.session(ann.token)


# --- OxRBAC --------------------------------------------------------------------------------


def test_user_abstraction_layer_shows_only_what_may_be_seen(
    sec: SecurityCatalog, joe: Session
) -> None:
    sec.add_schema(joe, "s")
    sec.add_stream(joe, "s", stream("in1"))
    sec.add_stream(joe, "s", stream("in2"))
    bob = login(sec, "bob")
    assert sec.visible(bob, Kind.STREAM) == []
    sec.grant(joe, Permission.VIEW_OBJECT, IN1, Grantee.user("al"))
    assert sec.visible(login(sec, "al"), Kind.STREAM) == []  # no VIEW CATALOG: lists nothing
    sec.grant(joe, Permission.VIEW_CATALOG, SYSTEM, Grantee.role("CUSTOMER2"))
    assert sec.visible(bob, Kind.STREAM) == []
    assert sec.visible(joe, Kind.STREAM) == ["in1", "in2"]
    sec.grant(joe, Permission.VIEW_OBJECT, IN1, Grantee.role("CUSTOMER2"))
    sec.grant(joe, Permission.VIEW_OBJECT, SCHEMA, Grantee.user("bob"))
    assert sec.visible(bob, Kind.STREAM) == ["in1"]
    assert sec.visible(bob, Kind.SCHEMA) == ["s"]
    assert sec.visible(login(sec, "ed"), Kind.STREAM) == []


def test_role_grants_reach_senior_roles(world: SecurityCatalog, joe: Session) -> None:
    world.grant(joe, Permission.READ_TUPLE, IN1, Grantee.role("CUSTOMER1"))
    assert world.check(login(world, "ann", ["ANALYST"]), Permission.READ_TUPLE, IN1)
    assert not world.check(login(world, "ann", ["CUSTOMER2"]), Permission.READ_TUPLE, IN1)
    assert world.check("ann", Permission.READ_TUPLE, IN1)  # a user name: every held role


def test_invisible_objects_read_as_not_found(world: SecurityCatalog, joe: Session) -> None:
    al = login(world, "al")
    with pytest.raises(NotFound) as hidden:
        world.grant(al, Permission.READ_TUPLE, IN2, Grantee.user("al"))
    with pytest.raises(NotFound) as missing:
        world.grant(al, Permission.READ_TUPLE, ObjectRef(Kind.STREAM, "nope"), Grantee.user("al"))
    assert str(hidden.value) == str(missing.value).replace("nope", "in2")
    assert str(missing.value) == (
        "not found: stream nope (no such stream, or you lack VIEW OBJECT on it)"
    )
    world.grant(joe, Permission.VIEW_OBJECT, IN2, Grantee.user("al"))
    with pytest.raises(PermissionDenied) as denied:
        world.grant(al, Permission.READ_TUPLE, IN2, Grantee.user("al"))
    assert not isinstance(denied.value, NotFound)
    assert "CHANGE PERM" in str(denied.value)


def test_granting_needs_change_perm_or_the_grant_option(
    world: SecurityCatalog, joe: Session
) -> None:
    world.grant(joe, Permission.VIEW_OBJECT, IN1, Grantee.role("CUSTOMER1"))
    world.grant(joe, Permission.READ_TUPLE, IN1, Grantee.user("al"))
    al = login(world, "al")
    with pytest.raises(PermissionDenied):
        world.grant(al, Permission.READ_TUPLE, IN1, Grantee.user("bob"))
    assert not world.check("bob", Permission.READ_TUPLE, IN1)
    world.grant(joe, Permission.READ_TUPLE, IN1, Grantee.user("al"), with_grant_option=True)
    world.grant(al, Permission.READ_TUPLE, IN1, Grantee.user("bob"))
    assert world.check("bob", Permission.READ_TUPLE, IN1)
    with pytest.raises(PermissionDenied):  # the option covers READ TUPLE only
        world.grant(al, Permission.WRITE, IN1, Grantee.user("bob"))
    world.grant(joe, Permission.CHANGE_PERM, IN1, Grantee.user("al"))
    world.grant(al, Permission.WRITE, IN1, Grantee.user("bob"))
    with pytest.raises(PermissionDenied):  # CHANGE PERM does not pass itself on
        world.grant(al, Permission.CHANGE_PERM, IN1, Grantee.user("bob"))


def test_revoking_cascades_to_what_was_passed_on(world: SecurityCatalog, joe: Session) -> None:
    for user in ("al", "bob"):
        world.grant(joe, Permission.VIEW_OBJECT, IN1, Grantee.user(user))
    world.grant(joe, Permission.READ_TUPLE, IN1, Grantee.user("al"), with_grant_option=True)
    al = login(world, "al")
    world.grant(al, Permission.READ_TUPLE, IN1, Grantee.user("bob"), with_grant_option=True)
    bob = login(world, "bob")
    world.grant(bob, Permission.READ_TUPLE, IN1, Grantee.role("CUSTOMER1"))  # back to al's role
    with pytest.raises(PermissionDenied):  # bob may not revoke joe's grant to al
        world.revoke(bob, Permission.READ_TUPLE, IN1, Grantee.user("al"))
    assert world.revoke(joe, Permission.READ_TUPLE, IN1, Grantee.user("al")) == 3
    for user in ("al", "bob"):
        assert not world.check(user, Permission.READ_TUPLE, IN1)
    assert world.check("al", Permission.VIEW_OBJECT, IN1)


def test_revoking_a_grant_that_does_not_exist_is_not_found(
    world: SecurityCatalog, joe: Session
) -> None:
    from streamshield.catalog.errors import GrantNotFound

    with pytest.raises(GrantNotFound, match="no grant of READ TUPLE"):
        world.revoke(joe, Permission.READ_TUPLE, IN1, Grantee.user("al"))
    world.grant(joe, Permission.READ_TUPLE, IN1, Grantee.user("al"))
    assert world.revoke(joe, Permission.READ_TUPLE, IN1, Grantee.user("al")) == 1
    with pytest.raises(GrantNotFound):  # the second time there is nothing left
        world.revoke(joe, Permission.READ_TUPLE, IN1, Grantee.user("al"))


def test_only_authorised_senders_write_and_inject(world: SecurityCatalog, joe: Session) -> None:
    assert not world.can_write("ed", "in1")
    assert not world.can_inject("ed", "in1")
    world.grant(joe, Permission.WRITE, IN1, Grantee.role("PROVIDER"))
    assert world.can_write("ed", "in1")
    assert not world.can_write("al", "in1")
    assert not world.can_inject("ed", "in1")  # writing tuples is not injecting policies
    assert world.can_inject("joe", "in1")  # the owner
    world.grant(joe, Permission.INJECT_SP, IN1, Grantee.user("ed"))  # a delegate
    assert world.can_inject("ed", "in1")
    assert not world.can_inject("ed", "in2")
    assert not world.can_write("ed", "nope")


def test_streams_are_added_under_a_schema_with_add(world: SecurityCatalog, joe: Session) -> None:
    ed = login(world, "ed")
    with pytest.raises(NotFound):
        world.add_stream(ed, "s", stream("feed"))
    world.grant(joe, Permission.VIEW_OBJECT, SCHEMA, Grantee.user("ed"))
    with pytest.raises(PermissionDenied):
        world.add_stream(ed, "s", stream("feed"))
    world.grant(joe, Permission.ADD, SCHEMA, Grantee.user("ed"))
    world.add_stream(ed, "s", stream("feed"))
    assert world.catalog.stream("feed") == stream("feed")
    assert world.can_inject("ed", "feed")  # the owner of the new stream
    assert world.visible(ed, Kind.STREAM) == ["feed"]


def test_a_query_needs_add_and_read_rights_on_every_input(
    world: SecurityCatalog, joe: Session
) -> None:
    al = login(world, "al")
    with pytest.raises(PermissionDenied) as no_add:
        world.add_query(al, "q1", ["in1"])
    assert no_add.value.permission is Permission.ADD
    world.grant(joe, Permission.ADD, SYSTEM, Grantee.role("CUSTOMER1"))
    with pytest.raises(NotFound):
        world.add_query(al, "q1", ["in1"])
    world.grant(joe, Permission.VIEW_OBJECT, IN1, Grantee.role("CUSTOMER1"))
    world.grant(joe, Permission.VIEW_OBJECT, IN2, Grantee.role("CUSTOMER1"))
    with pytest.raises(PermissionDenied) as no_read:
        world.add_query(al, "q1", ["in1"])
    assert no_read.value.permission is Permission.READ_TUPLE
    world.grant(joe, Permission.READ_TUPLE, IN1, Grantee.role("CUSTOMER1"))
    world.grant(joe, Permission.READ_AGGREGATE, IN2, Grantee.role("CUSTOMER1"))
    record = world.add_query(al, "q1", ["in1", "in2"], output_stream="out1")
    assert (record.owner, record.roles, record.status) == ("al", {"CUSTOMER1"}, "running")
    assert world.queries() == [record]
    out1 = ObjectRef(Kind.STREAM, "out1")
    assert world.check(al, Permission.SUBSCRIBE, out1)  # the owner of the output
    assert not world.check("bob", Permission.SUBSCRIBE, out1)
    bob = login(world, "bob")
    with pytest.raises(NotFound):
        world.query(bob, "q1")
    assert world.queries(bob) == []


def test_a_registration_is_audited_once_with_its_outcome(
    world: SecurityCatalog, joe: Session
) -> None:
    """Added unaudited, then confirmed (one ``add_query ok``) or refused (one ``add_query
    refused`` with the code; the query and its output gone, their names free again)."""
    for permission in (Permission.ADD, Permission.VIEW_OBJECT, Permission.READ_TUPLE):
        world.grant(joe, permission, SYSTEM, Grantee.role("CUSTOMER1"))
    al = login(world, "al")

    def entries(name: str) -> list[tuple[str, str, dict]]:
        return [
            (e.event.value, e.outcome.value, dict(e.detail))
            for e in world.audit_entries(joe, AuditFilter(event=Event.ADD_QUERY))
            if e.object == ObjectRef(Kind.QUERY, name)
        ]

    world.add_query(al, "kept", ["in1"], output_stream="kept_out", audited=False)
    assert entries("kept") == []
    world.record_registration("al", "kept")
    (entry,) = entries("kept")
    assert entry[:2] == ("add_query", "ok") and entry[2]["output_stream"] == "kept_out"
    world.add_query(al, "gone", ["in1"], output_stream="gone_out", audited=False)
    world.record_registration("al", "gone", "query_rejected.unresolved_column")
    assert entries("gone") == [
        ("add_query", "refused", {"error": "query_rejected.unresolved_column"})
    ]
    assert [q.name for q in world.queries()] == ["kept"]
    assert not world.check(al, Permission.SUBSCRIBE, ObjectRef(Kind.STREAM, "gone_out"))
    world.add_query(al, "gone", ["in1"], output_stream="gone_out")  # the names are free
    world.record_registration("bob", "kept", "forged")  # not bob's: nothing removed
    assert {q.name for q in world.queries()} == {"kept", "gone"}


def test_a_registration_a_crash_kept_from_the_audit_is_audited_at_restart(
    world: SecurityCatalog, joe: Session, clock: Clock
) -> None:
    """Recorded unaudited, then the server died before the outcome: the restart that
    runs it writes its one ``add_query ok`` (restored); audited queries get no second,
    and a name reused after a removal is audited for its new registration."""
    for permission in (Permission.ADD, Permission.VIEW_OBJECT, Permission.READ_TUPLE):
        world.grant(joe, permission, SYSTEM, Grantee.role("CUSTOMER1"))
    al = login(world, "al")

    def entries(name: str) -> list[tuple[str, dict]]:
        return [
            (e.outcome.value, dict(e.detail))
            for e in world.audit_entries(joe, AuditFilter(event=Event.ADD_QUERY))
            if e.object == ObjectRef(Kind.QUERY, name)
        ]

    world.add_query(al, "cut", ["in1"], output_stream="cut_out", audited=False)
    world.add_query(al, "whole", ["in1"])  # audited at once
    assert world.audit_restored_registration("cut")
    ((outcome, detail),) = entries("cut")
    assert outcome == "ok" and detail["restored"] is True and detail["output_stream"] == "cut_out"
    assert not world.audit_restored_registration("cut")  # once
    assert not world.audit_restored_registration("whole")
    assert not world.audit_restored_registration("never_added")
    assert len(entries("whole")) == 1
    world.remove_query(al, "whole")
    clock.now += 1
    world.add_query(al, "whole", ["in1"], audited=False)  # the old entry is not this one's
    assert world.audit_restored_registration("whole")
    assert [outcome for outcome, _ in entries("whole")] == ["ok", "ok"]


def test_readable_sources_follow_grants_at_once(world: SecurityCatalog, joe: Session) -> None:
    assert world.readable_sources("al") == (set(), set())
    world.grant(joe, Permission.READ_TUPLE, IN1, Grantee.role("CUSTOMER1"))
    world.grant(joe, Permission.READ_AGGREGATE, IN2, Grantee.user("al"))
    assert world.readable_sources("al") == ({"in1"}, {"in1", "in2"})
    assert world.readable_sources(login(world, "ann", ["CUSTOMER2"])) == (set(), set())
    world.revoke(joe, Permission.READ_TUPLE, IN1, Grantee.role("CUSTOMER1"))
    assert world.readable_sources("al") == (set(), {"in2"})
    assert world.readable_sources("joe") == ({"in1", "in2"}, {"in1", "in2"})  # SYSTEM owner


def test_query_status_and_quota(world: SecurityCatalog, joe: Session) -> None:
    world.grant(joe, Permission.ADD, SYSTEM, Grantee.role("CUSTOMER1"))
    world.grant(joe, Permission.VIEW_OBJECT, IN1, Grantee.role("CUSTOMER1"))
    world.grant(joe, Permission.READ_TUPLE, IN1, Grantee.role("CUSTOMER1"))
    world.set_quota(joe, "al", max_running_queries=1)
    assert world.quota("al").max_running_queries == 1
    al, bob = login(world, "al"), login(world, "bob")
    world.add_query(al, "q1", ["in1"])
    with pytest.raises(QuotaExceeded):
        world.add_query(al, "q2", ["in1"])
    world.add_query(al, "q2", ["in1"], status=QueryStatus.STOPPED)
    with pytest.raises(NotFound):
        world.set_query_status(bob, "q1", QueryStatus.STOPPED)
    world.set_query_status(al, "q1", QueryStatus.STOPPED)
    world.set_query_status(al, "q2", QueryStatus.RUNNING)
    with pytest.raises(NotFound):
        world.remove_query(bob, "q2")
    world.remove_query(al, "q2")
    assert [q.name for q in world.queries()] == ["q1"]
    with pytest.raises(PermissionDenied):
        world.set_quota(al, "al", max_running_queries=100)


def test_settings_need_change_system(world: SecurityCatalog, joe: Session) -> None:
    assert world.settings()["quota.max_running_queries"] == 10
    with pytest.raises(PermissionDenied):
        world.set_setting(login(world, "al"), "secfilter", False)
    world.set_setting(joe, "secfilter", {"on": True})
    assert world.settings()["secfilter"] == {"on": True}
    world.set_setting(joe, "quota.max_running_queries", 0)
    assert world.quota("al").max_running_queries == 0


# --- audit ---------------------------------------------------------------------------------


def test_audit_records_and_confines_what_users_read(world: SecurityCatalog, joe: Session) -> None:
    with pytest.raises(AuthError):
        world.login("al", "guess", client="10.1.1.1")
    al = login(world, "al")
    with pytest.raises(PermissionDenied):
        world.add_schema(al, "mine")
    world.record_drop("al", IN1, 5, policy_ids=["p9", "p1"])
    everything = world.audit_entries(joe)
    failed = [e for e in everything if e.event is Event.LOGIN and e.outcome is Outcome.FAILED]
    assert failed[0].client == "10.1.1.1" and failed[0].actor is None
    assert any(e.event is Event.GRANT for e in everything)
    dropped = world.audit_entries(joe, AuditFilter(event=Event.DATA_DROPPED))
    assert [e.detail for e in dropped] == [
        {"dropped": 5, "policy_ids": ["p1", "p9"], "reason": "secfilter"}
    ]
    own = world.audit_entries(al)
    assert own and {e.actor for e in own} == {"al"}
    assert {e.event for e in own} >= {Event.LOGIN, Event.DENIED, Event.DATA_DROPPED}
    assert world.audit_entries(al, AuditFilter(actor="joe")) == []


def test_the_audit_log_is_append_only(world: SecurityCatalog) -> None:
    for statement in ("UPDATE audit SET actor = 'x'", "DELETE FROM audit"):
        with pytest.raises(Exception, match="append-only"), world.engine.begin() as connection:
            connection.execute(text(statement))


def test_the_sqlite_catalog_and_its_side_files_are_owner_only(tmp_path: Path) -> None:
    """It holds password and session-token hashes: 0600 whatever the umask, and a file
    left readable by others is tightened when opened. (PostgreSQL keeps its own files.)"""
    path = tmp_path / "catalog.db"
    old = os.umask(0o022)
    try:
        sec = SecurityCatalog(path)
        reader = sqlite3.connect(path)  # keeps the WAL and shared memory from removal
        reader.execute("SELECT count(*) FROM users").fetchall()
        sec.create_user("root", "root-password-1", [])
        files = [path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))]
        modes = {f.name: f.stat().st_mode & 0o777 for f in files}
        reader.close()
    finally:
        os.umask(old)
    assert modes == {f.name: 0o600 for f in files}
    os.chmod(path, 0o644)
    SecurityCatalog(path)
    assert path.stat().st_mode & 0o777 == 0o600


# --- attribute tags and server policies (CHANGE SYSTEM) -----------------------------------


def test_only_an_administrator_retags_a_stream_or_sets_a_server_policy(
    world: SecurityCatalog, joe: Session
) -> None:
    policy = "INSERT SP INTO STREAM LET DDP = ATTRIBUTES: TAGGED PHI, SRP = rbac:ADMIN"
    for user in ("ed", "al"):  # the stream's provider and a customer alike
        who = login(world, user)
        with pytest.raises(PermissionDenied):
            world.set_stream_tags(who, "in1", {"price": ["PHI"]})
        with pytest.raises(PermissionDenied):
            world.set_server_policy(who, "*", policy, Combine.UNION)
    assert world.catalog.stream("in1").tags == ()
    assert world.server_policies() == {}
    retagged = world.set_stream_tags(joe, "in1", {"price": ["phi", "Pii"]})
    assert world.catalog.stream("in1") == retagged
    assert retagged.tags_of == {"price": frozenset({"PHI", "PII"})}
    world.set_server_policy(joe, "*", policy, Combine.UNION)
    assert list(world.server_policies()) == ["*"]
    (tag_entry,) = world.audit_entries(joe, AuditFilter(event=Event.SET_STREAM_TAGS))
    assert tag_entry.detail["tags"] == {"price": ["PHI", "PII"]}
    refusals = [
        (e.actor, e.detail["request"])
        for e in world.audit_entries(joe, AuditFilter(event=Event.DENIED))
        if e.detail.get("request") in ("set_stream_tags", "set_server_policy")
    ]
    assert sorted(refusals) == sorted(
        (user, request)
        for user in ("ed", "al")
        for request in ("set_stream_tags", "set_server_policy")
    )
    policy_entry = world.audit_entries(joe, AuditFilter(event=Event.SET_SERVER_POLICY))[-1]
    assert policy_entry.detail["scope"] == "*" and policy_entry.outcome is Outcome.OK
    with pytest.raises(ValueError, match="not an attribute"):
        world.set_stream_tags(joe, "in1", {"nope": ["PHI"]})
    with pytest.raises(ValueError, match="one mode per stream"):  # in1 is under the UNION one
        world.set_server_policy(
            joe, "in1", policy.replace("STREAM", "STREAM in1", 1), Combine.INTERSECT
        )
