"""Cache-state checks of one run: per pass, how many requests met their cache expectation, and the cache-state
failures (warm-condition requests that missed the prefix cache, cold-condition ones that hit it)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eval.records.final import ExampleKey as Key
from eval.records.final import Selection, slot
from eval.records.server_figures import checked_cached
from eval.records.types import CACHE_UNVERIFIED, RequestRecord
from eval.records.vocabulary import COLD_CONDITION, MISS_EXPECTED, WARM_CONDITION


@dataclass(frozen=True)
class CacheCheck:
    """`ok`: requests whose cached tokens met the pass's expectation, out of `n_total` expected ones."""

    pass_name: str
    expectation: str
    n_total: int
    ok: int
    reported: int  # records with usage.cached_tokens reported
    mean_cached: float | None
    invalid_attempts: int
    recovered: int
    errors: int
    missing: int
    # records whose cache state the server could not confirm (no cached-token count): never counted in `ok`
    unverified: int = 0


CACHE_EXPECTATIONS = {
    "cold": "0 cached tokens",
    "warm": "hit covering the prompt's full blocks",
    "repeat": "hit covering the prompt's full blocks",
    "timing_cold": "0 cached tokens",
    "timing_warm": "hit covering the prompt's full blocks",
    "control_salt": "0 cached tokens (new salt)",
    "control_sibling": "hit covering the shared context's blocks",
    "cold_answer": "0 cached tokens (CoT answer call, its own fresh salt)",
    "warm_answer": "hit covering what it shares with cold_answer's prompt",
    "repeat_answer": "hit covering what it shares with warm_answer's prompt",
}


def meets_expectation(rec: RequestRecord) -> bool:
    cached = checked_cached(rec)
    if cached is None or rec.status == "error" or rec.cache_check == CACHE_UNVERIFIED:
        return False
    expected = rec.expected_cached_tokens
    if rec.pass_name in MISS_EXPECTED:
        return cached == 0
    if expected is None:
        return rec.status == "ok" and cached > 0
    return cached >= expected if expected > 0 else rec.status == "ok"


def cache_check(keys: Sequence[Key], sel: Selection, pass_name: str, reps: int) -> CacheCheck:
    recs = [sel.final.get(slot(k, pass_name, r)) for k in keys for r in range(reps)]
    present = [r for r in recs if r is not None]
    cached = [c for c in map(checked_cached, present) if c is not None]
    return CacheCheck(
        pass_name=pass_name,
        expectation=CACHE_EXPECTATIONS[pass_name],
        n_total=len(recs),
        ok=sum(meets_expectation(r) for r in present),
        reported=len(cached),
        mean_cached=statistics.fmean(cached) if cached else None,
        invalid_attempts=sel.invalid_attempts.get(pass_name, 0),
        recovered=sel.recovered.get(pass_name, 0),
        errors=sum(r.status == "error" for r in present),
        missing=len(recs) - len(present),
        unverified=sum(r.cache_check == CACHE_UNVERIFIED for r in present),
    )


@dataclass(frozen=True)
class InvalidCounts:
    """Cache-state failures: warm-condition requests (warm, repeat, timing_warm) that missed the prefix cache,
    cold-condition ones (cold, timing_cold) that hit it. Attempts count every invalid record; recovered ones
    were followed by an ok retry; final ones stayed invalid (never scored)."""

    warm_attempts: int
    warm_recovered: int
    warm_final: int
    cold_attempts: int
    cold_recovered: int
    cold_final: int


def invalid_counts(sel: Selection) -> InvalidCounts:
    finals = Counter(r.pass_name for r in sel.final.values() if r.status == "invalid")

    def total(counts: Mapping[str, int], passes: Sequence[str]) -> int:
        return sum(counts.get(p, 0) for p in passes)

    return InvalidCounts(
        total(sel.invalid_attempts, WARM_CONDITION),
        total(sel.recovered, WARM_CONDITION),
        total(finals, WARM_CONDITION),
        total(sel.invalid_attempts, COLD_CONDITION),
        total(sel.recovered, COLD_CONDITION),
        total(finals, COLD_CONDITION),
    )
