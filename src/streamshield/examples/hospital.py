"""The hospital example of paper 1 (Figs. 2 and 6): three vital-sign streams, six roles.

Used by the README's run command, by the tests and later by the Spark engine, so it is
built from the public text forms (CQL for policies) exactly as a provider would write
them. Everything is deterministic.

Story on ward A (one monitor provider per stream, patients 120, 125 and 140):

* HeartRate: cardiologists read the whole stream, general physicians the patients
  120-133, nurses only the id and the beats. At ts 200 the policy changes mid-stream:
  patient 140 has an emergency (the ER role gets access) and patient 125 withdraws
  consent from doctors (a deny for D, which every cardiologist also is).
* BodyTemperature: doctors and nurses read temperature (attribute level, paper 4.1),
  doctors the patient id too.
* BreathingRate: an immutable sp lets GPs (with grant option) read frequency of
  patients 120-200 (Fig. 8a); a mutable one also names the insurer, but the hospital's
  server policy only lets hospital employees read it, so the insurer gets nothing. The
  first tuples come before any policy (denied: no policy); later the provider re-sends
  the policy with one sp lost in transit (incomplete: denied).
* At the end a late HeartRate tuple still names the old policy (out of order: denied),
  which also drops the current policy, so the rest of that segment is denied.
"""

from __future__ import annotations

from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.policy import Combine, Policy, ServerPolicy
from streamshield.policy.roles import RoleHierarchy
from streamshield.policy.shield import Schema

ROLE_NAMES = {
    "E": "Hospital Employee",
    "D": "Doctor",
    "ND": "Nurse-on-Duty",
    "DM": "Dermatologist",
    "C": "Cardiologist",
    "GP": "General Physician",
    "ER": "Emergency Responder",
    "INS": "Insurer (outside)",
}

SCHEMAS = {
    "HeartRate": Schema(("patient_id", "beats_per_min", "ts")),
    "BodyTemperature": Schema(("patient_id", "temperature", "ts")),
    "BreathingRate": Schema(("patient_id", "frequency", "ts")),
}

ATTRIBUTE_TYPES = {
    "HeartRate": (("patient_id", "bigint"), ("beats_per_min", "double"), ("ts", "bigint")),
    "BodyTemperature": (("patient_id", "bigint"), ("temperature", "double"), ("ts", "bigint")),
    "BreathingRate": (("patient_id", "bigint"), ("frequency", "double"), ("ts", "bigint")),
}

_VALUE = {
    "HeartRate": "beats_per_min",
    "BodyTemperature": "temperature",
    "BreathingRate": "frequency",
}


def hierarchy() -> RoleHierarchy:
    """Fig. 2 plus two roles outside it (emergency responder and an outside insurer)."""
    return RoleHierarchy.build(
        ROLE_NAMES,
        [("D", "E"), ("ND", "E"), ("DM", "D"), ("C", "D"), ("GP", "D")],
    )


def server_policies() -> dict[str, ServerPolicy]:
    """The hospital's own rule: vital signs of BreathingRate go to hospital employees only."""
    sps = parse_policy(
        "INSERT SP INTO STREAM BreathingRate LET DDP = TUPLES: *, SRP = rbac:E", ts=1
    ).sps
    return {"BreathingRate": ServerPolicy(sps, Combine.INTERSECT)}


HEART_RATE_V1 = """
INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, SRP = rbac:C;
INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: [120, 133], SRP = rbac:GP;
INSERT SP INTO STREAM HeartRate
  LET DDP = ATTRIBUTES: {patient_id, beats_per_min}, SRP = rbac:ND
"""

HEART_RATE_V2 = """
INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, SRP = rbac:C;
INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: 140, SRP = rbac:ER;
INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: 125, SRP = rbac:D, SIGN = NEGATIVE
"""

BODY_TEMPERATURE = """
INSERT SP INTO STREAM BodyTemperature LET
  DDP = STREAMS: {HeartRate, BodyTemperature} AND ATTRIBUTES: {temperature, beats_per_min},
  SRP = rbac:{D, ND};
INSERT SP INTO STREAM BodyTemperature LET DDP = ATTRIBUTES: patient_id, SRP = rbac:D
"""

BREATHING_RATE = """
INSERT SP AS sp1 INTO STREAM BreathingRate LET
  sp1.DDP = TUPLES: [120, 200] AND ATTRIBUTES: frequency,
  sp1.SRP = frbac:GP WITH GRANT OPTION,
  sp1.SIGN = POSITIVE,
  sp1.IMMUTABLE = TRUE;
INSERT SP INTO STREAM BreathingRate LET DDP = TUPLES: *, SRP = rbac:{GP, INS}
"""

PATIENTS = (120, 125, 140)


class _Channel:
    """Writes one channel's elements with consecutive sequence numbers."""

    def __init__(self, stream: str, provider: str = "ward-A") -> None:
        self.channel, self.seq = Channel(stream, provider), 0
        self.out: list[Element] = []
        self.declared = (0, 0)

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def policy(self, policy: Policy, drop_sn: int | None = None) -> None:
        for sp in policy.sps:
            if sp.sn != drop_sn:
                self.out.append(SpElement(self.channel, self._next(), sp))
        self.declared = (policy.ts, policy.csn)

    def tuples(self, minute: int, declared: tuple[int, int] | None = None) -> None:
        ts_sp, csn = declared or self.declared
        for offset, patient in enumerate(PATIENTS):
            value = _reading(self.channel.stream, patient, minute)
            values = {"patient_id": patient, _VALUE[self.channel.stream]: value}
            values["ts"] = minute * 60 + offset
            self.out.append(TupleElement(self.channel, self._next(), patient, ts_sp, csn, values))


def _reading(stream: str, patient: int, minute: int) -> float:
    base = {"HeartRate": 70.0, "BodyTemperature": 36.6, "BreathingRate": 14.0}[stream]
    return round(base + (patient % 7) * 0.5 + minute * 0.25, 2)


def elements() -> list[Element]:
    """All elements of the example, channel by channel (order across channels is free)."""
    heart = _Channel("HeartRate")
    heart.policy(parse_policy(HEART_RATE_V1, ts=100))
    heart.tuples(minute=1)
    heart.tuples(minute=2)
    heart.policy(parse_policy(HEART_RATE_V2, ts=200))
    heart.tuples(minute=3)
    heart.tuples(minute=4, declared=(100, 3))  # a late tuple naming the old policy

    temperature = _Channel("BodyTemperature")
    temperature.policy(parse_policy(BODY_TEMPERATURE, ts=100))
    temperature.tuples(minute=1)

    breathing = _Channel("BreathingRate")
    breathing.tuples(minute=0, declared=(90, 1))  # before any policy: no policy
    breathing.policy(parse_policy(BREATHING_RATE, ts=100))
    breathing.tuples(minute=1)
    breathing.policy(parse_policy(BREATHING_RATE, ts=300), drop_sn=2)
    breathing.tuples(minute=2)  # policy 300 lacks sp 2: incomplete
    return heart.out + temperature.out + breathing.out
