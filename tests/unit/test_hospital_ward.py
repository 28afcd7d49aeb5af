"""The live ward's readings: heart rates a monitor could show, however long it runs, and
the same on every run (tests and the console's screenshots compare them)."""

from __future__ import annotations

import itertools

from streamshield.examples import hospital_ward
from streamshield.examples.hospital_ward import (
    EMERGENCY_PATIENT,
    EMERGENCY_RISE,
    PATIENTS,
    RESTING,
    STEP,
    Monitor,
)
from streamshield.policy.elements import TupleElement

ROUNDS = 900  # an hour of the served example at one round per 4 s, 3,600 readings each


def _beats(patient: int) -> list[float]:
    monitor = Monitor(patient)
    list(monitor.send_policy(hospital_ward.ROUTINE, ts=100))
    return [
        t.values["beats_per_min"]
        for round_no in range(ROUNDS)
        for t in monitor.readings(round_no)
        if isinstance(t, TupleElement)
    ]


def test_heart_rates_stay_in_a_physiological_range_for_an_hour() -> None:
    low, high = RESTING
    for patient in PATIENTS:
        beats = _beats(patient)
        resting = beats[: hospital_ward.READINGS_PER_ROUND]
        if patient == EMERGENCY_PATIENT:  # from round 1 on, 60 higher: tachycardia
            beats = [b - EMERGENCY_RISE for b in beats[hospital_ward.READINGS_PER_ROUND :]]
        assert all(low <= b <= high for b in resting + beats), patient
        steps = [abs(b - a) for a, b in itertools.pairwise(beats)]
        assert max(steps) <= STEP + 1e-9
        assert max(beats) - min(beats) > 10  # it moves: not a constant line


def test_readings_are_the_same_on_every_run_and_differ_between_patients() -> None:
    assert _beats(120) == _beats(120)
    assert _beats(120) != _beats(125)
    rounds = [[e for e in r if isinstance(e, TupleElement)] for r in hospital_ward.rounds(3)]
    again = [[e for e in r if isinstance(e, TupleElement)] for r in hospital_ward.rounds(3)]
    assert [[t.values for t in r] for r in rounds] == [[t.values for t in r] for r in again]
