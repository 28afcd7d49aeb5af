"""``streamshield serve``: the server on its configuration, hospital example optional.

Embedded default = SQLite catalog under the storage root, local Spark, a self-signed
certificate made on first start; :mod:`streamshield.server.settings` says what can be
changed. With the example, a fresh root gets the hospital's users, stream, grants and
queries, and a provider thread keeps landing readings.

Start-up order (README, "Running the server", has the measured times): the Spark
session and the catalog first, then the HTTPS API (``/healthz`` answers, ``/readyz``
says 503 "starting"), then the example, ingest and the queries of the previous run;
``/readyz`` turns 200 once they run. SIGTERM and SIGINT stop the API, the queries
(``StreamingQuery.stop``: the checkpoint keeps the last committed batch), ingest and
the catalog, and the process exits 0.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from streamshield.server.hospital import CLINICIANS, CREDENTIALS, WardProvider, load_example, roles
from streamshield.server.settings import ServeSettings
from streamshield.server.tls import ensure_self_signed, given

log = logging.getLogger("streamshield.server")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def build_service(
    root: Path,
    master: str | None,
    example_roles: bool = False,
    *,
    security: Any = None,
    spark_conf: dict[str, str] | None = None,
    spark_ui: bool = False,
    spark_log_level: str = "ERROR",
):
    """The service: a Spark session and the security catalog (``security``, default
    the SQLite file ``<root>/catalog.db``).

    ``example_roles``: store the example's role hierarchy first; the engine reads the
    hierarchy once, when the service is built, so it must be in place before.
    """
    from streamshield.catalog.security import SecurityCatalog
    from streamshield.engine.session import spark_session
    from streamshield.server.service import ServerService

    root.mkdir(parents=True, exist_ok=True)
    security = security if security is not None else SecurityCatalog(root / "catalog.db")
    if example_roles:
        names, edges = roles()
        security.catalog.set_roles(names, edges)
    spark = spark_session(master, conf=spark_conf, ui=spark_ui)
    spark.sparkContext.setLogLevel(spark_log_level)
    return ServerService(spark, root, security)


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


def _fresh(security: Any) -> bool:
    """A catalog without any user: nobody could log in, the example may be loaded."""
    from sqlalchemy import func, select

    from streamshield.catalog import tables as t

    with security.engine.connect() as db:
        return not db.execute(select(func.count()).select_from(t.users)).scalar()


def run_server(settings: ServeSettings, echo: Callable[[str], None] = print) -> int:
    """Serves until SIGTERM or SIGINT; returns the exit code (0 on a clean stop)."""
    from streamshield.catalog.security import SecurityCatalog
    from streamshield.server.app import create_app
    from streamshield.server.runner import serve_in_thread

    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s %(message)s"
    )
    stopper = Stopper()
    stopper.install()
    timings = Timings()
    root = settings.root.resolve()
    tls = (
        given(settings.tls_cert, settings.tls_key)
        if settings.tls_cert and settings.tls_key
        else ensure_self_signed(root / "tls")
    )
    service = provider = api = None
    try:
        with timings.phase("spark session and catalog"):
            root.mkdir(parents=True, exist_ok=True)
            security = SecurityCatalog(settings.catalog_target)
            fresh = _fresh(security)
            service = build_service(
                root,
                settings.spark_master,
                example_roles=settings.example and fresh,
                security=security,
                spark_conf=_spark_conf(settings, root),
                spark_ui=settings.spark_ui,
                spark_log_level="WARN" if settings.log_level in ("debug", "info") else "ERROR",
            )
        stopper.install()
        if stopper.requested.is_set():
            return 0
        with timings.phase("api"):
            app = create_app(service, metrics_token=settings.metrics_token)
            api = serve_in_thread(
                app, settings.host, settings.port, tls, log_level=settings.log_level
            )
        echo(f"API listening at {api.url}, starting (GET /readyz says when ready)")
        passwords: dict[str, str] = {}
        if settings.example and fresh:
            echo("loading the hospital example (users, HeartRate stream, grants, queries)...")
            with timings.phase("example"):
                passwords = load_example(service)
        elif settings.example:
            path = root / CREDENTIALS
            passwords = json.loads(path.read_text()) if path.exists() else {}
            echo("existing catalog: the example is not loaded again")
        if stopper.requested.is_set():
            return 0
        with timings.phase("ingest and queries"):
            service.start()
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
            _shut_down(api, provider, service)
        finally:
            stopper.restore()


def _spark_conf(settings: ServeSettings, root: Path) -> dict[str, str]:
    from streamshield.engine.session import with_class_cache

    conf = dict(settings.spark_conf)
    return with_class_cache(conf, root / "jvm") if settings.jvm_class_cache else conf


def _shut_down(api: Any, provider: Any, service: Any) -> None:
    """API first (no new requests), then the example provider, the queries and ingest
    (each ``StreamingQuery.stop``), then the catalog's connections and Spark."""
    if api is not None:
        api.stop()
    if provider is not None:
        provider.stop()
    if service is not None:
        try:
            service.stop()
        finally:
            service.security.engine.dispose()
            service.spark.stop()


def _example_help(echo: Callable[[str], None], url: str, cert: Path, root: Path) -> None:
    echo(f"example users' passwords: {root / CREDENTIALS} (0600)")
    echo("log in and subscribe, e.g. as the nurse on duty:")
    echo(
        f'  STREAMSHIELD_PASSWORD=$(python -c "import json;print(json.load(open('
        f"'{root / CREDENTIALS}'))['nina'])\") \\"
    )
    echo(f"    streamshield client login --url {url} --ca {cert} --user nina --role ND")
    echo("  streamshield client catalog")
    echo("  streamshield client subscribe heart_nina_out --limit 10")
    echo(
        f"other users: {', '.join(f'{u} ({r})' for u, r in CLINICIANS.items())}, "
        "admin (ADMIN), ward (PROVIDER)"
    )
