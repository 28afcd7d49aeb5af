"""The CQL ``INSERT SP`` syntax (paper 1, Figs. 7 and 8a): parsing, errors, round trip."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamshield.lang.cql import (
    CqlError,
    SpStatement,
    parse_policy,
    parse_statements,
    to_cql,
)
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    Sign,
)
from streamshield.policy.sp_patterns import ANY, Glob, Literal, OneOf, Range
from tests.unit.test_sp_patterns import names, patterns

FIG_8A = """\
INSERT SP AS sp1
INTO STREAM s3
LET
sp1.DDP = TUPLES:[120, 200]
AND ATTRIBUTES: Frequency,
sp1.SRP = frbac:R1 WITH GRANT OPTION,
sp1. SIGN = POSITIVE,
sp1.IMMUTABLE = TRUE"""

FIG_8A_STATEMENT = SpStatement(
    ddp=DataDescription(
        streams=Literal("s3"), tuples=Range(120.0, 200.0), attributes=Literal("Frequency")
    ),
    srp=SecurityRestriction(Literal("R1"), grant_option=True),
    sign=Sign.GRANT,
    immutable=True,
    stream="s3",
    name="sp1",
)

MINIMAL = "INSERT SP INTO STREAM s LET DDP = TUPLES: 1, SRP = rbac:C"


def position(text: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """1-based (line, column) of the ``nth`` occurrence of ``needle`` in ``text``."""
    index = -1
    for _ in range(nth):
        index = text.index(needle, index + 1)
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, column


def cql_error(text: str) -> CqlError:
    """The CqlError that parsing ``text`` raises (failing the test if it returns)."""
    with pytest.raises(CqlError) as info:
        parse_statements(text)
    return info.value


def only(text: str) -> SpStatement:
    (statement,) = parse_statements(text)
    return statement


# --- the paper's example and the syntax -------------------------------------------------


def test_fig_8a_parses_to_expected_statement() -> None:
    assert parse_statements(FIG_8A) == [FIG_8A_STATEMENT]


def test_fig_8a_as_punctuation() -> None:
    sp = only(FIG_8A).punctuation(ts=7, sn=1)
    assert sp == SecurityPunctuation(
        FIG_8A_STATEMENT.ddp, FIG_8A_STATEMENT.srp, Sign.GRANT, True, ts=7, sn=1
    )


def test_keywords_are_case_insensitive() -> None:
    text = FIG_8A.lower().replace("frequency", "Frequency").replace("r1", "R1")
    assert parse_statements(text) == [FIG_8A_STATEMENT]
    mixed = "Insert Sp As x Into Stream s3 Let X.dDp = tuples:*, x.Srp = RBAC:C"
    with pytest.raises(CqlError):  # names (unlike keywords) are case-sensitive
        parse_statements(mixed)
    assert only(mixed.replace("X.dDp", "x.dDp")).srp.roles == Literal("C")


def test_security_punctuation_spelling() -> None:
    text = FIG_8A.replace("INSERT SP", "INSERT SECURITY PUNCTUATION")
    assert parse_statements(text) == [FIG_8A_STATEMENT]
    lower = MINIMAL.replace("INSERT SP", "insert Security punctuation")
    assert only(lower) == only(MINIMAL)


@pytest.mark.parametrize("spelling", ["ALL", "all", "*"])
def test_tuples_all_means_any(spelling: str) -> None:
    statement = only(f"INSERT SP INTO STREAM s LET DDP = TUPLES:{spelling}, SRP = rbac:C")
    assert statement.ddp.tuples == ANY


def test_defaults() -> None:
    statement = only(MINIMAL)
    assert statement.sign is Sign.GRANT
    assert statement.immutable is False
    assert statement.srp.grant_option is False
    assert statement.ddp == DataDescription(Literal("s"), Literal(1), ANY)
    assert statement.stream == "s"
    assert statement.name is None


def test_streams_default_to_any_without_stream_name() -> None:
    """Fig. 8b: ``INTO STREAM`` with no name (ON RESULT) leaves the stream scope open."""
    statement = only("INSERT SP INTO STREAM LET DDP = TUPLES:ALL, SRP = frbac:Cardiologist")
    assert statement.ddp.streams == ANY
    assert statement.stream is None


def test_quoted_stream_name() -> None:
    statement = only('INSERT SP INTO STREAM "Heart Rate" LET DDP = TUPLES:ALL, SRP = rbac:C')
    assert statement.stream == "Heart Rate"
    assert statement.ddp.streams == Literal("Heart Rate")


def test_explicit_streams_override_into_stream() -> None:
    statement = only(
        "INSERT SP INTO STREAM s LET DDP = STREAMS: {s1, s2} AND ATTRIBUTES: Heart*, SRP = rbac:C"
    )
    assert statement.ddp.streams == OneOf(frozenset({Literal("s1"), Literal("s2")}))
    assert statement.ddp.attributes == Glob("Heart*")
    assert statement.stream == "s"


def test_stream_singular_is_streams() -> None:
    statement = only("INSERT SP INTO STREAM s LET DDP = STREAM: t, SRP = rbac:C")
    assert statement.ddp.streams == Literal("t")


@pytest.mark.parametrize(
    ("spelling", "sign"),
    [
        ("NEGATIVE", Sign.DENY),
        ("negative", Sign.DENY),
        ("-", Sign.DENY),
        ("POSITIVE", Sign.GRANT),
        ("+", Sign.GRANT),
    ],
)
def test_sign(spelling: str, sign: Sign) -> None:
    assert only(f"{MINIMAL}, SIGN = {spelling}").sign is sign


def test_negative_sp() -> None:
    statement = only(
        "INSERT SP INTO STREAM s LET DDP = TUPLES:[120, 133], SRP = rbac:GP, "
        "SIGN = NEGATIVE, IMMUTABLE = false"
    )
    assert statement.sign is Sign.DENY
    assert statement.srp == SecurityRestriction(Literal("GP"), False)
    assert statement.immutable is False


def test_assignments_in_any_order() -> None:
    text = "INSERT SP INTO STREAM s LET IMMUTABLE = TRUE, SRP = rbac:C, SIGN = -, DDP = TUPLES: 1"
    statement = only(text)
    assert (statement.immutable, statement.sign) == (True, Sign.DENY)
    assert statement.srp.roles == Literal("C")


SCRIPT = """\
-- policy of provider p1
INSERT SP AS a INTO STREAM HeartRate LET
  a.DDP = TUPLES: [120, 133],   -- patients of ward 3
  a.SRP = rbac:GP;
-- a comment between statements
INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: {beats_per_min, ts}, SRP = rbac:{D, ND};
insert sp as c into stream BodyTemperature let
  c.DDP = TUPLES: 125, c.SRP = rbac:"Nurse on duty", c.SIGN = NEGATIVE, c.IMMUTABLE = TRUE;
"""


def test_script_with_comments_and_semicolons() -> None:
    statements = parse_statements(SCRIPT)
    assert [s.name for s in statements] == ["a", None, "c"]
    assert [s.stream for s in statements] == ["HeartRate", "HeartRate", "BodyTemperature"]
    assert statements[0].ddp.tuples == Range(120.0, 133.0)
    assert statements[1].srp.roles == OneOf(frozenset({Literal("D"), Literal("ND")}))
    assert statements[2].srp.roles == Literal("Nurse on duty")
    assert (statements[2].sign, statements[2].immutable) == (Sign.DENY, True)


def test_parse_policy_numbers_sps() -> None:
    policy = parse_policy(SCRIPT, ts=42)
    assert policy.ts == 42
    assert [sp.sn for sp in policy.sps] == [1, 2, 3]
    assert {sp.ts for sp in policy.sps} == {42}
    assert policy.csn == 3
    assert policy.is_complete(3)
    statements = parse_statements(SCRIPT)
    assert list(policy.sps) == [st_.punctuation(42, n) for n, st_ in enumerate(statements, 1)]


def test_parse_policy_single_statement() -> None:
    policy = parse_policy(FIG_8A, ts=1)
    assert policy.csn == 1
    assert policy.sps == (FIG_8A_STATEMENT.punctuation(1, 1),)


# --- errors -----------------------------------------------------------------------------


def test_missing_srp() -> None:
    text = "\n  INSERT SP INTO STREAM s LET DDP = TUPLES: 1"
    err = cql_error(text)
    assert "missing SRP" in err.problem
    assert (err.line, err.column) == position(text, "INSERT")


def test_missing_ddp() -> None:
    text = "INSERT SP INTO STREAM s LET SRP = rbac:C, SIGN = POSITIVE"
    err = cql_error(text)
    assert "missing DDP" in err.problem
    assert (err.line, err.column) == (1, 1)


def test_ddp_given_twice() -> None:
    text = (
        "INSERT SP AS x INTO STREAM s LET\n x.DDP = TUPLES: 1,\n x.DDP = TUPLES: 2, x.SRP = rbac:C"
    )
    err = cql_error(text)
    assert "DDP" in err.problem and "twice" in err.problem
    assert (err.line, err.column) == position(text, "x.DDP", 2)


@pytest.mark.parametrize("assignment", ["SIGN = -", "IMMUTABLE = TRUE", "SRP = rbac:D"])
def test_other_assignment_given_twice(assignment: str) -> None:
    text = (
        "INSERT SP INTO STREAM s LET DDP = TUPLES: 1, "
        f"SRP = rbac:C, SIGN = -, IMMUTABLE = TRUE,\n{assignment}"
    )
    err = cql_error(text)
    assert "twice" in err.problem
    assert (err.line, err.column) == (2, 1)


@pytest.mark.parametrize(
    ("first", "second"), [("TUPLES", "TUPLES"), ("STREAMS", "STREAM"), ("ATTRIBUTES", "attributes")]
)
def test_part_given_twice_in_one_ddp(first: str, second: str) -> None:
    text = f"INSERT SP INTO STREAM s LET DDP = {first}: 1 AND {second}: 2, SRP = rbac:C"
    err = cql_error(text)
    assert "twice" in err.problem
    assert (err.line, err.column) == position(text, f"{second}: 2")


def test_prefix_not_matching_name() -> None:
    text = "INSERT SP AS sp1 INTO STREAM s LET\n  sp1.DDP = TUPLES: 1,\n  sp2.SRP = rbac:C"
    err = cql_error(text)
    assert "sp2" in err.problem
    assert (err.line, err.column) == (3, 3)


def test_prefix_without_name() -> None:
    text = "INSERT SP INTO STREAM s LET DDP = TUPLES: 1, sp1.SRP = rbac:C"
    err = cql_error(text)
    assert "sp1" in err.problem
    assert (err.line, err.column) == position(text, "sp1")


def test_unknown_access_model() -> None:
    text = "INSERT SP INTO STREAM s LET DDP = TUPLES: 1,\n SRP = dac:C"
    err = cql_error(text)
    assert "dac" in err.problem
    assert (err.line, err.column) == (2, 8)


def test_empty_range() -> None:
    text = "INSERT SP INTO STREAM s LET DDP = TUPLES: [200, 120], SRP = rbac:C"
    err = cql_error(text)
    assert "empty range" in err.problem
    assert (err.line, err.column) == position(text, "200")


@pytest.mark.parametrize(
    ("text", "needle", "offset"),
    [
        ("INSERT SP INTO STREAM s LET DDP = TUPLES: 1 @ 2, SRP = rbac:C", "@", 0),
        ("INSERT SP INTO STREAM s LET\nDDP = TUPLES: 1 2, SRP = rbac:C", "2", 0),
        ("INSERT SP INTO STREAM s LET DDP = TUPLES: 1,\n  SRP = rbac:C WITH OPTION", "OPTION", 0),
        ("INSERT SP INTO s LET DDP = TUPLES: 1, SRP = rbac:C", "s LET", 0),
        ("INSERT SP INTO STREAM s LET DDP = PATIENTS: 1, SRP = rbac:C", "PATIENTS", 0),
        ("INSERT SP INTO STREAM s LET DDP = TUPLES: 1, SRP = rbac:C, SIGN = MAYBE", "MAYBE", 0),
        ("INSERT SP INTO STREAM s LET DDP = TUPLES: 1, SRP = rbac:C, IMMUTABLE = 1", "= 1", 2),
        ("INSERT SP INTO STREAM s LET DDP = TUPLES: 1, SRP = rbac:C; ;", "; ;", 2),
    ],
)
def test_garbage_token(text: str, needle: str, offset: int) -> None:
    """The error points at the offending token: ``offset`` characters into ``needle``."""
    err = cql_error(text)
    line, column = position(text, needle)
    assert (err.line, err.column) == (line, column + offset)
    assert "unexpected input" in err.problem


def test_negative_with_grant_option() -> None:
    """Reported at the statement start: the conflict spans the SRP and the SIGN."""
    text = (
        "-- deny\n"
        "INSERT SP INTO STREAM s LET DDP = TUPLES: 1,\n"
        " SRP = rbac:C WITH GRANT OPTION,\n"
        " SIGN = NEGATIVE"
    )
    err = cql_error(text)
    assert "grant option" in err.problem
    assert (err.line, err.column) == (2, 1)


def test_error_str_names_position() -> None:
    err = cql_error("INSERT SP INTO STREAM s LET DDP = TUPLES: 1,\n SRP = dac:C")
    assert str(err).startswith("line 2, column 8: ")


BROKEN_THIRD = """\
INSERT SP INTO STREAM s LET DDP = TUPLES: 1, SRP = rbac:C;
INSERT SP INTO STREAM s LET
  DDP = TUPLES: 2,
  SRP = rbac:D;
INSERT SP INTO STREAM s LET
  DDP = TUPLES: 3,
  {problem};
INSERT SP INTO STREAM s LET DDP = TUPLES: 4, SRP = rbac:E
"""


@pytest.mark.parametrize(
    ("problem", "line", "column"),
    [
        ("SRP = rbac:C WITH", 7, 20),  # syntax: the ';' after WITH is unexpected
        ("SRP = dac:C", 7, 9),  # semantic: unknown model
        ("SIGN = NEGATIVE", 5, 1),  # semantic: missing SRP, reported at the statement
        ("SRP = rbac:[3, 1]", 7, 15),  # semantic: empty range
    ],
)
def test_broken_third_statement(problem: str, line: int, column: int) -> None:
    """All or nothing: the first two statements are not returned, the error points at the 3rd."""
    text = BROKEN_THIRD.format(problem=problem)
    with pytest.raises(CqlError) as info:
        parse_statements(text)
    assert (info.value.line, info.value.column) == (line, column)
    with pytest.raises(CqlError):
        parse_policy(text, ts=1)


def test_empty_script_rejected() -> None:
    err = cql_error("   -- nothing here\n")
    assert err.line is not None


# --- round trip -------------------------------------------------------------------------

#: Sp and stream names: anything, including keywords (DDP, LET, ...) that to_cql must quote.
sp_names = st.one_of(
    st.none(),
    names,
    st.sampled_from(["DDP", "srp", "Sign", "IMMUTABLE", "INTO", "STREAM", "AS", "let", "SP"]),
)
streams = sp_names


@st.composite
def sps(draw: st.DrawFn) -> SecurityPunctuation:
    sign = draw(st.sampled_from(Sign))
    grant_option = sign is Sign.GRANT and draw(st.booleans())
    return SecurityPunctuation(
        DataDescription(draw(patterns), draw(patterns), draw(patterns)),
        SecurityRestriction(draw(patterns), grant_option),
        sign,
        draw(st.booleans()),
        ts=draw(st.integers(1, 2**40)),
        sn=draw(st.integers(1, 1000)),
    )


@given(sps(), streams, sp_names)
@example(only(FIG_8A).punctuation(1, 1), "s3", "sp1")
def test_to_cql_round_trip(sp: SecurityPunctuation, stream: str | None, name: str | None) -> None:
    text = to_cql(sp, stream, name)
    (statement,) = parse_statements(text)
    assert statement.punctuation(sp.ts, sp.sn) == sp
    assert statement.name == (name or None)
    assert statement.stream == (stream or None)


@given(st.lists(sps(), min_size=1, max_size=4))
def test_to_cql_script_round_trip(sp_list: list[SecurityPunctuation]) -> None:
    script = ";\n".join(to_cql(sp, "s", f"sp{i}") for i, sp in enumerate(sp_list))
    policy = parse_policy(script, ts=9)
    assert [sp.body for sp in policy.sps] == [sp.body for sp in sp_list]
    assert policy.csn == len(sp_list)


_SIMPLE_SP = only(MINIMAL).punctuation(1, 1)


@pytest.mark.parametrize("stream", ["let", "LET", "Into", "Heart Rate", "ALL", "s3"])
def test_to_cql_quotes_awkward_stream_names(stream: str) -> None:
    """Regression: a stream named ``let`` was written bare and read as the LET keyword."""
    statement = only(to_cql(_SIMPLE_SP, stream=stream))
    assert statement.stream == stream
    assert statement.punctuation(1, 1) == _SIMPLE_SP


@pytest.mark.parametrize("name", ["DDP", "sign", "Srp", "immutable", "let", "my sp", "sp1"])
def test_to_cql_keyword_sp_names(name: str) -> None:
    """Regression: ``DDP.DDP = ...`` cannot be read, a keyword is no ``name.`` prefix."""
    statement = only(to_cql(_SIMPLE_SP, name=name))
    assert statement.name == name
    assert statement.punctuation(1, 1) == _SIMPLE_SP


# -- privileges (FOR STATISTICS) ----------------------------------------------------------


def test_for_statistics_parses_and_round_trips() -> None:
    from streamshield.policy.privileges import Privilege

    text = "INSERT SP INTO STREAM S LET DDP = TUPLES: *, SRP = frbac:Insurer FOR STATISTICS"
    (statement,) = parse_statements(text)
    assert statement.srp.privilege is Privilege.STATISTICS
    sp = statement.punctuation(1, 1)
    assert parse_statements(to_cql(sp))[0].srp == statement.srp
    both = parse_statements(
        "INSERT SP INTO STREAM S LET DDP = TUPLES: *, SRP = rbac:A for statistics WITH GRANT OPTION"
    )[0]
    assert both.srp.grant_option and both.srp.privilege is Privilege.STATISTICS
    assert "FOR STATISTICS WITH GRANT OPTION" in to_cql(both.punctuation(1, 1))


def test_for_read_is_the_default_and_a_deny_cannot_be_for_statistics() -> None:
    from streamshield.policy.privileges import Privilege

    plain = "INSERT SP INTO STREAM S LET DDP = TUPLES: *, SRP = rbac:A"
    assert parse_statements(plain + " FOR READ")[0].srp == parse_statements(plain)[0].srp
    assert parse_statements(plain)[0].srp.privilege is Privilege.READ
    with pytest.raises(CqlError, match="every privilege"):
        parse_statements(plain + " FOR STATISTICS, SIGN = -")
    with pytest.raises(CqlError):
        parse_statements(plain + " FOR GRANT")
