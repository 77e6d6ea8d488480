"""Whose figures are these? A record's server-side figures (its /metrics deltas) checked against the request.

A record's `server_metrics` are the deltas of the server's counters and histograms between a scrape before the
request and one after it (eval/run/metrics_text.request_deltas). They describe this request alone only when
every watched counter moved by exactly this request:

    finished    the finished-requests counter moved by 1                       (`finished`, schema 3 on)
    requests    one observation in each request histogram (prefill, queue, TTFT) (`requests`, and no
                `observations_differ`: the histograms moved by different counts)
    queries     the prefix-cache queries moved by the request's prompt tokens   (`prefix_cache_queries`)
    hits        the prefix-cache hits moved by the request's cached tokens      (`prefix_cache_hits`)

Anything else (another client's request counted in the window, this request's counted late, a retried request
counted twice) makes the figures *foreign*: `figure_check` names why, the record keeps the deltas (nothing
recorded is lost) with `server_foreign` set, and no timing statistic reads them: `own_prefill_s` is the one rule,
read by eval/analyze/timing.measure_ms and by the adaptive stop (eval/run/adaptive.py).

When the window is otherwise clean (finished, requests and queries as above) but the hits differ from what the
response's usage said was cached, the server's two reports of one request disagree: that is also a
cache-verification finding ("usage reports N cached tokens, the server counted M hits"), `cache_finding`, which
the gate's cache_reports_consistent rule counts. The figures are foreign too: which report is wrong cannot be
told, so neither is used for timing. The cache checks (a cold request's miss, a warm one's hit, a fresh salt's
isolation, a hit length) then read the server's own count (`checked_usage`, `checked_cached`): its
prefix-cache counters are what the scheduler computed, usage a report of it, so a usage that lies fails
cache_reports_consistent alone, not the cache checks whose requests were served as asked.

Limit: counters cannot tell two requests of the same shape apart (the same prompt tokens and hits). When another
client's request of this shape is counted in the window and this one's observation lags behind it, the window
looks clean; the figure kept is then a figure of a request of the same shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eval.records.types import RequestRecord, Usage

FINISHED_KEY = "finished"  # the finished-requests counter's delta (vllm:request_success)
REQUESTS_KEY = "requests"  # observations added to the request histograms
OBSERVATIONS_DIFFER_KEY = "observations_differ"  # 1.0: the histograms moved by different counts
QUERIES_KEY = "prefix_cache_queries"
HITS_KEY = "prefix_cache_hits"
# speculative decoding's counters over the request's window (eval/analyze/spec_decode.py reads them)
SPEC_DRAFTS_KEY = "spec_drafts"
SPEC_DRAFT_TOKENS_KEY = "spec_draft_tokens"
SPEC_ACCEPTED_KEY = "spec_accepted"
SPEC_POSITION_PREFIX = "spec_accepted_pos"  # + the draft position: accepted tokens at that position


def own_prefill_s(rec: RequestRecord) -> float | None:
    """The record's server prefill seconds when its figures are its own (None: foreign, missing, not finite)."""
    if rec.server_foreign is not None:
        return None
    value = (rec.server_metrics or {}).get("prefill_time_s")
    return value if isinstance(value, float) and math.isfinite(value) else None


@dataclass(frozen=True)
class FigureCheck:
    foreign: str | None  # why the figures are not this request's own (None: its own, or no figures)
    finding: str | None  # usage and the server's hit counter disagree on a clean window (None: they agree)


def _moved(deltas: Mapping[str, float], key: str, expected: float, what: str) -> str | None:
    value = deltas.get(key)
    if value is None or value == expected:
        return None
    return f"{what} moved by {value:g}, this request accounts for {expected:g}"


def window_reasons(deltas: Mapping[str, float], prompt_tokens: int | None, requests: int = 1) -> list[str]:
    """Why a window's `deltas` are not one request's of `prompt_tokens` prompt tokens, the hits left aside
    (empty: they are): finished, requests and queries as in the module docstring, and no
    `observations_differ`. A delta the window lacks, or prompt tokens not known, is not checked. The one rule of
    a clean window: figure_check's for a record, batch_check's for `requests` sent together (`prompt_tokens`
    their sum), and the probe's for its own requests (eval/run/probe_counts.py), which requires the finished
    and queries deltas."""
    reasons = [
        r
        for r in (
            _moved(deltas, FINISHED_KEY, requests, "finished requests"),
            _moved(deltas, REQUESTS_KEY, requests, "request histogram observations"),
            None
            if prompt_tokens is None
            else _moved(deltas, QUERIES_KEY, prompt_tokens, "prefix-cache queries"),
        )  # fmt: skip
        if r is not None
    ]
    if deltas.get(OBSERVATIONS_DIFFER_KEY):
        reasons.append("the request histograms moved by different counts")
    return reasons


def figure_check(deltas: Mapping[str, float] | None, usage: Usage) -> FigureCheck:
    """Whether `deltas` are this request's own (module docstring)."""
    if deltas is None:
        return FigureCheck(None, None)
    reasons = window_reasons(deltas, usage.prompt_tokens)
    hits = deltas.get(HITS_KEY)
    finding = None
    if hits is not None and usage.cached_tokens is not None and hits != usage.cached_tokens:
        if not reasons:
            finding = f"usage reports {usage.cached_tokens} cached tokens, the server counted {hits:g} hits"
        reasons.append(
            f"prefix-cache hits moved by {hits:g}, usage reports {usage.cached_tokens} cached tokens"
        )
    return FigureCheck("; ".join(reasons) or None, finding)


def checked_usage(
    usage: Usage,
    deltas: Mapping[str, float] | None,
    finding: str | None,
    server_cached: int | None = None,
) -> Usage:
    """The usage a response's cache checks read: its own, but with the server's count as the cached tokens
    where the two disagree: `server_cached` when given (a batch member's, `batch_check`), else the window's hit
    count when they disagree on a clean window (`finding`, figure_check's; module docstring)."""
    hits = None if finding is None or deltas is None else deltas.get(HITS_KEY)
    cached = server_cached if server_cached is not None else None if hits is None else round(hits)
    if cached is None:
        return usage
    return Usage(usage.prompt_tokens, usage.completion_tokens, cached)


@dataclass(frozen=True)
class BatchMember:
    usage: Usage
    # the cached tokens its step plans (a miss 0, a hit its full blocks; None: not known)
    expected: int | None


@dataclass(frozen=True)
class BatchCheck:
    foreign: str | None  # why the window is not the batch's alone (None: clean, or no figures)
    findings: tuple[str | None, ...]  # per member: usage vs the server's count (figure_check's `finding`)
    cached: tuple[int | None, ...]  # per member: the server's cached tokens where usage disagrees, else None


def batch_check(deltas: Mapping[str, float] | None, members: Sequence[BatchMember]) -> BatchCheck:
    """A batch's requests sent together share one window: its deltas are the batch's as a whole. On a clean
    window (window_reasons for len(members) requests and their summed prompt tokens; no earlier count lagging
    into it, which the caller checks) whose hits differ from the sum of the members' usage, the server's count
    is given to each member when it determines it: 0 hits give every member 0; hits equal to the sum of what the
    steps plan (every `expected` known) give each member its plan. The member whose usage differs from its
    count gets the finding. Otherwise the count cannot be divided: the first member carries the batch's finding
    and every usage stands. Limit: a plan-sized count could also be two deviations that cancel (a hit missed
    and a miss hit by as many tokens)."""
    none: tuple[None, ...] = (None,) * len(members)
    if deltas is None or not members:
        return BatchCheck(None, none, none)
    usages = [m.usage for m in members]
    prompts = [u.prompt_tokens for u in usages]
    total_prompt = None if None in prompts else sum(p or 0 for p in prompts)
    reasons = window_reasons(deltas, total_prompt, len(members))
    hits, claims = deltas.get(HITS_KEY), [u.cached_tokens for u in usages]
    if reasons or hits is None or None in claims or hits == sum(c or 0 for c in claims):
        return BatchCheck("; ".join(reasons) or None, none, none)
    plans = [m.expected for m in members]
    if hits == 0:
        cached: list[int | None] = [0] * len(members)
    elif None not in plans and hits == sum(p or 0 for p in plans):
        cached = list(plans)
    else:
        first = f"usage reports {sum(c or 0 for c in claims)} cached tokens over a batch of {len(members)}, "
        return BatchCheck(None, (first + f"the server counted {hits:g} hits",) + none[1:], none)
    findings = tuple(
        None
        if c == claim
        else f"usage reports {claim} cached tokens, the server counted {hits:g} hits over its batch of "
        f"{len(members)}: {c} of them its own"
        for c, claim in zip(cached, claims, strict=True)
    )
    return BatchCheck(None, findings, tuple(c if f else None for c, f in zip(cached, findings, strict=True)))


def checked_cached(rec: RequestRecord) -> int | None:
    """A record's cached tokens as its cache checks read them (`checked_usage`): every reader of a record's
    cache state (analyze, gate) asks here, never `usage.cached_tokens` itself."""
    return checked_usage(rec.usage, rec.server_metrics, rec.cache_finding, rec.server_cached).cached_tokens
