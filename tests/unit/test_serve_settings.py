"""``serve``'s configuration: precedence (options > environment > file > defaults),
strictness (unknown keys, wrong types: exit code 2, one line, no traceback), the
system settings' schema, and the audit log's newest-first paging without values."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamshield.cli import main
from streamshield.engine.tuning import SERVER
from streamshield.server.settings import ConfigError, ServeSettings, load, parse_conf
from streamshield.server.system_settings import SettingsRejected, validated


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("STREAMSHIELD_"):
            monkeypatch.delenv(name)


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.toml"
    path.write_text(text)
    return path


def test_defaults_are_the_embedded_setup() -> None:
    settings = load({})
    assert (settings.host, settings.port, settings.example) == ("127.0.0.1", 8443, True)
    assert settings.catalog_target == Path("streamshield-data") / "catalog.db"
    assert settings.spark_ui is False and settings.spark_conf == {}


def test_the_engine_runs_with_the_tuning_its_settings_choose(tmp_path) -> None:
    """Every speed setting reaches the engine as one value built at construction
    (engine/tuning.py); the defaults are the server's."""
    assert load({}).tuning() == SERVER
    path = _file(
        tmp_path,
        "share_windows = false\nfuse_branches = false\nshare_aggregates = false\n"
        "share_sliding = false\ndriven_scan = false\ndriven_ingest = false\n",
    )
    off = load({}, path).tuning()
    assert off == replace(
        SERVER,
        share_windows=False,
        fuse=False,
        share_aggregates=False,
        share_sliding=False,
        driven_scan=False,
        driven_ingest=False,
    )


def test_options_beat_environment_beat_file_beat_defaults(tmp_path, monkeypatch) -> None:
    config = _file(
        tmp_path,
        'port = 9001\nhost = "127.0.0.2"\nlog_level = "info"\nround_seconds = 2.5\n'
        '[spark_conf]\n"spark.a" = "file"\n"spark.b" = 4\n',
    )
    monkeypatch.setenv("STREAMSHIELD_PORT", "9002")
    monkeypatch.setenv("STREAMSHIELD_HOST", "127.0.0.3")
    monkeypatch.setenv("STREAMSHIELD_SPARK_CONF", '{"spark.b": "env", "spark.c": "env"}')
    settings = load({"port": 9003, "spark_conf": {"spark.c": "cli"}}, config)
    assert settings.port == 9003  # option
    assert settings.host == "127.0.0.3"  # environment over file
    assert settings.log_level == "info" and settings.round_seconds == 2.5  # file over defaults
    assert settings.example is True  # default
    # dictionaries merge key by key, each key from its highest source
    assert settings.spark_conf == {"spark.a": "file", "spark.b": "env", "spark.c": "cli"}


def test_config_file_named_by_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("STREAMSHIELD_CONFIG", str(_file(tmp_path, "example = false\n")))
    assert load({}).example is False


def test_catalog_url_is_used_as_given() -> None:
    url = "postgresql+psycopg://ss@db.example/ss"
    assert load({"catalog_url": url}).catalog_target == url


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("catalog_ulr = 'sqlite:///x.db'\n", "catalog_ulr: unknown setting"),
        ("port = 'many'\n", "port:"),
        ("port = 70000\n", "port:"),
        ("round_seconds = 0\n", "round_seconds:"),
        ("log_level = 'loud'\n", "log_level:"),
        ("[spark_conf]\nx = [1, 2]\n", "spark_conf.x"),
        ("port = \n", "not valid TOML"),
    ],
)
def test_malformed_files_are_refused_naming_the_key(tmp_path, text: str, named: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load({}, _file(tmp_path, text))
    assert named in str(refused.value)


def test_bad_environment_values_are_refused(monkeypatch) -> None:
    monkeypatch.setenv("STREAMSHIELD_PORT", "eighty")
    with pytest.raises(ConfigError, match="port"):
        load({})


def test_pairs_and_exposure_rules() -> None:
    with pytest.raises(ConfigError, match="tls_cert and tls_key go together"):
        load({"tls_cert": Path("cert.pem")})
    with pytest.raises(ConfigError, match="spark_ui"):
        load({"spark_ui": True, "host": "0.0.0.0"})
    assert load({"spark_ui": True}).spark_ui is True  # loopback host
    with pytest.raises(ConfigError, match="metrics_token"):
        load({"metrics_token": "short"})


def test_conf_pairs() -> None:
    assert parse_conf(["spark.a=1", "spark.b=x=y"]) == {"spark.a": "1", "spark.b": "x=y"}
    with pytest.raises(ConfigError, match="key=value"):
        parse_conf(["spark.a"])


def test_serve_refuses_a_bad_config_with_exit_code_2_and_one_line(tmp_path) -> None:
    config = _file(tmp_path, "prot = 8443\n")
    result = CliRunner().invoke(main, ["serve", "--config", str(config)])
    assert result.exit_code == 2
    assert "prot: unknown setting" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(main, ["serve", "--conf", "no-equals-sign"])
    assert result.exit_code == 2 and "key=value" in result.output


@pytest.mark.parametrize(
    "setting",
    [
        "fuse_branches",  # shared networks' plain selections in one pass (fused_branches.py)
        "driven_scan",  # networks read through the scan ingest's commits drive (driven_scan.py)
        "driven_ingest",  # ingest's micro-batch started by a landing (driven_ingest.py)
        "share_aggregates",  # aggregates without a window fold as network branches
        "share_sliding",  # sliding-window aggregates fold as network branches too
    ],
)
def test_a_default_on_engine_switch_turns_off_by_option_or_environment(
    setting: str, monkeypatch
) -> None:
    """Each engine switch the server turns on by default is off with ``--no-<switch>`` or
    ``STREAMSHIELD_<SWITCH>=false``, and the option reaches the server's settings."""
    assert getattr(load({}), setting) is True
    variable = f"STREAMSHIELD_{setting.upper()}"
    monkeypatch.setenv(variable, "false")
    assert getattr(load({}), setting) is False
    monkeypatch.delenv(variable)
    started: list[ServeSettings] = []

    def run_server(settings: ServeSettings, _echo) -> int:
        started.append(settings)
        return 0

    monkeypatch.setattr("streamshield.server.main.run_server", run_server)
    flag = setting.replace("_", "-")
    for option, on in ((f"--no-{flag}", False), (f"--{flag}", True)):
        assert CliRunner().invoke(main, ["serve", option]).exit_code == 0
        assert getattr(started.pop(), setting) is on


def test_every_setting_is_documented_in_help_and_readme() -> None:
    help_text = CliRunner().invoke(main, ["serve", "--help"]).output
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for name in ServeSettings.model_fields:
        assert f"STREAMSHIELD_{name.upper()}" in readme, name
        # metrics_token: a secret, environment or file, never argv; oidc: tables of
        # issuers, file (or environment as JSON) only
        if name not in ("metrics_token", "oidc"):
            assert f"STREAMSHIELD_{name.upper()}" in help_text or name == "spark_conf", name


# -- system settings (GET/PUT /system/settings) ------------------------------------------------


def test_system_settings_schema() -> None:
    good = {"quota.max_running_queries": 3, "operator_limits": {"default": {"max_queries": 2}}}
    assert validated(good) == good
    for bad, key in [
        ({"quota.max_running_queries": "abc"}, "quota.max_running_queries"),
        ({"quota.max_running_queries": True}, "quota.max_running_queries"),
        ({"quota.max_state_rows": -1}, "quota.max_state_rows"),
        ({"quota": 5}, "quota"),
        ({"operator_limits": {"default": {"max_rows": "lots"}}}, "operator_limits"),
        ({"operator_limits": None}, "operator_limits"),
    ]:
        with pytest.raises(SettingsRejected) as refused:
            validated(bad)
        assert [k for k, _ in refused.value.problems] == [key], bad
        assert "abc" not in str(refused.value) and "lots" not in str(refused.value)


# -- the audit log: newest first, paged, admin_only stripped ------------------------------------


def test_audit_reads_newest_first_in_pages_and_strips_admin_only(tmp_path) -> None:
    from streamshield.catalog import audit
    from streamshield.catalog.audit import AuditFilter, Event, Outcome
    from streamshield.catalog.database import open_engine, transaction
    from streamshield.catalog.tables import metadata

    engine = open_engine(tmp_path / "audit.db")
    metadata.create_all(engine)
    now = time.time()
    with transaction(engine, write=True) as db:
        for i in range(5):
            detail = {"n": i, "admin_only": {"message": "value 4242"}}
            audit.record(db, now + i, Event.GRANT, Outcome.OK, actor="al", detail=detail)
    with transaction(engine) as db:
        first = audit.read(db, AuditFilter(limit=2, newest_first=True), None)
        assert [e.detail["n"] for e in first] == [4, 3]
        assert first[0].detail["admin_only"] == {"message": "value 4242"}  # administrator
        page = audit.read(db, AuditFilter(limit=2, newest_first=True, before_id=first[-1].id), "al")
        assert [e.detail["n"] for e in page] == [2, 1]
        assert all("admin_only" not in e.detail for e in page)
        window = AuditFilter(since=now + 1, until=now + 3, newest_first=True)
        assert [e.detail["n"] for e in audit.read(db, window, "al")] == [2, 1]


def test_jvm_class_archive_is_written_aside_then_kept(tmp_path) -> None:
    from streamshield.engine.session import class_cache, keep_class_cache, with_java_option

    option, pending = class_cache(tmp_path)
    assert pending is not None and option == f"-XX:ArchiveClassesAtExit={pending} -Xlog:cds*=error"
    keep_class_cache(pending)  # the JVM wrote nothing (killed): nothing is kept
    assert class_cache(tmp_path)[0].startswith("-XX:ArchiveClassesAtExit=")
    pending.write_bytes(b"archive")
    keep_class_cache(pending)
    option, again = class_cache(tmp_path)
    assert again is None and option.startswith("-XX:SharedArchiveFile=")
    assert option.endswith(".jsa") and not pending.exists()
    conf = with_java_option({"spark.driver.extraJavaOptions": "-Dmine=1"}, option)
    assert conf["spark.driver.extraJavaOptions"] == f"{option} -Dmine=1"


def test_jvm_class_archive_is_named_by_its_class_path(tmp_path) -> None:
    """Another install (new jars: a CI's fresh clone) or another JVM gets an archive of
    its own; an install's archive is found again by the next start of that install."""
    import os

    from streamshield.engine.session import class_cache, class_path_digest, keep_class_cache

    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"classes")
    java = tmp_path / "java"
    java.write_bytes(b"jvm")
    first = class_path_digest(jars, str(java))
    assert class_path_digest(jars, str(java)) == first  # the same install: the same name
    os.utime(jars / "spark-core.jar", ns=(1, 1))  # reinstalled: the JVM would refuse it
    reinstalled = class_path_digest(jars, str(java))
    assert reinstalled != first
    assert class_path_digest(jars, str(tmp_path / "other-java")) != reinstalled

    cache = tmp_path / "cache"
    _, pending = class_cache(cache, first)
    assert pending is not None
    pending.write_bytes(b"archive")
    keep_class_cache(pending)
    assert class_cache(cache, first)[1] is None  # found again: mapped, not rewritten
    option, other = class_cache(cache, reinstalled)  # the old one is not the new install's
    assert other is not None and option.startswith(f"-XX:ArchiveClassesAtExit={other} ")


def test_jvm_class_archives_beyond_the_newest_few_are_removed(tmp_path) -> None:
    import os
    import subprocess
    import sys

    from streamshield.engine.session import KEPT_ARCHIVES, class_cache, keep_class_cache

    written = []
    for n in range(KEPT_ARCHIVES + 2):
        _, pending = class_cache(tmp_path, f"install{n}")
        assert pending is not None
        pending.write_bytes(b"archive")
        keep_class_cache(pending)
        archive = next(tmp_path.glob(f"classes-*-install{n}.jsa"))
        os.utime(archive, (1000 + n, 1000 + n))  # written in this order
        written.append(archive)
    kept = sorted(tmp_path.glob("classes-*.jsa"))
    assert len(kept) == KEPT_ARCHIVES and written[-1] in kept and written[0] not in kept
    # a pending archive whose writer is gone is removed at the next start; a live one stays
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    orphan = tmp_path / f"classes-4-x.jsa.{gone.pid}.new"
    mine = tmp_path / f"classes-4-x.jsa.{os.getpid()}.new"
    orphan.write_bytes(b"half")
    mine.write_bytes(b"half")
    class_cache(tmp_path, "another")
    assert not orphan.exists() and mine.exists()


def test_the_servers_heap_is_sized_once_and_the_operator_wins() -> None:
    from streamshield.engine.session import DRIVER_JAVA_OPTIONS, fixed_heap, with_java_option

    assert fixed_heap({}) == "-Xms2g -XX:+AlwaysPreTouch"  # the default spark.driver.memory
    mine = {"spark.driver.memory": "3g", DRIVER_JAVA_OPTIONS: "-XX:-AlwaysPreTouch"}
    conf = with_java_option(mine, fixed_heap(mine))
    # the operator's options come later on the JVM's command line, so they win
    assert conf[DRIVER_JAVA_OPTIONS] == "-Xms3g -XX:+AlwaysPreTouch -XX:-AlwaysPreTouch"


def test_subscriber_bounds_and_the_catalog_poll_are_serve_options(monkeypatch) -> None:
    """The slow-subscriber bounds and the catalog view's poll period are settings like any
    other (option, environment, file), checked: a bound of one batch would drop every
    subscriber at her first batch, a poll of 0 would spin on the catalog."""
    started: list[ServeSettings] = []

    def run_server(settings: ServeSettings, _echo) -> int:
        started.append(settings)
        return 0

    monkeypatch.setattr("streamshield.server.main.run_server", run_server)
    options = ["--subscriber-queue-batches", "8", "--subscriber-queue-bytes", "1048576"]
    result = CliRunner().invoke(main, ["serve", *options, "--catalog-poll", "0.5"])
    assert result.exit_code == 0, result.output
    chosen = started.pop()
    assert (chosen.subscriber_queue_batches, chosen.subscriber_queue_bytes) == (8, 1 << 20)
    assert chosen.catalog_poll_seconds == 0.5
    monkeypatch.setenv("STREAMSHIELD_CATALOG_POLL_SECONDS", "2")
    assert load({}).catalog_poll_seconds == 2.0
    for bad in ({"subscriber_queue_batches": 1}, {"catalog_poll_seconds": 0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            load(bad)


def test_printed_hints_name_the_commands_that_run_from_where_the_server_started(
    tmp_path, monkeypatch
) -> None:
    """``make run`` starts ``.venv/bin/streamshield`` with no venv on PATH: a bare
    ``streamshield`` in the hints would be "command not found"."""
    from streamshield.server.main import command_path

    bin_dir = tmp_path / "repo" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "streamshield"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    python = str(bin_dir / "python")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command_path("streamshield", python, tmp_path / "repo") == ".venv/bin/streamshield"
    assert command_path("python", python, tmp_path / "repo") == ".venv/bin/python"
    elsewhere = command_path("streamshield", python, tmp_path / "other")
    assert elsewhere == str(bin_dir / "streamshield")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")  # an activated venv
    assert command_path("streamshield", python, tmp_path / "repo") == "streamshield"
    (bin_dir / "streamshield").unlink()  # no script: the module runs
    assert command_path("streamshield", python, tmp_path / "repo") == "python -m streamshield.cli"


def test_make_run_takes_a_port_and_installs_no_dev_extra() -> None:
    """``make -n`` prints what ``make run`` would do without doing it."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    dry = subprocess.run(
        ["make", "-n", "-B", "run", "PORT=8444"], cwd=root, capture_output=True, text=True
    )
    assert dry.returncode == 0, dry.stderr
    assert ".venv/bin/streamshield serve --port 8444" in dry.stdout
    assert "-e ." in dry.stdout and "[dev]" not in dry.stdout
    test = subprocess.run(["make", "-n", "-B", "test"], cwd=root, capture_output=True, text=True)
    assert "-e '.[dev]'" in test.stdout and "pytest" in test.stdout


def test_warm_up_returns_at_once_when_the_install_has_its_class_archive(
    tmp_path, monkeypatch
) -> None:
    """``make run`` calls ``warm-up`` before every serve: with the archive in place it
    must not start a server (nor Spark); without one it serves the example to write it."""
    import streamshield.server.main as server_main
    from streamshield.engine.session import class_cache, keep_class_cache
    from streamshield.server import warm_up

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    served: list[object] = []
    monkeypatch.setattr(server_main, "run_server", lambda s, echo: served.append(s) or 0)
    monkeypatch.setattr(warm_up, "_stop_after_first_batch", lambda settings: None)
    assert warm_up.archive_needed()
    said: list[str] = []
    assert warm_up.warm_up(said.append) == 1  # the stand-in server wrote no archive
    (settings,) = served
    assert settings.example and settings.jvm_class_cache and settings.host == "127.0.0.1"
    assert settings.catalog_url == f"sqlite:///{settings.root / 'catalog.db'}"  # never the real one
    assert "no class archive" in said[-1]

    _, pending = class_cache(tmp_path / "streamshield" / "jvm")
    assert pending is not None
    pending.write_bytes(b"archive")
    keep_class_cache(pending)
    said.clear()
    assert not warm_up.archive_needed()
    assert warm_up.warm_up(said.append) == 0
    assert len(served) == 1 and said == ["JVM class archive in place: nothing to warm up"]
