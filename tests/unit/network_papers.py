"""The query-sharing examples of the two papers, as operator trees.

Chinese-Wall paper (CW), section 4.1.1 and Figs. 3-5: Q1 and Q2 of Company1 over MessageLog.
Privacy-switch paper (PrS), Figs. 1, 2 and 6: CQ1 and CQ2 over three health streams.
"""

from __future__ import annotations

from streamshield.network.operators import (
    Aggregation,
    Operator,
    WindowSpec,
    aggregate,
    join,
    project,
    select,
    window,
)
from streamshield.network.predicates import Comparison, Conjunction, Op
from streamshield.network.predicates import parse_conjunction as where

# --- CW, section 4.1.1; Fig. 3 draws each as MessageLog -> seq-win (synopsis) -> select ->
# project timestamp -> output. The queries name no window, so seq-win is CQL's default
# window of a stream, UNBOUNDED.
CW_WINDOW = window(WindowSpec.unbounded(), "MessageLog")
CW_Q1 = project(
    {"timestamp"},
    select(where("msgType = 'send' AND outcome = 'success' AND receiver = 'CompanyB'"), CW_WINDOW),
)
CW_Q2 = project(
    {"timestamp"},
    select(where("msgType = 'send' AND outcome = 'failure' AND receiver = 'CompanyB'"), CW_WINDOW),
)
# Fig. 4: the overlapping selects decomposed.
CW_COMMON_SELECT = select(where("msgType = 'send' AND receiver = 'CompanyB'"), CW_WINDOW)
CW_Q1_RESIDUAL = select(where("outcome = 'success'"), CW_COMMON_SELECT)
CW_Q2_RESIDUAL = select(where("outcome = 'failure'"), CW_COMMON_SELECT)

MESSAGE_LOG = [
    {"serviceId": "5", "msgType": "send", "sender": "Company1", "receiver": "CompanyB",
     "timestamp": 1, "outcome": "success"},
    {"serviceId": "5", "msgType": "send", "sender": "Company1", "receiver": "CompanyB",
     "timestamp": 2, "outcome": "failure"},
    {"serviceId": "5", "msgType": "receive", "sender": "CompanyB", "receiver": "Company1",
     "timestamp": 3, "outcome": "success"},
    {"serviceId": "7", "msgType": "send", "sender": "Company1", "receiver": "CompanyA",
     "timestamp": 4, "outcome": "success"},
    {"serviceId": "5", "msgType": "send", "sender": "Company1", "receiver": "CompanyB",
     "timestamp": 5, "outcome": "success"},
]  # fmt: skip

# --- PrS, Figs. 1, 2 and 6. The text we have lacks Fig. 1's listing, so the queries are
# reconstructed from what the text states: three streams of health data; both queries
# select timestamps within the same interval (6:00am-7:00pm, the interval of section 4.2's
# example join, here in minutes after midnight) and join on the same condition; the window
# specifications are the same everywhere and omitted from the figure (here: the joins'
# synopsis); the network has ten operators, three of them the highlighted common prefix;
# losing every user of Q2 shuts six of the ten off (section 5.3), i.e. six are Q2's alone.
# Attributes are qualified by stream, as an admitted query's plan has them.
PRS_WINDOW = WindowSpec.rows(100)
DAYTIME = "{s}.ts > 360 AND {s}.ts < 1140"
PRS_HR = select(where(DAYTIME.format(s="hr")), "HeartRate")  # common prefix
PRS_BP = select(where(DAYTIME.format(s="bp")), "BloodPressure")  # common prefix
# common prefix: the same join condition in both queries
PRS_JOIN = join({("hr.patient", "bp.patient"), ("hr.ts", "bp.ts")}, PRS_HR, PRS_BP, PRS_WINDOW)
# CQ1: heart rate and blood pressure of every patient during the day.
PRS_Q1_PROJECT = project({"hr.patient", "hr.bpm", "bp.systolic"}, PRS_JOIN)
PRS_CQ1 = PRS_Q1_PROJECT
# CQ2: patients with repeated high pressure and low oxygen during the day.
PRS_O2 = select(where(DAYTIME.format(s="o2") + " AND o2.spo2 < 92"), "OxygenSaturation")
PRS_JOIN_O2 = join({("hr.patient", "o2.patient"), ("hr.ts", "o2.ts")}, PRS_JOIN, PRS_O2, PRS_WINDOW)
PRS_HIGH = select(where("bp.systolic > 140"), PRS_JOIN_O2)
PRS_Q2_PROJECT = project({"hr.patient", "bp.systolic", "o2.spo2"}, PRS_HIGH)
PRS_COUNT = aggregate(Aggregation.COUNT, "*", {"hr.patient"}, PRS_Q2_PROJECT)
PRS_REPEATED = select(Conjunction.of([Comparison("count(*)", Op.GE, 2)]), PRS_COUNT)
PRS_CQ2 = PRS_REPEATED
PRS_COMMON_PREFIX = frozenset({PRS_HR, PRS_BP, PRS_JOIN})
PRS_Q2_ONLY: frozenset[Operator] = frozenset(
    {PRS_O2, PRS_JOIN_O2, PRS_HIGH, PRS_Q2_PROJECT, PRS_COUNT, PRS_REPEATED}
)


def prs_streams() -> dict[str, list[dict[str, object]]]:
    """A day of readings for three patients; p1 matches CQ2 twice, p2 once, p3 never."""
    hr, bp, o2 = [], [], []
    for minute, patient, bpm, systolic, spo2 in [
        (300, "p1", 80, 150, 90),  # before 6:00am: dropped by the daytime selects
        (600, "p1", 90, 150, 90),
        (610, "p1", 95, 155, 89),
        (620, "p2", 70, 150, 91),
        (630, "p2", 72, 120, 97),
        (640, "p3", 60, 110, 98),
    ]:
        hr.append({"hr.patient": patient, "hr.bpm": bpm, "hr.ts": minute})
        bp.append({"bp.patient": patient, "bp.systolic": systolic, "bp.ts": minute})
        o2.append({"o2.patient": patient, "o2.spo2": spo2, "o2.ts": minute})
    return {"HeartRate": hr, "BloodPressure": bp, "OxygenSaturation": o2}
