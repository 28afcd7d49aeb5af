"""Bounds on the numbers a user's SQL may write, checked before Spark sees the query.

Spark reads an integer literal as INT, BIGINT or DECIMAL(38) by its size and a literal
with a fraction as a DECIMAL of its digits; past 38 digits it fails *while planning* the
query with an arithmetic error, and a literal with an exponent is a double that may be
infinite. Suffixed literals (``5L``, ``5S``, ``5Y``, ``1.5BD``) are casts that quietly
give NULL when the value does not fit. None of that is a clear answer: the user gets a
server error, or a query that compares with NULL and never matches. So every number is
held to what its type can represent, and refused (never echoed: it may be data) past it:

=========================================  ==============================================
written                                    bound
=========================================  ==============================================
``123``, ``-1.25``, ``1.5BD``              at most 38 significant digits (DECIMAL(38))
``1e10``, ``2.5E-3``, ``2D``, ``3F``       a finite double
``5L`` / ``5`` cast to BIGINT              -2^63 .. 2^63-1
``5S`` / cast to SMALLINT, ``5Y`` TINYINT  -2^15 .. 2^15-1, -2^7 .. 2^7-1
cast to INT                                -2^31 .. 2^31-1
``DECIMAL(p, s)``                          1 <= p <= 38, 0 <= s <= p
=========================================  ==============================================

Window sizes (``[ROWS n]``, ``[RANGE t]``) have their own bound
(:data:`streamshield.lang.windows.MAX_WINDOW_SIZE`), sizes of functions that amplify a
row theirs (``query_check.MAX_EXPANSION``).
"""

from __future__ import annotations

import math

from sqlglot import exp

MAX_DECIMAL_DIGITS = 38
"""Spark's largest DECIMAL precision."""

_INTEGER_RANGES = {
    exp.DataType.Type.TINYINT: 8,
    exp.DataType.Type.SMALLINT: 16,
    exp.DataType.Type.INT: 32,
    exp.DataType.Type.BIGINT: 64,
}

OUT_OF_RANGE = (
    "a number in the query is out of range: whole and decimal numbers take at most "
    f"{MAX_DECIMAL_DIGITS} digits, numbers with an exponent must be finite doubles"
)


def number_problem(tree: exp.Expr) -> str | None:
    """Why a number in ``tree`` cannot be read as its type, or ``None`` when all can."""
    for node in tree.walk():
        if isinstance(node, exp.Literal) and not node.is_string:
            if not _representable(str(node.this)):
                return OUT_OF_RANGE
        elif isinstance(node, exp.Cast | exp.TryCast):
            problem = _cast_problem(node)
            if problem is not None:
                return problem
        elif isinstance(node, exp.DataType) and node.this == exp.DataType.Type.DECIMAL:
            problem = _decimal_problem(node)
            if problem is not None:
                return problem
    return None


def _representable(text: str) -> bool:
    mantissa, exponent = _split_exponent(text)
    if exponent:
        try:
            return math.isfinite(float(text))
        except ValueError:
            return False
    digits = mantissa.replace(".", "").lstrip("+-").lstrip("0")
    return len(digits) <= MAX_DECIMAL_DIGITS


def _split_exponent(text: str) -> tuple[str, bool]:
    lower = text.lower()
    return (lower.split("e", 1)[0], True) if "e" in lower else (lower, False)


def _cast_problem(node: exp.Cast | exp.TryCast) -> str | None:
    """A literal cast to an integer type (``5L`` is ``TRY_CAST(5 AS BIGINT)``) must fit."""
    target = node.to.this if isinstance(node.to, exp.DataType) else None
    bits = _INTEGER_RANGES.get(target)
    value = _integer(node.this)
    if bits is None or value is None:
        return None
    if isinstance(node.parent, exp.Neg):
        value = -value  # ``-9223372036854775808L``: Spark reads the sign with the literal
    if -(2 ** (bits - 1)) <= value <= 2 ** (bits - 1) - 1:
        return None
    return f"a whole number in the query does not fit in {target.value} ({bits} bits)"


def _integer(node: exp.Expr) -> int | None:
    negative = isinstance(node, exp.Neg)
    inner = node.this if negative else node
    if not (isinstance(inner, exp.Literal) and not inner.is_string):
        return None
    text = str(inner.this)
    if not text.isdigit() or len(text.lstrip("0")) > MAX_DECIMAL_DIGITS:
        return None  # not a whole number, or refused as a literal already
    return -int(text) if negative else int(text)


def _decimal_problem(node: exp.DataType) -> str | None:
    params = [p.this for p in node.expressions if isinstance(p, exp.DataTypeParam)]
    numbers = [_integer(p) if isinstance(p, exp.Expression) else None for p in params]
    if not params:
        return None
    shown = (
        f"DECIMAL(precision, scale) takes 1 <= precision <= {MAX_DECIMAL_DIGITS} "
        "and 0 <= scale <= precision"
    )
    if any(n is None for n in numbers):
        return shown
    precision, scale = numbers[0], numbers[1] if len(numbers) > 1 else 0
    assert precision is not None and scale is not None
    if not 1 <= precision <= MAX_DECIMAL_DIGITS or not 0 <= scale <= precision:
        return shown
    return None
