"""Executing one unit of work (eval/run/steps.py: what a unit is and what each request must show) and where a
resumed run picks up.

A cold that hit is retried once with a fresh salt; a warm/repeat that missed (0 cached tokens) is re-primed
(same prompt and salt, max_tokens=1, not recorded) and retried once. The failing attempt stays on disk as
`invalid`. A warm/repeat that found some but fewer cached tokens than expected (a short hit: "found N of M
cached tokens") is the server's answer, not a transient miss: it stays `invalid` and is not retried.
A server restart noticed inside a group (process start time or counters went back, connection refused) marks
the request `invalid` and re-runs the whole group from cold as group g+1.

A server that reports no cached tokens at all (llama-cpp-python; `CacheFacts.reported` false) cannot be
verified: every record gets `cache_check = "unverified"` and status ok when answered, never a verified ok. Cold
requests then come from `--cold evict`: an unrelated short prompt (EVICT_PROMPT, another first token) sent just
before each cold request, which replaces the one sequence such a server keeps cached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from eval.errors import LbevalError
from eval.prepare.inputs import InputRow, sha256_text
from eval.records.final import select_final
from eval.records.server_figures import FINISHED_KEY, FigureCheck, checked_usage, figure_check
from eval.records.types import CACHE_UNVERIFIED, CACHE_VERIFIED, RequestRecord
from eval.records.vocabulary import ANSWER_PASSES
from eval.run.client import Client
from eval.run.metrics_text import Snapshot, request_deltas, went_backwards
from eval.run.reply import Reply, RequestFailed
from eval.run.request import RequestSettings, build_request, endpoint_for, request_settings
from eval.run.retry import RetryPolicy, SendOutcome, send_with_retries, with_retries
from eval.run.server_watch import ServerWatch
from eval.run.steps import (
    ANSWER_REFERENCE,
    EVICT_PROMPT,
    CacheFacts,
    Step,
    Unit,
    answer_prompt,
    new_salt,
    short_hit,
    sibling_prompt,
    verify,
)

MAX_GROUP_RESTARTS = 3


@dataclass
class Context:
    """Everything a unit needs; shared by the worker threads of a run."""

    client: Client
    settings: RequestSettings
    model: str
    run_id: str
    variant: str
    cold_mode: str  # "salt" | "reset" | "evict"
    facts: CacheFacts
    policy: RetryPolicy
    per_request_metrics: bool  # concurrency 1 and /metrics: record server deltas per request
    tokenize: bool
    watch: ServerWatch
    emit: Callable[[RequestRecord, bool], None]  # (record, final for its slot)
    seq_start: int = 0
    sleep: Callable[[float], None] = time.sleep
    stop: threading.Event = field(default_factory=threading.Event)
    counters: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_seq(self) -> int:
        with self._lock:
            seq = self.seq_start
            self.seq_start += 1
            return seq

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + n


@dataclass
class GroupState:
    group: int
    salt: str | None = None
    epoch: int | None = None
    answer_salt: str | None = None  # CoT: the answer calls' salt (cold_answer's)
    reasoning: dict[str, str] = field(default_factory=dict)  # CoT: generation pass -> its reasoning output


class RestartDetected(Exception):
    pass


class UnitFailed(Exception):
    pass


@dataclass(frozen=True)
class Share:
    """What a partial-share request (the sibling control, a CoT answer call whose reasoning diverged) shares
    with the prompt sent before it under its salt: `shared` tokens, as the server tokenizes both; `ids` the
    request's own prompt IDs (for a prime sent as token IDs); None fields when /tokenize is unavailable."""

    expect: str  # "sibling" (a partial share) or the step's own expectation
    shared: int | None = None
    ids: tuple[int, ...] | None = None


def _tokenized(ctx: Context, row: InputRow, text: str) -> list[int]:
    if row.mode == "chat":
        messages = [{"role": "user", "content": text}]
        kwargs = ctx.settings.chat_template_kwargs
        return ctx.client.tokenize(ctx.model, messages=messages, chat_template_kwargs=kwargs)
    return ctx.client.tokenize(ctx.model, prompt=text)


def _shared_ids(ctx: Context, row: InputRow, sibling: str, base: str | None = None) -> Share:
    """The tokens the sibling prompt shares with `base` (the input's prompt by default), as the server
    tokenizes them, and the sibling's IDs (Share with None fields without /tokenize)."""
    if not ctx.tokenize:
        return Share("sibling")
    try:
        a = _tokenized(ctx, row, row.prompt if base is None else base)
        b = _tokenized(ctx, row, sibling)
    except (RequestFailed, KeyError, TypeError, ValueError):
        return Share("sibling")
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return Share("sibling", n, tuple(b))


def _share_of(ctx: Context, row: InputRow, step: Step, at: Attempt) -> Share:
    """The attempt's expectation, and for a partial share what it shares (before it is sent: a cache model of
    recurrent-state checkpoints needs it primed first)."""
    if step.expect == "sibling" and at.prompt is not None:
        return _shared_ids(ctx, row, at.prompt)
    if at.reference is not None and at.prompt is not None and at.reference != at.prompt:
        # a CoT answer call whose reasoning differs from its reference's: only the common prefix is cached
        return _shared_ids(ctx, row, at.prompt, base=at.reference)
    return Share(step.expect)


def _reset_cache(ctx: Context) -> None:
    def reset() -> None:
        if not ctx.client.reset_prefix_cache():
            raise RequestFailed("POST /reset_prefix_cache answered success false", retryable=True)

    if with_retries(reset, ctx.policy, ctx.sleep, ctx.stop).failure is not None:
        ctx.count("reset_failures")  # the cold request's own verification will tell whether it hit


def _evict(ctx: Context) -> None:
    """`--cold evict`: one short unrelated prompt (another first token than any input's), max_tokens=1, not
    recorded: a server that keeps one cached sequence (llama-cpp-python) replaces it before the cold request."""
    row = InputRow(
        dataset="lbeval_evict", id="evict", prompt=EVICT_PROMPT, mode="raw", max_tokens=1, prompt_sha256="",
        prompt_tokens=None, truncated=False, answers=[], all_classes=None, length=0,
    )  # fmt: skip
    settings = replace(ctx.settings, top_logprobs=1)
    req = build_request(row, settings, model=ctx.model, cache_salt=None, stream=False, max_tokens=1)
    send_with_retries(
        ctx.client, "completions", req, ctx.policy, "cache eviction prompt", ctx.sleep, ctx.stop
    )
    ctx.count("evictions")


def _reprime(ctx: Context, row: InputRow, salt: str | None, prompt: str | None) -> None:
    req = build_request(
        row, ctx.settings, model=ctx.model, cache_salt=salt, stream=False, max_tokens=1, prompt=prompt
    )
    send_with_retries(
        ctx.client, endpoint_for(row), req, ctx.policy, f"{row.dataset}/{row.id} re-prime", ctx.sleep
    )
    ctx.count("reprimes")


def _prime_share(ctx: Context, row: InputRow, at: Attempt, share: Share) -> None:
    """Before a partial-share request on a cache of recurrent-state checkpoints (eval/records/cache_model.py):
    the first `prime_tokens(shared, n)` of its own token IDs under its salt, max_tokens 1, sent to
    /v1/completions as IDs (not recorded; `partial_primes` counted). The prime's replay boundary is then the
    shared prefix's last whole block, where the request must resume; on dense blocks nothing is sent."""
    model = ctx.facts.model
    if model is None or share.shared is None or share.ids is None:
        return
    primed = model.prime_tokens(share.shared, len(share.ids))
    if primed == share.shared:
        return  # dense blocks: the shared prefix is cached already
    raw = replace(row, mode="raw")
    req = build_request(raw, ctx.settings, model=ctx.model, cache_salt=at.salt, stream=False, max_tokens=1)
    req["prompt"] = list(share.ids[:primed])
    what = f"{row.dataset}/{row.id} partial-share prime"
    send_with_retries(ctx.client, "completions", req, ctx.policy, what, ctx.sleep)
    ctx.count("partial_primes")


@dataclass
class Attempt:
    step: Step
    attempt: int
    salt: str | None
    prompt: str | None  # None: the row's prompt
    max_tokens: int | None = None  # None: the step's
    reference: str | None = (
        None  # CoT warm/repeat answer call: the answer prompt its cache hit is measured on
    )
    variation: dict[str, Any] = field(default_factory=dict)


@dataclass
class Observed:
    """One request sent, with what the server's metrics said around it."""

    out: SendOutcome
    seq: int
    epoch: int
    server: dict[str, float] | None  # per-request metric deltas (concurrency 1 with /metrics)
    foreign: str | None = None  # why `server` is not this request's own (RequestRecord.server_foreign)
    finding: str | None = None  # usage vs the server's hit counter (RequestRecord.cache_finding)
    cached: int | None = None  # a batch member's count from its batch's window (RequestRecord.server_cached)


@dataclass(frozen=True)
class Window:
    epoch: int  # the server's epoch after the window (a restart moves it)
    deltas: (
        dict[str, float] | None
    )  # the counters' deltas over it (None: no scrape, or the metrics went back)


def close_window(
    ctx: Context,
    before: Snapshot | None,
    answered: bool,
    refused: bool,
    keep: bool = True,
    requests: int = 1,
) -> Window:
    """The after-snapshot of a window opened by `ctx.watch.before()` around one request, or `requests` sent
    together (ServerWatch.after), observed for restarts, and the deltas over it."""
    after = ctx.watch.after(before, answered, keep=keep, requests=requests)
    epoch = ctx.watch.observe(after, refused)
    if before is None or after is None or went_backwards(before, after):
        return Window(epoch, None)
    return Window(epoch, request_deltas(before, after))


def send_observed(ctx: Context, row: InputRow, req: dict[str, Any], what: str) -> Observed:
    before = ctx.watch.before() if ctx.per_request_metrics else None
    seq = ctx.next_seq()
    out = send_with_retries(ctx.client, endpoint_for(row), req, ctx.policy, what, ctx.sleep, ctx.stop)
    if out.response is not None:
        ctx.watch.request_done()
    if not ctx.per_request_metrics:
        return Observed(out, seq, ctx.watch.check(out.refused), None)
    window = close_window(ctx, before, out.response is not None, out.refused, keep=out.retries == 0)
    check = _own_figures(ctx, window.deltas, out.response)
    return Observed(out, seq, window.epoch, window.deltas, check.foreign, check.finding)


def _own_figures(ctx: Context, server: dict[str, float] | None, response: Reply | None) -> FigureCheck:
    """Whose figures are these (eval/records/server_figures.py): every watched counter moved by this request?
    A usage finding needs the request before to have been counted in its own window too (its figures its own,
    or a finding of its own): else its lagging count (the same prompt, other hits: a timing_cold before its
    timing_warm) may be what this window saw."""
    if response is None or server is None:
        return FigureCheck(None, None)
    check = figure_check(server, response.usage)
    if check.finding is not None and ctx.watch.last_foreign:
        check = FigureCheck(f"{check.foreign}; the request before had foreign figures too", None)
    # a finding's window was clean but for the hits: this request was counted in it, nothing lags from it
    ctx.watch.window_checked(
        check.foreign is not None and check.finding is None, server.get(FINISHED_KEY) == 1
    )
    if check.foreign is not None:
        ctx.count("foreign_figures")
    if check.finding is not None:
        ctx.count("cached_tokens_mismatch")
    return check


def _send_attempt(
    ctx: Context, row: InputRow, unit: Unit, gs: GroupState, at: Attempt, share: Share
) -> RequestRecord:
    step = at.step
    req = build_request(
        row, ctx.settings, model=ctx.model, cache_salt=at.salt, stream=step.stream,
        max_tokens=at.max_tokens if at.max_tokens is not None else step.max_tokens, prompt=at.prompt,
    )  # fmt: skip
    obs = send_observed(ctx, row, req, f"{row.dataset}/{row.id} {step.pass_name}")
    base = RequestRecord(
        run_id=ctx.run_id, variant=ctx.variant, dataset=row.dataset, example_id=row.id,
        pass_name=step.pass_name, repetition=step.repetition, attempt=at.attempt, seq=obs.seq, group=gs.group,
        endpoint=endpoint_for(row), settings=request_settings(req), cache_salt=at.salt,
        prompt_sha256=sha256_text(at.prompt if at.prompt is not None else row.prompt), status="error",
        retries=obs.out.retries, variation=dict(at.variation),
        cache_check=CACHE_VERIFIED if ctx.facts.reported else CACHE_UNVERIFIED,
    )  # fmt: skip
    resp = obs.out.response
    if resp is None:
        return replace(base, error=obs.out.failure.message if obs.out.failure else "no response")
    status, reason, expected = verify(
        share.expect, checked_usage(resp.usage, obs.server, obs.finding), ctx.facts, share.shared
    )
    if step.salt != "fresh" and gs.epoch is not None and obs.epoch != gs.epoch:
        status, reason = "invalid", "server restart detected during the group; the group is re-run from cold"
    elif step.salt == "fresh":
        gs.epoch = obs.epoch
    return replace(
        base, status=status, error=reason, output_text=resp.text, finish_reason=resp.finish_reason,
        output_token_ids=resp.token_ids, topk=resp.topk, usage=resp.usage, expected_cached_tokens=expected,
        timings=resp.timings, server_metrics=obs.server, server_foreign=obs.foreign, cache_finding=obs.finding,
    )  # fmt: skip


def _answer_attempt(ctx: Context, row: InputRow, step: Step, gs: GroupState) -> Attempt:
    """A CoT answer call's prompt, output limit, cache reference and variation (salt and attempt set later)."""
    assert step.answer_of is not None
    prompt = answer_prompt(row, gs.reasoning.get(step.answer_of, ""))
    ref = ANSWER_REFERENCE.get(step.answer_of)
    if ref is not None and ref not in gs.reasoning:
        ref = "cold" if "cold" in gs.reasoning else None  # repeat without warm: measured against cold's
    reference = answer_prompt(row, gs.reasoning[ref]) if ref is not None else None
    limit = ctx.settings.max_tokens_override or row.answer_max_tokens
    variation = {"call": "answer", "reasoning": step.answer_of}
    return Attempt(step, 0, None, prompt, limit, reference, variation)


def run_step(ctx: Context, row: InputRow, unit: Unit, step: Step, gs: GroupState) -> None:
    """Send one step (and its one retry if verification fails); raises RestartDetected / UnitFailed."""
    prompt = sibling_prompt(row) if step.sibling else None
    base = (
        _answer_attempt(ctx, row, step, gs) if step.answer_of is not None else Attempt(step, 0, None, prompt)
    )
    prompt = base.prompt
    for attempt in (0, 1):
        salt = gs.answer_salt if step.answer_of is not None else gs.salt
        if step.salt in ("fresh", "new"):
            salt = None if (ctx.cold_mode in ("reset", "evict") and step.salt == "fresh") else new_salt()
            if ctx.cold_mode == "reset" and step.salt == "fresh":
                _reset_cache(ctx)
            elif ctx.cold_mode == "evict" and step.salt == "fresh":
                _evict(ctx)
        at = replace(base, attempt=attempt, salt=salt)
        share = _share_of(ctx, row, step, at)
        _prime_share(ctx, row, at, share)
        rec = _send_attempt(ctx, row, unit, gs, at, share)
        if rec.status == "error" and ctx.stop.is_set():
            raise UnitFailed("interrupted")  # a failure caused by the shutdown is not recorded
        if row.answer_template is not None and step.pass_name in ANSWER_PASSES and rec.status != "error":
            gs.reasoning[step.pass_name] = rec.output_text or ""  # the answer call of this pass builds on it
        if step.salt == "fresh" and rec.status != "error":
            if step.answer_of is not None:
                gs.answer_salt = salt
            else:
                gs.salt = salt
        restart = rec.error is not None and rec.error.startswith("server restart detected")
        retry = (
            rec.status == "invalid"
            and step.retry_invalid
            and attempt == 0
            and not restart
            and not short_hit(rec)
        )
        ctx.emit(rec, not (retry or restart))
        if rec.status == "error":
            raise UnitFailed(rec.error)
        if restart:
            raise RestartDetected()
        if not retry:
            return
        ctx.count(f"invalid_{step.pass_name}")
        if step.expect == "hit":
            _reprime(ctx, row, gs.answer_salt if step.answer_of is not None else gs.salt, prompt)


def run_unit(ctx: Context, row: InputRow, unit: Unit, start: GroupState, first_step: int = 0) -> bool:
    """Run a unit from `first_step` in group `start.group`; re-run from cold on a restart. True when complete."""
    gs, index = start, first_step
    if index > 0 and gs.epoch is None:
        gs.epoch = ctx.watch.epoch  # a continued group: restarts from now on count
    for _ in range(MAX_GROUP_RESTARTS + 1):
        try:
            for step in unit.steps[index:]:
                if ctx.stop.is_set():
                    return False
                run_step(ctx, row, unit, step, gs)
            return True
        except RestartDetected:
            ctx.count("group_restarts")
            gs, index = GroupState(group=gs.group + 1), 0
        except UnitFailed:
            ctx.count("failed_units")
            return False
    raise LbevalError(
        f"the server restarted {MAX_GROUP_RESTARTS + 1} times during {row.dataset}/{row.id}; giving up"
    )


# --- resume ------------------------------------------------------------------------------------------------------


def _step_done(step: Step, final: RequestRecord | None) -> bool:
    if final is None or final.status == "error":
        return False
    # an invalid first attempt of a retried step whose retry was never sent is not done (a short hit is: it
    # is never retried)
    return not (
        final.status == "invalid" and step.retry_invalid and final.attempt == 0 and not short_hit(final)
    )


def resume_point(
    unit: Unit, records: list[RequestRecord], same_server: bool
) -> tuple[GroupState, int] | None:
    """Where a unit picks up: None when it is complete; else (group state, first step to send).

    A partial group is continued only on the same server process with every record so far `ok`;
    otherwise it starts over from cold as the next group (its earlier records stay, superseded)."""
    if not records:
        return GroupState(group=0), 0
    g = max(r.group for r in records)
    finals = {(s.pass_name, s.repetition): r for s, r in select_final(records).final.items()}
    done = [_step_done(s, finals.get((s.pass_name, s.repetition))) for s in unit.steps]
    if all(done):
        return None
    index = done.index(False)
    clean = all(r.status == "ok" for r in finals.values()) and all(done[:index]) and not any(done[index:])
    if not (same_server and clean and index > 0):
        return GroupState(group=g + 1), 0
    done_steps = unit.steps[:index]
    fresh = [finals[(s.pass_name, s.repetition)] for s in done_steps if s.salt == "fresh" and not s.answer_of]
    answer = [finals[(s.pass_name, s.repetition)] for s in done_steps if s.salt == "fresh" and s.answer_of]
    reasoning = {
        s.pass_name: finals[(s.pass_name, s.repetition)].output_text or ""
        for s in done_steps
        if s.pass_name in ANSWER_PASSES and any(a.answer_of == s.pass_name for a in unit.steps)
    }
    return GroupState(
        group=g,
        salt=fresh[-1].cache_salt if fresh else None,
        answer_salt=answer[-1].cache_salt if answer else None,
        reasoning=reasoning,
    ), index
