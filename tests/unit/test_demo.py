"""The main job's per-role view of the hospital example tells the story it promises."""

from __future__ import annotations

from streamshield.demo import report, shield_for
from streamshield.examples import hospital
from streamshield.lang.wire import parse_lines, to_line
from streamshield.policy.shield import Reason


def _by_role(role: str):
    return {
        (d.element.channel.stream, d.element.seq): d
        for d in shield_for(role).decisions(hospital.elements())
    }


def test_policy_change_mid_stream() -> None:
    cardiologist, er = _by_role("C"), _by_role("ER")
    # ts 100: C reads patient 125; ts 200: patient 125 denies doctors (C is a D)
    assert cardiologist["HeartRate", 5].passed
    assert cardiologist["HeartRate", 14].reason is Reason.NOT_AUTHORIZED
    # the emergency grant for patient 140 only exists under the new policy
    assert not er["HeartRate", 6].passed
    assert er["HeartRate", 15].passed


def test_attribute_level_masking() -> None:
    nurse = _by_role("ND")
    assert nurse["HeartRate", 4].attributes == {"patient_id", "beats_per_min"}
    assert nurse["BodyTemperature", 3].attributes == {"temperature"}


def test_server_policy_and_denials() -> None:
    insurer, gp = _by_role("INS"), _by_role("GP")
    assert not any(d.passed for d in insurer.values())
    assert gp["BreathingRate", 6].attributes == {"patient_id", "frequency", "ts"}
    assert gp["BreathingRate", 1].reason is Reason.NO_POLICY
    assert gp["BreathingRate", 10].reason is Reason.INCOMPLETE_POLICY
    assert gp["HeartRate", 16].reason is Reason.OUT_OF_ORDER


def test_report_names_every_role_and_reason() -> None:
    text = "\n".join(report())
    for name in ("Cardiologist", "Nurse-on-Duty", "General Physician", "Insurer"):
        assert name in text
    for reason in ("no policy", "incomplete policy", "out of order", "not authorized"):
        assert reason in text
    assert "beats_per_min=-" not in text.split("Nurse-on-Duty")[0]


def test_fixture_survives_the_wire_format() -> None:
    elements = hospital.elements()
    assert list(parse_lines(to_line(e) for e in elements)) == elements
