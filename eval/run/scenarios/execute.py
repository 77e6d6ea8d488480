"""Sending one scenario unit: its steps in order, a batch's requests released together, every one recorded.

Per request: the salt its `salt_key` names (or a fresh one), the prompt (text, or token IDs to /v1/completions),
then verification of the cache state it must have (`verify`, as in the cache scenario):
    miss    0 cached tokens, else `invalid`
    hit     the prompt's full blocks cached, else `invalid`
    prefix  floor(min(L, n-1)/block)*block expected (kept in `expected_cached_tokens`); a hit the server does
            not honour is recorded `ok` with what it reported: a finding (the attribution table counts the hits
            honoured), not a failure
Scenario requests are never retried on a failed check: they measure, and an invalid record is counted in every
figure that needed it. A batch's requests are sent by one thread each, released by a barrier, with no
per-request /metrics deltas (they overlap); the batch's window as a whole is checked against their usage
(eval/records/server_figures.batch_check: where the server's count decides each member's cached tokens, the
cache checks read it, as for one request). A server restart noticed during the unit (the metrics went back or a
connection was refused) marks the group's requests invalid and re-runs the whole unit as group g+1; an errored
request (after transport retries) ends the unit, which the next `lbeval run` re-runs from its start.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from eval.errors import LbevalError
from eval.prepare.inputs import InputRow, sha256_text
from eval.records import scenarios as sc
from eval.records.final import select_final
from eval.records.server_figures import (
    BatchCheck,
    BatchMember,
    batch_check,
    checked_cached,
    checked_usage,
)
from eval.records.types import RequestRecord, Usage
from eval.records.vocabulary import scenario_of
from eval.run.passes import (
    MAX_GROUP_RESTARTS,
    Context,
    GroupState,
    Observed,
    RestartDetected,
    UnitFailed,
    close_window,
    send_observed,
)
from eval.run.reply import Reply
from eval.run.request import build_request, endpoint_for, request_settings
from eval.run.retry import SendOutcome, send_with_retries
from eval.run.scenarios.base import ScenarioStep, steps_of
from eval.run.steps import CacheFacts, Unit, new_salt, verify

RESTART_REASON = "server restart detected during the group; the group is re-run from cold"
BARRIER_TIMEOUT_S = 60.0


class _Stopped(Exception):
    """The run is being interrupted: the unit stops before its next request."""


@dataclass
class _Built:
    step: ScenarioStep
    row: InputRow  # the row the request is built from (raw mode for token-ID prompts)
    request: dict[str, Any]
    salt: str
    prompt_sha256: str
    extra: dict[str, Any]  # variation added when sending (the stop string)


def run_scenario_unit(
    ctx: Context,
    rows: Sequence[InputRow],
    unit: Unit,
    start: GroupState,
    peers: Sequence[Context] = (),
    turns: Sequence[Turn] = (),
) -> bool:
    """Send a scenario unit from its first request in group `start.group`; True when complete. `peers`: every
    replica's context by index, for a step that names its replica (the replicas scenario); `turns`: each
    replica's turn, taken for the steps sent there and given back when the unit moves on (none: the caller
    owns the replicas)."""
    gs = start
    for _ in range(MAX_GROUP_RESTARTS + 1):
        try:
            with _Turns(turns) as held:
                _run_once(ctx, rows, unit, gs, peers, held)
            return True
        except RestartDetected:
            ctx.count("group_restarts")
            gs = GroupState(group=gs.group + 1)
        except UnitFailed:
            ctx.count("failed_units")
            return False
        except _Stopped:
            return False
    row = rows[unit.row_index]
    raise LbevalError(
        f"the server restarted {MAX_GROUP_RESTARTS + 1} times during {row.dataset}/{row.id} {unit.kind}; giving up"
    )


def batches(steps: Sequence[ScenarioStep]) -> list[list[ScenarioStep]]:
    """The unit's sends in order: consecutive steps of one batch number together, alone steps one by one."""
    out: list[list[ScenarioStep]] = []
    for step in steps:
        if step.batch >= 0 and out and out[-1][0].batch == step.batch:
            out[-1].append(step)
        else:
            out.append([step])
    return out


def sender(ctx: Context, peers: Sequence[Context], step: ScenarioStep) -> Context:
    """The context a step is sent through: its replica's when it names one, else the unit's own."""
    if step.replica is None:
        return ctx
    if step.replica >= len(peers):
        raise LbevalError(f"{step.pass_name} {step.repetition}: no replica {step.replica} in this run")
    return peers[step.replica]


class Turn(Protocol):
    """A replica's turn (eval/run/scheduler.LaneLock): one unit at a time sends to the replica."""

    def acquire(self) -> bool: ...

    def release(self) -> None: ...


class _Turns:
    """The replica turn a spanning unit holds now: taken as its steps reach a replica, the last one given back
    when they move to the next replica and when the unit ends."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.turns = turns
        self.now: int | None = None

    def take(self, replica: int | None) -> None:
        if not self.turns or replica is None or replica == self.now:
            return
        self.give_back()
        self.turns[replica].acquire()
        self.now = replica

    def give_back(self) -> None:
        if self.now is not None:
            self.turns[self.now].release()
            self.now = None

    def __enter__(self) -> _Turns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.give_back()


def _run_once(
    ctx0: Context,
    rows: Sequence[InputRow],
    unit: Unit,
    gs: GroupState,
    peers: Sequence[Context],
    held: _Turns,
) -> None:
    own = rows[unit.row_index]
    salts: dict[str, str] = {}
    sent: dict[tuple[str, int], RequestRecord] = {}
    epochs: dict[int, int] = {}  # per sending context (a replica's): its server's epoch moving is a restart
    for group in batches(steps_of(unit)):
        ctx = sender(ctx0, peers, group[0])  # a batch's steps share their replica (planners keep it so)
        held.take(group[0].replica)  # a spanning unit waits for the replica's turn, then sees a stop
        if ctx.stop.is_set():
            raise _Stopped()
        built = [_build(ctx, rows, own, step, salts, sent) for step in group]
        observed = [_send_alone(ctx, own, built[0])] if len(built) == 1 else _send_together(ctx, own, built)
        now = observed[-1].epoch
        restart = now != epochs.setdefault(id(ctx), now)
        records = [_record(ctx, own, unit, gs, b, o, restart) for b, o in zip(built, observed, strict=True)]
        failure: str | None = None
        for rec in records:
            if rec.status == "error" and ctx.stop.is_set():
                raise _Stopped()  # a failure caused by the shutdown is not recorded
            ctx.emit(rec, True)
            sent[(rec.pass_name, rec.repetition)] = rec
            if rec.status == "error" and failure is None:
                failure = rec.error or "no response"
        if failure is not None:
            raise UnitFailed(failure)
        if restart:
            raise RestartDetected()


def _build(
    ctx: Context,
    rows: Sequence[InputRow],
    own: InputRow,
    step: ScenarioStep,
    salts: dict[str, str],
    sent: dict[tuple[str, int], RequestRecord],
) -> _Built:
    row = rows[step.prompt_row] if step.prompt_row is not None else own
    salt = salts.setdefault(step.salt_key, new_salt()) if step.salt_key else new_salt()
    extra: dict[str, Any] = {}
    if step.token_ids is not None:
        row = replace(row, mode="raw")  # token IDs go to /v1/completions whatever the input's mode
        sha = sha256_text(",".join(str(t) for t in step.token_ids))
    else:
        sha = sha256_text(row.prompt)
    req = build_request(
        row, ctx.settings, model=ctx.model, cache_salt=salt, stream=False, max_tokens=step.max_tokens
    )
    if step.token_ids is not None:
        req["prompt"] = list(step.token_ids)
    if step.stop_from is not None:
        before = sent.get(step.stop_from)
        words = (before.output_text or "").split() if before is not None else []
        stop = words[-1] if words else "\n"
        req["stop"] = [stop]
        extra[sc.STOP] = stop
    return _Built(step, row, req, salt, sha, extra)


def _what(own: InputRow, step: ScenarioStep) -> str:
    return f"{own.dataset}/{own.id} {step.pass_name} {step.repetition}"


def _send_alone(ctx: Context, own: InputRow, b: _Built) -> Observed:
    return send_observed(ctx, b.row, b.request, _what(own, b.step))


def _send_together(ctx: Context, own: InputRow, built: Sequence[_Built]) -> list[Observed]:
    """Every request of a batch from its own thread, released at once; the server's epoch checked after, and
    with per-request metrics the batch's window as a whole (`_batch_figures`)."""
    before = ctx.watch.before() if ctx.per_request_metrics else None
    barrier = threading.Barrier(len(built))
    seqs = [ctx.next_seq() for _ in built]
    outcomes: list[SendOutcome | None] = [None] * len(built)
    raised: list[BaseException] = []

    def send(i: int) -> None:
        b = built[i]
        with contextlib.suppress(threading.BrokenBarrierError):  # a slow thread start: send anyway
            barrier.wait(timeout=BARRIER_TIMEOUT_S)
        try:
            outcomes[i] = send_with_retries(
                ctx.client,
                endpoint_for(b.row),
                b.request,
                ctx.policy,
                _what(own, b.step),
                ctx.sleep,
                ctx.stop,
            )
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            raised.append(exc)

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(len(built))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if raised:
        raise raised[0]
    done = [o for o in outcomes if o is not None]
    for o in done:
        if o.response is not None:
            ctx.watch.request_done()
    refused = any(o.refused for o in done)
    replies = [o.response for o in done if o.response is not None]
    if before is None:
        epoch, check = ctx.watch.check(refused), None
    else:
        answered = len(replies) == len(built)
        window = close_window(ctx, before, answered, refused, keep=False, requests=len(built))
        epoch, deltas = window.epoch, window.deltas if answered else None
        check = None if deltas is None else _batch_figures(ctx, built, replies, deltas)
    return [
        Observed(
            o if o is not None else SendOutcome(None, None, 0, False),
            seq,
            epoch,
            None,
            finding=None if check is None else check.findings[i],
            cached=None if check is None else check.cached[i],
        )  # fmt: skip
        for i, (o, seq) in enumerate(zip(outcomes, seqs, strict=True))
    ]


def _batch_figures(
    ctx: Context, built: Sequence[_Built], replies: Sequence[Reply], deltas: dict[str, float]
) -> BatchCheck:
    """Usage against the server's counters over the batch's window (eval/records/server_figures.batch_check).
    As for one request (eval/run/passes.py), no finding when the request before had foreign figures: its
    lagging count may be in this window."""
    members = [
        BatchMember(r.usage, check_cache(b.step, r.usage, ctx.facts)[2])
        for b, r in zip(built, replies, strict=True)
    ]
    check = batch_check(deltas, members)
    if ctx.watch.last_foreign and any(check.findings):
        none = (None,) * len(built)
        check = BatchCheck("the request before had foreign figures", none, none)
    ctx.watch.window_checked(check.foreign is not None, False)
    for finding in check.findings:
        if finding is not None:
            ctx.count("cached_tokens_mismatch")
    return check


def check_cache(step: ScenarioStep, usage: Usage, facts: CacheFacts) -> tuple[str, str | None, int | None]:
    """(status, reason, expected cached tokens) of one scenario response (see the module docstring)."""
    if step.expect != "prefix":
        return verify(step.expect, usage, facts)
    if usage.cached_tokens is None:
        return "invalid", "the server reported no usage.prompt_tokens_details.cached_tokens", None
    if facts.prefix_caching is False:
        return "ok", None, 0
    n, model = usage.prompt_tokens, facts.model
    if model is None or n is None or step.shared is None:
        return "ok", None, None
    return "ok", None, model.expected_hit(n, step.shared)


def _record(
    ctx: Context,
    own: InputRow,
    unit: Unit,
    gs: GroupState,
    b: _Built,
    obs: Observed,
    restart: bool,
) -> RequestRecord:
    step = b.step
    base = RequestRecord(
        run_id=ctx.run_id, variant=ctx.variant, dataset=own.dataset, example_id=own.id,
        pass_name=step.pass_name, repetition=step.repetition, attempt=0, seq=obs.seq, group=gs.group,
        endpoint=endpoint_for(b.row), settings=request_settings(b.request), cache_salt=b.salt,
        prompt_sha256=b.prompt_sha256, status="error", retries=obs.out.retries,
        scenario=scenario_of(step.pass_name), variation={**dict(step.variation), **b.extra},
    )  # fmt: skip
    resp = obs.out.response
    if resp is None:
        return replace(base, error=obs.out.failure.message if obs.out.failure else "no response")
    status, reason, expected = check_cache(
        step, checked_usage(resp.usage, obs.server, obs.finding, obs.cached), ctx.facts
    )
    if restart:
        status, reason = "invalid", RESTART_REASON
    return replace(
        base, status=status, error=reason, output_text=resp.text, finish_reason=resp.finish_reason,
        output_token_ids=resp.token_ids, topk=resp.topk, usage=resp.usage, expected_cached_tokens=expected,
        timings=resp.timings, server_metrics=obs.server, server_foreign=obs.foreign, cache_finding=obs.finding,
        server_cached=obs.cached,
    )  # fmt: skip


def hit_findings(records: Sequence[RequestRecord]) -> tuple[int, int]:
    """(hitlen_full requests whose cached tokens differ from what their hit length promises, of those with
    an expectation), over the final records."""
    full = [
        r
        for r in select_final(records).final.values()
        if r.pass_name == "hitlen_full" and r.status == "ok" and r.expected_cached_tokens is not None
    ]
    return sum(checked_cached(r) != r.expected_cached_tokens for r in full), len(full)


def scenario_warnings(records: Sequence[RequestRecord]) -> list[str]:
    """Run warnings from the scenario records (for the manifest and the terminal)."""
    off, total = hit_findings(records)
    if not off:
        return []
    return [
        f"hitlen: {off} of {total} primed requests did not find the cached tokens their hit length promises "
        "(a finding about the server, counted in the attribution table)"
    ]
