"""Determinism metrics: how two responses to the same request differ, and aggregates over many.

A `Generation` is what one request produced: the generated token IDs, the output text, and optionally per
position the top-k alternatives as {token ID: logprob} (`topk[p]` belongs to the token at position p; when
given, it must have one entry per generated token). Responses that ended in an error are not Generations:
callers count them and pass the count to `aggregate_pairs(..., errors=n)`, which reports it separately.

Pair metrics, A vs B (`compare_pair`):
- `text_equal`: the output strings are identical. `tokens_equal`: the token-ID sequences are identical.
- `first_token_equal`: A's and B's tokens at position 0 are equal; None when either response is empty.
- `first_divergence`: the first position p where the token IDs differ; None when the sequences are equal;
  the shorter length when one sequence is a proper prefix of the other (an empty one included: 0).
- `margin_a`, `margin_b`: at the divergence position, each side's top-1 minus top-2 logprob (the two
  largest logprobs of that side's top-k at that position; 0.0 for a tie). None when there is no
  divergence, when that side has no top-k, fewer than two alternatives there, or no token at that position
  (the shorter side of a prefix). A small margin means a near-tie flip, a large one a real difference.
- The compared positions: 0 up to and including the first divergence, or every position when the
  sequences are equal; a position counts only where both sides have top-k (so the prefix side's missing
  position is skipped). Before the divergence both sides saw the same tokens, so their top-k are
  distributions over the same context; position 0 is always compared (when both have it), so a
  first-token flip still yields a figure (the one-token seed check compares top-20 at position 0).
- `topk_max_abs_delta`: over the compared positions and the token IDs present in both top-k sets there,
  the largest |logprob_A - logprob_B|; 0.0 when the logprobs are identical. None when no position is
  compared (no logprobs on a side, or empty responses) or no token ID is shared at any compared position.
- `topk_min_overlap`: over the compared positions, the smallest |topk_A ∩ topk_B| counted by token ID; k
  when the sets are identical (k = the set size, which may be below 20). None when no position is compared.

Aggregates (`aggregate_pairs`): n pairs; how many have text_equal, tokens_equal, first_token_equal True
(`first_token_compared` pairs had both first tokens); the max of the deltas and the min of the overlaps
(over pairs that have one; None if none has); the first-divergence positions of the diverging pairs, in
input order; `errors`, the responses that could not be paired, never folded into n.

Repeats of one request (`unique_outputs`): the number of distinct outputs and the share of the most
common one (count / N); (0, 0.0) for no outputs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Generation:
    """One successful response: generated token IDs, text, optional per-position top-k {token ID: logprob}."""

    token_ids: Sequence[int]
    text: str
    topk: Sequence[Mapping[int, float]] | None

    def __post_init__(self) -> None:
        if self.topk is not None and len(self.topk) != len(self.token_ids):
            raise ValueError(f"topk has {len(self.topk)} positions for {len(self.token_ids)} tokens")


@dataclass(frozen=True)
class PairResult:
    text_equal: bool
    tokens_equal: bool
    first_token_equal: bool | None
    first_divergence: int | None
    margin_a: float | None
    margin_b: float | None
    topk_max_abs_delta: float | None
    topk_min_overlap: int | None


@dataclass(frozen=True)
class PairAggregate:
    n: int
    text_equal: int
    tokens_equal: int
    first_token_equal: int
    first_token_compared: int
    max_delta: float | None
    min_overlap: int | None
    divergence_positions: list[int]
    errors: int


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """First differing position; the shorter length for a proper prefix; None when equal."""
    for p, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return p
    return None if len(a) == len(b) else min(len(a), len(b))


def margin(topk: Sequence[Mapping[int, float]] | None, position: int | None) -> float | None:
    """Top-1 minus top-2 logprob at a position (None without a position, top-k or two alternatives)."""
    if position is None or topk is None or position >= len(topk) or len(topk[position]) < 2:
        return None
    first, second = sorted(topk[position].values(), reverse=True)[:2]
    return first - second


def compared_positions(a: Generation, b: Generation, divergence: int | None) -> range:
    """0 .. divergence (inclusive), or all positions when equal; only where both sides have top-k."""
    if a.topk is None or b.topk is None:
        return range(0)
    end = len(a.token_ids) if divergence is None else divergence + 1
    return range(min(end, len(a.topk), len(b.topk)))


def topk_delta_overlap(a: Generation, b: Generation, positions: range) -> tuple[float | None, int | None]:
    """(max |logprob_A - logprob_B| over shared IDs, min shared-ID count) over the positions."""
    if a.topk is None or b.topk is None or len(positions) == 0:
        return None, None
    delta: float | None = None
    overlap: int | None = None
    for p in positions:
        left, right = a.topk[p], b.topk[p]
        shared = left.keys() & right.keys()
        overlap = len(shared) if overlap is None else min(overlap, len(shared))
        for token in shared:
            d = abs(left[token] - right[token])
            delta = d if delta is None else max(delta, d)
    return delta, overlap


def compare_pair(a: Generation, b: Generation) -> PairResult:
    """All pair metrics of two responses to the same request (definitions in the module docstring)."""
    divergence = first_divergence(a.token_ids, b.token_ids)
    first_equal = None if not a.token_ids or not b.token_ids else a.token_ids[0] == b.token_ids[0]
    delta, overlap = topk_delta_overlap(a, b, compared_positions(a, b, divergence))
    return PairResult(
        text_equal=a.text == b.text,
        tokens_equal=list(a.token_ids) == list(b.token_ids),
        first_token_equal=first_equal,
        first_divergence=divergence,
        margin_a=margin(a.topk, divergence),
        margin_b=margin(b.topk, divergence),
        topk_max_abs_delta=delta,
        topk_min_overlap=overlap,
    )


def aggregate_pairs(results: Sequence[PairResult], errors: int = 0) -> PairAggregate:
    """Counts, max delta, min overlap and divergence positions over pairs; errors reported separately."""
    if errors < 0:
        raise ValueError("errors must be >= 0")
    deltas = [r.topk_max_abs_delta for r in results if r.topk_max_abs_delta is not None]
    overlaps = [r.topk_min_overlap for r in results if r.topk_min_overlap is not None]
    return PairAggregate(
        n=len(results),
        text_equal=sum(r.text_equal for r in results),
        tokens_equal=sum(r.tokens_equal for r in results),
        first_token_equal=sum(r.first_token_equal is True for r in results),
        first_token_compared=sum(r.first_token_equal is not None for r in results),
        max_delta=max(deltas) if deltas else None,
        min_overlap=min(overlaps) if overlaps else None,
        divergence_positions=[r.first_divergence for r in results if r.first_divergence is not None],
        errors=errors,
    )


def unique_outputs(texts: Sequence[str]) -> tuple[int, float]:
    """(number of distinct outputs, share of the most common one) over repeats of one request."""
    if not texts:
        return 0, 0.0
    counts = Counter(texts)
    return len(counts), counts.most_common(1)[0][1] / len(texts)
