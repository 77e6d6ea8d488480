"""Speculative decoding's figures of one run: drafts, draft tokens and accepted tokens (per draft position) as
vLLM's counters moved around each request (`RequestRecord.server_metrics`, concurrency 1; eval/run/metrics_text.py
REQUEST_COUNTERS), summed over the final records whose figures are their own.

    acceptance rate           accepted / draft tokens
    mean acceptance length    1 + accepted / drafts (tokens each verification step yields, as vLLM reports it)
    per position              accepted at position k / drafts (how often the k-th drafted token survives)

A record whose server figures are another's (`server_foreign`) is left out and counted; so is a final answered
record without figures (no /metrics, or concurrency above 1). None: no record has speculative figures (a server
without a draft).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from eval.records.server_figures import (
    SPEC_ACCEPTED_KEY,
    SPEC_DRAFT_TOKENS_KEY,
    SPEC_DRAFTS_KEY,
    SPEC_POSITION_PREFIX,
)
from eval.records.types import RequestRecord

__all__ = ["SpecDecode", "spec_decode"]


@dataclass(frozen=True)
class SpecDecode:
    counted: int  # final answered records whose own figures were summed
    foreign: int  # final answered records whose figures were another's (left out)
    unmeasured: int  # final answered records without speculative figures
    drafts: int
    draft_tokens: int
    accepted: int
    accepted_per_position: tuple[int, ...]  # index k: accepted tokens at draft position k

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.draft_tokens if self.draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        return 1 + self.accepted / self.drafts if self.drafts else None

    @property
    def position_rates(self) -> tuple[float, ...]:
        return tuple(a / self.drafts for a in self.accepted_per_position) if self.drafts else ()


def _positions(figures: dict[str, float]) -> dict[int, float]:
    out: dict[int, float] = {}
    for key, value in figures.items():
        tail = key[len(SPEC_POSITION_PREFIX) :]
        if key.startswith(SPEC_POSITION_PREFIX) and tail.isdigit():
            out[int(tail)] = value
    return out


def spec_decode(finals: Iterable[RequestRecord]) -> SpecDecode | None:
    """The run's speculative-decoding figures from its final records (module docstring)."""
    counted = foreign = unmeasured = 0
    drafts = tokens = accepted = 0.0
    positions: dict[int, float] = {}
    seen = False
    for rec in finals:
        if rec.status == "error":
            continue
        figures = rec.server_metrics or {}
        if SPEC_DRAFTS_KEY not in figures:
            unmeasured += 1
            continue
        seen = True
        if rec.server_foreign is not None:
            foreign += 1
            continue
        counted += 1
        drafts += figures.get(SPEC_DRAFTS_KEY, 0.0)
        tokens += figures.get(SPEC_DRAFT_TOKENS_KEY, 0.0)
        accepted += figures.get(SPEC_ACCEPTED_KEY, 0.0)
        for k, v in _positions(figures).items():
            positions[k] = positions.get(k, 0.0) + v
    if not seen:
        return None
    per_position = tuple(round(positions.get(k, 0.0)) for k in range(max(positions, default=-1) + 1))
    return SpecDecode(
        counted, foreign, unmeasured, round(drafts), round(tokens), round(accepted), per_position
    )
