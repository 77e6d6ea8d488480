"""The server's own count of one probe request's prefix-cache hits, beside what its response's usage says.

The probe decides from usage's cached tokens whether a fresh cache_salt isolated a request. A server whose usage
over-reports cached tokens (it claims a hit it recomputed) would look like one whose salt leaks; its
prefix-cache counters on /metrics (`vllm:prefix_cache_hits`) tell the two apart. `counted` sends one request
between two /metrics scrapes (the after-scrape repeated until the finished-requests counter moved, since vLLM
counts a request a moment after answering it) and returns the hit count only from a clean window: exactly one
request finished in it and the prefix-cache queries moved by this request's prompt tokens (another client's
request in the window would make the count not this one's; eval/records/server_figures.py checks the passes'
records the same way).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eval.records.types import Usage
from eval.run.client import Client
from eval.run.metrics_text import FINISHED_COUNTER, REQUEST_COUNTERS, Snapshot, counter_delta, parse_metrics
from eval.run.reply import RequestFailed
from eval.run.retry import RetryPolicy, with_retries

SETTLE_POLLS_S = (
    0.02,
    0.05,
    0.1,
    0.2,
    0.4,
    0.8,
)  # waits for the finished counter to move (about 1.6 s in all)
HITS = REQUEST_COUNTERS["prefix_cache_hits"]
QUERIES = REQUEST_COUNTERS["prefix_cache_queries"]


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


def _settled_after(
    client: Client,
    policy: RetryPolicy,
    before: Snapshot,
    polls: Sequence[float],
    sleep: Callable[[float], None],
) -> Snapshot | None:
    after = _scrape(client, policy)
    for wait in polls:
        moved = None if after is None else counter_delta(before, after, FINISHED_COUNTER)
        if moved is None or moved >= 1:
            break
        sleep(wait)
        after = _scrape(client, policy)
    return after


def counted(
    client: Client,
    policy: RetryPolicy,
    send: Callable[[], Usage | None],
    polls: Sequence[float] = SETTLE_POLLS_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Counted:
    """`send()` (returns the response's usage) between two scrapes of the server's /metrics."""
    before = _scrape(client, policy)
    usage = send()
    cached = None if usage is None else usage.cached_tokens
    if before is None or usage is None:
        return Counted(cached, None)
    after = _settled_after(client, policy, before, polls, sleep)
    if after is None or counter_delta(before, after, FINISHED_COUNTER) != 1:
        return Counted(cached, None)
    if counter_delta(before, after, QUERIES) != usage.prompt_tokens:
        return Counted(cached, None)
    hits = counter_delta(before, after, HITS)
    return Counted(cached, None if hits is None else round(hits))
