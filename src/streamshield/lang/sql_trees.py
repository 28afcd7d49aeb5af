"""Small SQL trees the security rewrites add to a query, built as trees.

The rewrites work on the one tree admission parsed (lang/admission.py); what they add
is built here node by node rather than written as text and parsed, so that nothing of
a query is ever read by a parser twice and no rendered user expression is re-read.

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from sqlglot import exp


def bigint(value: int) -> exp.Expr:
    """Spark's ``<value>L`` (as its parser reads it: ``-CAST(1 AS BIGINT)`` for -1)."""
    number = exp.cast(exp.Literal.number(abs(value)), exp.DataType.build("bigint"))
    return exp.Neg(this=number) if value < 0 else number


def chain(kind: type[exp.Binary], operands: list[exp.Expr]) -> exp.Expr:
    """``a OP b OP c ...``, left-associative, as a parser reads it; every operand must
    bind tighter than ``OP`` (a name, a call, a comparison under AND, or in parentheses)."""
    first, *rest = operands
    out = first
    for operand in rest:
        out = kind(this=out, expression=operand)
    return out


def is_null(value: exp.Expr) -> exp.Expr:
    return exp.Is(this=value, expression=exp.Null())


def not_null_elements(array: exp.Expr) -> exp.Expr:
    """``FILTER(array, x -> x IS NOT NULL)``."""
    x = exp.to_identifier("x")
    test = exp.Not(this=is_null(x))
    return exp.ArrayFilter(this=array, expression=exp.Lambda(this=test, expressions=[x.copy()]))


def empty_strings() -> exp.Expr:
    """``CAST(ARRAY() AS ARRAY<STRING>)``."""
    return exp.cast(exp.Array(), exp.DataType.build("array<string>", dialect="spark"))
