"""The select nodes of a merged network as Spark filters over labelled rows, each shared
node computed once per micro-batch (docs/query-sharing.md).

Both networks of a stream use it: the selection network over the scan's rows
(engine/sharing/shared_network.py) and the window network over each window node's relation
(engine/sharing/window_network.py, CW Figs. 3-5). A shared select is a pre-filter on *raw*
values, run before any branch's security, so it may only ever drop rows its consumers
would drop themselves:

- it is built from conjuncts every consumer's WHERE implies (the merge's Defs. 7-8);
- an atom is built only where the comparison means the same on raw values as in the
  branch's SQL (a numeric attribute against a number, a string attribute against a
  string: no cast that Spark could do differently, and none that could fail on a row
  the branch may not read). Other atoms are left to the branch;
- a row it drops fails the branch's own WHERE where the attribute is visible, and where
  the attribute is hidden from the branch its WHERE reads NULL and drops the row too.

So each branch, running its own secured view and SQL over what reaches it, returns what
it returns alone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.network.merge import Network
from streamshield.network.operators import Operator, Select
from streamshield.network.predicates import Comparison

_NUMERIC = {"tinyint", "smallint", "int", "bigint", "float", "double"}


def selected_frames(
    network: Network,
    names: Collection[str],
    leaves: Mapping[str | Operator, DataFrame],
    stream: StreamDefinition,
    cached: list[DataFrame],
    persist: bool = True,
) -> dict[str, DataFrame]:
    """Each of ``names``' rows after the select nodes below its root (plans only: no job
    runs here). ``leaves``: the frame of each producer the selects read (a stream, a
    window vertex); a node of another kind passes its input's rows on (the branch
    projects and aggregates itself). A select several of ``names`` read is persisted and
    appended to ``cached`` (the caller unpersists it once the micro-batch is done), so it
    is computed once, by whichever consumer's job runs first; not with ``persist`` off
    (every consumer is read by one job, each of its parts scanning for itself, as each
    query alone does: engine/sharing/aggregate_pass.py)."""
    users = network.usage
    frames: dict[str | Operator, DataFrame] = dict(leaves)

    def frame(node: str | Operator) -> DataFrame:
        if node in frames:
            return frames[node]
        assert isinstance(node, Operator), f"no rows for the producer {node!r}"
        below = frame(node.inputs[0])
        out = below
        if isinstance(node, Select):
            condition = select_condition(stream, node)
            if condition is not None:
                out = below.filter(condition)
                if persist and len(users.get(node, frozenset()) & set(names)) > 1:
                    out = out.persist()
                    cached.append(out)
        frames[node] = out
        return out

    return {name: frame(network.roots[name]) for name in names}


def select_condition(stream: StreamDefinition, node: Select) -> Column | None:
    """The filter of ``node``: its atoms that mean the same on raw values, or None."""
    atoms = sorted(node.predicate.conjuncts, key=lambda a: a.canonical)
    parts = [c for c in (_atom(stream, a) for a in atoms) if c is not None]
    if not parts:
        return None
    out = parts[0]
    for part in parts[1:]:
        out = out & part
    return out


def _atom(stream: StreamDefinition, atom: Comparison) -> Column | None:
    names = {n.lower(): n for n in stream.names}
    attribute = names.get(atom.attribute.lower())
    if attribute is None:
        return None
    kind = stream.types[attribute].lower()
    numeric = isinstance(atom.value, int | float) and not isinstance(atom.value, bool)
    if (numeric and kind not in _NUMERIC) or (not numeric and kind != "string"):
        return None  # Spark would cast: leave it to the branch's own WHERE
    return atom.op.apply(F.col(attribute), F.lit(atom.value))  # type: ignore[return-value]
