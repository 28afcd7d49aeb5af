"""Append throughput through a real ``streamshield serve`` process (served ingest).

One server (``bench.server_process``) on a fresh root with one stream; ``--providers``
users each POST ``/streams/s/elements?assign=seq`` bodies of ``--lines`` ndjson lines
(``{"values": {...}}``; each provider's first post starts with an sp line) back to back
for ``--posts`` posts. Reported: the latency of one post (median, p99, max) per body
size, and the tuples per second the server accepted over all providers in parallel.
Admission control is off (``--max-ingest-backlog 0 --ingest-latency-budget 0``): the
append path itself is measured, not how fast ingest drains; ``--admission`` keeps the
server's defaults, and a post refused with 503 ``ingest_backlog`` is then sent again
after its Retry-After (counted as ``refused``; its wait is in the post's latency).
``--pid-file`` writes the server's pid (for ``py-spy record --pid``).

``python -m bench.append_post [--lines 1250 5000] [--providers 1 4] [--posts 20]
[--admission]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.server_process import ServerProcess, prepare_root

STREAM = "s"
SP = {
    "type": "sp",
    "ts": 1,
    "sn": 1,
    "ddp": {"streams": "*", "tuples": "*", "attributes": "*"},
    "srp": {"roles": "{R1}", "grant_option": False},
    "sign": "+",
    "immutable": False,
}


def body(provider: int, start: int, lines: int, with_sp: bool) -> str:
    rows = [json.dumps({**SP, "ts": int(time.time() * 1e6)})] if with_sp else []
    now = int(time.time() * 1000)
    for n in range(start, start + lines):
        tid = provider * 1_000_000_000 + n
        rows.append(json.dumps({"values": {"id": tid, "chan": f"p{provider}", "n": n, "t": now}}))
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, nargs="+", default=[1250, 5000])
    parser.add_argument("--providers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--posts", type=int, default=20)
    parser.add_argument("--pid-file", type=Path)
    parser.add_argument("--admission", action="store_true")
    args = parser.parse_args()
    most = max(args.providers)
    users = {"joe": ["ADMIN"]} | {f"p{i}": ["PROV"] for i in range(most)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        prepare_root(root, None, ["ADMIN", "PROV", "R1"], users)
        off = ["--max-ingest-backlog", "0", "--ingest-latency-budget", "0"]
        server = ServerProcess(root, options=[] if args.admission else off)
        try:
            server.wait_ready()
            if args.pid_file:
                args.pid_file.write_text(str(server.pid))
            run(server, args, most)
        finally:
            server.stop()


def run(server: ServerProcess, args: argparse.Namespace, most: int) -> None:
    with server.login("joe", ["ADMIN"]) as admin:
        attributes = [["id", "bigint"], ["chan", "string"], ["n", "bigint"], ["t", "bigint"]]
        schema = {"name": "tick", "attributes": attributes, "tid": "id"}
        admin.post("/schemas", json=schema).raise_for_status()
        admin.post("/streams", json={"name": STREAM, "schema": "tick"}).raise_for_status()
        for permission in ("WRITE", "INJECT SP", "VIEW OBJECT"):
            grant = {"permission": permission, "kind": "stream", "object": STREAM, "role": "PROV"}
            admin.post("/grants", json=grant).raise_for_status()
    clients = [server.login(f"p{i}", ["PROV"]) for i in range(most)]
    next_n = [1] * most
    results = []
    for lines in args.lines:
        for providers in args.providers:
            times: list[float] = []
            accepted, refused = [0], [0]
            lock = threading.Lock()

            def provider(
                i: int, lines=lines, times=times, accepted=accepted, refused=refused, lock=lock
            ) -> None:
                for _ in range(args.posts):
                    text = body(i, next_n[i], lines, next_n[i] == 1)
                    began = time.perf_counter()
                    while True:
                        answer = clients[i].post(
                            f"/streams/{STREAM}/elements", params={"assign": "seq"}, content=text
                        )
                        if answer.status_code != 503:
                            break
                        with lock:
                            refused[0] += 1
                        time.sleep(float(answer.headers.get("Retry-After", "1")))
                    took = time.perf_counter() - began
                    answer.raise_for_status()
                    got = answer.json()
                    assert got["rejected"] == 0, got
                    next_n[i] += lines
                    with lock:
                        times.append(took)
                        accepted[0] += got["accepted"]

            began = time.perf_counter()
            threads = [threading.Thread(target=provider, args=(i,)) for i in range(providers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - began
            times.sort()
            row = {
                "lines": lines,
                "providers": providers,
                "posts": len(times),
                "median_s": round(statistics.median(times), 4),
                "p99_s": round(times[min(len(times) - 1, int(len(times) * 0.99))], 4),
                "max_s": round(times[-1], 4),
                "accepted_per_s": round(accepted[0] / wall),
                "refused": refused[0],
            }
            results.append(row)
            print(json.dumps(row), flush=True)
    for client in clients:
        client.close()


if __name__ == "__main__":
    main()
