"""User and role administration in the security catalog, on SQLite and PostgreSQL.

Each rule has a test that tries to break it: non-administrators, weak passwords,
unknown users and roles, cycles, a full role capacity, disabled users' sessions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from argon2 import PasswordHasher, Type
from click.testing import CliRunner
from sqlalchemy import Engine, text

from streamshield.catalog import administration as adm
from streamshield.catalog.audit import AuditFilter, Event, Outcome
from streamshield.catalog.bootstrap import AlreadyInitialised, init_admin
from streamshield.catalog.errors import AUTH_FAILED, AuthError, PermissionDenied, Throttled
from streamshield.catalog.security import SecurityCatalog, Session
from streamshield.catalog.store import set_role_capacity
from streamshield.catalog.throttle import ThrottlePolicy

CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1, type=Type.ID)
ADMIN_PW = "the administrator's passphrase"
PW = "a perfectly long password"


@pytest.fixture
def sec(db_target: str | Path | Engine) -> SecurityCatalog:
    catalog = SecurityCatalog(
        db_target,
        password_hasher=CHEAP,
        throttle=ThrottlePolicy(free_failures=2, window=600, base_delay=10, max_delay=100),
    )
    init_admin(catalog, "root", ADMIN_PW)
    return catalog


@pytest.fixture
def root(sec: SecurityCatalog) -> Session:
    return sec.login("root", ADMIN_PW)


def _user(sec: SecurityCatalog, root: Session, name: str, roles: list[str]) -> Session:
    """A user holding ``roles`` or else STAFF (a session needs a role), logged in."""
    if not roles and "STAFF" not in sec.catalog.hierarchy().roles:
        sec.create_role(root, "STAFF")
    sec.add_user(root, name, PW, roles or ["STAFF"])
    return sec.login(name, PW)


def test_bootstrap_makes_an_administrator_role_and_refuses_a_second_time(sec, root) -> None:
    assert [r.name for r in sec.roles_info(root)] == ["ADMIN"]
    # a later holder of ADMIN administers too (CHANGE SYSTEM granted to the role)
    deputy = _user(sec, root, "deputy", ["ADMIN"])
    sec.add_user(deputy, "ann", PW, [])
    assert [u.name for u in sec.users_info(deputy)] == ["ann", "deputy", "root"]
    with pytest.raises(AlreadyInitialised):
        init_admin(sec, "mallory", "another long password")
    with pytest.raises(AuthError):
        sec.login("mallory", "another long password")


def test_admin_init_cli_on_a_fresh_root(tmp_path: Path) -> None:
    from streamshield.cli import main

    secret = tmp_path / "pw"
    secret.write_text("short\n")
    runner = CliRunner()
    args = ["admin", "init", "--root", str(tmp_path / "r"), "--password-file", str(secret)]
    weak = runner.invoke(main, args)
    assert weak.exit_code != 0 and "password: at least 12" in weak.output
    assert "Traceback" not in weak.output
    secret.write_text(ADMIN_PW + "\n")
    done = runner.invoke(main, [*args, "--role-capacity", "128"])
    assert done.exit_code == 0, done.output
    catalog = SecurityCatalog(tmp_path / "r" / "catalog.db")
    assert catalog.login("admin", ADMIN_PW).roles == {"ADMIN"}
    assert catalog.catalog.hierarchy().capacity == 128
    again = runner.invoke(main, args)
    assert again.exit_code != 0 and "has users already" in again.output


@pytest.mark.parametrize(
    ("password", "says"),
    [
        ("", "required"),
        ("short", "at least 12"),
        (" " * 20, "whitespace"),
        ("Ann.Example", "at least 12"),
        ("ANN.EXAMPLE.ORG", "user name"),
        ("x" * (adm.MAX_PASSWORD + 1), "at most"),
    ],
)
def test_weak_passwords_are_refused_naming_the_field(sec, root, password, says) -> None:
    with pytest.raises(adm.WeakPassword, match=f"password: .*{says}") as refused:
        sec.add_user(root, "ann.example.org", password, [])
    assert refused.value.field == "password"
    with pytest.raises(adm.UnknownUser):
        sec.user_info(root, "ann.example.org")


def test_non_administrators_change_nothing_and_learn_nothing(sec, root) -> None:
    ann = _user(sec, root, "ann", [])
    attempts = [
        lambda: sec.add_user(ann, "eve", PW, []),
        lambda: sec.users_info(ann),
        lambda: sec.user_info(ann, "root"),
        lambda: sec.user_info(ann, "nobody"),  # same refusal as for an existing user
        lambda: sec.change_user_roles(ann, "ann", ["ADMIN"]),
        lambda: sec.reset_password(ann, "root", PW),
        lambda: sec.set_disabled(ann, "root", True),
        lambda: sec.create_role(ann, "EVIL"),
        lambda: sec.add_junior(ann, "ADMIN", "ADMIN"),
        lambda: sec.remove_junior(ann, "ADMIN", "X"),
    ]
    for attempt in attempts:
        with pytest.raises(PermissionDenied, match="CHANGE SYSTEM"):
            attempt()
    assert sec.user_info(ann, "ann") == adm.UserInfo("ann", ("STAFF",), False)
    assert [u.name for u in sec.users_info(root)] == ["ann", "root"]
    assert [r.name for r in sec.roles_info(ann)] == ["ADMIN", "STAFF"]
    assert sec.user_roles("ann") == {"STAFF"}
    denied = sec.audit_entries(root, AuditFilter(event=Event.DENIED))
    assert len(denied) == len(attempts)


def test_users_roles_and_names(sec, root) -> None:
    sec.create_role(root, "NURSE")
    info = sec.add_user(root, "nina", PW, ["NURSE"])
    assert info == adm.UserInfo("nina", ("NURSE",), False)
    with pytest.raises(adm.Exists):
        sec.add_user(root, "NINA", PW, [])
    with pytest.raises(adm.UnknownRole, match="roles: unknown roles \\['NOPE'\\]"):
        sec.add_user(root, "olga", PW, ["NOPE"])
    with pytest.raises(adm.AdminError, match="user names"):
        sec.add_user(root, "bad name!", PW, [])
    assert sec.change_user_roles(root, "nina", []).roles == ()
    with pytest.raises(adm.UnknownUser):
        sec.change_user_roles(root, "nobody", [])
    with pytest.raises(adm.UnknownRole):
        sec.change_user_roles(root, "nina", ["NOPE"])


def test_passwords_reset_and_change(sec, root) -> None:
    nina = _user(sec, root, "nina", [])
    sec.change_password(nina, PW, "nina's brand new password")
    with pytest.raises(AuthError):
        sec.login("nina", PW)
    nina = sec.login("nina", "nina's brand new password")
    with pytest.raises(adm.WeakPassword, match="new: "):
        sec.change_password(nina, "nina's brand new password", "nina")
    with pytest.raises(adm.WrongPassword, match="current"):
        sec.change_password(nina, "a wrong guess of it", "yet another long password")
    with pytest.raises(adm.WrongPassword):
        sec.change_password(nina, "a 2nd wrong guess", "yet another long password")
    with pytest.raises(Throttled):  # guessing through a session is throttled like a login
        sec.change_password(nina, "nina's brand new password", "yet another long password")
    sec.reset_password(root, "nina", "set by the administrator")
    assert sec.login("nina", "set by the administrator", client="c").user == "nina"
    with pytest.raises(adm.UnknownUser):
        sec.reset_password(root, "nobody", "set by the administrator")
    with sec.engine.connect() as db:
        details = db.execute(text("SELECT detail FROM audit")).scalars().all()
    assert not any("password" in d and ("nina's" in d or 'administrator"' in d) for d in details)
    assert not any(secret in "".join(details) for secret in (PW, "set by the administrator"))
    events = {e.event for e in sec.audit_entries(root)}
    assert {Event.CHANGE_PASSWORD, Event.RESET_PASSWORD} <= events


def test_disabling_ends_sessions_and_login_reads_like_a_wrong_password(sec, root) -> None:
    dora = _user(sec, root, "dora", [])
    other = sec.login("dora", PW)
    assert sec.set_disabled(root, "dora", True).disabled
    for session in (dora, other):
        with pytest.raises(AuthError):
            sec.session(session.token)
    with pytest.raises(AuthError) as refused:
        sec.login("dora", PW)
    assert str(refused.value) == AUTH_FAILED and type(refused.value) is AuthError
    failed = sec.audit_entries(root, AuditFilter(event=Event.LOGIN))[-1]
    assert failed.outcome is Outcome.FAILED and failed.detail["admin_only"] == {
        "reason": "disabled"
    }
    disabled = sec.audit_entries(root, AuditFilter(event=Event.DISABLE_USER))[-1]
    assert disabled.detail["sessions_ended"] == 2
    with pytest.raises(adm.SelfLockout):
        sec.set_disabled(root, "root", True)
    assert not sec.set_disabled(root, "dora", False).disabled
    assert sec.login("dora", PW).user == "dora"


def test_roles_and_the_hierarchy(sec, root) -> None:
    sec.create_role(root, "DOCTOR")
    role, hierarchy = sec.create_role(root, "CARDIO", ["DOCTOR"])
    assert role == adm.RoleInfo("CARDIO", ("DOCTOR",))
    assert hierarchy.roles == ("ADMIN", "DOCTOR", "CARDIO")  # appended, never re-sorted
    with pytest.raises(adm.Exists):
        sec.create_role(root, "cardio")
    with pytest.raises(adm.UnknownRole, match="juniors"):
        sec.create_role(root, "X", ["NOPE"])
    with pytest.raises(adm.InvalidHierarchy, match="name"):
        sec.create_role(root, "1BAD")
    with pytest.raises(adm.InvalidHierarchy, match="cycle"):
        sec.add_junior(root, "DOCTOR", "CARDIO")
    with pytest.raises(adm.InvalidHierarchy, match="cycle"):
        sec.add_junior(root, "DOCTOR", "DOCTOR")
    with pytest.raises(adm.UnknownRole) as unknown:
        sec.add_junior(root, "NOPE", "DOCTOR")
    assert unknown.value.field == "name"
    sec.create_role(root, "NURSE")
    info, hierarchy = sec.add_junior(root, "CARDIO", "NURSE")
    assert info.juniors == ("DOCTOR", "NURSE") and hierarchy.effective(["CARDIO"]) == {
        "CARDIO",
        "DOCTOR",
        "NURSE",
    }
    info, hierarchy = sec.remove_junior(root, "CARDIO", "DOCTOR")
    assert info.juniors == ("NURSE",)
    with pytest.raises(adm.UnknownRole):
        sec.remove_junior(root, "CARDIO", "DOCTOR")
    stored = sec.catalog.hierarchy()
    assert stored == hierarchy and stored.roles == ("ADMIN", "DOCTOR", "CARDIO", "NURSE")
    assert json.dumps([e.detail for e in sec.audit_entries(root)]).count("create_role") == 0
    assert {Event.CREATE_ROLE, Event.ADD_JUNIOR, Event.REMOVE_JUNIOR} <= {
        e.event for e in sec.audit_entries(root)
    }


def test_a_full_role_capacity_is_refused_with_a_way_forward(sec, root) -> None:
    for i in range(63):  # ADMIN + 63 = 64 roles: the default capacity
        sec.create_role(root, f"R{i}")
    with pytest.raises(adm.RoleCapacityReached, match="role-capacity"):
        sec.create_role(root, "ONE_TOO_MANY")
    assert len(sec.catalog.hierarchy().roles) == 64
    with sec._write() as db:
        set_role_capacity(db, 128)  # what a root created with --role-capacity 128 records
    assert sec.create_role(root, "ONE_TOO_MANY")[1].block_words == 2
