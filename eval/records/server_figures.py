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
from collections.abc import Mapping
from dataclasses import dataclass

from eval.records.types import RequestRecord, Usage

FINISHED_KEY = "finished"  # the finished-requests counter's delta (vllm:request_success)
REQUESTS_KEY = "requests"  # observations added to the request histograms
OBSERVATIONS_DIFFER_KEY = "observations_differ"  # 1.0: the histograms moved by different counts
QUERIES_KEY = "prefix_cache_queries"
HITS_KEY = "prefix_cache_hits"


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


def window_reasons(deltas: Mapping[str, float], prompt_tokens: int | None) -> list[str]:
    """Why a window's `deltas` are not one request's of `prompt_tokens` prompt tokens, the hits left aside
    (empty: they are): finished, requests and queries as in the module docstring, and no
    `observations_differ`. A delta the window lacks, or prompt tokens not known, is not checked. The one rule of
    a clean window: figure_check's for a record, and the probe's for its own requests (eval/run/probe_counts.py),
    which requires the finished and queries deltas."""
    reasons = [
        r
        for r in (
            _moved(deltas, FINISHED_KEY, 1, "finished requests"),
            _moved(deltas, REQUESTS_KEY, 1, "request histogram observations"),
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


def checked_usage(usage: Usage, deltas: Mapping[str, float] | None, finding: str | None) -> Usage:
    """The usage a response's cache checks read: its own, but with the server's hit count as the cached
    tokens when the two disagree on a clean window (`finding`, figure_check's; module docstring)."""
    hits = None if finding is None or deltas is None else deltas.get(HITS_KEY)
    if hits is None:
        return usage
    return Usage(usage.prompt_tokens, usage.completion_tokens, round(hits))


def checked_cached(rec: RequestRecord) -> int | None:
    """A record's cached tokens as its cache checks read them (`checked_usage`): every reader of a record's
    cache state (analyze, gate) asks here, never `usage.cached_tokens` itself."""
    return checked_usage(rec.usage, rec.server_metrics, rec.cache_finding).cached_tokens
