"""SPGen: the root of a delegating query (paper 1, section 4.4, Fig. 8b).

A query whose roles hold an object WITH GRANT OPTION may put ``ON RESULT`` sps on its
output. SPGen strips whatever policies governed the input (the output carries no
labels on) and emits the new sps, as one policy, at the head of the query's output
channel; every output tuple declares that policy. The output lands in the landing zone
as a *derived stream*, so the ordinary secure ingest labels it and other users'
queries are governed by the delegated sps like any provider's.

SPGen never widens access by itself: the query it ends runs over *grant views*
(secured views masked with the roles' GRANT privilege), so every value it sees was
readable by the query with grant option, and nothing else reaches it.

Runs once per micro-batch on the driver, as a ``CallbackSink``: the rows are the
query's (already filtered) output, collected once. Its state (the output channel's next
seq, whether the policy was emitted) is versioned per batch, so a replayed batch
produces the same elements, which the landing zone then refuses as already landed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame

from streamshield.engine.store.snapshots import Snapshots
from streamshield.landing import LandingZone, Reason
from streamshield.lang.cql import SpStatement
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement

POLICY_TS = 1  # one delegated policy for the query's whole life


class DelegationFailed(RuntimeError):
    """The landing zone refused SPGen's output; the message names no data values."""


class SpGen:
    """A ``CallbackSink`` function landing a delegating query's output as a derived stream."""

    def __init__(
        self,
        landing: LandingZone,
        stream: str,
        provider: str,
        statements: Sequence[SpStatement],
        tid: str,
        state_dir: str | Path,
    ) -> None:
        if not statements:
            raise ValueError("SPGen needs at least one ON RESULT sp")
        self.landing, self.tid = landing, tid
        self.channel = Channel(stream, provider)
        self.sps = [s.punctuation(POLICY_TS, sn) for sn, s in enumerate(statements, start=1)]
        self.state = Snapshots(state_dir)
        self.withheld = 0  # rows without a visible tuple id: no tuple pattern could match them

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        state = self.state.start_of(batch_id, {"seq": 0, "emitted": False})
        columns = [c for c in frame.columns if not c.startswith("_ss_")]
        rows = frame.select(*columns).collect()
        elements = self._elements([row.asDict() for row in rows], state)
        if elements:
            result = self.landing.append(elements)
            # A replayed batch re-sends what already landed: those seqs are refused, rightly.
            refused = [r for r in result.rejected if r.reason is not Reason.SEQ_NOT_INCREASING]
            if refused:
                reasons = sorted({r.reason.value for r in refused})
                raise DelegationFailed(f"the derived stream refused output: {reasons}")
        self.state.save(batch_id, state)

    def _elements(self, rows: list[dict], state: dict) -> list[Element]:
        elements: list[Element] = []
        addressable = [values for values in rows if values.get(self.tid) is not None]
        self.withheld += len(rows) - len(addressable)
        if not addressable:
            return elements
        if not state["emitted"]:
            for sp in self.sps:
                state["seq"] += 1
                elements.append(SpElement(self.channel, state["seq"], sp))
            state["emitted"] = True
        for values in addressable:
            state["seq"] += 1
            elements.append(
                TupleElement(
                    self.channel,
                    state["seq"],
                    values[self.tid],
                    POLICY_TS,
                    len(self.sps),
                    values,
                )
            )
        return elements
