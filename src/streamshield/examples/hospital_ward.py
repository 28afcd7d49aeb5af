"""A live ward for the main job: several patients' monitors streaming in rounds.

Each patient's monitor is its own provider, so each (stream, patient) is a channel
with its own policies. Every patient lets cardiologists read the heart rate, general
physicians read it for patients 120-133, and nurses the id and beats only. In round 2
patient 140 has an emergency: the monitor sends a new policy that also grants the
emergency role. The outside insurer is never granted anything.

Each monitor's readings are a bounded random walk seeded by the patient's id (the same
numbers on every run): a resting heart rate between :data:`RESTING`'s bounds, 60 beats
higher in the emergency, however long the ward runs.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement
from streamshield.policy.policy import Policy

PATIENTS = (120, 125, 140)
EMERGENCY_PATIENT = 140
READINGS_PER_ROUND = 4
RESTING = (55.0, 100.0)
"""Bounds of a resting adult's heart rate (beats per minute) the walk stays within."""
STEP = 3.0
"""The largest change from one reading (a minute) to the next."""
EMERGENCY_RISE = 60.0

ROUTINE = """
INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, SRP = rbac:C;
INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: [120, 133], SRP = rbac:GP;
INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: {patient_id, beats_per_min}, SRP = rbac:ND
"""
EMERGENCY = ROUTINE + ";\nINSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:ER"


class Monitor:
    """One patient's heart-rate monitor: numbers its elements, remembers its policy."""

    def __init__(self, patient: int) -> None:
        self.patient = patient
        self.channel = Channel("HeartRate", f"monitor-{patient}")
        self.seq = 0
        self.policy: Policy | None = None
        self.beats = 62.0 + patient % 11
        self._walk = random.Random(patient)

    def send_policy(self, text: str, ts: int) -> Iterator[Element]:
        self.policy = parse_policy(text, ts)
        for sp in self.policy.sps:
            self.seq += 1
            yield SpElement(self.channel, self.seq, sp)

    def readings(self, round_no: int) -> Iterator[Element]:
        assert self.policy is not None
        for i in range(READINGS_PER_ROUND):
            self.seq += 1
            minute = round_no * READINGS_PER_ROUND + i
            beats = self._step() if minute else self.beats
            if self.patient == EMERGENCY_PATIENT and round_no >= 1:
                beats += EMERGENCY_RISE
            values = {"patient_id": self.patient, "beats_per_min": beats, "ts": minute * 60}
            yield TupleElement(
                self.channel, self.seq, self.patient, self.policy.ts, self.policy.csn, values
            )

    def _step(self) -> float:
        """The next reading: at most :data:`STEP` away, reflected back inside
        :data:`RESTING` (one decimal, as monitors show it)."""
        low, high = RESTING
        beats = self.beats + self._walk.uniform(-STEP, STEP)
        if beats < low:
            beats = 2 * low - beats
        elif beats > high:
            beats = 2 * high - beats
        self.beats = round(beats, 1)
        return self.beats


def rounds(count: int = 3) -> Iterator[list[Element]]:
    """The elements of each round, all monitors together."""
    monitors = [Monitor(p) for p in PATIENTS]
    for round_no in range(count):
        elements: list[Element] = []
        for monitor in monitors:
            if round_no == 0:
                elements += monitor.send_policy(ROUTINE, ts=100)
            if round_no == 1 and monitor.patient == EMERGENCY_PATIENT:
                elements += monitor.send_policy(EMERGENCY, ts=200)
            elements += monitor.readings(round_no)
        yield elements
