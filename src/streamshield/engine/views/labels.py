"""Label columns as native Spark expressions: rule evaluation and the secured-view check.

The layout and the combination formula come from :mod:`streamshield.policy.rules`;
this module only spells them in Catalyst. Per tuple it is one ``aggregate`` over the
(few) rules of the tuple's policy plus bitwise arithmetic: no Python runs per row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamshield.policy.bitset import Words
from streamshield.policy.policy import Combine
from streamshield.policy.rules import COVER, DENY, IMM, MUT, SRV, SRV_DENY, Layout, RuleSet
from streamshield.policy.sp_patterns import Any, Glob, Literal, OneOf, Pattern, Range, glob_segments

RULE_TYPE = StructType(
    [
        StructField("kind", IntegerType(), False),
        StructField("num", DoubleType()),
        StructField("str", StringType()),
        StructField("nums", ArrayType(DoubleType())),
        StructField("strs", ArrayType(StringType())),
        StructField("lo", DoubleType()),
        StructField("hi", DoubleType()),
        StructField("regex", StringType()),
        StructField("words", ArrayType(LongType()), False),
    ]
)
RULES_TYPE = ArrayType(RULE_TYPE)
ANY_KIND, NUM_KIND, STR_KIND, SET_KIND, RANGE_KIND, GLOB_KIND = range(6)
NUMERIC_TEXT = r"^-?[0-9]+(\.[0-9]+)?$"  # the same reading as patterns.as_number


def glob_regex(pattern: str) -> str:
    """A Java regex equal to :func:`~streamshield.policy.sp_patterns.glob_match`, linear in the
    value: ``first(?>.*?middle)...(?>.*?middle).*last``.

    A naive translation (``.*`` for every ``*``) backtracks over every way of splitting the
    value between the stars: ``a*a*a*a*b`` costs O(n^4) per tuple, and a long glob nests
    one Java stack frame per regex node (the StackOverflowError seen in an ingest thread).
    Here each middle segment is found at its leftmost place inside an atomic group, which
    Java never re-enters, exactly like the Python scan; only the last ``.*`` backtracks,
    once. The glob itself is at most ``MAX_GLOB_CHARS`` long (checked when it is built).
    """

    def segment(text: str) -> str:
        return "".join("." if c == "?" else re.escape(c) for c in text)

    parts = glob_segments(pattern)
    if len(parts) == 1:
        return "(?s)^" + segment(pattern) + r"\z"
    first, *middle, last = parts
    body = segment(first) + "".join(f"(?>.*?{segment(m)})" for m in middle if m)
    return "(?s)^" + body + ".*" + segment(last) + r"\z"


def rule_row(pattern: Pattern, words: Words) -> tuple:
    """One rule as a row of RULE_TYPE."""
    kind, num, text, nums, strs, lo, hi, regex = ANY_KIND, None, None, None, None, None, None, None
    if isinstance(pattern, Any):
        pass
    elif isinstance(pattern, Literal):
        if isinstance(pattern.value, int | float):
            kind, num = NUM_KIND, float(pattern.value)
        else:
            kind, text = STR_KIND, pattern.value
    elif isinstance(pattern, OneOf):
        kind = SET_KIND
        values = [lit.value for lit in pattern.values]
        nums = sorted(float(v) for v in values if isinstance(v, int | float))
        strs = sorted(v for v in values if isinstance(v, str))
    elif isinstance(pattern, Range):
        kind, lo, hi = RANGE_KIND, pattern.low, pattern.high
    elif isinstance(pattern, Glob):
        kind, regex = GLOB_KIND, glob_regex(pattern.pattern)
    else:  # pragma: no cover - exhaustive over Pattern
        raise TypeError(pattern)
    return (kind, num, text, nums, strs, lo, hi, regex, list(words))


def rule_rows(rules: RuleSet) -> list[tuple]:
    return [rule_row(rule.tuples, rule.words) for rule in rules.rules]


def tid_number(tid: Column) -> Column:
    return F.when(tid.rlike(NUMERIC_TEXT), tid.cast("double"))


def _matches(rule: Column, tid: Column, tid_num: Column) -> Column:
    kind = rule["kind"]
    return F.coalesce(
        F.when(kind == ANY_KIND, F.lit(True))
        .when(kind == NUM_KIND, tid_num == rule["num"])
        .when(kind == STR_KIND, tid == rule["str"])
        .when(
            kind == SET_KIND,
            F.array_contains(rule["strs"], tid) | F.array_contains(rule["nums"], tid_num),
        )
        .when(kind == RANGE_KIND, tid_num.between(rule["lo"], rule["hi"]))
        .when(kind == GLOB_KIND, F.regexp_like(tid, rule["regex"])),
        F.lit(False),
    )


def accumulate(rules: Column, tid: Column, size: int) -> Column:
    """OR of the words of the matching rules; all zeros when there is no rule (deny)."""
    tid_num = tid_number(tid)
    zero = F.array_repeat(F.lit(0).cast("long"), size)
    folded = F.aggregate(
        rules,
        zero,
        lambda acc, rule: F.when(
            _matches(rule, tid, tid_num),
            F.zip_with(acc, rule["words"], lambda x, y: x.bitwiseOR(y)),
        ).otherwise(acc),
    )
    return F.coalesce(folded, zero)


def reader_column(obj: int, word: int) -> str:
    return f"_ss_r{obj}_{word}"


def denied_column(obj: int, word: int) -> str:
    return f"_ss_d{obj}_{word}"


def label_columns(acc: Column, layout: Layout, mode: Combine) -> list[Column]:
    """Reader and denied words of the tuple and of every attribute, from accumulated words."""
    columns = []
    for obj in range(len(layout.objects)):
        for w in range(layout.width):

            def part(p: int, obj: int = obj, w: int = w) -> Column:
                return acc[layout.offset(obj, p) + w]

            srv_ok = part(SRV).bitwiseAND(F.bitwise_not(part(SRV_DENY)))
            joined = (
                part(MUT).bitwiseAND(srv_ok)
                if mode is Combine.INTERSECT
                else part(MUT).bitwiseOR(srv_ok)
            )
            combined = F.when(part(COVER) != 0, joined).otherwise(part(MUT))
            columns.append(combined.bitwiseOR(part(IMM)).alias(reader_column(obj, w)))
            columns.append(part(DENY).alias(denied_column(obj, w)))
    return columns


def label_names(objects: int, width: int) -> list[str]:
    """The label columns of ``objects`` objects (the tuple, then each attribute) of
    ``width`` words, in label column order (``policy.rules.label_words``)."""
    return [
        name(obj, w)
        for obj in range(objects)
        for w in range(width)
        for name in (reader_column, denied_column)
    ]


def allows(obj: int, query: Words) -> Column:
    """The secured-view test for one object: readers meet the query, denied misses it."""
    words = {w: (reader_column(obj, w), denied_column(obj, w)) for w in range(len(query))}
    return allows_words(words, query)


def allows_words(
    words: Mapping[int, tuple[str, str]], query: Words, col: Callable[[str], Column] = F.col
) -> Column:
    """:func:`allows` over any label columns: ``words`` maps a word index to its (readers,
    denied) column names, ``col`` a name to its column. A word the query needs but
    ``words`` lacks denies."""
    if any(q and w not in words for w, q in enumerate(query)):
        return F.lit(False)
    meets = [(col(words[w][0]).bitwiseAND(F.lit(q)) != 0) for w, q in enumerate(query) if q]
    misses = [(col(words[w][1]).bitwiseAND(F.lit(q)) == 0) for w, q in enumerate(query) if q]
    if not meets:
        return F.lit(False)
    condition = _any(meets)
    for miss in misses:
        condition = condition & F.coalesce(miss, F.lit(False))
    return F.coalesce(condition, F.lit(False))


def _any(conditions: Sequence[Column]) -> Column:
    result = conditions[0]
    for condition in conditions[1:]:
        result = result | condition
    return result
