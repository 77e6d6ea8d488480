"""Bit-parallel longest-common-subsequence rows (Allison-Dix / Hyyro), over word sequences.

The columns (one sequence, or several independent "segments" packed side by side) are bits of one Python
int. `match_masks` gives, per word, the bits of the columns holding that word. Processing the row words one
by one with

    u = v & mask[word];  v = ((v + u) | (v ^ u)) & full        (v starts as `full`, all column bits set)

keeps in `v` the DP row of the classic LCS table T: bit c of v is 0 exactly where the row steps up at
column c + 1, i.e. T[i][j] = j - popcount(v_i & (2**j - 1)) inside a segment. Between segments a guard bit
(always 0 in `full`) absorbs the carry of the addition, so segments never interact. Cost: one big-int
expression per row word instead of a Python loop per table cell.
"""

from __future__ import annotations

from collections.abc import Sequence


def match_masks(segments: Sequence[Sequence[str]]) -> tuple[dict[str, int], list[int], int]:
    """Pack segments (each followed by one guard bit): (word -> column bits, segment offsets, full mask)."""
    positions: dict[str, list[int]] = {}
    offsets: list[int] = []
    full = 0
    pos = 0
    for words in segments:
        offsets.append(pos)
        for k, word in enumerate(words):
            positions.setdefault(word, []).append(pos + k)
        full |= ((1 << len(words)) - 1) << pos
        pos += len(words) + 1
    masks = {word: _bits(cols) for word, cols in positions.items()}
    return masks, offsets, full


def _bits(columns: list[int]) -> int:
    value = 0
    for c in columns:
        value |= 1 << c
    return value


def dp_rows(row_words: Sequence[str], masks: dict[str, int], full: int) -> list[int]:
    """v_0 .. v_n: the bit rows after 0 .. n row words (v_0 = full)."""
    v = full
    rows = [v]
    append = rows.append
    get = masks.get
    for word in row_words:
        m = get(word, 0)
        if m:
            u = v & m
            v = ((v + u) | (v ^ u)) & full
        append(v)
    return rows


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of a longest common subsequence of a and b."""
    if not a or not b:
        return 0
    masks, _, full = match_masks([b])
    v = full
    for word in a:
        m = masks.get(word, 0)
        if m:
            u = v & m
            v = ((v + u) | (v ^ u)) & full
    return len(b) - v.bit_count()
