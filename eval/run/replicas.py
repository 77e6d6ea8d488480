"""Replicas: one variant served by N endpoints, every input's units pinned to one of them.

    lbeval run --variant v --base-url URL0 --base-url URL1 ...   # N running replicas
    lbeval run --spec NAME                                      # a launch spec with `replicas = N`

The prefix cache is per server, so a warm request answered by another replica than its cold twin is a miss.
Here every unit of one input (cold -> warm -> repeat -> controls, every timing repetition, every scenario unit
with its primes and fillers) goes to ONE replica (`assign_replicas`: seeded, balanced by prompt tokens, a pure
function of the inputs and N). Each replica runs its units at `--concurrency`, all replicas at once; each has
its own Client, probe and ServerWatch (all on the session's one send ledger), so cache verification, /metrics
deltas and cache resets are per replica. Every record names its replica (RequestRecord.replica).

The probe checks every replica against replica 0 (`replica_differences`: model, version, server kind, context
length, prefix caching, block size, cached-token reporting, cache_salt): one that differs is refused with the
difference named. The manifest's session line lists each replica (`replicas`: index, credential-free URL,
version, process start time).

Resume: the assignment depends only on the inputs and N, so the same N keeps every unit where it was; with
another N, a unit left incomplete whose latest records are on another replica than its new one restarts as a
whole on the new one (a new group: no warm record pairs with a cold from another replica); complete units stay.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, fields, replace
from typing import Any

from eval.errors import ConfigError, LbevalError
from eval.prepare.inputs import InputRow
from eval.records.run_folder import (
    MANIFEST_NAME,
    RECORDS_NAME,
    RecordWriter,
    append_server_record,
    read_manifest,
    write_manifest,
)
from eval.records.types import RequestRecord
from eval.redact import safe_url
from eval.run.client import Client, SendLedger
from eval.run.config import RunConfig
from eval.run.passes import Context, GroupState, Unit, run_unit
from eval.run.probe import ProbeResult, probe_server
from eval.run.progress import Progress
from eval.run.scenarios.execute import run_scenario_unit
from eval.run.scenarios.plan import is_scenario_unit
from eval.run.scenarios.replicas import spans_replicas
from eval.run.session import Inputs, RunSession, open_client, units_left
from eval.serve.launch_specs import LaunchSpec
from eval.serve.process import start
from eval.terminal import echo_err

ASSIGNMENT_SEED = 0  # the assignment's tie-break order; fixed, so a resume with the same N assigns the same
CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"  # vLLM CPU: the cores a server's OpenMP threads are bound to
# what every replica must share with replica 0 (ProbeResult fields), in the order a refusal names them
SAME_ON_EVERY_REPLICA = (
    "model",
    "version",
    "server_kind",
    "max_model_len",
    "prefix_caching",
    "block_size",
    "cached_tokens_reported",
    "salt_honored",
    "cold_mode",
)

Todo = tuple[Unit, GroupState, int]


# --- the assignment (pure) ---------------------------------------------------------------------------------------


def row_weight(row: InputRow) -> int:
    """An input's share of the work: its prompt tokens (prepared inputs record them), else about 4 characters
    a token; at least 1."""
    if row.prompt_tokens is not None:
        return max(1, row.prompt_tokens)
    return max(1, len(row.prompt) // 4)


def assign_replicas(weights: Sequence[int], n: int, seed: int = ASSIGNMENT_SEED) -> tuple[int, ...]:
    """Input i -> its replica (0..n-1): the heaviest input first (equal weights in an order shuffled by `seed`),
    each to the replica with the least weight so far (a tie: the lowest index), so the replicas finish together.
    Equal weights go round-robin; the same (weights, n, seed) always gives the same assignment."""
    if n < 1:
        raise ValueError(f"replicas must be at least 1, got {n}")
    order = list(range(len(weights)))
    random.Random(seed).shuffle(order)
    order.sort(key=lambda i: -weights[i])  # stable: the seeded order among equal weights
    loads = [0] * n
    out = [0] * len(weights)
    for i in order:
        r = min(range(n), key=lambda k: (loads[k], k))
        out[i] = r
        loads[r] += weights[i]
    return tuple(out)


def replica_differences(first: ProbeResult, other: ProbeResult) -> list[str]:
    """What replica `other` reports differently from replica 0 (`first`), e.g. "block_size 16 -> 128"."""
    return [
        f"{name} {getattr(first, name)!r} -> {getattr(other, name)!r}"
        for name in SAME_ON_EVERY_REPLICA
        if getattr(first, name) != getattr(other, name)
    ]


def core_sets(cores: Sequence[int], n: int) -> list[str]:
    """The cores of each of n replicas on one host, as VLLM_CPU_OMP_THREADS_BIND lists ("0-1"): contiguous
    equal shares (the first ones one more when they do not divide); with fewer cores than replicas, a core is
    shared round-robin."""
    if len(cores) < n:
        return [str(cores[i % len(cores)]) for i in range(n)]
    share, extra = divmod(len(cores), n)
    out: list[str] = []
    at = 0
    for i in range(n):
        size = share + (1 if i < extra else 0)
        out.append(_cpu_list(cores[at : at + size]))
        at += size
    return out


def _cpu_list(cores: Sequence[int]) -> str:
    """ "2-5" for consecutive cores, else "0,2,5" (both forms vLLM's CPU list takes)."""
    if len(cores) > 1 and list(cores) == list(range(cores[0], cores[0] + len(cores))):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(str(c) for c in cores)


def replica_specs(spec: LaunchSpec, cores: Sequence[int]) -> list[LaunchSpec]:
    """A launch spec's N replicas: the same command, each bound to its cores (CPU_BIND_ENV) unless the spec's
    env sets that itself."""
    n = spec.replicas
    if CPU_BIND_ENV in spec.env:
        return [spec] * n
    return [replace(spec, env={**spec.env, CPU_BIND_ENV: c}) for c in core_sets(cores, n)]


def replica_count(config: RunConfig) -> int:
    if config.server is not None:
        return config.server.replicas
    return max(1, len(config.base_urls))


def replicated(config: RunConfig, inputs: Inputs) -> bool:
    """Whether the session runs through the replicas' path: more than one replica now, or a run folder an
    earlier session ran on replicas (its units' replicas decide what resumes where)."""
    if replica_count(config) > 1:
        return True
    if not (inputs.run_dir / MANIFEST_NAME).exists():
        return False
    return any("replicas" in s for s in read_manifest(inputs.run_dir).sessions)


def refuse_replicas_in_ab(config: RunConfig, side: str) -> None:
    """`lbeval ab` runs one endpoint per side (replicas there are a later step)."""
    if replica_count(config) > 1:
        raise ConfigError(
            f"lbeval ab: side {side} has {replica_count(config)} replicas; ab takes one endpoint"
        )


# --- the session -------------------------------------------------------------------------------------------------


class SendOrder:
    """The run's one send order across the replicas' contexts (RequestRecord.seq)."""

    def __init__(self, start: int) -> None:
        self._next = start
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            seq = self._next
            self._next += 1
            return seq


@dataclass
class ReplicaContext(Context):
    """One replica's passes context: its Client and ServerWatch; the send order shared with the others."""

    replica: int = 0
    sequence: SendOrder | None = None

    def next_seq(self) -> int:
        assert self.sequence is not None
        return self.sequence.take()


@dataclass(frozen=True)
class Replica:
    index: int
    base_url: str
    client: Client
    probe: ProbeResult


@contextmanager
def serving_replicas(config: RunConfig) -> Iterator[tuple[list[str], list[dict[str, Any]]]]:
    """(every replica's URL, what lbeval started): a launch spec's N servers, each on a free port with its
    cores, started one after the other and all stopped on exit; else the configured URLs."""
    if config.server is None:
        yield list(config.base_urls or (config.base_url,)), []
        return
    cores = sorted(os.sched_getaffinity(0))
    with ExitStack() as stack:
        urls: list[str] = []
        started: list[dict[str, Any]] = []
        for spec in replica_specs(config.server, cores):
            server = stack.enter_context(start(spec, echo=echo_err, runs=config.out))
            stack.enter_context(server.reported_if_dead())
            urls.append(server.base_url)
            started.append(server.describe())
        yield urls, started


def _probe(config: RunConfig, client: Client, inputs: Inputs) -> ProbeResult:
    probe = probe_server(
        client, model=config.model, settings=config.request, modes={r.mode for r in inputs.rows},
        cold_mode=config.cold_mode, check_reset=not (inputs.run_dir / MANIFEST_NAME).exists(),
        policy=config.retry,
    )  # fmt: skip
    probe.require()
    return probe


def _replicas(session: RunSession, config: RunConfig, clients: list[Client], inputs: Inputs) -> list[Replica]:
    """Replica 0 is the session's (already probed); the others are probed (in parallel) and compared with it."""
    out = [Replica(0, config.base_urls[0], clients[0], session.probe)]
    with ThreadPoolExecutor(max_workers=max(1, len(clients) - 1)) as pool:  # the others at once
        probes = list(pool.map(lambda c: _probe(config, c, inputs), clients[1:]))
    for i, (client, probe) in enumerate(zip(clients[1:], probes, strict=True), start=1):
        diffs = replica_differences(session.probe, probe)
        if diffs:
            raise ConfigError(
                f"replica {i} ({safe_url(config.base_urls[i])}) differs from replica 0 "
                f"({safe_url(config.base_urls[0])}): {'; '.join(diffs)}; every replica must serve the same"
            )
        out.append(Replica(i, config.base_urls[i], client, probe))
    return out


def _same_servers(session: RunSession, replicas: list[Replica]) -> list[bool]:
    last = session.manifest.sessions[-1].get("replicas") if session.manifest.sessions else None
    before = {int(r["replica"]): r.get("server_process_start_time") for r in last or []}
    return [
        before.get(r.index) is not None and before.get(r.index) == r.probe.process_start_time
        for r in replicas
    ]


def run_replicated(
    config: RunConfig,
    inputs: Inputs,
    ledger: SendLedger,
    on_record: Callable[[RequestRecord], None] | None,
) -> None:
    """The session on every replica (the run folder's lock held by the caller): start a spec's servers, probe
    and compare them, assign, resume, run every replica at once, end the session."""
    with serving_replicas(config) as (urls, started):
        config = replace(config, base_url=urls[0], base_urls=tuple(urls))
        with ExitStack() as stack:
            clients = [stack.enter_context(open_client(replace(config, base_url=u), ledger)) for u in urls]
            session = RunSession.prepare(config, clients[0], inputs)
            session.on_record = on_record
            replicas = _replicas(session, session.config, clients, inputs)
            weights = [row_weight(r) for r in session.rows]
            assignment = assign_replicas(weights, len(replicas))
            session.todo = units_left(
                session.units, session.rows, session.slim, _same_servers(session, replicas), assignment
            )
            session.start(started[0] if started else None)
            _note_replicas(session, replicas, started[1:])
            _send_all(session, replicas, assignment)


def start_replicas(
    session: RunSession,
    clients: list[Client],
    inputs: Inputs,
    started: list[dict[str, Any]],
    emit: Callable[[RequestRecord, bool], None],
) -> tuple[list[ReplicaContext], tuple[int, ...]]:
    """`lbeval ab`'s hook (eval/run/ab.py): a prepared session's replicas probed and compared, its units
    assigned and left, its session line started, and every replica's context with the assignment."""
    replicas = _replicas(session, session.config, clients, inputs)
    assignment = assign_replicas([row_weight(r) for r in session.rows], len(replicas))
    same = _same_servers(session, replicas)
    session.todo = units_left(session.units, session.rows, session.slim, same, assignment)
    session.start(started[0] if started else None)
    _note_replicas(session, replicas, started[1:])
    return _contexts(session, replicas, emit), assignment


def merged_context(session: RunSession, ctxs: list[ReplicaContext]) -> Context | None:
    """Replica 0's context carrying every replica's counters (what RunSession.end takes)."""
    return _merged(session, ctxs)


def _note_replicas(session: RunSession, replicas: list[Replica], more: list[dict[str, Any]]) -> None:
    """The session line's `replicas` (never a URL's credentials); the other started servers in servers.jsonl."""
    session.manifest.sessions[-1]["replicas"] = [
        {
            "replica": r.index,
            "base_url": safe_url(r.base_url),
            "server_version": r.probe.version,
            "server_process_start_time": r.probe.process_start_time,
        }
        for r in replicas
    ]
    write_manifest(session.run_dir, session.manifest)
    for server in more:
        append_server_record(session.run_dir, server)


def _contexts(
    session: RunSession, replicas: list[Replica], emit: Callable[[RequestRecord, bool], None]
) -> list[ReplicaContext]:
    seq = SendOrder(max((r.seq for r in session.slim), default=-1) + 1)
    out: list[ReplicaContext] = []
    for r in replicas:

        def stamped(rec: RequestRecord, final: bool, index: int = r.index) -> None:
            emit(replace(rec, replica=index), final)

        base = replace(session, probe=r.probe).context(r.client, stamped)
        kwargs = {
            f.name: getattr(base, f.name) for f in fields(Context) if f.init and not f.name.startswith("_")
        }
        out.append(ReplicaContext(**kwargs, replica=r.index, sequence=seq))
    return out


def _send_all(session: RunSession, replicas: list[Replica], assignment: Sequence[int]) -> None:
    progress = Progress(session.units, session.done_by_pass(), session.config.quiet)
    ctxs: list[ReplicaContext] = []
    try:
        with RecordWriter(session.run_dir / RECORDS_NAME) as writer:
            ctxs = _contexts(session, replicas, session.emitter(writer, progress))
            outcome = "complete" if _run_every_replica(session, ctxs, assignment) else "incomplete"
    except BaseException as exc:
        progress.close()
        outcome = f"stopped: {exc}" if isinstance(exc, LbevalError) else "interrupted"
        session.end(_merged(session, ctxs), outcome, exc)
        raise
    progress.close()
    session.end(_merged(session, ctxs), outcome, None)


def _merged(session: RunSession, ctxs: list[ReplicaContext]) -> Context | None:
    """Replica 0's context carrying every replica's counters; each replica's last process start time noted."""
    if not ctxs:
        return None
    total: dict[str, int] = {}
    for ctx in ctxs:
        for name, n in ctx.counters.items():
            total[name] = total.get(name, 0) + n
    for entry, ctx in zip(session.manifest.sessions[-1].get("replicas", []), ctxs, strict=False):
        entry["server_process_start_time"] = ctx.watch.start_time
    ctxs[0].counters = total
    return ctxs[0]


def _run_every_replica(session: RunSession, ctxs: list[ReplicaContext], assignment: Sequence[int]) -> bool:
    """Every replica's units at once (one thread each); the first failure stops them all and is raised."""
    mine: list[list[Todo]] = [[] for _ in ctxs]
    for t in session.todo:
        if not spans_replicas(t[0]):
            mine[assignment[t[0].row_index]].append(t)
    with ThreadPoolExecutor(max_workers=len(ctxs)) as pool:
        futures = [
            pool.submit(_run_replica, session, ctx, todo) for ctx, todo in zip(ctxs, mine, strict=True)
        ]
        try:
            done = _wait_all(futures)
        except BaseException:  # Ctrl-C, SIGTERM: no wait for the requests in flight (as eval/run/runner.py)
            for ctx in ctxs:
                ctx.stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        failed = [f for f in done if f.exception() is not None]
        if failed:
            for ctx in ctxs:
                ctx.stop.set()
            raise failed[0].exception()  # type: ignore[misc]
        ok = all(f.result() for f in futures)
    return _run_across_replicas(session, ctxs) and ok


def _run_across_replicas(session: RunSession, ctxs: list[ReplicaContext]) -> bool:
    """The units whose requests go to every replica (the replicas scenario), one at a time once the replicas'
    own units are done, so each replica still has one request in flight at a time."""
    ok = True
    for unit, gs, _ in (t for t in session.todo if spans_replicas(t[0])):
        if ctxs[0].stop.is_set():
            return False
        ok = run_scenario_unit(ctxs[0], session.rows, unit, gs, peers=ctxs) and ok
    return ok


def _wait_all(futures: list[Future[bool]]) -> set[Future[bool]]:
    while True:  # short waits: Ctrl-C reaches the main thread
        done, pending = wait(futures, timeout=0.2, return_when=FIRST_EXCEPTION)
        if any(f.exception() is not None for f in done) or not pending:
            return done


def _run_replica(session: RunSession, ctx: ReplicaContext, todo: list[Todo]) -> bool:
    """One replica's units: the cache units at --concurrency, then its scenario units one at a time (a
    scenario unit owns its replica while it runs)."""
    rows = session.rows
    cache = [t for t in todo if not is_scenario_unit(t[0])]
    ok = True
    if session.config.concurrency == 1:
        for unit, gs, index in cache:
            if ctx.stop.is_set():
                return False
            ok = run_unit(ctx, rows[unit.row_index], unit, gs, index) and ok
    else:
        with ThreadPoolExecutor(max_workers=session.config.concurrency) as pool:
            results = list(pool.map(lambda t: run_unit(ctx, rows[t[0].row_index], *t), cache))
            ok = all(results)
    for unit, gs, _ in (t for t in todo if is_scenario_unit(t[0])):
        if ctx.stop.is_set():
            return False
        ok = run_scenario_unit(ctx, rows, unit, gs) and ok
    return ok
