"""Who may receive a NOT match's row (docs/cep.md "NOT matches"):
only a recipient whose READ mask is exactly the pattern's, checked through the same
label words (readers, denied) Delivery tests every row slot with.

No JVM: the slots are constants, tested here with the pure form of the label check
(``EncodedAccess.allows``, what ``engine.views.labels.allows_words`` computes natively).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamshield.cep.match_labels import Absence, LabelLayout, exactly
from streamshield.policy.bitset import WORD_BITS, to_signed
from streamshield.policy.encoding import EncodedAccess

WIDTH = 2
# Bits at both ends of both words (the sign bit included), so that the property meets
# two words and negative ones.
BITS = [0, 1, 2, WORD_BITS - 1, WORD_BITS, WORD_BITS + 1, 2 * WORD_BITS - 1]
role_sets = st.frozensets(st.sampled_from(BITS), max_size=len(BITS))


def words(bits: frozenset[int]) -> tuple[int, ...]:
    out = [0] * WIDTH
    for bit in bits:
        out[bit // WORD_BITS] |= 1 << (bit % WORD_BITS)
    return tuple(to_signed(w) for w in out)


def passes(layout: LabelLayout, mask: tuple[int, ...]) -> bool:
    """Every slot allows ``mask``, as a row's slots all must for Delivery."""
    return all(EncodedAccess(r, d).allows(mask) for r, d in exactly(layout))


@given(role_sets, role_sets)
def test_only_the_patterns_exact_roles_pass(pattern_roles, recipient_roles) -> None:
    layout = LabelLayout(WIDTH, 1, absence=Absence(words(pattern_roles)))
    expected = bool(pattern_roles) and recipient_roles == pattern_roles
    assert passes(layout, words(recipient_roles)) == expected


@given(role_sets)
def test_without_an_absence_nobody_passes(recipient_roles) -> None:
    assert not passes(LabelLayout(WIDTH, 1), words(recipient_roles))
    wrong_width = LabelLayout(WIDTH, 1, absence=Absence((1,)))
    assert not passes(wrong_width, words(recipient_roles))
