"""``streamshield serve``: the server on its configuration, hospital example optional.

Embedded default = SQLite catalog under the storage root, local Spark, a self-signed
certificate made on first start; :mod:`streamshield.server.settings` says what can be
changed. With the example, a fresh root gets the hospital's users, stream, grants and
queries, and a provider thread keeps landing readings.

Start-up order (docs/performance.md, "Start-up", has the measured times): the Spark
session and the catalog first, then the HTTPS API (``/healthz`` answers, ``/readyz``
says 503 "starting"), then the example, ingest and the queries of the previous run;
``/readyz`` turns 200 once they run. SIGTERM and SIGINT stop the API, the queries
(``StreamingQuery.stop``: the checkpoint keeps the last committed batch), ingest and
the catalog, and the process exits 0.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamshield.engine.store import root_location
from streamshield.server.oidc_settings import unknown_mapped_roles
from streamshield.server.oidc_tokens import TokenVerifier
from streamshield.server.settings import ServeSettings
from streamshield.server.tls import ensure_self_signed, given

if TYPE_CHECKING:
    from streamshield.server.service import ServerService

log = logging.getLogger("streamshield.server")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
GIL_SWITCH_SECONDS = 0.001
"""How long a Python thread may hold the GIL while another waits (default 0.005)."""


def build_service(
    root: Path,
    master: str | None,
    example_roles: bool = False,
    *,
    security: Any = None,
    spark: Any = None,
    spark_conf: dict[str, str] | None = None,
    spark_ui: bool = False,
    spark_log_level: str = "ERROR",
    separate_levels: Any = None,
    tuning: Any = None,
):
    """The service: a Spark session (``spark``, else a new one) and the security catalog
    (``security``, default the SQLite file ``<root>/catalog.db``).

    ``example_roles``: store the example's role hierarchy first; the engine reads the
    hierarchy once, when the service is built, so it must be in place before.
    ``separate_levels``: a :class:`~streamshield.server.application_query.SeparateLevels`
    to run each level's queries in a Spark application of its own. ``tuning``: an
    :class:`~streamshield.engine.tuning.EngineTuning` (default: the server's defaults).
    """
    from streamshield.catalog.security import SecurityCatalog
    from streamshield.engine.session import spark_session
    from streamshield.engine.tuning import SERVER
    from streamshield.server.hospital import roles
    from streamshield.server.service import ServerService

    root.mkdir(parents=True, exist_ok=True)
    security = security if security is not None else SecurityCatalog(root / "catalog.db")
    if example_roles:
        names, edges = roles()
        security.catalog.set_roles(names, edges)
    spark = spark if spark is not None else spark_session(master, conf=spark_conf, ui=spark_ui)
    spark.sparkContext.setLogLevel(spark_log_level)
    return ServerService(spark, root, security, separate_levels, tuning or SERVER)


class Stopper:
    """SIGTERM/SIGINT set an event the start-up and the main loop look at; the handlers
    do nothing else (no I/O in a signal handler)."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """(Re)installs the handlers: pyspark's SparkContext puts its own SIGINT handler
        in place (cancel jobs, raise KeyboardInterrupt), so this runs again after it."""
        for number in STOP_SIGNALS:
            previous = signal.signal(number, self._handle)
            self._previous.setdefault(number, previous)

    def restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _handle(self, number: int, _frame: Any) -> None:
        self.signal = number
        self.requested.set()


class Timings:
    """How long each start-up phase took (logged, and what the README's figures are)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.phases: list[tuple[str, float]] = []
        before = process_age()  # the interpreter's start and the imports up to here
        if before is not None:
            self.started -= before
            self.phases.append(("python start and imports", before))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.phases.append((name, time.monotonic() - began))

    def summary(self) -> str:
        parts = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in self.phases)
        return f"ready after {time.monotonic() - self.started:.1f}s ({parts})"


def process_age() -> float | None:
    """Seconds since this process started (Linux /proc; None elsewhere)."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def _fresh(security: Any) -> bool:
    """A catalog without any user: nobody could log in, the example may be loaded."""
    from sqlalchemy import func, select

    from streamshield.catalog import tables as t

    with security.engine.connect() as db:
        return not db.execute(select(func.count()).select_from(t.users)).scalar()


def run_server(settings: ServeSettings, echo: Callable[[str], None] = print) -> int:
    """Serves until SIGTERM or SIGINT; returns the exit code (0 on a clean stop)."""
    # The Spark driver's thread makes thousands of Py4J round trips per micro-batch, each
    # waiting for the GIL when it returns; with appends, delivery and the event loop busy
    # in other threads, the default 5 ms switch interval made every round trip wait up
    # to 5 ms (measured: a Py4J call 2x slower beside one busy thread; 1 ms: 1.1x).
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    stopper = Stopper()
    stopper.install()
    timings = Timings()
    root = settings.root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    try:
        root_location.check(root)
    except root_location.RootMoved as err:
        echo(f"refusing to serve {root}: {err}")
        stopper.restore()
        return 2
    # The JVM takes longest; it starts first, in a thread, while the rest is set up.
    # (Off the main thread pyspark installs no SIGINT handler of its own.)
    starter = ThreadPoolExecutor(1, thread_name_prefix="spark-start")
    spark_started = starter.submit(_spark, settings)
    starter.shutdown(wait=False)
    service = provider = api = None
    try:
        with timings.phase("catalog, TLS, imports, example users"):
            logging.basicConfig(
                level=settings.log_level.upper(), format="%(levelname)s %(name)s %(message)s"
            )
            from streamshield.catalog.security import SecurityCatalog
            from streamshield.server.app import create_app
            from streamshield.server.hospital import (
                CREDENTIALS,
                WardProvider,
                create_example_users,
                load_example,
                roles,
            )
            from streamshield.server.runner import GRACEFUL_SECONDS, serve_in_thread

            tls = (
                given(settings.tls_cert, settings.tls_key)
                if settings.tls_cert and settings.tls_key
                else ensure_self_signed(root / "tls")
            )
            security = SecurityCatalog(
                settings.catalog_target, view_poll_seconds=settings.catalog_poll_seconds
            )
            fresh = _fresh(security)
            users = None
            if settings.example and fresh:  # the hierarchy before the engine reads it
                security.catalog.set_roles(*roles())
                users = create_example_users(security, root)
        with timings.phase("spark start"):
            spark, _pending = _started(spark_started)
            if spark is None:
                echo("Spark did not start (details above); stopping")
                return 1
            service = build_service(
                root,
                settings.spark_master,
                security=security,
                spark=spark,
                spark_log_level="WARN" if settings.log_level in ("debug", "info") else "ERROR",
                separate_levels=_separate_levels(settings),
                tuning=settings.tuning(),
            )
            service.pipeline.landing.max_future_skew = settings.max_clock_skew
            service.backlog.limit = settings.max_ingest_backlog
            service.backlog.budget = settings.ingest_latency_budget_seconds
            service.retention.max_age = settings.retention
            if settings.oidc.issuers:
                unknown = unknown_mapped_roles(settings.oidc, security.catalog.hierarchy().roles)
                if unknown:
                    echo(f"oidc: role_mapping names roles the catalog lacks: {unknown}; stopping")
                    return 1
                service.administration.tokens = TokenVerifier(settings.oidc)
        if stopper.requested.is_set():
            return 0
        with timings.phase("api"):
            app = create_app(
                service,
                queue_size=settings.subscriber_queue_batches,
                queue_bytes=settings.subscriber_queue_bytes,
                metrics_token=settings.metrics_token,
            )
            try:
                api = serve_in_thread(
                    app,
                    settings.host,
                    settings.port,
                    tls,
                    log_level=settings.log_level,
                    graceful=GRACEFUL_SECONDS,
                )
            except RuntimeError:
                echo(f"the API could not listen on {settings.host}:{settings.port}; stopping")
                return 1
        echo(f"API listening at {api.url}, starting (GET /readyz says when ready)")
        passwords: dict[str, str] = {}
        if users is not None:
            echo("loading the hospital example (HeartRate stream, grants, queries)...")
            with timings.phase("example"):
                passwords = load_example(service, users)
        elif settings.example:
            path = root / CREDENTIALS
            passwords = json.loads(path.read_text()) if path.exists() else {}
            echo("existing catalog: the example is not loaded again")
        if stopper.requested.is_set():
            return 0
        service.start(timings.phase)
        if settings.example and "ward" in passwords:
            provider = WardProvider(service, passwords["ward"], settings.round_seconds)
            provider.start()
        echo(f"streamshield server at {api.url} (TLS certificate {tls.cert})")
        echo(timings.summary())
        if passwords:
            _example_help(echo, api.url, tls.cert, root)
        stopper.requested.wait()
        echo("stopping")
        return 0
    finally:
        try:  # a second signal meanwhile changes nothing: the handlers stay until done
            _shut_down(api, provider, service, spark_started, echo)
        finally:
            stopper.restore()


def _spark(settings: ServeSettings) -> tuple[Any, Path | None]:
    """The Spark session, and the class archive its JVM writes at exit (if any)."""
    from streamshield.engine.session import (
        cache_directory,
        class_cache,
        fixed_heap,
        spark_session,
        with_java_option,
    )

    conf, pending = dict(settings.spark_conf), None
    conf = with_java_option(conf, fixed_heap(conf))  # memory flat whatever the load
    if settings.jvm_class_cache:
        option, pending = class_cache(cache_directory())
        conf = with_java_option(conf, option)
    return spark_session(settings.spark_master, conf=conf, ui=settings.spark_ui), pending


def _separate_levels(settings: ServeSettings) -> Any:
    """The levels' own applications as the settings choose them (None: in process)."""
    if settings.level_applications != "separate":
        return None
    from streamshield.server.application_query import SeparateLevels

    return SeparateLevels(settings.level_master or "local[1]", dict(settings.level_conf))


def _started(spark_started: Future) -> tuple[Any, Path | None]:
    """:func:`_spark`'s answer, or (None, None) when Spark did not start (logged)."""
    try:
        return spark_started.result()
    except Exception as err:
        log.error("Spark did not start: %s", str(err).splitlines()[0] if str(err) else err)
        return None, None


def _shut_down(
    api: Any,
    provider: Any,
    service: ServerService | None,
    spark_started: Future,
    echo: Callable[[str], None] = print,
) -> None:
    """Subscribers first (a ``closed`` event instead of a cut connection), the API (no
    new requests), then the example provider, the queries and ingest (each
    ``StreamingQuery.stop``), then the catalog's connections and Spark. A JVM that
    writes the class archive at its exit says so first: that takes tens of seconds."""
    if service is not None:
        service.end_subscriptions("server stopping")
    if api is not None:
        api.stop()
    if provider is not None:
        provider.stop()
    if service is not None:
        logging.getLogger().addFilter(_jvm_gone_noise)  # stopping: the JVM may go first
        try:
            service.stop()
        except Exception:
            if _spark_alive(spark_started):
                raise
            log.warning(JVM_STOPPED)
        finally:
            service.security.engine.dispose()
    spark, pending = _started(spark_started)  # a stop during start-up waits for Spark
    if spark is not None and _spark_alive(spark_started):
        from streamshield.engine.session import keep_class_cache, stop_jvm

        spark.stop()
        if pending is not None:
            bound = f"at most {JVM_EXIT_SECONDS:.0f} s, once per install"
            echo(f"writing the JVM class archive for faster starts ({bound})")
        if stop_jvm(JVM_EXIT_SECONDS):
            keep_class_cache(pending)


JVM_EXIT_SECONDS = 60.0
"""How long the stop waits for the JVM to exit: writing the class archive (about 200 MB)
took 40 s on a busy machine; past this the JVM is killed and the next start writes it."""

JVM_STOPPED = (
    "Spark's JVM got the stop signal too (sent to the whole process group or cgroup) and "
    "stopped before the queries could stop between two micro-batches: they stopped as in "
    "a crash and resume from their checkpoints at the next start. Signal the server's own "
    "process to stop it between batches (systemd: KillMode=mixed)."
)


def _jvm_gone_noise(record: logging.LogRecord) -> bool:
    """False for py4j's record of a command cut by the JVM's exit (logged with its
    traceback on the root logger, ``java_gateway``'s "Exception while sending command"):
    installed once the server stops, when the JVM getting the stop signal too is the
    race :data:`JVM_STOPPED` already reports in one line. Every other record passes."""
    if not str(record.msg).startswith("Exception while sending command"):
        return True
    from py4j.protocol import Py4JNetworkError

    error = record.exc_info[1] if record.exc_info else None
    return not isinstance(error, (Py4JNetworkError, ConnectionError))


def _spark_alive(spark_started: Future) -> bool:
    """Whether Spark's context still runs: a signal sent to the server's whole process
    group (``timeout``, ``kill -- -PGID``, systemd's default ``KillMode=control-group``)
    reaches the JVM too, whose own shutdown hook then stops the context under the
    queries' orderly stop. (Its SIGINT is ignored: PySpark starts it so.)"""
    spark, _pending = _started(spark_started)
    if spark is None:
        return False
    try:
        return not spark.sparkContext._jsc.sc().isStopped()
    except Exception:  # the JVM has exited: its gateway is gone
        return False


def _example_help(echo: Callable[[str], None], url: str, cert: Path, root: Path) -> None:
    """What to type next, runnable as printed from the directory the server started in
    (``make run``: the repository's root, where only ``.venv/bin/streamshield`` runs)."""
    from streamshield.server.hospital import CLINICIANS, CREDENTIALS

    command, python = command_path("streamshield"), command_path("python")
    credentials = shlex.quote(str(root / CREDENTIALS))
    echo(f"example users' passwords: {root / CREDENTIALS} (0600)")
    echo("log in and subscribe, e.g. as the nurse on duty:")
    echo(
        f'  STREAMSHIELD_PASSWORD=$({python} -c "import json,sys;'
        f"print(json.load(open(sys.argv[1]))['nina'])\" {credentials}) \\"
    )
    ca = shlex.quote(str(cert))
    echo(f"    {command} client login --url {url} --ca {ca} --user nina --role ND")
    echo(f"  {command} client catalog")
    echo(f"  {command} client subscribe heart_nina_out --limit 10")
    echo(
        f"other users: {', '.join(f'{u} ({r})' for u, r in CLINICIANS.items())}, "
        "admin (ADMIN), ward (PROVIDER)"
    )


def command_path(name: str, executable: str | None = None, cwd: Path | None = None) -> str:
    """How to run ``name`` (``streamshield`` or ``python``) of this installation from
    ``cwd``: the bare name when it is on PATH and the same program, else its path
    (relative when under ``cwd``, e.g. ``.venv/bin/streamshield``). The scripts of a
    virtualenv sit beside its interpreter (``sys.executable``, not resolved: in a venv
    it is a link to the system's python)."""
    program = Path(executable or sys.executable).absolute().parent / name
    if not program.exists():
        program = Path(executable or sys.executable).absolute()
        if name != "python":
            return f"{command_path('python', executable, cwd)} -m streamshield.cli"
    found = shutil.which(name)
    if found and Path(found).absolute() == program:
        return name
    here = (cwd or Path.cwd()).absolute()
    try:
        return shlex.quote(str(program.relative_to(here)))
    except ValueError:
        return shlex.quote(str(program))
