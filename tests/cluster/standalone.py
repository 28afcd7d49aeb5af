"""A throwaway Spark standalone cluster on loopback: one master, one worker.

Both daemons are started from the PySpark distribution's ``bin/spark-class`` as separate
processes (their own JVMs), so an application submitted to the master runs its executors
in the worker's JVM children, not in the driver's process. Everything binds 127.0.0.1.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
HOST = "127.0.0.1"
START_TIMEOUT = 90.0  # seconds for both daemons to come up and the worker to register
STOP_TIMEOUT = 15.0  # seconds between SIGTERM and SIGKILL


class ClusterError(RuntimeError):
    """A daemon exited or did not become ready in time."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP=HOST,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        # the daemons only coordinate: a quick-starting JVM that takes little CPU
        SPARK_DAEMON_JAVA_OPTS="-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        SPARK_DAEMON_MEMORY="512m",
    )
    env.pop("SPARK_MASTER_HOST", None)
    env.pop("SPARK_CONF_DIR", None)  # the distribution's defaults, not a stray config
    return env


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, from /proc (Linux); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ... starttime ...": comm may hold spaces and parentheses
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def _descendants(pid: int) -> dict[int, int]:
    """Every live descendant of ``pid``: pid -> start time (to never signal a reused pid)."""
    tree: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (info := _stat(int(entry.name))) is not None:
            tree.setdefault(info[0], []).append((int(entry.name), info[1]))
    found: dict[int, int] = {}
    todo = [pid]
    while todo:
        for child, started in tree.get(todo.pop(), []):
            found[child] = started
            todo.append(child)
    return found


def _living(known: dict[int, int]) -> list[int]:
    return [pid for pid, started in known.items() if (_stat(pid) or (0, -1))[1] == started]


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, sig)


def _signal_group(pgid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def stop(process: subprocess.Popen) -> None:
    """Terminate a daemon, its process group and every descendant (executors, and Python
    workers that moved to their own group); SIGKILL whatever outlives the timeout."""
    known = _descendants(process.pid)
    _signal_group(process.pid, signal.SIGTERM)
    _signal(_living(known), signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline and (process.poll() is None or _living(known)):
        time.sleep(0.2)
    if process.poll() is None:
        known.update(_descendants(process.pid))
        _signal_group(process.pid, signal.SIGKILL)
    _signal(_living(known), signal.SIGKILL)
    process.wait()


def _start(args: list[str], log: Path, env: dict[str, str], stack: ExitStack) -> subprocess.Popen:
    handle = stack.enter_context(log.open("wb"))
    process = subprocess.Popen(
        [str(SPARK_HOME / "bin" / "spark-class"), *args],
        stdin=subprocess.DEVNULL,
        stdout=handle,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=log.parent,
        start_new_session=True,  # its own process group, so stop() reaches all of it
    )
    stack.callback(stop, process)
    return process


def _wait_for(process: subprocess.Popen, log: Path, needle: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        if needle in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise ClusterError(f"{log.name}: exited with {process.returncode}\n{_tail(log)}")
        time.sleep(0.2)
    raise ClusterError(f"{log.name}: no {needle!r} after {START_TIMEOUT:.0f} s\n{_tail(log)}")


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def standalone_cluster(work_dir: str | Path, cores: int = 1, memory: str = "1g") -> Iterator[str]:
    """Start a master and one worker (``cores``, ``memory``) on loopback; yield the
    master URL. Two applications run side by side only if the worker has room for an
    executor of each (each taking ``spark.cores.max`` and ``spark.executor.memory``).

    Logs go to ``master.log`` and ``worker.log`` in ``work_dir``; the worker's executors
    run under ``work_dir/worker``. Both daemons are always stopped on exit.
    """
    work = Path(work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "worker").mkdir(exist_ok=True)
    env = _environment()
    port = free_port()
    url = f"spark://{HOST}:{port}"
    master_log, worker_log = work / "master.log", work / "worker.log"
    with ExitStack() as stack:
        deadline = time.monotonic() + START_TIMEOUT
        master = _start(
            [
                "org.apache.spark.deploy.master.Master",
                *("--host", HOST, "--port", str(port), "--webui-port", str(free_port())),
            ],
            master_log,
            env,
            stack,
        )
        _wait_for(master, master_log, "I have been elected leader", deadline)
        worker = _start(
            [
                "org.apache.spark.deploy.worker.Worker",
                url,
                *("--host", HOST, "--cores", str(cores), "--memory", memory),
                *("--webui-port", str(free_port()), "--work-dir", str(work / "worker")),
            ],
            worker_log,
            env,
            stack,
        )
        _wait_for(worker, worker_log, "Successfully registered with master", deadline)
        _wait_for(master, master_log, "Registering worker", deadline)
        yield url
