"""How wide the row a shared network's fused pass writes is, for N branches.

One command: ``.venv/bin/python -m bench.fused_row_width [--queries 1 4 16 64]``. The
branches are ``bench.sharing_scale``'s N users (roles cycling C, GP, ND, E, D, four
thresholds); the figure is the number of values (leaf columns) per written row, read
from the pass's plan over an empty batch: no job runs and nothing is timed, so the load
does not matter. Since each row is stored once (engine/sharing/fused_branches.py) it does not
grow with N; before, every branch added a struct of its own output columns.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from pyspark.sql.types import DataType, StructType

from bench.sharing_scale import Sink, user_query
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.session import spark_session
from streamshield.engine.sharing.branched_network import NetworkParts
from streamshield.engine.sharing.fused_branches import FusedBranch, fused_pass
from streamshield.engine.sharing.shared_network import SharedNetwork
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.lang.rewrite_rules import secure


def leaves(dtype: DataType) -> int:
    if isinstance(dtype, StructType):
        return sum(leaves(f.dataType) for f in dtype.fields)
    return 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, nargs="+", default=[1, 4, 16, 64])
    args = parser.parse_args()
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="ss-width-"))
    queries = Pipeline(spark, hospital_catalog(root / "catalog.db"), root).queries
    parts = NetworkParts(
        spark,
        queries.labelled,
        queries.streams["HeartRate"],
        queries.codec,
        queries.provenance,
        root / "network",
    )
    network = SharedNetwork(parts, fuse=True)
    empty = spark.createDataFrame([], network._schema())
    for n in sorted(set(args.queries)):
        while len(network.branches) < n:
            i = len(network.branches)
            text, roles = user_query(i)
            admitted = queries.admit(text, roles)

            def sql(view: str, admitted=admitted) -> str:
                return secure(admitted.checked.tree, queries.rewrite({"HeartRate": view}))

            network.add(f"user{i:02d}", admitted, sql, Sink())
        branches = [b.fused for b in network.branches.values()]
        fused = tuple(b for b in branches if isinstance(b, FusedBranch))
        wide = fused_pass(fused).over(empty)
        print(f"{n} branches ({len(fused)} fused): {leaves(wide.schema)} values per row")


if __name__ == "__main__":
    main()
