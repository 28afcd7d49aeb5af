"""Kafka source: records/s into a stream and landing-to-subscriber latency, against the
HTTP append path and plain Spark reading the same records.

One command: ``.venv/bin/python -m bench.kafka_source`` (part of ``make bench``; a few
minutes). One ``streamshield serve`` process on a fresh root and one Tansu broker (the
dev extra's Kafka-protocol broker); stream ``ticks`` (``id``, ``v``, ``sent``), provider
``feed``, and Al's query ``SELECT id, sent FROM ticks`` watched by one SSE subscriber the
whole time. Interleaved repetitions (``--repeats``), each:

* **kafka**: ``--records`` wire-format tuples already in a new topic; a binding is made
  and timed until its partition's next offset is past the last record: landed
  (through the landing gate, the provider's rights, her policy) records/s;
* **http**: the same records POSTed to ``/streams/ticks/elements?assign=seq`` in
  5,000-line posts, one after another: acknowledged records/s;
* **plain Spark**: a batch read of the same topic through Spark 4's Python data source
  API with confluent-kafka (Spark has no Kafka connector without its jars), counted:
  rows/s, in this process's own Spark (no security, no landing, nothing durable);
* **latency**: ``--rate`` records/s for ``--seconds`` through Kafka (a producer flushing
  every 50 ms) and through the API (a post every 100 ms), each record carrying its
  send time in ``sent``; latency = when the subscriber reads the row minus that time.

Median and spread over the repetitions. Results: ``bench/results/kafka-source.json`` and
the table of docs/performance.md between ``<!-- bench:kafka-source -->`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.served_load import write_block
from bench.server_process import ServerProcess, prepare_root
from bench.tansu_broker import TansuBroker
from streamshield.client import parse_sse

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "kafka-source.json"
MARK_BEGIN, MARK_END = "<!-- bench:kafka-source -->", "<!-- /bench:kafka-source -->"
USERS = {"joe": ["ADMIN"], "feed": ["PROV"], "al": ["R1"]}
POST_LINES = 5000
SP = {
    "type": "sp",
    "ts": 100,
    "ddp": {"streams": "ticks", "tuples": "*", "attributes": "*"},
    "srp": {"roles": "{R1}", "grant_option": False},
    "sign": "+",
    "immutable": False,
}


def _tuple(tid: int, sent: int = 0) -> str:
    return json.dumps({"type": "tuple", "values": {"id": tid, "v": tid % 97, "sent": sent}})


def _ok(answer: httpx.Response, status: int = 200) -> dict:
    if answer.status_code != status:
        raise RuntimeError(f"{answer.request.method} {answer.request.url}: {answer.text}")
    return answer.json() if answer.content else {}


class Watcher:
    """Al's subscription in a thread: each row's receive time minus its ``sent``."""

    def __init__(self, server: ServerProcess, token: str) -> None:
        self.latencies: dict[int, float] = {}  # id -> seconds (rows with a send time)
        self.rows = 0
        self._client = server.client(token)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        timeout = httpx.Timeout(60, read=None)
        try:
            with self._client.stream("GET", "/queries/alq/subscribe", timeout=timeout) as r:
                for event, data in parse_sse(r.iter_lines()):
                    if event != "rows":
                        continue
                    now = time.time() * 1000
                    for row in data["rows"]:
                        self.rows += 1
                        if row["sent"]:
                            self.latencies[row["id"]] = (now - row["sent"]) / 1000
        except httpx.HTTPError:
            pass


class Bench:
    def __init__(self, workdir: Path, records: int) -> None:
        self.records = records
        self.broker = TansuBroker(workdir / "broker.log")
        root = workdir / "root"
        prepare_root(root, None, ["ADMIN", "PROV", "R1"], USERS)
        self.server = ServerProcess(root)
        self.server.wait_ready()
        self.joe = self.server.login("joe", ["ADMIN"])
        self.feed = self.server.login("feed", ["PROV"])
        schema = {
            "name": "tick",
            "attributes": [["id", "bigint"], ["v", "bigint"], ["sent", "bigint"]],
            "tid": "id",
        }
        _ok(self.joe.post("/schemas", json=schema), 201)
        _ok(self.joe.post("/streams", json={"name": "ticks", "schema": "tick"}), 201)
        for permission, role in (
            ("WRITE", "PROV"),
            ("INJECT SP", "PROV"),
            ("VIEW OBJECT", "PROV"),
            ("READ TUPLE", "R1"),
            ("VIEW OBJECT", "R1"),
            ("ADD", "R1"),
        ):
            kind, obj = ("system", "system") if permission == "ADD" else ("stream", "ticks")
            body = {"permission": permission, "kind": kind, "object": obj, "role": role}
            _ok(self.joe.post("/grants", json=body))
        al = self.server.login("al", ["R1"])
        query = {"name": "alq", "text": "SELECT id, sent FROM ticks"}
        _ok(al.post("/queries", json=query), 201)
        self.watcher = Watcher(self.server, al.headers["Authorization"].split()[1])
        self.next_id = 1

    def ids(self, count: int) -> range:
        first = self.next_id
        self.next_id += count
        return range(first, first + count)

    def kafka(self, rep: int) -> float:
        topic, name = f"backlog{rep}", f"backlog{rep}"
        self.broker.create_topic(topic, 1)
        self.broker.produce(topic, 0, [SP, *(_tuple(i) for i in self.ids(self.records))])
        began = time.monotonic()
        self._bind(name, topic, f"feed.k{rep}")
        self._landed(name, self.records + 1)
        seconds = time.monotonic() - began
        _ok(self.joe.delete(f"/connectors/kafka/{name}"), 200)
        return self.records / seconds

    def http(self, rep: int) -> float:
        provider = f"feed.h{rep}"
        lines = [json.dumps({**SP, "provider": provider})]
        lines += [
            json.dumps({**json.loads(_tuple(i)), "provider": provider})
            for i in self.ids(self.records)
        ]
        began = time.monotonic()
        for start in range(0, len(lines), POST_LINES):
            self._post("\n".join(lines[start : start + POST_LINES]))
        return self.records / (time.monotonic() - began)

    def plain(self, spark, rep: int, warm_up: bool = False) -> float:
        if warm_up:
            self.broker.create_topic("backlog-1", 1)
            self.broker.produce("backlog-1", 0, [_tuple(0)] * (self.records + 1))
        began = time.monotonic()
        reader = spark.read.format("bench_kafka").option("servers", self.broker.address)
        reader = reader.option("count", self.records + 1)
        count = reader.option("topic", f"backlog{rep}").load().count()
        seconds = time.monotonic() - began
        if count != self.records + 1:
            raise RuntimeError(f"plain Spark read {count} records")
        return self.records / seconds

    def latency(self, rep: int, rate: float, seconds: float) -> dict[str, list[float]]:
        topic, name = f"paced{rep}", f"paced{rep}"
        self.broker.create_topic(topic, 1)
        self.broker.produce(topic, 0, [SP])
        self._bind(name, topic, f"feed.p{rep}")
        provider = f"feed.q{rep}"
        _ok(self.feed.post("/streams/ticks/elements?assign=seq", content=json.dumps(
            {**SP, "provider": provider})))  # fmt: skip
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.broker.address, "linger.ms": 0})
        sent: dict[str, list[int]] = {"kafka": [], "http": []}
        per_tick = max(1, round(rate * 0.05))
        began = time.monotonic()
        tick = 0
        while time.monotonic() - began < seconds:
            now = int(time.time() * 1000)
            for tid in self.ids(per_tick):
                producer.produce(topic, _tuple(tid, now), partition=0)
                sent["kafka"].append(tid)
            producer.flush(5)
            if tick % 2 == 0:  # a post every 100 ms, as many records
                tids = list(self.ids(2 * per_tick))
                body = "\n".join(
                    json.dumps({**json.loads(_tuple(t, now)), "provider": provider}) for t in tids
                )
                self._post(body)
                sent["http"] += tids
            tick += 1
            time.sleep(max(0.0, began + tick * 0.05 - time.monotonic()))
        deadline = time.monotonic() + 60
        wanted = set(sent["kafka"]) | set(sent["http"])
        while time.monotonic() < deadline and not wanted <= self.watcher.latencies.keys():
            time.sleep(0.2)
        _ok(self.joe.delete(f"/connectors/kafka/{name}"), 200)
        got = self.watcher.latencies
        return {path: [got[t] for t in tids if t in got] for path, tids in sent.items()} | {
            "missing": [float(len(wanted - got.keys()))]
        }

    def _post(self, body: str) -> None:
        """One append, sent again after ``Retry-After`` while ingest is behind (503), as
        a provider does; nothing else may be refused."""
        while True:
            answer = self.feed.post("/streams/ticks/elements?assign=seq", content=body)
            if answer.status_code != 503:
                break
            time.sleep(min(5.0, float(answer.headers.get("retry-after", 1))))
        if _ok(answer)["rejected"]:
            raise RuntimeError(f"rejected: {answer.json()['rejections'][:3]}")

    def _bind(self, name: str, topic: str, provider: str) -> None:
        binding = {
            "name": name,
            "stream": "ticks",
            "bootstrap_servers": self.broker.address,
            "topic": topic,
            "partitions": {"0": {"user": "feed", "provider": provider}},
        }
        _ok(self.joe.post("/connectors/kafka", json=binding), 201)

    def _landed(self, name: str, offsets: int, bound: float = 600) -> None:
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            state = _ok(self.joe.get(f"/connectors/kafka/{name}"))["partitions_state"][0]
            if (state["next_offset"] or 0) >= offsets:
                return
            time.sleep(0.05)
        raise RuntimeError(f"binding {name} did not land {offsets} records in {bound} s")

    def close(self) -> None:
        self.server.kill()
        self.broker.stop()


def _plain_spark():
    """This process's own Spark, with a Python data source reading one partition of a
    topic with confluent-kafka (the records' values as strings)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class KafkaReader(DataSourceReader):
        def __init__(self, options: dict) -> None:
            self.options = options

        def read(self, partition):
            from confluent_kafka import Consumer, TopicPartition

            consumer = Consumer(
                {
                    "bootstrap.servers": self.options["servers"],
                    "group.id": "bench-plain",
                    "enable.auto.commit": False,
                }
            )
            topic, count = self.options["topic"], int(self.options["count"])
            consumer.assign([TopicPartition(topic, 0, 0)])
            read = 0
            while read < count:  # the count, not the high watermark (Tansu reports it low)
                for message in consumer.consume(5000, 1.0):
                    if message.error() is None:
                        read += 1
                        yield (message.offset(), message.value().decode())
            consumer.close()

    class KafkaSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_kafka"

        def schema(self) -> str:
            return "offset bigint, value string"

        def reader(self, schema):
            return KafkaReader(self.options)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.master("local[2]").appName("bench-kafka-plain").getOrCreate()
    spark.dataSource.register(KafkaSource)
    return spark


def _summary(values: list[float]) -> dict:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
        "runs": [round(v, 1) for v in values],
    }


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def run(args: argparse.Namespace) -> dict:
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {"kafka": [], "http": [], "plain_spark": []}
    latencies: dict[str, list[float]] = {"kafka": [], "http": []}
    missing = 0.0
    spark = _plain_spark()
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as workdir:
        bench = Bench(Path(workdir), args.records)
        try:
            bench.plain(spark, -1, warm_up=True)  # the Python worker's first start
            for rep in range(args.repeats):
                order = ["kafka", "http"] if rep % 2 == 0 else ["http", "kafka"]
                for path in order:
                    rates[path].append(getattr(bench, path)(rep))
                rates["plain_spark"].append(bench.plain(spark, rep))
                paced = bench.latency(rep, args.rate, args.seconds)
                for path in latencies:
                    latencies[path] += paced[path]
                missing += paced["missing"][0]
        finally:
            bench.close()
            spark.stop()
    return {
        "argv": args.argv,
        "records": args.records,
        "repeats": args.repeats,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "records_per_second": {path: _summary(values) for path, values in rates.items()},
        "latency_seconds": {
            path: {
                "rate": args.rate,
                "rows": len(values),
                "p50": _quantile(values, 0.5),
                "p95": _quantile(values, 0.95),
                "p99": _quantile(values, 0.99),
            }
            for path, values in latencies.items()
        },
        "rows_missing": int(missing),
    }


def table(result: dict) -> str:
    rates, lat = result["records_per_second"], result["latency_seconds"]
    names = {"kafka": "Kafka source", "http": "HTTP append (5,000-line posts)"}
    lines = [
        MARK_BEGIN,
        f"Generated by `{' '.join(['python -m bench.kafka_source', *result['argv']])}` (2 cores, "
        f"load average {' '.join(map(str, result['load_before']))} before, "
        f"{' '.join(map(str, result['load_after']))} after; {result['records']:,} records "
        f"per run, {result['repeats']} interleaved runs):",
        "",
        "| path | records/s, median (min-max) | latency at "
        f"{lat['kafka']['rate']:g}/s, p50 / p95 / p99 |",
        "|---|---|---|",
    ]
    for path in ("kafka", "http"):
        r, l_ = rates[path], lat[path]
        lines.append(
            f"| {names[path]} | {r['median']:,.0f} ({r['min']:,.0f}-{r['max']:,.0f}) | "
            f"{l_['p50']} s / {l_['p95']} s / {l_['p99']} s |"
        )
    r = rates["plain_spark"]
    lines.append(
        f"| plain Spark reading the same topic (Python data source, no security) | "
        f"{r['median']:,.0f} ({r['min']:,.0f}-{r['max']:,.0f}) | - |"
    )
    lines += ["", f"Rows not delivered within 60 s: {result['rows_missing']}.", MARK_END]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rate", type=float, default=200.0, help="records/s, latency phase")
    parser.add_argument("--seconds", type=float, default=15.0, help="latency phase")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--doc", default=str(ROOT / "docs" / "performance.md"))
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    result = run(args)
    print(json.dumps(result, indent=2))
    if not args.no_write:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        write_block(Path(args.doc), table(result))
    return result


if __name__ == "__main__":
    main()
