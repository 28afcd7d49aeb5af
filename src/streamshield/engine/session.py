"""The SparkSession the engine uses: local by default, the master is configuration."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession


def spark_session(
    master: str | None = None,
    app_name: str = "streamshield",
    *,
    conf: Mapping[str, str] | None = None,
    ui: bool = False,
) -> SparkSession:
    """One session per process; small shuffles because micro-batches are small.

    ``ui``: Spark's web UI is off unless asked for: it has no authentication and shows
    every query's plan (view names, literals). ``conf`` comes last, so an operator's
    ``--conf`` wins over these defaults.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("STREAMSHIELD_SPARK_MASTER", "local[2]")
    if master.startswith("local"):  # a cluster's driver must advertise a reachable address
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.ansi.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", DRIVER_MEMORY)
        .config(CONSTRAINT_PROPAGATION, "false")
        .config(LISTING_THRESHOLD, "1000000")
        .config(CALL_SITES, "false")
    )
    for key, value in {**THREAD_CAPS, **STATUS_RETENTION}.items():
        builder = builder.config(key, value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    # Spark replaces ${env:X}, ${system:X} and ${spark.conf} in SQL text before parsing:
    # a string literal in a user query would read the server's environment (secrets) and
    # configuration. Never on, whatever the operator's --conf says.
    builder = builder.config(VARIABLE_SUBSTITUTION, "false")
    session = builder.getOrCreate()
    session.conf.set(VARIABLE_SUBSTITUTION, "false")  # a session that existed before
    return session


THREAD_CAPS = {
    "spark.sql.shuffleExchange.maxThreadThreshold": "16",
    "spark.sql.resultQueryStage.maxThreadThreshold": "16",
    "spark.sql.broadcastExchange.maxThreadThreshold": "8",
}
"""Caps of the JVM's per-stage thread pools (static: set before the session starts).

Spark makes each of these a "cached" pool whose core size is its maximum (1024, 1024,
128), so every task submitted starts a new thread while fewer than the maximum exist,
idle ones included, and a thread dies after 60 s idle: the pool holds about as many
threads as stages were planned in the last minute. Under the soak (16 continuous
queries, a micro-batch a second each) that was ~100 new threads a minute and, with more
queries or faster batches, up to 2176. With the caps, stages beyond them queue for a
free thread (each only plans and submits a stage; the work runs on the executors)."""

STATUS_RETENTION = {
    "spark.sql.ui.retainedExecutions": "50",
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "5000",
    "spark.ui.retainedDeadExecutors": "10",
    "spark.sql.streaming.ui.retainedQueries": "20",
    "spark.sql.streaming.ui.retainedProgressUpdates": "50",
}
"""How much finished work Spark's status store keeps in the driver's heap (static).

The store exists whether the web UI runs or not (the status tracker reads it), and by
default keeps the last 1000 SQL executions with their plan descriptions and metrics,
1000 jobs, 1000 stages and up to 100,000 tasks per stage. A continuous query runs at
least one execution, a job and a few stages every micro-batch, each execution with its
plan's description and graph (a secured view's plan is wide): 16 queries fill the
defaults within minutes and the heap then holds them for nobody (the UI is off by
default; docs/reliability.md, "Flat memory under overload", has the figures). These
bounds keep the last minute or so of a busy server; an operator's ``--conf`` wins."""

VARIABLE_SUBSTITUTION = "spark.sql.variable.substitute"
CONSTRAINT_PROPAGATION = "spark.sql.constraintPropagation.enabled"
"""Off: Catalyst's constraint propagation is exponential in the aliases of a projection
whose expressions share attributes, and every secured plan is such a projection (masks
and pair labels aliasing the same label words over one visibility filter). On the
cloud-auditing self-join (7 attributes a side, 3 label words) ``PruneFilters`` alone spent
208 s of a micro-batch's 219 s of planning deriving constraints it never used; off, the
batch plans in under a second (docs/chinese-wall.md, "Why the joins were slow"). It only
infers extra ``isnotnull`` filters, which change no result."""


CALL_SITES = "spark.python.sql.dataFrameDebugging.enabled"
"""Off: PySpark then records no Python call site for every DataFrame function called.
On (its default), each ``F.col``, ``select`` or ``when`` makes four more Py4J round trips
(the active session, the origin class, a conf read, setting and clearing the origin),
only so that an analysis error can name the Python line that built the failing column.
The engine builds its plans per micro-batch (label projections, decision joins, branch
rebuilds, delivery): with call sites on, ~0.05 s of a small ingest batch's 0.22 s of
planning was this bookkeeping (``bench.landing_latency``,
bench/results/landing-latency.json). Errors keep their message and SQL context."""

LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
"""Never list directories with a Spark job. Spark lists a directory's subdirectories
with a job of one task per subdirectory once there are more than 32 (the default), and
a file-stream source lists its whole directory at every trigger: a stream's labelled
store holds one ``batch=<id>`` directory per ingest batch, so past 32 batches every poll
of every query on it was a Spark job of one task per batch ever ingested (on 2 cores, a
job of hundreds of tasks per poll, growing with the server's age). Listing on the driver
costs a ``listStatus`` per directory, no job."""


def planning_session(spark: SparkSession) -> SparkSession:
    """A new session (own SQL settings and temporary views, same JVM and cache) that
    plans the engine's wide secured projections without constraint propagation,
    whatever session it is handed."""
    session = spark.newSession()
    session.conf.set(CONSTRAINT_PROPAGATION, "false")
    session.conf.set(VARIABLE_SUBSTITUTION, "false")
    return session


DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
DRIVER_MEMORY = "2g"


def fixed_heap(conf: Mapping[str, str]) -> str:
    """JVM options that size the driver's heap once, at start: its maximum
    (``spark.driver.memory``, Spark's ``-Xmx``) committed and touched up front.

    Left to itself, G1 sizes the heap from the share of wall time its pauses take:
    above a threshold (1-8 %, higher as the heap grows) it expands, and it gives memory
    back only after a full collection or a concurrent cycle that finds most of the heap
    free. On a loaded machine every pause is long in wall time, so a long-running
    server's committed heap, and its RSS, climbed for as long as the machine was busy
    while what it kept alive stayed flat: in a soak at load 30-60, 70-100 MB survived
    every collection while the committed heap went 114 -> 863 MB in steps at 100-400 ms
    pauses (docs/reliability.md, "Why the JVM's memory grew"). A fixed heap is what
    servers on the JVM run with (minimum equal to maximum, pre-touched): the memory is
    the configuration's, the same at minute 1 and at day 7, not the load's. An
    operator's own ``-Xms`` or ``-XX:-AlwaysPreTouch`` in ``--conf
    spark.driver.extraJavaOptions`` wins (it comes later on the command line)."""
    size = str(conf.get("spark.driver.memory", DRIVER_MEMORY)).strip()
    return f"-Xms{size} -XX:+AlwaysPreTouch"


def cache_directory() -> Path:
    """Where the JVM class archive lives: one per machine user, shared by every root."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamshield" / "jvm"


KEPT_ARCHIVES = 3
"""Class archives kept per machine user (about 200 MB each): the newest, one per install
(a CI's fresh clone is an install of its own)."""


def class_path_digest(jars: Path | None = None, java: str | None = None) -> str:
    """A digest of what a dynamic class archive is only valid for: the JVM and each jar
    of the class path with its size and modification time.

    The JVM maps an archive only when the class path it was written for is the same,
    path, size and mtime of every jar (and ignores it, silently but for one warning line,
    otherwise). A reinstalled virtualenv (every CI run's clean clone) has new jars: under
    a name without this digest the first install's archive was never replaced, and every
    later server started without one (seen on every start since a CI clone wrote the
    machine's archive on 11-28: ``Unable to use shared archive``)."""
    import pyspark

    jars = jars or Path(pyspark.__file__).resolve().parent / "jars"
    java = java or _java()
    digest = hashlib.sha256(str(java).encode())
    with contextlib.suppress(OSError):
        stat = os.stat(java)
        digest.update(f":{stat.st_size}:{stat.st_mtime_ns}".encode())
    with contextlib.suppress(OSError):
        for jar in sorted(jars.iterdir()):
            stat = jar.stat()
            digest.update(f"\n{jar.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:12]


def _java() -> str:
    """The java executable Spark's launcher runs (``JAVA_HOME`` first, as it does)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else "java"


def class_cache(directory: Path, digest: str | None = None) -> tuple[str, Path | None]:
    """The JVM option for class-data sharing through an archive in ``directory``, and
    the archive this run writes at its exit (None when it reads one).

    Loading and verifying Spark's classes one by one is most of the Spark session's
    start-up time. A run without an archive writes one when its JVM exits
    (``-XX:ArchiveClassesAtExit``), under a temporary name that
    :func:`keep_class_cache` renames once the JVM has exited cleanly; later runs map it
    (``-XX:SharedArchiveFile``). The name carries the pyspark version and
    :func:`class_path_digest` (``digest``: the caller's), so that another install, an
    upgrade or another JVM writes an archive of its own instead of starting without one.
    """
    import pyspark

    directory.mkdir(parents=True, exist_ok=True)
    _remove_orphans(directory)
    digest = digest or class_path_digest()
    archive = directory / f"classes-{pyspark.__version__}-{digest}.jsa"
    if archive.exists() and archive.stat().st_size > 0:
        return f"-XX:SharedArchiveFile={archive}", None
    pending = directory / f"{archive.name}.{os.getpid()}.new"  # runs side by side: one each
    pending.unlink(missing_ok=True)
    return f"-XX:ArchiveClassesAtExit={pending} {ARCHIVE_QUIET}", pending


ARCHIVE_QUIET = "-Xlog:cds*=error"
"""The JVM option that keeps the archive's writing quiet but for errors: writing it, the
JVM warns once per class it leaves out (``[warning][cds] Pre JDK 6 class not supported
by CDS`` for each of the reflection accessors Spark generates, over a thousand lines at
the stop), none of which anyone can act on. Reading an archive keeps its warnings."""


def _remove_orphans(directory: Path) -> None:
    """Removes archives being written by processes that are gone: a JVM that outlived
    :func:`stop_jvm`'s bound (writing 200 MB at a load of 30 took longer) left its
    ``.new`` file behind, never renamed, for good."""
    for pending in directory.glob("classes-*.jsa.*.new"):
        try:
            os.kill(int(pending.name.rsplit(".", 2)[-2]), 0)
        except ValueError:
            continue  # not a name this module writes
        except ProcessLookupError:
            pending.unlink(missing_ok=True)
        except OSError:
            continue  # alive (another user's, say)


def with_java_option(conf: Mapping[str, str], option: str) -> dict[str, str]:
    """``conf`` with ``option`` first in the driver's Java options (the operator's kept)."""
    out = dict(conf)
    out[DRIVER_JAVA_OPTIONS] = " ".join(filter(None, [option, out.get(DRIVER_JAVA_OPTIONS)]))
    return out


def stop_jvm(timeout: float = 60.0) -> bool:
    """Ends the driver JVM and waits (bounded) for it to exit, so that what it writes at
    exit (a class archive) is complete; True when it exited."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is None or process is None:
        return False
    with contextlib.suppress(Exception):  # already gone: only the process is left
        gateway.shutdown()
    try:
        if process.stdin is not None:
            process.stdin.close()  # the gateway JVM exits at the end of its stdin
        process.wait(timeout)
    except Exception:
        with contextlib.suppress(OSError):  # the stop stays bounded; no archive this time
            process.kill()
        return False
    SparkContext._gateway = None
    SparkContext._jvm = None
    return process.returncode is not None


def keep_class_cache(pending: Path | None) -> None:
    """Makes the archive written at exit the one later runs read, and removes the oldest
    archives beyond :data:`KEPT_ARCHIVES` (each install writes its own)."""
    if pending is not None and pending.exists() and pending.stat().st_size > 0:
        pending.replace(pending.parent / (pending.name.split(".jsa.")[0] + ".jsa"))
        archives = sorted(
            pending.parent.glob("classes-*.jsa"), key=lambda a: a.stat().st_mtime, reverse=True
        )
        for old in archives[KEPT_ARCHIVES:]:  # a JVM that maps one keeps its mapping
            old.unlink(missing_ok=True)
