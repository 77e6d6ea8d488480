"""The server's own count of one probe request's prefix-cache hits, beside what its response's usage says.

The probe decides from usage's cached tokens whether a fresh cache_salt isolated a request. A server whose usage
over-reports cached tokens (it claims a hit it recomputed) would look like one whose salt leaks; its
prefix-cache counters on /metrics (`vllm:prefix_cache_hits`) tell the two apart. `counted` sends one request
between two /metrics scrapes (the after-scrape repeated until the finished-requests counter moved, since vLLM
counts a request a moment after answering it: ServerWatch's `settle`, eval/run/server_watch.py) and returns the
hit count only from a clean window: exactly one request finished in it and the prefix-cache queries moved by
this request's prompt tokens (another client's request in the window would make the count not this one's; the
rule is eval/records/server_figures.window_reasons, by which the passes' records are checked too). The
before-scrape, too, waits until the server counts every request answered before this one. `counted_together`
is the same window around requests sent at once: the server's sum must be theirs, and it names each one's count
only where it needs no guess (0 hits in all, or the hits usage claims in all).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eval.records.server_figures import FINISHED_KEY, HITS_KEY, QUERIES_KEY, window_reasons
from eval.records.types import Usage
from eval.run.client import Client
from eval.run.metrics_text import FINISHED_COUNTER, REQUEST_COUNTERS, Snapshot, counter_delta, parse_metrics
from eval.run.reply import RequestFailed
from eval.run.retry import RetryPolicy, with_retries
from eval.run.server_watch import settle

SETTLE_POLLS_S = (
    0.02,
    0.05,
    0.1,
    0.2,
    0.4,
    0.8,
)  # waits for the finished counter to move (about 1.6 s in all)
# the counters the probe reads, by the keys of a record's server_metrics (the request histograms are not read)
WINDOW_COUNTERS = {
    FINISHED_KEY: FINISHED_COUNTER,
    QUERIES_KEY: REQUEST_COUNTERS[QUERIES_KEY],
    HITS_KEY: REQUEST_COUNTERS[HITS_KEY],
}


@dataclass(frozen=True)
class Counted:
    """One probe request: usage's cached tokens and the server's hit count for it (None: not known)."""

    usage_cached: int | None
    server_hits: int | None

    @property
    def usage_overreports(self) -> bool:
        """usage claims cached tokens where the server's own counters counted none for this request."""
        return bool(self.usage_cached) and self.server_hits == 0


def _scrape(client: Client, policy: RetryPolicy) -> Snapshot | None:
    try:
        return parse_metrics(with_retries(client.metrics_text, policy).result())
    except (RequestFailed, ValueError):
        return None


def _window(before: Snapshot, after: Snapshot) -> dict[str, float]:
    deltas = {key: counter_delta(before, after, name) for key, name in WINDOW_COUNTERS.items()}
    return {key: d for key, d in deltas.items() if d is not None}


def counted(
    client: Client,
    policy: RetryPolicy,
    send: Callable[[], Usage | None],
    polls: Sequence[float] = SETTLE_POLLS_S,
    sleep: Callable[[float], None] = time.sleep,
    expect: float | None = None,
) -> Counted:
    """`send()` (returns the response's usage) between two scrapes of the server's /metrics. `expect`: the
    finished-requests count once every request answered before this one is counted; the before-scrape waits
    for it (else a request before this one, counted late, lands in this window: with the same prompt its hits
    pass for this one's), and no server count is given when it never comes."""
    return counted_together(client, policy, lambda: [send()], polls, sleep, expect)[0]


def counted_together(
    client: Client,
    policy: RetryPolicy,
    send_all: Callable[[], Sequence[Usage | None]],
    polls: Sequence[float] = SETTLE_POLLS_S,
    sleep: Callable[[float], None] = time.sleep,
    expect: float | None = None,
) -> list[Counted]:
    """`counted` for requests sent at once (`send_all` returns each one's usage, None for one refused): the
    window must be all of theirs (finished moved by the number answered, queries by their prompt tokens'
    sum). One request's count is its own. Of several, the server counts only their sum: a window of 0 hits
    gives each 0; a window with hits gives each its usage's cached tokens when their sum is the window's hits
    (the server agrees with usage on the whole), and no server count to any of them otherwise (a usage that
    over- or under-reports: the caller asks each alone)."""
    first = settle(lambda: _scrape(client, policy), expect, polls, None, sleep)
    before = first.snap if expect is None or first.counted else None
    usages = list(send_all())
    answered = [u for u in usages if u is not None]
    unknown = [Counted(None if u is None else u.cached_tokens, None) for u in usages]
    seen = None if before is None else before.counter(FINISHED_COUNTER)
    if before is None or seen is None or not answered:
        return unknown
    after = settle(lambda: _scrape(client, policy), seen + len(answered), polls, None, sleep)
    tokens = [u.prompt_tokens for u in answered]
    if not after.counted or after.snap is None or None in tokens:
        return unknown
    window = _window(before, after.snap)
    total = sum(t for t in tokens if t is not None)
    if QUERIES_KEY not in window or window_reasons(window, total, requests=len(answered)):
        return unknown
    hits = window.get(HITS_KEY)
    return unknown if hits is None else _attributed(usages, round(hits))


def _attributed(usages: Sequence[Usage | None], hits: int) -> list[Counted]:
    """Each answered request's server count from a clean window of `hits`: the window's own for one request;
    of several, 0 for each when none hit, else each one's usage claim where the claims sum to `hits` (no
    server count for any otherwise)."""
    claimed = [u.cached_tokens for u in usages if u is not None]

    def server(u: Usage) -> int | None:
        if len(claimed) == 1 or hits == 0:
            return hits
        sums = None not in claimed and sum(c or 0 for c in claimed) == hits
        return u.cached_tokens if sums else None

    return [Counted(None, None) if u is None else Counted(u.cached_tokens, server(u)) for u in usages]
