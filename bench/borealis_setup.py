"""Secured-Borealis paper, Figs. 11 and 12: query setup time, and the security share of it.

``python -m bench.borealis_setup [--quick]``. The paper starts six queries of growing
complexity (Q1 4 objects with 2 boxes ... Q6 140 objects with 128 boxes) ten times
each, unprotected and secured (Fig. 11: setup time, the security work stacked on the
unprotected bars; Fig. 12: security overhead, "from around 18% with a very simple query
... to around 5% with Query 6", section 4.2).

Ours registers each query through the API of a real server (HTTPS on loopback,
``bench.revocation_server.busy_root_server``: the server app and service in this
process, one Spark session): Al ``POST /queries`` until the 201, then ``DELETE``. The
six queries are selections over one stream with ``boxes`` operators: ``boxes / 2``
conjuncts in ``WHERE`` and ``boxes / 2`` computed columns (2, 4, 16, 32, 64, 128 as the
paper's boxes; our queries read one stream, the paper's 1-6: see docs/experiments.md).
Carol's query runs throughout, so the stream's shared network is running and a
registration adds a branch to it, as any query after the first does.

**Security work** is timed inside the registration by wrapping, for the duration of
the bench only (:func:`timing_hooks`; nothing changes when it is off), every security
step the registration path takes: OxRBAC (``security_port.seen_streams``, ``add_query``
with its ADD/READ/quota checks and catalog record, ``registered`` with its audit entry,
the session's Chinese-Wall level), the operator limits, and the security rewrite
(``rewrite_rules.secure``, the secured projection of a branch, secured views). The
**rest** (= what an unprotected system does: parsing and checking the SQL, planning
the branch with Spark, HTTP and TLS) is the client's time minus the security work; it
is our "unprotected" bar. Secured and unprotected are therefore the same
registrations, split, not two servers: our server has no switch to run without
security, and adding one only for a bench would measure a code path no one runs. The
SQL check (``check_query``) is reported on its own and counted in the rest, since an
unprotected system parses and validates too.

Rounds are interleaved: every round registers Q1..Q6 (reversed every other round).
Writes ``bench/results/borealis-setup.json`` and ``docs/img/borealis-setup.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench import experiment_common as ec
from bench import plots
from bench.plots import Caption, Panel, PaperPoint, Series, publish
from bench.revocation_server import STREAM, busy_root_server, ok, set_up_stream

DOCS = Path(__file__).resolve().parent.parent / "docs"
BOXES = (2, 4, 16, 32, 64, 128)  # the paper's boxes of Q1..Q6
PAPER_OBJECTS = (4, 8, 22, 40, 74, 140)
# Section 4.2, in its text: the overhead falls from ~18% (Q1) to ~5% (Q6); Fig. 11 has
# no number in the text (our copy has captions only), so nothing of it is drawn.
PAPER = {"share_pct_q1": 18.0, "share_pct_q6": 5.0}
ANCHOR = "SELECT id, price FROM feed WHERE price > 50"


def query_text(boxes: int) -> str:
    """A selection with ``boxes`` operators: half computed columns, half conjuncts."""
    half = max(1, boxes // 2)
    columns = ", ".join(f"price + {i} AS p{i}" for i in range(half))
    where = " AND ".join(f"price > {-1 - i}" for i in range(half))
    return f"SELECT id, {columns} FROM {STREAM} WHERE {where}"


class Timings:
    """Seconds per hook, only the outermost hook of a nested call counted."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.local = threading.local()

    def wrap(self, name: str, function: Callable) -> Callable:
        @functools.wraps(function)
        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            depth = getattr(self.local, "depth", 0)
            self.local.depth = depth + 1
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.local.depth = depth
                if depth == 0:
                    spent = time.perf_counter() - began
                    self.seconds[name] = self.seconds.get(name, 0.0) + spent

        return timed

    def take(self) -> dict[str, float]:
        taken, self.seconds = self.seconds, {}
        return taken


SECURITY = (
    "oxrbac: visible streams",
    "oxrbac: add query (ADD, READ, quota, record)",
    "oxrbac: session level",
    "operator limits",
    "rewrite: secure",
    "rewrite: secured projection",
    "rewrite: secured view",
)


@contextlib.contextmanager
def timing_hooks(timings: Timings) -> Iterator[None]:
    """Wraps the security steps of registration (and the SQL check) while inside."""
    from streamshield.engine.queries import cql_service, streaming_queries, window_query
    from streamshield.engine.views.secured_view import SecuredProjection
    from streamshield.lang import admission
    from streamshield.policy.operator_limits import OperatorLimits
    from streamshield.server import security_port

    functions = [
        (security_port, "seen_streams", SECURITY[0]),
        (security_port, "add_query", SECURITY[1]),
        (security_port, "registered", SECURITY[1]),
        (security_port, "session_query_level", SECURITY[2]),
        (OperatorLimits, "check", SECURITY[3]),
        (cql_service, "secure", SECURITY[4]),
        (streaming_queries, "secure", SECURITY[4]),
        (streaming_queries, "secured_view", SECURITY[6]),
        (window_query, "secured_view", SECURITY[6]),
        (admission, "check_query", "sql check (counted in the rest)"),
    ]
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in functions]
    of = SecuredProjection.__dict__["of"]
    try:
        for owner, attr, name in functions:
            setattr(owner, attr, timings.wrap(name, getattr(owner, attr)))
        SecuredProjection.of = classmethod(timings.wrap(SECURITY[5], of.__func__))  # type: ignore[method-assign]
        yield
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)
        SecuredProjection.of = of  # type: ignore[method-assign]


def run(args: argparse.Namespace) -> list[dict]:
    spark = ec.session()
    root = Path(tempfile.mkdtemp(prefix="streamshield-borealis-setup-"))
    samples: dict[int, list[dict]] = {b: [] for b in args.boxes}
    timings = Timings()
    try:
        with busy_root_server(spark, root) as server:
            set_up_stream(server)
            with server.login("carol") as carol:
                ok(carol.post("/queries", json={"name": "anchor", "text": ANCHOR}), 201)
            with server.login("al") as al, timing_hooks(timings):
                for r in range(args.repeats + 1):  # round 0 warms up, not reported
                    for boxes in args.boxes if r % 2 == 0 else reversed(args.boxes):
                        name = f"q{boxes}_{r}"
                        timings.take()
                        began = time.perf_counter()
                        ok(al.post("/queries", json={"name": name, "text": query_text(boxes)}), 201)
                        total = time.perf_counter() - began
                        parts = timings.take()
                        ok(al.delete(f"/queries/{name}"))
                        if r:
                            samples[boxes].append({"total_s": total, **parts})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    for boxes in args.boxes:
        got = samples[boxes]
        security = [sum(s.get(k, 0.0) for k in SECURITY) for s in got]
        totals = [s["total_s"] for s in got]
        row = {
            "query": BOXES.index(boxes) + 1 if boxes in BOXES else None,
            "boxes": boxes,
            "total_ms": [round(t * 1000, 3) for t in totals],
            "security_ms": [round(s * 1000, 3) for s in security],
            "rest_ms": [round((t - s) * 1000, 3) for t, s in zip(totals, security, strict=True)],
            "share_pct": [round(100 * s / t, 2) for t, s in zip(totals, security, strict=True)],
            "parts_ms": {
                k: round(statistics.median(s.get(k, 0.0) for s in got) * 1000, 3)
                for k in sorted({k for s in got for k in s if k != "total_s"})
            },
        }
        print(row, flush=True)
        rows.append(row)
    return rows


def panels(result: dict) -> list[Panel]:
    rows = result["rows"]
    xs = [r["boxes"] for r in rows]
    paper = []
    if 2 in xs:
        paper.append(PaperPoint(2, PAPER["share_pct_q1"], "~18% at Q1"))
    if 128 in xs:
        paper.append(PaperPoint(128, PAPER["share_pct_q6"], "~5% at Q6"))
    label = "operators in the query (the paper's boxes of Q1..Q6)"
    return [
        Panel(
            "setup time: secured vs its unprotected part [paper 11]",
            label,
            "ms per registration",
            xs,
            [
                Series("secured (POST /queries to 201)", [r["total_ms"] for r in rows]),
                Series("unprotected part (total - security)", [r["rest_ms"] for r in rows]),
            ],
            log_x=True,
            note="setup time grows with the query; the security work on top grows only "
            "a little (no numbers in the text)",
        ),
        Panel(
            "security work in the setup [paper 11, top of the bars]",
            label,
            "ms per registration",
            xs,
            [Series("security work (timed hooks)", [r["security_ms"] for r in rows])],
            log_x=True,
        ),
        Panel(
            "security share of the setup time [paper 12]",
            label,
            "% of the setup time",
            xs,
            [Series("security / total", [r["share_pct"] for r in rows])],
            paper=paper,
            log_x=True,
        ),
    ]


def render(result: dict, out: Path) -> Path:
    title = "Secured Borealis Figs. 11-12 on Spark: query setup through the API"
    figure = panels(result)
    path = publish(figure, out, "borealis-setup", title, Caption.of(result), columns=3)
    parts = sorted({k for r in result["rows"] for k in r["parts_ms"]})
    table = plots.markdown_table(
        [
            {"boxes": r["boxes"], **{k: r["parts_ms"].get(k, 0.0) for k in parts}}
            for r in result["rows"]
        ],
        ["boxes", *parts],
    )
    key = "borealis-setup-parts"
    plots.replace_block(
        out / "experiments.md", key, "Median ms per step of registration:\n\n" + table
    )
    return path


def parse(argv: list[str]) -> argparse.Namespace:
    parser = plots.experiment_parser(__doc__, "borealis-setup", DOCS, "Q1 and Q3, one round")
    parser.add_argument("--boxes", type=int, nargs="+", default=list(BOXES))
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.boxes, args.repeats = [2, 16], 1
    return args


def fields(args: argparse.Namespace) -> dict:
    """What this bench adds to its results JSON (measured now)."""
    return {
        "data": f"queries of {', '.join(map(str, args.boxes))} operators over one stream "
        f"(no data flowing), registered by one user next to one running query; "
        f"{args.repeats} interleaved rounds after a warm-up round",
        "paper": PAPER,
        "rows": run(args),
    }


def main(argv: list[str] | None = None) -> dict:
    return plots.run_experiment(
        argv, parse, "borealis_setup", "borealis-setup", DOCS, fields, render
    )


if __name__ == "__main__":
    main()
