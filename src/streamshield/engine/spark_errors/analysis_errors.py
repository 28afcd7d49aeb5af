"""Spark's refusals of a query at plan time, as :class:`QueryRejected` safe to show.

A query that passed the SQL gate can still be wrong for Spark: an unknown column, a
type error, an operation streaming does not support. Spark says so with an error class
and message parameters when the plan is analysed (``session.sql``) or started; left
alone, that exception is a 500 and the query's failure surfaces nowhere useful.

The message is built from the error class and an allow-list of parameters that name
things (columns, functions, types), never from Spark's text, which quotes expressions
and so can quote the literals a user typed (possibly data copied from elsewhere). Any
parameter that still contains one of the query's literals is dropped, and names of
internal columns (``_ss_...``) and views never appear. An unknown column is answered
with the columns of the query's own streams: Spark's suggestions are the five nearest
columns of the secured plan, label columns among them, so with those taken out they
are not the stream's columns but a misleading few of them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from streamshield.lang.query_check import QueryRejected

audit = logging.getLogger("streamshield.audit")
T = TypeVar("T")
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
"""PySpark's loggers of every AnalysisException it raises (``PySparkException``)."""


def quiet_query_context_logs() -> None:
    """PySpark logs each analysis error it raises at ERROR, on a handler of its own, with
    the Java stack trace and the analysed plan (the secured views, label constants
    included). A refused query is its author's error, answered to her as a
    :class:`QueryRejected`: nothing for the server's log (its class goes to the audit
    entry of the refusal). The level outlives a logging configuration (uvicorn's),
    which resets ``disabled`` but not the level of loggers it does not name."""
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


quiet_query_context_logs()

_SHOWN = (
    "objectName",
    "routineName",
    "functionName",
    "left",
    "right",
    "inputType",
    "requiredType",
    "dataType",
    "paramIndex",
    "inputName",
    "fieldName",
    "columnName",
    "colName",
    "exprName",
    "type",
)
_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")
_INTERNAL = re.compile(r"_ss_|ss_[0-9a-f]{32}")
_TEXTS = {
    "UNRESOLVED_COLUMN": "unknown column {objectName}",
    "UNRESOLVED_FIELD": "unknown field {fieldName} of {columnName}",
    "FIELD_NOT_FOUND": "unknown column {fieldName}",
    "UNRESOLVED_ROUTINE": "unknown function {routineName}",
    "AMBIGUOUS_REFERENCE": "ambiguous column {objectName}: qualify it with its stream",
    "MISSING_AGGREGATION": "column {expression} must be aggregated or in GROUP BY",
    "GROUP_BY_AGGREGATE": "GROUP BY may not contain an aggregate",
}


def spark_error_class(err: BaseException) -> str | None:
    """Spark's error class (``UNRESOLVED_COLUMN.WITH_SUGGESTION``) or None."""
    for getter in ("getCondition", "getErrorClass"):
        method = getattr(err, getter, None)
        if method is not None:
            try:
                found = method()
            except Exception:  # py4j may be gone: fall back to the text
                found = None
            if found:
                return str(found)
    match = _CLASS.search(str(err))
    return match.group(1) if match else None


def is_spark_refusal(err: BaseException) -> bool:
    """Whether ``err`` is Spark refusing a plan (analysis, an unsupported operation, or an
    arithmetic error while folding the query's constants, such as a decimal literal past
    Spark's precision): the query's fault, never the server's."""
    names = {klass.__name__ for klass in type(err).__mro__}
    return bool(names & _REFUSALS)


_REFUSALS = frozenset(
    {
        "AnalysisException",
        "ParseException",
        "IllegalArgumentException",
        "ArithmeticException",
        "NumberFormatException",
        "DateTimeException",
    }
)


Columns = Mapping[str, Sequence[str]]
"""The user's columns of each stream a query reads, by stream name."""


def rejected(err: BaseException, sql: str, columns: Columns | None = None) -> QueryRejected:
    """The refusal as shown to the user: rule from the error class, names not values;
    ``columns``: the query's streams' columns, named in an unknown column's answer."""
    audit.debug("query refused by Spark's analysis: %s", spark_error_class(err))
    error_class = spark_error_class(err)
    literals = _literals(sql)
    params = _parameters(err, literals)
    if error_class is None:
        if _says_unsupported_on_stream(str(err)):
            return QueryRejected(
                "not_supported", "an operation of the query is not supported on a stream"
            )
        return QueryRejected("analysis", "Spark could not plan the query")
    if error_class.startswith("_LEGACY"):
        sentence = _first_sentence(str(err))
        if _says_unsupported_on_stream(sentence) and not any(lit in sentence for lit in literals):
            return QueryRejected("not_supported", f"{sentence} [{error_class}]")
    top = error_class.split(".", 1)[0]
    template = _TEXTS.get(top)
    text: str | None = None
    if template is not None:
        try:
            text = template.format(**params)
        except KeyError:
            text = None
    if text is None:
        shown = ", ".join(f"{k}={v}" for k, v in params.items() if k in _SHOWN)
        what = "type error" if top == "DATATYPE_MISMATCH" else "Spark refused the query"
        text = f"{what} ({error_class})" + (f": {shown}" if shown else "")
    elif top == "UNRESOLVED_COLUMN" and columns:
        text += f" ({columns_text(columns)})"
    return QueryRejected(top.lower(), f"{text} [{error_class}]")


def columns_text(columns: Columns) -> str:
    """``columns of HeartRate: `patient_id`, `beats_per_min`, `ts```, per stream."""
    return "; ".join(
        f"columns of {stream}: " + ", ".join(f"`{c}`" for c in names if not _INTERNAL.search(c))
        for stream, names in columns.items()
    )


def planned(plan: Callable[[], T], sql: str, columns: Columns | None = None) -> T:
    """``plan()``, with Spark's plan-time refusals turned into :class:`QueryRejected`
    (``columns``: as for :func:`rejected`)."""
    try:
        return plan()
    except Exception as err:
        if is_spark_refusal(err):
            raise rejected(err, sql, columns) from None
        raise


def _parameters(err: BaseException, literals: Iterable[str]) -> dict[str, str]:
    getter = getattr(err, "getMessageParameters", None)
    try:
        raw = dict(getter()) if getter is not None else {}
    except Exception:
        raw = {}
    shown: dict[str, str] = {}
    literals = [lit.lower() for lit in literals]
    for key, value in raw.items():
        value = str(value)
        if key not in (*_SHOWN, "expression"):
            continue
        if any(lit in value.lower() for lit in literals):
            continue  # could echo a value the user typed
        if _INTERNAL.search(value):
            continue
        if len(value) > 200:
            value = value[:200] + "..."
        shown[key] = value
    return shown


def _says_unsupported_on_stream(text: str) -> bool:
    """Whether a sentence says "not supported"/"unsupported" and later "stream".

    Spark's messages can quote the user's query, so this runs in linear time: the regex
    it replaces, ``(not supported|unsupported)[^.\\n]*(stream)``, was quadratic on a
    message repeating "unsupported" (8,000 times: 4 s of a server thread).
    """
    for sentence in re.split(r"[.\n]", text.lower()):
        ends = [
            i + len(k) for k in ("not supported", "unsupported") if (i := sentence.find(k)) >= 0
        ]
        if ends and sentence.find("stream", min(ends)) >= 0:
            return True
    return False


def _first_sentence(text: str) -> str:
    """Spark's fixed wording of an unsupported operation: its first sentence, no class."""
    text = _CLASS.sub("", text.split("\n", 1)[0]).strip()
    sentence = text.split(". ", 1)[0].rstrip(".")
    return sentence if "#" not in sentence and len(sentence) < 300 else ""


def _literals(sql: str) -> list[str]:
    """String and number literals of the query (two characters or more)."""
    try:
        tokens = Spark().tokenize(sql)
    except (TokenError, ValueError):
        return []
    kinds = {TokenType.STRING, TokenType.NUMBER}
    return [t.text for t in tokens if t.token_type in kinds and len(t.text.strip()) >= 2]
