"""Agreement within or across runs: pairs of samples of the same prompt, compared token by token.

A pair is (pass_a repetition r, pass_b repetition r) of one input; pass_b may come from another run (base vs
variant). Only pairs whose two samples are ok are compared; errored, invalid and missing ones are counted. Within
one run the two samples must come from one replica (eval/run/replicas.py pins an input's units to one): a pair
whose records name different replicas is counted invalid, never compared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from eval.analyze.memo import ScoreMemo, pair_result
from eval.records.final import ExampleKey as Key
from eval.records.final import Selection, ok_record, slot
from eval.records.types import RequestRecord
from eval.records.vocabulary import GENERATION_PASSES
from scorers import determinism

# a divergence whose top-1/top-2 logprob margin is below this (nats) on either side is a near tie
NEAR_TIE_MARGIN = 0.1


@dataclass(frozen=True)
class Divergence:
    dataset: str
    example_id: str
    repetition: int
    position: int
    margin_a: float | None
    margin_b: float | None
    text_equal: bool

    @property
    def near_tie(self) -> bool:
        margins = [m for m in (self.margin_a, self.margin_b) if m is not None]
        return bool(margins) and min(margins) < NEAR_TIE_MARGIN


@dataclass(frozen=True)
class PairStats:
    """Agreement of pass_a vs pass_b. `n_total` counts every expected pair; only valid ones compare."""

    pass_a: str
    pass_b: str
    n_total: int
    n_pairs: int  # both samples ok
    text_equal: int
    tokens_equal: int
    first_token_equal: int
    max_delta: float | None  # max |logprob delta| over shared top-k ids at compared positions
    min_overlap: int | None  # min |top-k(a) & top-k(b)| at compared positions
    errors: int  # pairs with an errored sample
    invalid: int  # pairs with an invalid (cache-miss) sample
    missing: int  # pairs with a missing record
    divergences: list[Divergence] = field(default_factory=list)


@dataclass(frozen=True)
class Pair:
    key: Key
    repetition: int
    a: RequestRecord
    b: RequestRecord
    result: determinism.PairResult


def pair_kind(a: RequestRecord | None, b: RequestRecord | None, same_replica: bool = False) -> str:
    """ok, error, invalid or missing: what a pair of two samples is. With `same_replica` (two records of one run
    compared as a pair, e.g. cold and warm), records of different replicas are no pair: invalid."""
    if a is None or b is None:
        return "missing"
    if same_replica and a.replica != b.replica:
        return "invalid"  # no pair: the warm of one replica never found the other's cache
    statuses = {a.status, b.status}
    if "error" in statuses:
        return "error"
    if "invalid" in statuses:
        return "invalid"
    return "ok"


def collect_pairs(
    keys: Sequence[Key],
    sel: Selection,
    pass_a: str,
    pass_b: str,
    reps: int,
    sel_b: Selection | None = None,
    memo: ScoreMemo | None = None,
) -> tuple[list[Pair], Counter[str]]:
    """Pairs (pass_a rep r, pass_b rep r) per key: pass_b is read from `sel_b` when given (another run);
    `memo`: the pair results kept between scorings (eval/analyze/memo.py)."""
    pairs: list[Pair] = []
    counts: Counter[str] = Counter()
    other = sel if sel_b is None else sel_b
    for key in keys:
        for rep in range(reps):
            a = sel.final.get(slot(key, pass_a, rep))
            b = other.final.get(slot(key, pass_b, rep))
            kind = pair_kind(a, b, same_replica=sel_b is None)
            counts[kind] += 1
            if kind == "ok" and a is not None and b is not None:
                pairs.append(Pair(key, rep, a, b, pair_result(memo, a, b)))
    return pairs, counts


def pair_stats(pass_a: str, pass_b: str, pairs: Sequence[Pair], counts: Mapping[str, int]) -> PairStats:
    bad = counts.get("error", 0) + counts.get("invalid", 0) + counts.get("missing", 0)
    agg = determinism.aggregate_pairs([p.result for p in pairs], errors=bad)
    divergences = [
        Divergence(
            p.key[0],
            p.key[1],
            p.repetition,
            p.result.first_divergence,
            p.result.margin_a,
            p.result.margin_b,
            p.result.text_equal,
        )
        for p in pairs
        if p.result.first_divergence is not None
    ]
    return PairStats(
        pass_a=pass_a,
        pass_b=pass_b,
        n_total=len(pairs) + bad,
        n_pairs=len(pairs),
        text_equal=agg.text_equal,
        tokens_equal=agg.tokens_equal,
        first_token_equal=agg.first_token_equal,
        max_delta=agg.max_delta,
        min_overlap=agg.min_overlap,
        errors=counts.get("error", 0),
        invalid=counts.get("invalid", 0),
        missing=counts.get("missing", 0),
        divergences=divergences,
    )


@dataclass(frozen=True)
class UniqueOutputs:
    n_prompts: int  # prompts with at least two ok generation samples
    n_multiple: int  # of those, prompts with more than one distinct output
    max_unique: int
    min_top_share: float | None


def unique_outputs(keys: Sequence[Key], sel: Selection) -> UniqueOutputs:
    n_prompts = n_multiple = max_unique = 0
    min_share: float | None = None
    for key in keys:
        texts = [r.output_text or "" for p in GENERATION_PASSES if (r := ok_record(sel, key, p)) is not None]
        if len(texts) < 2:
            continue
        n_unique, share = determinism.unique_outputs(texts)
        n_prompts += 1
        n_multiple += n_unique > 1
        max_unique = max(max_unique, n_unique)
        min_share = share if min_share is None else min(min_share, share)
    return UniqueOutputs(n_prompts, n_multiple, max_unique, min_share)
