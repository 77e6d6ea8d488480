"""Passes: the schedule of requests per input, cache-state verification, and executing one unit of work.

A *unit* is what must run back to back on one server for its cache state to mean something:
    main unit of an input     cold -> warm -> repeat -> control_salt -> control_sibling
    timing unit r of an input timing_cold r -> timing_warm r   (max_tokens=1, streamed for TTFT)
Units of one input run in that order (main, then timing r = 0..R-1: cold and warm interleaved per input).

Verification per request (vLLM caches whole blocks and never the last prompt token):
    cold, timing_cold, control_salt   must report 0 cached tokens
    warm, repeat, timing_warm         must report floor((prompt_tokens - 1) / block) * block cached tokens
    control_sibling                   must hit the blocks of the prefix it shares with the input's prompt
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

LongBench v2 CoT inputs (a row with `answer_template`): each of cold, warm and repeat is the reasoning call, and
the main unit ends with its answer calls, cold_answer -> warm_answer -> repeat_answer, each prompt built from
the reasoning output of its own pass (`answer_prompt`: `$COT$` replaced as pred.py does). The answer calls have
a salt of their own: cold_answer takes a fresh one (or a reset), so it misses, and warm_answer / repeat_answer
reuse it. warm_answer must hit what its prompt shares with cold_answer's (repeat_answer: with warm_answer's):
the whole prompt's blocks when the two reasonings are the same, the common prefix (as tokenized) when a
reasoning diverged, since its tail then differs. The answer calls come after the controls, so that in reset
mode the reset before cold_answer empties nothing that a later reasoning-prompt request needs.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from eval.errors import ConfigError, LbevalError
from eval.prepare.dataset_specs import get_spec
from eval.prepare.dataset_specs_v2 import is_v2
from eval.prepare.inputs import InputRow, sha256_text
from eval.records.final import select_final
from eval.records.server_figures import FINISHED_KEY, FigureCheck, figure_check
from eval.records.types import CACHE_UNVERIFIED, CACHE_VERIFIED, RequestRecord, Usage
from eval.records.vocabulary import ANSWER_PASSES, PASS_CHOICES, UNIT_MAIN, UNIT_TIMING
from eval.run.client import Client
from eval.run.ledger import SendLedger
from eval.run.metrics_text import (
    FINISHED_COUNTER,
    PROCESS_START,
    WATCHED_SAMPLES,
    Snapshot,
    parse_metrics,
    request_deltas,
    went_backwards,
)
from eval.run.reply import Reply, RequestFailed
from eval.run.request import RequestSettings, build_request, endpoint_for, request_settings
from eval.run.retry import RetryPolicy as RetryPolicy  # re-exported: the run's retry settings
from eval.run.retry import with_retries
from scorers.longbench_v2.prompting import insert_cot

MAIN_ORDER = ("cold", "warm", "repeat")
SIBLING_QUESTION = "\n\nQuestion: Which topic does the text above discuss first?\n\nAnswer:"
EVICT_PROMPT = "~ lbeval cache eviction: an unrelated short prompt sent before a cold request."
V2_CONTEXT_END = "</text>\n\nWhat is the correct answer"  # what follows the document in the v2 templates
MAX_GROUP_RESTARTS = 3
# ServerWatch: waits between /metrics scrapes until a request is counted (the last repeats). Most answers are
# counted by the first scrape after them; the rest within a few ms (vLLM records just after answering)
SETTLE_POLLS_S = (0.002, 0.005, 0.01)
# a CoT answer call's warm reference: the answer call whose prompt it must share (what is cached under its salt)
ANSWER_REFERENCE = {"warm": "cold", "repeat": "warm"}


@dataclass(frozen=True)
class Step:
    pass_name: str
    repetition: int = 0
    salt: str = (
        "group"  # "fresh": a new salt that becomes the group's; "group": the group's; "new": throwaway
    )
    expect: str = "hit"  # "miss" | "hit" | "sibling"
    max_tokens: int | None = None  # None: the example's limit
    stream: bool = False
    retry_invalid: bool = True  # retry once when verification fails (not for controls: they measure)
    sibling: bool = False
    answer_of: str | None = None  # a CoT answer call: the generation pass whose reasoning output it completes


@dataclass(frozen=True)
class Unit:
    row_index: int
    kind: str  # "main" | "timing"
    repetition: int
    steps: tuple[Step, ...]


def validate_passes(passes: tuple[str, ...]) -> None:
    unknown = [p for p in passes if p not in PASS_CHOICES]
    if unknown:
        raise ConfigError(f"--passes: unknown pass {unknown[0]!r} (choose from {', '.join(PASS_CHOICES)})")
    needs_cold = [p for p in passes if p in ("warm", "repeat", "controls")]
    if needs_cold and "cold" not in passes:
        raise ConfigError(
            f"--passes: {needs_cold[0]} needs cold (it re-sends the cold request's prompt and salt)"
        )
    if "repeat" in passes and "warm" not in passes:
        raise ConfigError("--passes: repeat needs warm")
    if not passes:
        raise ConfigError("--passes: give at least one pass")


def main_steps(passes: tuple[str, ...], stream: bool) -> tuple[Step, ...]:
    steps: list[Step] = []
    if "cold" in passes:
        steps.append(Step("cold", salt="fresh", expect="miss", stream=stream))
    for name in ("warm", "repeat"):
        if name in passes:
            steps.append(Step(name, stream=stream))
    if "controls" in passes:
        steps.append(Step("control_salt", salt="new", expect="miss", max_tokens=1, retry_invalid=False))
        steps.append(
            Step("control_sibling", expect="sibling", max_tokens=1, retry_invalid=False, sibling=True)
        )
    return tuple(steps)


def answer_steps(passes: tuple[str, ...], stream: bool) -> tuple[Step, ...]:
    """A CoT input's answer calls, one per generation pass asked (see the module docstring)."""
    steps = []
    for name in ("cold", "warm", "repeat"):
        if name in passes:
            cold = name == "cold"
            salt, expect = ("fresh", "miss") if cold else ("group", "hit")
            steps.append(Step(ANSWER_PASSES[name], salt=salt, expect=expect, stream=stream, answer_of=name))
    return tuple(steps)


def answer_prompt(row: InputRow, reasoning: str) -> str:
    """A CoT row's answer call: its answer_template with the reasoning call's output (stripped) as `$COT$`."""
    if row.answer_template is None:
        raise ValueError(f"{row.dataset}/{row.id} is not a CoT input")
    return insert_cot(row.answer_template, reasoning)


def timing_steps(r: int) -> tuple[Step, ...]:
    return (
        Step("timing_cold", r, salt="fresh", expect="miss", max_tokens=1, stream=True),
        Step("timing_warm", r, expect="hit", max_tokens=1, stream=True),
    )


def plan_units(
    n_rows: int,
    passes: tuple[str, ...],
    timing_reps: int,
    stream_all: bool = False,
    cot_rows: frozenset[int] = frozenset(),
) -> list[Unit]:
    """Every unit of a run, in send order; the rows in `cot_rows` (CoT inputs) end their main unit with the
    answer calls."""
    main = main_steps(passes, stream_all)
    answers = answer_steps(passes, stream_all)
    units: list[Unit] = []
    for i in range(n_rows):
        if main:
            units.append(Unit(i, UNIT_MAIN, 0, main + answers if i in cot_rows else main))
        if "timing" in passes:
            units.extend(Unit(i, UNIT_TIMING, r, timing_steps(r)) for r in range(timing_reps))
    return units


def expected_cached(prompt_tokens: int, shared_tokens: int, block_size: int) -> int:
    """Cached tokens vLLM reports: whole blocks of the shared prefix, never covering the last prompt token."""
    usable = max(0, min(shared_tokens, prompt_tokens - 1))
    return (usable // block_size) * block_size


@dataclass(frozen=True)
class CacheFacts:
    prefix_caching: bool | None  # None: unknown (treated as on)
    block_size: int | None
    reported: bool = True  # the server reports cached tokens per request (False: nothing can be verified)


def verify(
    expect: str, usage: Usage, facts: CacheFacts, shared_tokens: int | None = None
) -> tuple[str, str | None, int | None]:
    """(status, reason, expected_cached_tokens) of one response, by the rules in the module docstring."""
    if not facts.reported:
        return "ok", None, None  # answered; its cache state is unverified (the record says so)
    cached = usage.cached_tokens
    if cached is None:
        return "invalid", "the server reported no usage.prompt_tokens_details.cached_tokens", None
    if expect == "miss":
        if cached == 0:
            return "ok", None, 0
        return "invalid", f"expected a prefix-cache miss, but {cached} tokens were cached", 0
    if facts.prefix_caching is False:
        return "ok", None, 0  # warm cannot hit on this server: recorded, not verified (the probe warned)
    n = usage.prompt_tokens
    shared = n if expect == "hit" else shared_tokens
    if facts.block_size is None or n is None or shared is None:
        if cached > 0:
            return "ok", None, None
        return "invalid", f"expected a prefix-cache hit ({expect}), but 0 tokens were cached", None
    expected = expected_cached(n, shared, facts.block_size)
    if cached >= expected:
        return "ok", None, expected
    if cached > 0:
        return "invalid", f"found {cached} of {expected} cached tokens ({expect}): a short hit", expected
    return "invalid", f"expected {expected} cached tokens ({expect}), the server reported {cached}", expected


def short_hit(rec: RequestRecord) -> bool:
    """An invalid hit-condition record that found some but fewer cached tokens than expected: what the server
    does, not a transient miss, so it is never retried (`verify` names it "found N of M cached tokens")."""
    cached, expected = rec.usage.cached_tokens, rec.expected_cached_tokens
    return rec.status == "invalid" and cached is not None and expected is not None and 0 < cached < expected


def sibling_prompt(row: InputRow) -> str:
    """The same context with a different question: the prompt up to the end of its context, then
    SIBLING_QUESTION. The context's end is found from the dataset template's text that follows {context};
    without a usable template, the last tenth of the prompt is replaced."""
    tail = ""
    try:
        if is_v2(row.dataset):
            tail = V2_CONTEXT_END
        else:
            template = get_spec(row.dataset).template
            after = template.split("{context}", 1)[1]
            tail = after.split("{input}", 1)[0]
    except Exception:  # noqa: BLE001 - unknown dataset or template without {context}: fall back
        tail = ""
    cut = row.prompt.rfind(tail) if len(tail.strip()) >= 8 else -1
    if cut <= 0:
        cut = len(row.prompt) - max(1, len(row.prompt) // 10)
    return row.prompt[:cut] + SIBLING_QUESTION


def new_salt() -> str:
    return "lbeval-" + secrets.token_hex(12)


# --- retries ---------------------------------------------------------------------------------------------------


@dataclass
class SendOutcome:
    response: Reply | None
    failure: RequestFailed | None
    retries: int
    refused: bool  # a connection was refused on the way (the server was down)


def send_with_retries(
    client: Client,
    endpoint: str,
    request: dict[str, Any],
    policy: RetryPolicy,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    stop: threading.Event | None = None,
) -> SendOutcome:
    """Send with `with_retries` (eval/run/retry.py); a 4xx (or an unusable answer) stops the run.

    No retry once `stop` is set (the run is being interrupted)."""
    out = with_retries(lambda: client.send(endpoint, request), policy, sleep, stop)
    if out.failure is not None and not out.failure.retryable:
        raise LbevalError(f"the server rejected {what}: {out.failure.message}")
    return SendOutcome(out.value, out.failure, out.attempts - 1, out.refused)


# --- server watch ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settled:
    snap: Snapshot | None
    counted: bool  # the finished-requests counter reached the target (not: no counter, or wait_s ran out)


@dataclass(frozen=True)
class Seen:
    finished: float  # the finished-requests counter of a settled after-snapshot
    answered: int  # ledger.answered(server) when that request had been answered


class ServerWatch:
    """Notices server restarts (`epoch` increases when the metrics go back or a connection is refused) and
    waits for the server's counters to include every request sent (vLLM records them just after answering).

    Per-request metrics (`before` / `after` around one request at concurrency 1): a settled after-snapshot is
    kept and serves as the next request's before, one scrape instead of two, only while the session's send ledger
    (`ledger`, default: the client's) shows that nothing was sent since by this session (any of its Clients, any thread, either side of `lbeval ab`, a reset, an
    eviction or re-prime prompt, a scenario batch); anything else gets a fresh scrape."""

    def __init__(
        self,
        client: Client,
        metrics: bool,
        start_time: float | None,
        finished: float | None,
        wait_s: float = 2.0,
        polls_s: tuple[float, ...] = SETTLE_POLLS_S,
        filtered: bool | None = False,
        ledger: SendLedger | None = None,
    ) -> None:
        self.client = client
        self.ledger = ledger if ledger is not None else client.ledger
        self.metrics = metrics
        self.epoch = 0
        self.start_time = start_time
        self.finished = finished  # vllm:request_success once every request sent so far is counted
        self.wait_s = wait_s
        self.polls_s = polls_s  # waits between settle scrapes; the last one repeats
        self._last: Snapshot | None = None
        self._kept: Snapshot | None = None
        self._kept_mark: int | None = None
        self._seen: Seen | None = None  # the last settled after: its finished count, ledger.answered then
        self._filtered = filtered  # scrape the filtered /metrics (None: find out whether it has every sample)
        self._lock = threading.Lock()
        # the last request's figures were not its own (window_checked; eval/records/server_figures.py)
        self.last_foreign = False

    def scrape(self) -> Snapshot | None:
        if not self.metrics:
            return None
        try:
            if self._filtered is None:
                self._filtered = self._filter_works()
            text = self.client.metrics_text(WATCHED_SAMPLES) if self._filtered else self.client.metrics_text()
            return parse_metrics(text, names=WATCHED_SAMPLES)
        except (RequestFailed, ValueError):
            return None

    def _filter_works(self) -> bool:
        """Whether the server's filtered /metrics (Client.metrics_text(names)) has every watched sample, with
        the same label sets, that its full /metrics has (vLLM: yes; a server that 404s or drops one: the full
        text is scraped instead, on every request)."""
        full = parse_metrics(self.client.metrics_text(), names=WATCHED_SAMPLES)
        try:
            part = parse_metrics(self.client.metrics_text(WATCHED_SAMPLES), names=WATCHED_SAMPLES)
        except (RequestFailed, ValueError):
            return False
        return full.shape() == part.shape()

    def _settle(self, target: float | None) -> Settled:
        snap = self.scrape()
        deadline = time.monotonic() + self.wait_s
        polls = iter(self.polls_s)
        while snap is not None and target is not None:
            seen = snap.counter(FINISHED_COUNTER) or 0.0
            if seen >= target:
                return Settled(snap, True)
            if time.monotonic() >= deadline:
                self.finished = seen  # never counted (aborted?): stop waiting for it on every request
                break
            time.sleep(next(polls, self.polls_s[-1]))
            snap = self.scrape() or snap
        return Settled(snap, False)

    def before(self) -> Snapshot | None:
        """The snapshot a request's deltas start from: the kept after-snapshot of the request just before it
        when nothing was sent since, else a scrape settled until the server counts the requests this process
        had answered by it since this watch's last settled after (another side's, an eviction or re-prime
        prompt), as well as the run's own."""
        kept, self._kept = self._kept, None
        if kept is not None and self._kept_mark is not None and self.ledger.mark() == self._kept_mark:
            return kept
        target = self.finished
        if target is not None and self._seen is not None:
            since = self.ledger.answered(self.client.root) - self._seen.answered
            target = max(target, self._seen.finished + since)
        return self._settle(target).snap

    def after(self, before: Snapshot | None, answered: bool, keep: bool = True) -> Snapshot | None:
        """The snapshot after a request: settled until the finished counter is one past `before`'s (the
        request counted; the run's own count when `before` has none). Kept for the next `before` only when
        `keep` (the request was sent once: a retried one may be counted twice or late), it settled, and
        nothing was sent, or in flight, while it was taken."""
        self._kept = None
        if not answered:
            return self.scrape()
        mark, done = self.ledger.mark(), self.ledger.answered(self.client.root)
        counted = before.counter(FINISHED_COUNTER) if before is not None else None
        got = self._settle(counted + 1 if counted is not None else self.finished)
        if got.counted and got.snap is not None:
            self._seen = Seen(got.snap.counter(FINISHED_COUNTER) or 0.0, done)
            if keep and mark is not None and self.ledger.mark() == mark:
                self._kept, self._kept_mark = got.snap, mark
        return got.snap

    def window_checked(self, foreign: bool, own_missing: bool) -> None:
        """The per-request check of the window just closed. A foreign window's after-snapshot is not reused as
        the next before; when one request was counted in it and it was not this one (`own_missing`: another
        took its place, this one's count lags), the next before also waits for one more finished request, so
        that the lagging count does not land in the next request's window."""
        with self._lock:
            self.last_foreign = foreign
            if not foreign:
                return
            self._kept = None
            if own_missing and self._seen is not None:
                self._seen = Seen(self._seen.finished + 1, self._seen.answered)

    def request_done(self) -> None:
        with self._lock:
            if self.finished is not None:
                self.finished += 1

    def check(self, refused: bool = False) -> int:
        """Scrape and observe under the lock: scrapes from several threads stay in order."""
        with self._lock:
            return self._observe(self.scrape(), refused)

    def observe(self, snap: Snapshot | None, refused: bool = False) -> int:
        with self._lock:
            return self._observe(snap, refused)

    def _observe(self, snap: Snapshot | None, refused: bool) -> int:
        changed = refused
        if snap is not None:
            if self._last is not None and went_backwards(self._last, snap):
                changed = True
                self.finished = snap.counter(FINISHED_COUNTER)  # a new process counts from zero
            self._last = snap
            self.start_time = snap.total(PROCESS_START)
        if changed:
            self.epoch += 1
            self._kept = self._seen = None  # a new process: nothing before it describes it
        return self.epoch


# --- executing one unit ------------------------------------------------------------------------------------------


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


def _shared_tokens(ctx: Context, row: InputRow, sibling: str, base: str | None = None) -> int | None:
    """Tokens the sibling prompt shares with `base` (the input's prompt by default), as the server tokenizes
    them, or None."""
    if not ctx.tokenize:
        return None
    kwargs = ctx.settings.chat_template_kwargs
    first = row.prompt if base is None else base
    try:
        if row.mode == "chat":
            a = ctx.client.tokenize(
                ctx.model, messages=[{"role": "user", "content": first}], chat_template_kwargs=kwargs
            )
            b = ctx.client.tokenize(
                ctx.model, messages=[{"role": "user", "content": sibling}], chat_template_kwargs=kwargs
            )
        else:
            a = ctx.client.tokenize(ctx.model, prompt=first)
            b = ctx.client.tokenize(ctx.model, prompt=sibling)
    except (RequestFailed, KeyError, TypeError, ValueError):
        return None
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


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


def send_observed(ctx: Context, row: InputRow, req: dict[str, Any], what: str) -> Observed:
    before = ctx.watch.before() if ctx.per_request_metrics else None
    seq = ctx.next_seq()
    out = send_with_retries(ctx.client, endpoint_for(row), req, ctx.policy, what, ctx.sleep, ctx.stop)
    if out.response is not None:
        ctx.watch.request_done()
    if not ctx.per_request_metrics:
        return Observed(out, seq, ctx.watch.check(out.refused), None)
    after = ctx.watch.after(before, out.response is not None, keep=out.retries == 0)
    epoch = ctx.watch.observe(after, out.refused)
    server = None
    if before is not None and after is not None and not went_backwards(before, after):
        server = request_deltas(before, after)
    check = _own_figures(ctx, server, out.response)
    return Observed(out, seq, epoch, server, check.foreign, check.finding)


def _own_figures(ctx: Context, server: dict[str, float] | None, response: Reply | None) -> FigureCheck:
    """Whose figures are these (eval/records/server_figures.py): every watched counter moved by this request?
    A usage finding needs the request before to have been counted in its own window too: else its lagging
    count (the same prompt, other hits: a timing_cold before its timing_warm) may be what this window saw."""
    if response is None or server is None:
        return FigureCheck(None, None)
    check = figure_check(server, response.usage)
    if check.finding is not None and ctx.watch.last_foreign:
        check = FigureCheck(f"{check.foreign}; the request before had foreign figures too", None)
    ctx.watch.window_checked(check.foreign is not None, server.get(FINISHED_KEY) == 1)
    if check.foreign is not None:
        ctx.count("foreign_figures")
    if check.finding is not None:
        ctx.count("cached_tokens_mismatch")
    return check


def _send_attempt(ctx: Context, row: InputRow, unit: Unit, gs: GroupState, at: Attempt) -> RequestRecord:
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
    sibling = step.expect == "sibling" and at.prompt is not None
    shared = _shared_tokens(ctx, row, at.prompt) if sibling and at.prompt is not None else None
    expect = step.expect
    if at.reference is not None and at.prompt is not None and at.reference != at.prompt:
        # a CoT answer call whose reasoning differs from its reference's: only the common prefix is cached
        expect, shared = "sibling", _shared_tokens(ctx, row, at.prompt, base=at.reference)
    status, reason, expected = verify(expect, resp.usage, ctx.facts, shared)
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
        rec = _send_attempt(ctx, row, unit, gs, replace(base, attempt=attempt, salt=salt))
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
