"""Where deliveries ran: the Spark job group of each delivery's collect, whether a Spark
job collected its rows, the driver did (a small pass: engine/frames/driver_rows.py) or the job
that computed a small pass collected them with it (``SharedNetwork._pass_delivered``),
so that tests can prove a branch delivered, or did nothing, without counting Spark jobs."""

from __future__ import annotations

from streamshield.engine.delivery import delivery as delivery_module
from streamshield.engine.delivery.collected_rows import arrow_table, collect_on_driver, collect_rows
from streamshield.engine.sharing import shared_network as network_module


def record_groups(monkeypatch, sc) -> list[str]:
    """The job group of every delivery from now on (until ``monkeypatch`` undoes it)."""
    groups: list[str] = []

    def recorded(collect):
        def collecting(*args):
            got = collect(*args)
            if got is not None:  # None: the driver could not, the job collects
                groups.append(sc.getLocalProperty("spark.jobGroup.id"))
            return got

        return collecting

    monkeypatch.setattr(delivery_module, "collect_rows", recorded(collect_rows))
    monkeypatch.setattr(delivery_module, "collect_on_driver", recorded(collect_on_driver))
    monkeypatch.setattr(network_module, "arrow_table", recorded(arrow_table))
    return groups
