"""The hospital example (paper 1, Figs. 2 and 6) as a catalog: streams, roles, server policy.

Built from :mod:`streamshield.examples.hospital` so that the two cannot drift: the
role edges are read back from ``hospital.hierarchy()`` rather than copied.
"""

from __future__ import annotations

import os

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.examples import hospital
from streamshield.policy.policy import Combine

TID = "patient_id"
EVENT_TIME = "ts"
BREATHING_RATE_SERVER_POLICY = (
    "INSERT SP INTO STREAM BreathingRate LET DDP = TUPLES: *, SRP = rbac:E"
)


def junior_edges() -> list[tuple[str, str]]:
    """(senior, junior) edges of the hospital hierarchy, sorted."""
    juniors = hospital.hierarchy().juniors
    return sorted((senior, junior) for senior, js in juniors.items() for junior in js)


def stream_definitions() -> list[StreamDefinition]:
    return [
        StreamDefinition(name, attributes, TID, EVENT_TIME)
        for name, attributes in sorted(hospital.ATTRIBUTE_TYPES.items())
    ]


def hospital_catalog(path: str | os.PathLike[str]) -> SqliteCatalog:
    """A catalog at ``path`` holding the hospital example; rerunning it on the same path is
    harmless (missing streams are added, roles and the server policy are set again)."""
    catalog = SqliteCatalog(path)
    registered = {definition.name for definition in catalog.streams()}
    for definition in stream_definitions():
        if definition.name not in registered:
            catalog.register_stream(definition)
    catalog.set_roles(hospital.ROLE_NAMES, junior_edges())
    catalog.set_server_policy("BreathingRate", BREATHING_RATE_SERVER_POLICY, Combine.INTERSECT)
    return catalog
