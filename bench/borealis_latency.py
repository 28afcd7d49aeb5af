"""Secured-Borealis paper, Fig. 14: tuple latency with and without security.

``python -m bench.borealis_latency [--quick]``. The paper times the processing of a
tuple through queries of 4-64 boxes with SecFilter enabled and disabled (Fig. 14; its
text gives no number, only that the overhead "stays constant" while processing grows,
which Fig. 15 turns into 9% -> 1%). Ours times a tuple batch from ingest to delivery,
in the same Spark session, the two arms alive together and alternating round by round:

The paper's x axis is the query's size (4 to 64 boxes); ours is too: ``--boxes``
gives the operators of ``bench.borealis_setup.query_text`` (half computed columns, half
conjuncts, the queries of Figs. 11-12), each size measured in its own interleaved rounds.

* **secured**: the real server (HTTPS on loopback, ``bench.revocation_server``'s
  ``busy_root_server``, in this process) with Al's query of that size and Al's live SSE
  subscription; Ed POSTs ``tuples`` rows; the latency is from before the POST to Al's
  reader receiving the ``rows`` event (as ``bench.landing_latency``): TLS, OxRBAC on the
  POST, landing, secure ingest (labels, the SS analyser) at the server's ingest trigger,
  the query over its secured view at the default trigger, SecFilter delivery and SSE.
* **plain**: the same two-stage pipeline in plain Spark without any of the security:
  the rows written as one JSON-lines file into a directory (atomic rename), a
  streaming query parsing it into Parquet at the same trigger as the server's ingest, and
  a second streaming query running the same SQL at the default trigger, its
  ``foreachBatch`` collecting the rows to the driver (the delivery). The latency is from
  before the file is written to the collect returning. No HTTP, TLS, labels, policies
  or delivery checks: this arm is what the pipeline costs when nothing is secured.

The difference is therefore all the security work *and* the server's transport (HTTP,
TLS, SSE), which the paper's unprotected Borealis also had and ours cannot separate
from the secured server; ``bench.landing_latency`` profiles where the secured arm's
time goes. The first round of each arm warms up and is not reported.
Writes ``bench/results/borealis-latency.json`` and ``docs/img/borealis-latency.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from bench import experiment_common as ec
from bench import plots
from bench.borealis_setup import query_text
from bench.plots import Caption, Panel, Series, publish
from bench.revocation_server import (
    STREAM,
    Provider,
    Subscriber,
    busy_root_server,
    ok,
    set_up_stream,
    wait_for,
)
from streamshield.server.service import INGEST_TRIGGER_SECONDS

DOCS = Path(__file__).resolve().parent.parent / "docs"
SCHEMA = "id bigint, symbol string, price double"


class PlainPipeline:
    """Landing directory -> Parquet (the ingest trigger) -> the query -> collect: no security."""

    def __init__(self, spark: SparkSession, root: Path, text: str) -> None:
        self.spark, self.root = spark, root
        self.inbox, self.table = root / "in", root / "table"
        self.inbox.mkdir(parents=True)
        self.table.mkdir(parents=True)
        self.arrivals: list[tuple[float, int]] = []  # monotonic time, rows collected
        self._lock = threading.Lock()
        self.rng = random.Random(5)
        self.next_id, self.files = 1, 0
        ingest = spark.readStream.schema(SCHEMA).json(str(self.inbox))
        self.ingest = (
            ingest.writeStream.format("parquet")
            .option("path", str(self.table))
            .option("checkpointLocation", str(root / "ck-ingest"))
            .trigger(processingTime=f"{INGEST_TRIGGER_SECONDS} seconds")
            .start()
        )
        view = f"plain_{root.name}"
        spark.readStream.schema(SCHEMA).parquet(str(self.table)).createOrReplaceTempView(view)
        self.query = (
            spark.sql(text.replace(f"FROM {STREAM} ", f"FROM {view} "))
            .writeStream.foreachBatch(self._deliver)
            .option("checkpointLocation", str(root / "ck-query"))
            .start()
        )

    def _deliver(self, frame: DataFrame, _batch: int) -> None:
        rows = frame.collect()
        if rows:
            with self._lock:
                self.arrivals.append((time.monotonic(), len(rows)))

    def post(self, tuples: int) -> float:
        """Writes ``tuples`` rows as one file; the latency until they are collected."""
        seen = len(self.arrivals)
        began = time.monotonic()
        lines = []
        for _ in range(tuples):
            price = round(self.rng.uniform(0, 100), 2)
            lines.append(json.dumps({"id": self.next_id, "symbol": "S1", "price": price}))
            self.next_id += 1
        staged = self.root / f"f{self.files}.tmp"
        staged.write_text("\n".join(lines) + "\n")
        os.rename(staged, self.inbox / f"f{self.files}.json")
        self.files += 1
        arrived = wait_for(lambda: self.arrivals[seen:], timeout=300)
        return arrived[0][0] - began  # type: ignore[index]

    def stop(self) -> None:
        for query in (self.ingest, self.query):
            query.stop()


def run(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Per query size, both arms' latencies (ms): one server, one plain pipeline per size."""
    spark = ec.session()
    rng = random.Random(3)
    root = Path(tempfile.mkdtemp(prefix="streamshield-borealis-latency-"))
    samples: dict[str, dict[str, list[float]]] = {}
    try:
        with busy_root_server(spark, root / "server") as server:
            set_up_stream(server)
            provider = Provider(server.login("ed"), args.tuples, posts=1.0, seed=3)
            try:
                for boxes in args.boxes:
                    samples[str(boxes)] = _one_size(spark, server, provider, root, boxes, args, rng)
            finally:
                provider.client.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return samples


def _one_size(spark, server, provider, root: Path, boxes: int, args, rng) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    """Interleaved rounds of one query size; its query and pipeline are gone afterwards, so
    that the next size's rounds do not pay for them."""
    text, name = query_text(boxes), f"al_q{boxes}"
    with server.login("al") as al:
        ok(al.post("/queries", json={"name": name, "text": text}), 201)
    subscriber = Subscriber(server.login("al"), name)
    plain = PlainPipeline(spark, root / f"plain{boxes}", text)
    samples: dict[str, list[float]] = {"plain": [], "secured": []}

    def secured(index: int) -> float:
        seen = len(subscriber.rows_events())
        began = time.monotonic()
        if not provider.post(first=index == 0 and boxes == args.boxes[0]):
            raise RuntimeError(f"the POST was refused: {provider.errors[-1:]}")
        arrived = wait_for(lambda: subscriber.rows_events()[seen:], timeout=300)
        return arrived[0] - began  # type: ignore[index]

    arms = {"plain": lambda _i: plain.post(args.tuples), "secured": secured}
    try:
        for index in range(args.repeats + 1):  # round 0 warms both up
            for arm in arms if index % 2 == 0 else reversed(list(arms)):
                latency = arms[arm](index)
                if index:
                    samples[arm].append(round(latency * 1000, 1))
                time.sleep(rng.uniform(0.1, 1.0))  # a random phase against triggers
            print(boxes, {k: v[-1:] for k, v in samples.items()}, flush=True)
    finally:
        plain.stop()
        subscriber.close()
        subscriber.client.close()
        with server.login("al") as al:
            ok(al.delete(f"/queries/{name}"), 200)
    return samples


def by_size(result: dict) -> tuple[list[int], dict[str, list[float]]]:
    """Query sizes and latencies; results of the first version (one size, no ``boxes``)
    read as that single query of 2 operators."""
    latency = result["latency_ms"]
    if "plain" in latency:
        return [2], {"2": latency}
    return [int(b) for b in latency], latency


def panels(result: dict) -> list[Panel]:
    sizes, latency = by_size(result)
    keys = [str(b) for b in sizes]
    over = [
        [a - b for a, b in zip(latency[k]["secured"], latency[k]["plain"], strict=True)]
        for k in keys
    ]
    xlabel = f"operators of the query ({result['tuples']} rows per POST / file)"
    return [
        Panel(
            "tuple latency, ingest to delivery [paper 14]",
            xlabel,
            "ms",
            sizes,
            [
                Series("plain Spark pipeline", [latency[k]["plain"] for k in keys]),
                Series("secured server", [latency[k]["secured"] for k in keys]),
            ],
            note="processing times with SecFilter enabled and disabled, the overhead constant "
            "as queries grow (no numbers in the text)",
            log_x=len(sizes) > 1,
        ),
        Panel(
            "secured - plain, paired within a round",
            xlabel,
            "ms",
            sizes,
            [Series("secured - plain", over)],
            log_x=len(sizes) > 1,
        ),
    ]


def render(result: dict, out: Path) -> Path:
    title = "Secured Borealis Fig. 14 on Spark: latency with and without security"
    return publish(panels(result), out, "borealis-latency", title, Caption.of(result))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = plots.experiment_parser(__doc__, "borealis-latency", DOCS, "two rounds of 100 rows")
    parser.add_argument("--tuples", type=int, default=1000, help="rows per POST")
    parser.add_argument("--repeats", type=int, default=6, help="interleaved rounds per size")
    parser.add_argument(
        "--boxes", type=int, nargs="+", default=[4, 16, 64], help="query sizes (operators)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.tuples, args.repeats, args.boxes = 100, 2, [2]
    return args


def fields(args: argparse.Namespace) -> dict:
    """What this bench adds to its results JSON (measured now)."""
    return {
        "data": f"{args.tuples} rows per POST (secured) or file (plain), one query of "
        f"{'/'.join(map(str, args.boxes))} operators at a time, one subscriber; "
        f"{args.repeats} interleaved rounds per size after a warm-up round",
        "tuples": args.tuples,
        "latency_ms": run(args),
    }


def main(argv: list[str] | None = None) -> dict:
    return plots.run_experiment(
        argv, parse, "borealis_latency", "borealis-latency", DOCS, fields, render
    )


if __name__ == "__main__":
    main()
