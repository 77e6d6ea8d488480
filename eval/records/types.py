"""Typed request records: one per request sent to a server, append-only, versioned.

This module holds the in-memory types only (shared by the runner, which writes them, and the analysis stages,
which read them). The on-disk codec is `eval/records/codec.py`, the run folder with its writer and readers
`eval/records/run_folder.py`, the pass vocabulary `eval/records/vocabulary.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RECORD_SCHEMA_VERSION = 3
# versions this lbeval reads: 1 had no `scenario` and `variation` (the defaults fill them: a cache-scenario
# record); 1 and 2 had no `server_foreign` and `cache_finding` (the codec derives them from the stored deltas)
# and no `replica` (the default fills it: replica 0, the one endpoint of a run before replicas)
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
CACHE_VERIFIED, CACHE_UNVERIFIED = "verified", "unverified"
CACHE_CHECKS = (CACHE_VERIFIED, CACHE_UNVERIFIED)  # RequestRecord.cache_check


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, None if not reported


@dataclass(frozen=True)
class ClientTimings:
    """Wall-clock epoch seconds (time.time()) and a monotonic TTFT/latency in seconds."""

    sent_at: float
    first_token_s: float | None  # seconds from send to the first content chunk (streaming only)
    done_s: float | None  # seconds from send to the last byte


@dataclass(frozen=True)
class TopK:
    """Per generated position, the top-k alternatives: ids[i][j] has logprob logprobs[i][j].

    Rows may be shorter than k (the server returned fewer); a position without logprobs has an
    empty row. `chosen_logprobs[i]` is the logprob of the sampled token at position i.
    """

    ids: list[list[int]]
    logprobs: list[list[float]]
    chosen_logprobs: list[float]

    def as_dicts(self) -> list[dict[int, float]]:
        return [dict(zip(i, lp, strict=True)) for i, lp in zip(self.ids, self.logprobs, strict=True)]


@dataclass(frozen=True)
class RequestRecord:
    run_id: str
    variant: str
    dataset: str
    example_id: str
    pass_name: str  # one of vocabulary.RECORD_PASSES
    repetition: int  # 0 for cold/warm/repeat/controls; r for timing passes
    attempt: int  # 0 first try; a re-primed warm retry is attempt 1 (the invalid attempt 0 is kept)
    seq: int  # global send order within the run (0, 1, 2, ...), for order/interleaving analysis
    group: int  # restarts of a cold/warm group after a server restart increment this
    endpoint: str  # "chat" | "completions"
    settings: dict[str, Any]  # the request body minus prompt/messages (never an API key)
    cache_salt: str | None
    prompt_sha256: str
    status: str  # one of vocabulary.STATUSES
    error: str | None = None  # error text (status error) or invalid reason (status invalid)
    output_text: str | None = None
    finish_reason: str | None = None
    output_token_ids: list[int] | None = None
    topk: TopK | None = None
    usage: Usage = field(default_factory=Usage)
    expected_cached_tokens: int | None = None  # what verification expected (0 for cold)
    timings: ClientTimings | None = None
    # server metric deltas over this request at concurrency 1 (None if /metrics unavailable):
    # prefill_time_s, queue_time_s, ttft_s, prefix_cache_queries, prefix_cache_hits
    server_metrics: dict[str, float] | None = None
    retries: int = 0  # transport retries spent on this record
    scenario: str = "cache"  # vocabulary.scenario_of(pass_name): cache, batch, hitlen, repeats, traffic
    # what this request varied within its scenario, e.g. {"batch_size": 4, "slot": 0}, {"hit_len": 255,
    # "expected_cached": 128}, {"noise": 2} (eval/records/scenarios.py names the keys); {} for the cache scenario
    variation: dict[str, Any] = field(default_factory=dict)
    schema_version: int = RECORD_SCHEMA_VERSION
    # CACHE_CHECKS: "verified" when the server's cached-token count was checked against the pass's expectation
    # (status ok: met; invalid: not met); "unverified" when the server reports no count (llama-cpp-python), so
    # the request's cache state is not known and status ok says only that it was answered
    cache_check: str = "verified"
    # eval/records/server_figures.py: why `server_metrics` are not this request's own (another request counted
    # in the window, this one counted late or twice); None: its own, or no figures. Foreign figures are kept
    # on disk and read by no timing statistic
    server_foreign: str | None = None
    # the same module: "usage reports N cached tokens, the server counted M hits" on an otherwise clean window
    cache_finding: str | None = None
    # the same module: the cached tokens the server's own counters give this request where its usage disagrees
    # (a request of a batch: the batch's window as a whole, `batch_check`); None: usage, or its window's deltas
    # (`checked_usage`), stand. Written only when set: records without a finding are unchanged
    server_cached: int | None = None
    # the replica (endpoint) of the variant that answered: 0..N-1 in the order given (eval/run/replicas.py); every
    # request of one input's units goes to one replica, so its cache relations stay on one server
    replica: int = 0

    @property
    def key(self) -> tuple[str, str, str, int, int, int]:
        """Identity for resume and de-duplication."""
        return (self.dataset, self.example_id, self.pass_name, self.repetition, self.attempt, self.group)
