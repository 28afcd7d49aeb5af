"""The CLI client against a live server and without one: one line, a distinct exit code.

Runs the real ``streamshield`` click command in-process (CliRunner) against the
module's TLS server; the failure cases need no server at all, or a wrong certificate.
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import threading
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from streamshield.cli import main
from streamshield.cli.output import (
    EXIT_LOCAL,
    EXIT_REFUSED,
    EXIT_SERVER,
    EXIT_SESSION,
    EXIT_TLS,
    EXIT_UNREACHABLE,
)
from streamshield.client import ClientError, Saved, save
from streamshield.server.body_limit import ELEMENTS_LIMIT
from streamshield.server.tls import ensure_self_signed
from tests.server.conftest import PASSWORD, Server, serve_root, stop_server, tuple_line

pytestmark = pytest.mark.spark


def _run(home: Path, *args: str, input: str | None = None):
    runner = CliRunner()
    env = {"STREAMSHIELD_HOME": str(home), "STREAMSHIELD_PASSWORD": PASSWORD}
    return runner.invoke(main, ["client", *args], env=env, input=input, catch_exceptions=False)


def _one_line_failure(result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
    assert "Traceback" not in result.output + result.stderr
    # The server runs in this process: its JSON log lines land on the same stderr.
    lines = [line for line in result.stderr.splitlines() if line.strip() and line[0] != "{"]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _login(server, home: Path, user: str = "joe", role: str = "ADMIN") -> None:
    result = _run(
        home,
        "login",
        "--url",
        server.url,
        "--ca",
        str(server.cert),
        "--user",
        user,
        "--role",
        role,
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert f"logged in as {user}" in result.output


@pytest.fixture(scope="module")
def joe_home(server, tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("joe_home")
    _login(server, home)
    for args in (
        (
            "add-schema",
            "blob_s",
            "--attribute",
            "id:bigint",
            "--attribute",
            "body:string",
            "--tid",
            "id",
        ),
        ("add-stream", "blobs", "--schema", "blob_s"),
    ):
        result = _run(home, *args)
        assert result.exit_code == 0, result.output + result.stderr
    return home


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- without a (reachable, trusted) server ------------------------------------------------


def test_an_unreachable_server_is_one_line_and_exit_3(tmp_path) -> None:
    save(Saved(f"https://127.0.0.1:{_free_port()}", "token"), tmp_path)
    line = _one_line_failure(_run(tmp_path, "catalog"), EXIT_UNREACHABLE)
    assert "cannot reach the server" in line


def test_no_session_is_exit_5(tmp_path) -> None:
    line = _one_line_failure(_run(tmp_path, "catalog"), EXIT_SESSION)
    assert "login" in line


@pytest.mark.parametrize("content", ["{not json", '{"token": "t"}', '{"url": 5}', "[]"])
def test_a_malformed_session_file_is_exit_7(tmp_path, content) -> None:
    (tmp_path / "session.json").write_text(content)
    line = _one_line_failure(_run(tmp_path, "catalog"), EXIT_LOCAL)
    assert "session" in line


def test_an_unreadable_input_file_is_a_usage_error_not_a_traceback(tmp_path) -> None:
    result = _run(tmp_path, "ingest", "blobs", str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 2 and "Traceback" not in result.output + result.stderr


def test_a_server_error_is_exit_6(tmp_path, monkeypatch) -> None:
    save(Saved("https://127.0.0.1:1", "token"), tmp_path)

    def failing(self):
        raise ClientError(500, "internal", "internal error")

    monkeypatch.setattr("streamshield.client.Client.catalog", failing)
    line = _one_line_failure(_run(tmp_path, "catalog"), EXIT_SERVER)
    assert "500" in line


# -- against the live server ----------------------------------------------------------------


def test_a_certificate_the_client_does_not_trust_is_exit_4(server, tmp_path) -> None:
    other = ensure_self_signed(tmp_path / "other-tls")  # a valid certificate, not the server's
    result = _run(
        tmp_path,
        "login",
        "--url",
        server.url,
        "--ca",
        str(other.cert),
        "--user",
        "joe",
        "--role",
        "ADMIN",
    )
    line = _one_line_failure(result, EXIT_TLS)
    assert "certificate" in line
    result = _run(tmp_path, "login", "--url", server.url, "--user", "joe", "--role", "ADMIN")
    _one_line_failure(result, EXIT_TLS)  # the system trust store does not know it either


def test_a_failed_login_is_exit_5(server, tmp_path) -> None:
    runner = CliRunner()
    args = [
        "client",
        "login",
        "--url",
        server.url,
        "--ca",
        str(server.cert),
        "--user",
        "mallory",
        "--role",
        "OTHER",
    ]
    env = {"STREAMSHIELD_HOME": str(tmp_path), "STREAMSHIELD_PASSWORD": "wrong password"}
    line = _one_line_failure(runner.invoke(main, args, env=env), EXIT_SESSION)
    assert "login failed" in line and not (tmp_path / "session.json").exists()


def test_an_expired_or_ended_session_is_exit_5(server, tmp_path) -> None:
    save(Saved(server.url, "forged-or-expired", str(server.cert)), tmp_path)
    line = _one_line_failure(_run(tmp_path, "catalog"), EXIT_SESSION)
    assert "login" in line
    _login(server, tmp_path)
    assert _run(tmp_path, "catalog").exit_code == 0
    saved = json.loads((tmp_path / "session.json").read_text())
    assert _run(tmp_path, "logout").exit_code == 0
    (tmp_path / "session.json").write_text(json.dumps(saved))  # the token of a logged-out session
    _one_line_failure(_run(tmp_path, "catalog"), EXIT_SESSION)


def test_a_refusal_is_exit_1_with_the_servers_message(server, joe_home) -> None:
    line = _one_line_failure(_run(joe_home, "stream", "no_such_stream"), EXIT_REFUSED)
    assert line.startswith("Error: 404")
    result = _run(joe_home, "query", "register", "bad_q", "SELECT nope FROM blobs")
    assert "nope" in _one_line_failure(result, EXIT_REFUSED)


def test_ingest_sends_any_size_in_chunks_and_reports_rejections_by_line(
    server, joe_home, tmp_path
) -> None:
    body = "x" * 4000
    count = (ELEMENTS_LIMIT * 5 // 4) // 4100  # the whole file is over the server's limit
    lines = [tuple_line("blobs", "joe", i, i, {"id": i, "body": body}) for i in range(1, count)]
    lines.insert(2, "{not json")  # line 3
    lines.append(tuple_line("elsewhere", "joe", count, count, {"id": count, "body": "y"}))
    feed = tmp_path / "big.jsonl"
    feed.write_text("\n".join(lines) + "\n")
    assert feed.stat().st_size > ELEMENTS_LIMIT
    result = _run(joe_home, "ingest", "blobs", str(feed))
    assert result.exit_code == EXIT_REFUSED, result.output + result.stderr
    assert f"accepted {count - 1}, rejected 2" in result.output
    assert "Traceback" not in result.output + result.stderr
    result = _run(joe_home, "--output", "json", "ingest", "blobs", str(feed), "--show", "5")
    summary = json.loads(result.output)
    assert summary["accepted"] == 0  # the same seqs again: all stale now
    assert summary["rejected"] == len(lines)
    assert [r["line"] for r in summary["rejections"]] == [1, 2, 3, 4, 5]
    good = "\n".join(
        tuple_line("blobs", "joe", count + i, count + i, {"id": count + i, "body": "z"})
        for i in (1, 2)
    )
    result = _run(joe_home, "ingest", "blobs", "-", input=good + "\n")
    assert result.exit_code == 0 and "accepted 2, rejected 0" in result.output


def test_the_last_rejection_keeps_its_absolute_line_number(server, joe_home, tmp_path) -> None:
    body = "x" * 4000
    n = (ELEMENTS_LIMIT * 5 // 4) // 4100
    lines = [tuple_line("blobs", "joe.b", i, i, {"id": i, "body": body}) for i in range(1, n)]
    lines.append(tuple_line("elsewhere", "joe.b", n, n, {"id": n, "body": "y"}))
    feed = tmp_path / "tail.jsonl"
    feed.write_text("\n".join(lines) + "\n")
    result = _run(joe_home, "-o", "json", "ingest", "blobs", str(feed))
    summary = json.loads(result.output)
    assert summary["rejected"] == 1 and summary["rejections"][0]["line"] == n, summary
    assert summary["rejections"][0]["reason"] == "stream_mismatch"


def test_every_command_answers_in_json(server, joe_home) -> None:
    catalog = json.loads(_run(joe_home, "catalog", "--output", "json").output)
    assert {"schemas", "streams", "queries"} <= set(catalog)
    stream = json.loads(_run(joe_home, "-o", "json", "stream", "blobs").output)
    assert stream["name"] == "blobs" and stream["tid"] == "id"
    settings = json.loads(_run(joe_home, "settings", "-o", "json").output)
    assert isinstance(settings, dict)
    audit = json.loads(_run(joe_home, "audit", "-o", "json", "--limit", "3").output)
    assert isinstance(audit["entries"], list)
    registered = json.loads(
        _run(joe_home, "query", "register", "json_q", "SELECT id FROM blobs", "-o", "json").output
    )
    assert registered["name"] == "json_q" and registered["output"] == "json_q_out"
    stopped = json.loads(_run(joe_home, "query", "stop", "json_q", "-o", "json").output)
    assert stopped["status"] == "stopped"
    assert json.loads(_run(joe_home, "query", "remove", "json_q", "-o", "json").output)
    table = _run(joe_home, "catalog").output
    assert "blobs" in table and "{" not in table.splitlines()[0]


def test_the_client_groups_output_option_holds_unless_the_command_gives_its_own(
    server, joe_home
) -> None:
    """``client -o json audit`` is JSON (the group's choice), as docs/api.md says; the
    command's own ``-o`` wins over it."""
    audit = json.loads(_run(joe_home, "-o", "json", "audit", "--limit", "2").output)
    assert isinstance(audit["entries"], list) and audit["entries"]
    queries = json.loads(_run(joe_home, "--output", "json", "query", "list").output)
    assert isinstance(queries["queries"], list)
    users = json.loads(_run(joe_home, "-o", "json", "user", "list").output)
    assert "joe" in {u["name"] for u in users["users"]}
    table = _run(joe_home, "-o", "json", "audit", "-o", "table", "--limit", "2").output
    assert table.lstrip().startswith("audit") and "actor" in table
    with pytest.raises(json.JSONDecodeError):
        json.loads(table)


def test_query_list_reads_at_80_columns(server, joe_home) -> None:
    """Nine columns in an 80-column terminal: every header whole on one line."""
    from streamshield.cli.operations import QUERY_COLUMNS

    assert _run(joe_home, "query", "register", "narrow_q", "SELECT id FROM blobs").exit_code == 0
    try:
        result = CliRunner().invoke(
            main,
            ["client", "query", "list"],
            env={"STREAMSHIELD_HOME": str(joe_home), "COLUMNS": "80"},
            catch_exceptions=False,
        )
    finally:
        _run(joe_home, "query", "remove", "narrow_q")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= 80 for line in lines), result.output
    header = next(line for line in lines if "name" in line and "owner" in line)
    cells = [cell.strip() for cell in header.replace("┃", "|").split("|")]
    assert cells == list(QUERY_COLUMNS.values()), result.output
    assert any("narrow_q" in line for line in lines)


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))


def test_every_command_help_has_an_example() -> None:
    runner = CliRunner()
    missing = []
    for path, command in _commands(main):
        if isinstance(command, click.Group) or path == ("serve",):
            continue  # serve's options belong to the configuration work (helper "ops")
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0, path
        if "Example" not in result.output or "streamshield " not in result.output:
            missing.append(" ".join(path))
    assert not missing, f"--help without an example: {missing}"


# -- providers: server-assigned seqs, the wire schema, the sample feed ------------------------


@pytest.fixture(scope="module")
def heart(server, joe_home) -> str:
    """Joe's stream ``heart`` in the sample feed's shape."""
    args = (
        "add-schema",
        "heart_s",
        "--attribute",
        "patient_id:bigint",
        "--attribute",
        "beats_per_min:double",
        "--attribute",
        "ts:bigint",
        "--tid",
        "patient_id",
        "--event-time",
        "ts",
    )
    assert _run(joe_home, *args).exit_code == 0
    assert _run(joe_home, "add-stream", "heart", "--schema", "heart_s").exit_code == 0
    return "heart"


def assigned_sp(stream: str, provider: str, roles: str) -> dict:
    """An sp granting ``roles`` the whole stream, without seq, ts or sn (the server
    assigns them, ``assign=seq``)."""
    return {
        "type": "sp",
        "provider": provider,
        "ddp": {"streams": stream, "tuples": "*", "attributes": "*"},
        "srp": {"roles": roles, "grant_option": False},
        "sign": "+",
        "immutable": False,
    }


def _landed(server, stream: str, provider: str) -> list[dict]:
    directory = server.service.pipeline.landing.stream_dir(stream)
    files = sorted(directory.glob(f"{provider}-*.jsonl"))
    return [json.loads(line) for path in files for line in path.read_text().splitlines()]


def test_sample_feed_piped_into_ingest_reaches_a_subscriber(server, joe_home, heart) -> None:
    from tests.server.conftest import Subscriber, poll

    joe = server.login("joe", ["ADMIN"])
    text = "SELECT patient_id, beats_per_min FROM heart"
    answer = joe.post("/queries", json={"name": "heart_q", "text": text})
    assert answer.status_code == 201, answer.text
    subscriber = Subscriber(joe, "heart_q")
    try:
        feed = CliRunner().invoke(
            main, ["sample-feed", "--stream", "heart", "--rows", "30", "--roles", "ADMIN"]
        )
        assert feed.exit_code == 0 and len(feed.output.splitlines()) == 31
        assert '"seq"' not in feed.output
        result = _run(joe_home, "ingest", "heart", "-", input=feed.output)
        assert result.exit_code == 0, result.output + result.stderr
        assert "accepted 31, rejected 0" in result.output
        rows = poll(lambda: len(subscriber.rows()) >= 30 and subscriber.rows(), timeout=120)
        assert {r["patient_id"] for r in rows} == set(range(120, 130))
        assert all(r["beats_per_min"] is not None for r in rows)
    finally:
        subscriber.close()
        joe.delete("/queries/heart_q")
    landed = _landed(server, "heart", "joe")
    assert [e["seq"] for e in landed] == list(range(1, 32))
    sp = landed[0]
    assert sp["type"] == "sp" and sp["sn"] == 1
    assert all(e["policy"] == {"ts": sp["ts"], "csn": 1} for e in landed[1:])


def test_assigned_seqs_continue_per_channel_and_never_race(server, heart) -> None:
    import threading

    joe = server.login("joe", ["ADMIN"])

    def plain(i: int) -> str:
        return json.dumps(
            {"provider": "joe.race", "values": {"patient_id": i, "beats_per_min": 60.0, "ts": i}}
        )

    answers: list[dict] = []

    def send(offset: int) -> None:
        body = "\n".join(plain(offset + i) for i in range(50))
        answer = joe.post("/streams/heart/elements", params={"assign": "seq"}, content=body)
        answers.append(answer.json())

    threads = [threading.Thread(target=send, args=(k * 100,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [a["accepted"] for a in answers] == [50] * 4, answers
    assert sorted(a["assigned"]["joe.race"] for a in answers) == [50, 100, 150, 200]
    landed = _landed(server, "heart", "joe.race")
    assert sorted(e["seq"] for e in landed) == list(range(1, 201))
    # a channel with no policy: the tuples land, declaring none, so the shield denies them
    assert all(e["policy"] == {"ts": 1, "csn": 0} for e in landed)


def test_assign_mode_refuses_own_seqs_and_follows_the_channels_policy(server, heart) -> None:
    joe = server.login("joe", ["ADMIN"])
    sp = assigned_sp("heart", "joe.p", "{ADMIN}")
    row = {"provider": "joe.p", "values": {"patient_id": 1, "beats_per_min": 70.0, "ts": 1}}
    body = "\n".join(json.dumps(x) for x in (sp, sp, row, {**row, "seq": 99}, row))
    answer = joe.post("/streams/heart/elements", params={"assign": "seq"}, content=body).json()
    assert answer["accepted"] == 4, answer
    assert [(r["line"], r["reason"]) for r in answer["rejections"]] == [(4, "seq_given")]
    later = joe.post(
        "/streams/heart/elements", params={"assign": "seq"}, content=json.dumps(row)
    ).json()
    assert later["accepted"] == 1 and later["assigned"] == {"joe.p": 5}
    landed = _landed(server, "heart", "joe.p")
    sps = [e for e in landed if e["type"] == "sp"]
    assert [e["sn"] for e in sps] == [1, 2] and sps[0]["ts"] == sps[1]["ts"]
    tuples = [e for e in landed if e["type"] == "tuple"]
    assert [e["policy"] for e in tuples] == [{"ts": sps[0]["ts"], "csn": 2}] * 3
    assert [e["seq"] for e in landed] == [1, 2, 3, 4, 5]
    assert all(e["tid"] == 1 for e in tuples)  # the stream's tid attribute, from values
    stale = joe.post("/streams/heart/elements", content=json.dumps(row)).json()
    assert stale["accepted"] == 0  # without assign=seq, seq is required as before


def test_the_wire_schema_is_served_without_login_and_documented(server) -> None:
    from streamshield.lang.wire import json_schema

    with server.client() as anonymous:
        answer = anonymous.get("/schema/wire")
    assert answer.status_code == 200
    schema = answer.json()
    assert schema == json_schema()
    assert {"tuple", "sp"} == set(schema["discriminator"]["mapping"])
    docs = Path(__file__).parents[2] / "docs" / "wire-format.md"
    text = docs.read_text()
    start = text.index("```json schema") + len("```json schema")
    documented = json.loads(text[start : text.index("```", start)])
    assert documented == json_schema(), "docs/wire-format.md is stale: regenerate its schema"


def test_the_bundled_sample_feed_is_the_generators_default() -> None:
    from streamshield.examples.sample_feed import bundled, sample_lines

    assert bundled() == "\n".join(sample_lines()) + "\n"


def test_a_subscriber_is_told_which_columns_are_masked(server, heart) -> None:
    from tests.server.conftest import Subscriber, poll

    joe = server.login("joe", ["ADMIN"])
    text = "SELECT patient_id, beats_per_min, ts FROM heart WHERE patient_id >= 900"
    assert joe.post("/queries", json={"name": "mask_q", "text": text}).status_code == 201
    subscriber = Subscriber(joe, "mask_q")
    try:

        def sp(attributes: str, roles: str) -> dict:
            ddp = {"streams": "heart", "tuples": "*", "attributes": attributes}
            srp = {"roles": roles, "grant_option": False}
            return {
                "type": "sp",
                "provider": "joe.m",
                "ddp": ddp,
                "srp": srp,
                "sign": "+",
                "immutable": False,
            }

        rows = [
            {"provider": "joe.m", "values": {"patient_id": 900 + i, "beats_per_min": 70.0, "ts": i}}
            for i in (1, 2)
        ]
        lines = [sp("{patient_id, ts}", "{ADMIN}"), sp("beats_per_min", "{OTHER}"), *rows]
        body = "\n".join(json.dumps(x) for x in lines)
        answer = joe.post("/streams/heart/elements", params={"assign": "seq"}, content=body)
        assert answer.json()["accepted"] == 4, answer.text
        got = poll(lambda: len(subscriber.rows()) >= 2 and subscriber.rows(), timeout=120)
    finally:
        subscriber.close()
        joe.delete("/queries/mask_q")
    assert {r["patient_id"] for r in got} == {901, 902}
    for row in got:
        assert row["beats_per_min"] is None and row["_masked"] == ["beats_per_min"], row
        assert not any(k.startswith("_ss_") for k in row)


def test_timestamps_keep_their_zone_and_a_tuple_without_its_event_time_is_refused(
    server, joe_home
) -> None:
    """``Z`` in, ``Z`` out (a time without a zone reads as anyone's local time); a tuple
    without the event time is refused by line, with the reason, instead of landing as
    a null that no window would ever count."""
    from datetime import UTC, datetime, timedelta

    from tests.server.conftest import Subscriber, poll, sp_line

    args = ("add-schema", "times_s", "--attribute", "id:bigint", "--attribute", "at:timestamp")
    assert _run(joe_home, *args, "--tid", "id", "--event-time", "at").exit_code == 0
    assert _run(joe_home, "add-stream", "times", "--schema", "times_s").exit_code == 0
    joe = server.login("joe", ["ADMIN"])
    answer = joe.post("/queries", json={"name": "times_q", "text": "SELECT id, at FROM times"})
    assert answer.status_code == 201, answer.text
    subscriber = Subscriber(joe, "times_q")
    hour = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)
    sent = {
        1: hour.isoformat().replace("+00:00", "Z"),
        3: (hour + timedelta(seconds=1)).isoformat(),
    }
    lines = [
        sp_line("times", "joe.t", 1, "{ADMIN}"),
        tuple_line("times", "joe.t", 2, 1, {"id": 1, "at": sent[1]}),
        tuple_line("times", "joe.t", 3, 2, {"id": 2}),  # no event time
        tuple_line("times", "joe.t", 4, 3, {"id": 3, "at": sent[3]}),  # +00:00
    ]
    try:
        result = _run(joe_home, "-o", "json", "ingest", "times", "-", input="\n".join(lines))
        summary = json.loads(result.output)
        assert (result.exit_code, summary["accepted"]) == (EXIT_REFUSED, 3), result.output
        (refused,) = summary["rejections"]
        assert (refused["line"], refused["reason"]) == (3, "missing_attribute")
        assert "values.at" in refused["message"]
        rows = poll(lambda: len(subscriber.rows()) >= 2 and subscriber.rows(), timeout=120)
    finally:
        subscriber.close()
        joe.delete("/queries/times_q")
    expected = (hour.isoformat(), (hour + timedelta(seconds=1)).isoformat())
    assert sorted((r["id"], r["at"]) for r in rows) == [
        (1, expected[0].replace("+00:00", "Z")),
        (3, expected[1].replace("+00:00", "Z")),
    ]


# -- docs/permissions.md's walk-through, line by line ------------------------------------------

WALKTHROUGH = Path(__file__).resolve().parents[2] / "docs" / "permissions.md"
DOC_URL = "https://127.0.0.1:8443"
_PASSWORD_FROM_FILE = re.compile(r"^(\w+)=\$\(cat (\S+)\) (.*)$")


def walkthrough_lines() -> list[str]:
    """The command lines of the ``sh`` block after the doc's walk-through marker."""
    after = WALKTHROUGH.read_text().split("<!-- walkthrough -->", 1)[1]
    block = after.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def _shell(line: str, url: str, home: Path) -> str:
    """Runs one line of the walk-through as a shell would (``NAME=$(cat FILE)`` before
    the command, ``a | b``), each ``streamshield`` in-process; its standard output."""
    env = {"STREAMSHIELD_HOME": str(home)}
    assigned = _PASSWORD_FROM_FILE.match(line)
    if assigned:
        name, path, line = assigned.groups()
        env[name] = Path(path).read_text().splitlines()[0]
    piped: str | None = None
    for command in line.split(" | "):
        argv = shlex.split(command.replace(DOC_URL, url))
        assert argv[0] == "streamshield", line
        result = _bounded(argv[1:], env, piped, line)
        assert result.exit_code == 0, (line, result.output, result.stderr)
        piped = result.output
    assert piped is not None
    return piped


def _bounded(args: list[str], env: dict[str, str], piped: str | None, line: str):
    """The command's result, or a failure after 120 s (a subscription waiting for rows
    that never come must not hang the suite)."""
    result: list = []

    def run() -> None:
        result.append(CliRunner().invoke(main, args, env=env, input=piped, catch_exceptions=False))

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(120)
    assert result, f"{line!r} did not finish in 120 s"
    return result[0]


def test_the_walkthrough_of_a_first_stream_runs_as_written(spark, tmp_path, monkeypatch) -> None:
    """From ``admin init`` on an empty root to the subscriber's rows, as the doc says it
    (one server for the whole walk-through: ``serve`` is this process's server on the
    root the doc names; the doc's URL is that server's)."""
    monkeypatch.chdir(tmp_path)
    for user in ("admin", "nora", "wes"):
        (tmp_path / f"{user}.pw").write_text(f"{user} walks through it\n")
    lines = walkthrough_lines()
    assert sum(line.startswith("streamshield serve ") for line in lines) == 1
    server: Server | None = None
    said: dict[str, str] = {}
    try:
        for line in lines:
            if line.startswith("streamshield serve "):
                assert "--root ./data" in line
                server = serve_root(tmp_path / "data", spark)
                continue
            said[line] = _shell(line, server.url if server else DOC_URL, tmp_path / "home")
    finally:
        if server is not None:
            stop_server(server)

    def output(command: str) -> str:
        (found,) = [text for line, text in said.items() if command in line]
        return found

    assert "HeartRate" in output("client catalog")  # nora sees the stream
    assert "accepted 6, rejected 0" in output("client ingest"), output("client ingest")
    rows = [json.loads(row) for row in output("client subscribe").splitlines()]
    assert len(rows) == 5 and all(set(r) >= {"patient_id", "beats_per_min"} for r in rows), rows
    assert all(r.get("_masked", []) == [] for r in rows), rows


WARD_POLICY = (
    "INSERT SP INTO STREAM LET DDP = ATTRIBUTES: TAGGED PHI, SRP = rbac:ADMIN;"
    "INSERT SP INTO STREAM LET DDP = ATTRIBUTES: NOT TAGGED PHI, SRP = rbac:{ADMIN, CUSTOMER1}"
)


def test_a_tag_policy_covers_a_stream_created_after_it_and_follows_its_tags(
    server, joe_home
) -> None:
    """An INTERSECT policy over every ``ward*`` stream, set before any exists: PHI
    attributes for ADMIN only, the rest for ADMIN and CUSTOMER1 too. A ward stream created
    later with a PHI attribute has it masked for Al (CUSTOMER1) and shown to Joe (ADMIN),
    through live subscriptions; retagging moves the mask from the next landed batch on;
    only an administrator may retag or set server policies."""
    from tests.server.conftest import Subscriber, poll

    policy = ("set-server-policy", "ward*", "--mode", "intersect", "--cql", WARD_POLICY)
    assert _run(joe_home, *policy).exit_code == 0
    schema = ("add-schema", "ward_s", "--attribute", "id:bigint", "--attribute", "note:string")
    schema += ("--attribute", "diagnosis:string", "--tid", "id", "--tag", "diagnosis:phi")
    assert _run(joe_home, *schema).exit_code == 0
    assert _run(joe_home, "add-stream", "ward_a", "--schema", "ward_s").exit_code == 0
    joe, al = server.login("joe", ["ADMIN"]), server.login("al", ["CUSTOMER1"])
    assert joe.get("/streams/ward_a").json()["tags"] == {"diagnosis": ["PHI"]}
    for permission, kind, name in [
        ("VIEW CATALOG", "system", "system"),
        ("VIEW OBJECT", "stream", "ward_a"),
        ("READ TUPLE", "stream", "ward_a"),
    ]:
        body = {"permission": permission, "kind": kind, "object": name, "role": "CUSTOMER1"}
        assert joe.post("/grants", json=body).status_code == 200
    # Al sees the stream but may change neither its tags nor any server policy
    assert al.put("/streams/ward_a/tags", json={"tags": {}}).status_code == 403
    assert al.get("/server-policies").status_code == 403
    body = {"cql": WARD_POLICY, "mode": "union"}
    assert al.put("/server-policies/ward_a", json=body).status_code == 403
    assert joe.get("/streams/ward_a").json()["tags"] == {"diagnosis": ["PHI"]}
    assert [p["scope"] for p in joe.get("/server-policies").json()["policies"]] == ["ward*"]
    query = {
        "name": "ward_q",
        "text": "SELECT id, note, diagnosis FROM ward_a",
        "output": "ward_q_out",
    }
    assert joe.post("/queries", json=query).status_code == 201
    for permission in ("VIEW OBJECT", "SUBSCRIBE"):
        body = {
            "permission": permission,
            "kind": "stream",
            "object": "ward_q_out",
            "role": "CUSTOMER1",
        }
        assert joe.post("/grants", json=body).status_code == 200
    watcher, reader = Subscriber(joe, "ward_q_out"), Subscriber(al, "ward_q_out")
    try:
        sp = assigned_sp("ward_a", "joe.w", "{ADMIN, CUSTOMER1}")

        def send(ids: range, first: list[dict] | None = None) -> None:
            rows = [
                {"provider": "joe.w", "values": {"id": i, "note": f"n{i}", "diagnosis": f"d{i}"}}
                for i in ids
            ]
            lines = [*(first or []), *rows]
            answer = joe.post(
                "/streams/ward_a/elements",
                params={"assign": "seq"},
                content="\n".join(json.dumps(x) for x in lines),
            )
            assert answer.json()["accepted"] == len(lines), answer.text

        def by_id(sub: Subscriber, n: int) -> dict[int, dict]:
            return poll(lambda: len(sub.rows()) >= n and {r["id"]: r for r in sub.rows()})

        send(range(1, 3), [sp])
        seen, shown = by_id(reader, 2), by_id(watcher, 2)
        for i in (1, 2):
            assert seen[i]["diagnosis"] is None and seen[i]["_masked"] == ["diagnosis"]
            assert seen[i]["note"] == f"n{i}"
            assert shown[i]["diagnosis"] == f"d{i}" and shown[i]["_masked"] == []
        result = _run(joe_home, "set-tags", "ward_a", "--tag", "note:PHI")
        assert result.exit_code == 0 and "note: PHI" in result.output
        send(range(3, 5))
        seen, shown = by_id(reader, 4), by_id(watcher, 4)
        for i in (3, 4):
            assert seen[i]["note"] is None and seen[i]["_masked"] == ["note"]
            assert seen[i]["diagnosis"] == f"d{i}"
            assert shown[i]["note"] == f"n{i}" and shown[i]["_masked"] == []
        assert seen[1]["_masked"] == ["diagnosis"]  # delivered rows are not relabelled
    finally:
        watcher.close()
        reader.close()
        joe.delete("/queries/ward_q")
    entries = joe.get("/audit", params={"action": "set_stream_tags"}).json()["entries"]
    assert [e["detail"]["tags"] for e in entries] == [{"note": ["PHI"]}]
