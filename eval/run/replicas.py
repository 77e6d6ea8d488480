"""Replicas: one variant served by N endpoints, every unit on one of them.

    lbeval run --variant v --base-url URL0 --base-url URL1 ...   # N running replicas
    lbeval run --spec NAME                                      # a launch spec with `replicas = N`

The prefix cache is per server, so a warm request answered by another replica than its cold twin is a miss.
Here every unit (an input's main unit: cold -> warm -> repeat -> controls; a timing repetition: its cold and warm;
a scenario unit with its primes and fillers) goes to ONE replica (`place_units`): an input's main unit to the
input's replica (`assign_replicas`: seeded, balanced by prompt tokens, a pure function of the inputs and N), the
timing repetitions and scenario units, whose salts are their own, by cost to the least-loaded replica. Each
replica is a lane of the one scheduler (eval/run/scheduler.py): it runs its units at `--concurrency`, all
replicas at once (`replica_lanes` gives the scheduler the replicas' contexts); each has its own Client, probe and
ServerWatch, so cache verification, /metrics deltas and cache resets are per replica. Every record names its
replica (RequestRecord.replica).

The probe checks every replica against replica 0 (`replica_differences`: model, version, server kind, context
length, prefix caching, block size, cached-token reporting, cache_salt): one that differs is refused with the
difference named. The manifest's session line lists each replica (`replicas`: index, credential-free URL,
version, process start time).

A routing endpoint (`--dp-ranks N`, or a spec's `dp_ranks = N`: vLLM's internal data-parallel load balancing):
one URL, N replicas that are its data-parallel ranks. Replica r's Client sends `X-data-parallel-rank: r` with
every request (DP_RANK_HEADER), its ServerWatch sees only engine r's series of /metrics (the `engine` label:
EngineWatch), and its ledger counts the answers of rank r apart (RankLedger). A record whose request engine r's
counters do not show while another engine's do (the router ignored the pin: `pin_finding`) is `invalid`, with
the reason, and counted (`misrouted`). A cache reset empties every engine, so `--cold reset` is refused there.

A spec with `devices` (a GPU host) gives each of its replicas an equal share of them as CUDA_VISIBLE_DEVICES
(`device_sets`); a spec without gets CPU thread binding (`core_sets`).

Resume: the assignment depends only on the inputs and N, so the same N keeps every unit where it was; with
another N, a unit left incomplete whose latest records are on another replica than its new one restarts as a
whole on the new one (a new group: no warm record pairs with a cold from another replica); complete units stay.
"""

from __future__ import annotations

import glob
import os
import random
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any

from eval.errors import ConfigError
from eval.prepare.inputs import InputRow
from eval.records.final import UnitKey, unit_of
from eval.records.manifest_parts import ReplicaEntry
from eval.records.run_folder import (
    MANIFEST_NAME,
    append_server_record,
    read_manifest,
)
from eval.records.server_identity import SERVER_IDENTITY_KEYS, server_differences
from eval.records.types import RequestRecord
from eval.records.vocabulary import UNIT_TIMING
from eval.redact import safe_url
from eval.run.client import Client
from eval.run.config import RunConfig, Topology
from eval.run.ledger import SendLedger
from eval.run.metrics_text import (
    FINISHED_COUNTER,
    REQUEST_COUNTERS,
    Snapshot,
    engine_deltas,
    engine_names,
    engine_view,
    parse_metrics,
)
from eval.run.passes import Context, GroupState
from eval.run.probe import ProbeResult, probe_server
from eval.run.reply import RequestFailed
from eval.run.scenarios.base import ScenarioStep
from eval.run.scenarios.plan import is_scenario_unit
from eval.run.scenarios.replicas import spans_replicas
from eval.run.scheduler import Lanes
from eval.run.server_watch import ServerWatch
from eval.run.session import Inputs, RunSession, api_key
from eval.run.steps import Step, Unit
from eval.serve.launch_specs import LaunchSpec
from eval.serve.process import start
from eval.terminal import echo_err

ASSIGNMENT_SEED = 0  # the assignment's tie-break order; fixed, so a resume with the same N assigns the same
CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"  # vLLM CPU: the cores a server's OpenMP threads are bound to
GPU_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"  # the GPUs a replica's server process sees
DP_RANK_HEADER = "X-data-parallel-rank"  # vLLM: pin a request to one data-parallel rank (case-insensitive)
# a request's cost in prompt tokens' worth (`unit_cost`), from the CPU server's measured rates
# (docs/measured/cpu-smollm2-2026-11-30.md): a 1,000-1,400-token prompt prefills in 2.5-4 s cold (about 2.5-3 ms a
# token) and 0.3-0.5 s warm (about an eighth), and a token decodes in 0.05-0.1 s (about 30 prompt tokens' worth)
WARM_PREFILL_PARTS = 8
DECODE_TOKEN_WEIGHT = 30
MISROUTED = "misrouted"  # the counter of records another engine than the pinned one answered
# what every replica must share with replica 0 (ProbeResult fields), in the order a refusal names them: the
# server's identity (and its cache model, when both have one), and how it reports and isolates the cache
SAME_ON_EVERY_REPLICA = (*SERVER_IDENTITY_KEYS, "cached_tokens_reported", "salt_honored")

Todo = tuple[Unit, GroupState, int]
UnitId = tuple[int, str, int]  # (row index, unit kind, repetition)


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


def unit_id(unit: Unit) -> UnitId:
    return (unit.row_index, unit.kind, unit.repetition)


def unit_cost(unit: Unit, rows: Sequence[InputRow]) -> int:
    """A unit's share of a lane's time, in prompt tokens' worth: each request's prefill (its prompt's weight,
    `row_weight`, a scenario step's filler or noise prompt being its own input's; an expected cache hit
    WARM_PREFILL_PARTS-th of it) and its decoding (DECODE_TOKEN_WEIGHT a token of its output limit). The requests
    of one batch (`ScenarioStep.batch`) are sent at once: their prefills add up, their decoding is their longest's.
    So many short requests (hitlen's, repeats') weigh what they take, not what their prompts hold."""
    cost = 0
    batches: dict[int, int] = {}  # batch -> its longest decoding so far
    for step in unit.steps:
        row = rows[_prompt_row(unit, step)]
        weight = row_weight(row)
        cost += weight if step.expect == "miss" else max(1, weight // WARM_PREFILL_PARTS)
        decode = DECODE_TOKEN_WEIGHT * (step.max_tokens if step.max_tokens is not None else row.max_tokens)
        batch = step.batch if isinstance(step, ScenarioStep) else -1
        if batch < 0:
            cost += decode
        else:
            batches[batch] = max(batches.get(batch, 0), decode)
    return cost + sum(batches.values())


def _prompt_row(unit: Unit, step: Step) -> int:
    other = step.prompt_row if isinstance(step, ScenarioStep) else None
    return unit.row_index if other is None else other


def movable(unit: Unit) -> bool:
    """A unit that needs nothing its input left on a server: a timing repetition (its cold and warm on a fresh
    salt of their own) or a scenario unit (its own fresh salts); not one that spans the replicas."""
    return (unit.kind == UNIT_TIMING or is_scenario_unit(unit)) and not spans_replicas(unit)


def where_units_began(
    units: Sequence[Unit], rows: Sequence[InputRow], records: Sequence[RequestRecord], n: int
) -> dict[UnitId, int]:
    """A movable unit begun in an earlier session -> the replica of its latest group's records, when there is
    one of the n now (lbeval run runs a fresh movable unit on whichever replica is free first, so a unit is
    resumed where it began rather than where `place_units` would put it)."""
    latest: dict[UnitKey, tuple[int, int]] = {}  # unit -> (its latest group, that group's replica)
    for r in records:
        key = unit_of(r)
        if key not in latest or r.group >= latest[key][0]:
            latest[key] = (r.group, r.replica)
    out: dict[UnitId, int] = {}
    for unit in units:
        row = rows[unit.row_index]
        seen = latest.get(UnitKey(row.dataset, row.id, unit.kind, unit.repetition))
        if seen is not None and movable(unit) and seen[1] < n:
            out[unit_id(unit)] = seen[1]
    return out


def place_units(
    units: Sequence[Unit], rows: Sequence[InputRow], n: int, seed: int = ASSIGNMENT_SEED
) -> dict[UnitId, int]:
    """Unit -> its lane (replica 0..n-1). An input's main unit (cold, warm, repeat, the controls: one cache
    relation on one server) goes to the input's replica (`assign_replicas`). A timing repetition (its cold and
    warm on a fresh salt of their own) and a scenario unit (its own fresh salts) need nothing their input left on
    a server: they go by cost, the costliest first (plan order among equal costs), each to the lane with the
    least cost so far (a tie: the lowest index), after the main units; every unit's requests stay on its one
    lane. A unit that spans every replica (the replicas scenario) has no lane. A pure function of the units, the
    inputs and n: the same plan and n always place the same. `lbeval ab` pairs by this placement; `lbeval run`
    keeps it for main units and resumed ones and lets a fresh movable unit run on the first lane free
    (`replica_lanes`, eval/run/scheduler.py)."""
    inputs = assign_replicas([row_weight(r) for r in rows], n, seed)
    loads = [0] * n
    lanes: dict[UnitId, int] = {}
    movable_units: list[Unit] = []
    for unit in units:
        if spans_replicas(unit):
            continue
        if movable(unit):
            movable_units.append(unit)
            continue
        lane = inputs[unit.row_index]
        lanes[unit_id(unit)] = lane
        loads[lane] += unit_cost(unit, rows)
    for unit in sorted(
        movable_units, key=lambda u: -unit_cost(u, rows)
    ):  # stable: plan order among equal costs
        lane = min(range(n), key=lambda k: (loads[k], k))
        lanes[unit_id(unit)] = lane
        loads[lane] += unit_cost(unit, rows)
    return lanes


def replica_differences(first: ProbeResult, other: ProbeResult) -> list[str]:
    """What replica `other` reports differently from replica 0 (`first`), e.g. "block_size 16 -> 128"."""
    diffs = server_differences(first, other, SAME_ON_EVERY_REPLICA)
    return [f"{name} {before!r} -> {now!r}" for name, before, now in diffs]


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


def device_sets(devices: Sequence[int], n: int) -> list[str]:
    """The GPUs of each of n replicas, as CUDA_VISIBLE_DEVICES lists ("3", "0,1"): equal contiguous shares in
    the order given; devices that do not split evenly (or fewer devices than replicas) are refused, since
    replicas on unequal shares would not serve alike."""
    if not devices or len(devices) % n:
        raise ConfigError(
            f"{len(devices)} GPU device(s) {list(devices)} do not split evenly between {n} replicas; "
            "give the spec `devices = [...]` with a multiple of its replicas"
        )
    share = len(devices) // n
    return [",".join(str(d) for d in devices[i * share : (i + 1) * share]) for i in range(n)]


def host_devices(environ: Mapping[str, str], dev: str = "/dev") -> tuple[int, ...]:
    """A spec's `devices = "auto"`: the GPUs this process may use, CUDA_VISIBLE_DEVICES when it is set (device
    numbers only), else the /dev/nvidiaN device files."""
    given = environ.get(GPU_DEVICES_ENV)
    if given is not None:
        parts = [p.strip() for p in given.split(",") if p.strip()]
        if not all(p.isdigit() for p in parts):
            raise ConfigError(f"{GPU_DEVICES_ENV}={given!r} is not a list of device numbers; give `devices`")
        return tuple(int(p) for p in parts)
    found = (
        re.fullmatch(r"nvidia(\d+)", os.path.basename(p)) for p in glob.glob(os.path.join(dev, "nvidia*"))
    )
    return tuple(sorted(int(m.group(1)) for m in found if m))


def replica_specs(spec: LaunchSpec, cores: Sequence[int], devices: Sequence[int] = ()) -> list[LaunchSpec]:
    """A launch spec's N replicas: the same command, each with its share of `devices` as CUDA_VISIBLE_DEVICES
    when the spec is a GPU spec (`devices` given), else bound to its cores (CPU_BIND_ENV) unless the spec's
    env sets that itself."""
    n = spec.replicas
    if spec.devices is not None:
        if GPU_DEVICES_ENV in spec.env and n > 1:
            raise ConfigError(
                f"variant {spec.name}: env sets {GPU_DEVICES_ENV} and `devices` splits them; give one of them"
            )
        return [replace(spec, env={**spec.env, GPU_DEVICES_ENV: d}) for d in device_sets(devices, n)]
    if CPU_BIND_ENV in spec.env:
        return [spec] * n
    return [replace(spec, env={**spec.env, CPU_BIND_ENV: c}) for c in core_sets(cores, n)]


def dp_ranks(config: RunConfig) -> int:
    """A routing endpoint's data-parallel ranks (`Topology.ranks`); 1: none."""
    return config.topology.ranks


def replica_count(config: RunConfig) -> int:
    """The session's lanes (`Topology.lanes`): replicas, or a routing endpoint's ranks; 1: one server."""
    return config.topology.lanes


def replicated(topology: Topology, inputs: Inputs) -> bool:
    """Whether the session runs through the replicas' path: more than one lane now, or a run folder an
    earlier session ran on replicas (its units' replicas decide what resumes where)."""
    if topology.replicated:
        return True
    if not (inputs.run_dir / MANIFEST_NAME).exists():
        return False
    return any(s.replicas is not None for s in read_manifest(inputs.run_dir).sessions)


def refuse_ranks_in_ab(config: RunConfig, side: str) -> None:
    """`lbeval ab` pairs replicas given as endpoints (URLs, `replicas = N`); a routing endpoint's ranks
    (`dp_ranks`) are not paired yet: refused, naming the way that works."""
    if dp_ranks(config) > 1:
        raise ConfigError(
            f"lbeval ab: side {side} is a routing endpoint with {dp_ranks(config)} ranks (dp_ranks); ab pairs "
            "replicas given as endpoints: give each rank's URL (--base-url-{a,b} repeated or a spec's url list)"
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
    """(every endpoint's URL, what lbeval started): a launch spec's N servers, each on a free port with its
    cores or devices, started one after the other and all stopped on exit; else the configured URLs. A
    routing endpoint's N ranks: its one URL (one server started, for a managed spec); `Topology.lane_urls`
    gives it once per rank."""
    ranks = dp_ranks(config)
    given = config.topology.spec
    if given is None or not config.topology.to_start:
        yield list(config.topology.urls), []
        return
    with ExitStack() as stack:
        urls = []
        started: list[dict[str, Any]] = []
        for spec in _specs_to_start(given, ranks):
            server = stack.enter_context(start(spec, echo=echo_err, runs=config.out))
            stack.enter_context(server.reported_if_dead())
            urls.append(server.base_url)
            started.append(server.describe())
        yield urls, started


def _specs_to_start(spec: LaunchSpec, ranks: int) -> list[LaunchSpec]:
    if ranks > 1:
        return [spec]  # one server routes to its ranks
    if spec.devices is None:
        return replica_specs(spec, sorted(os.sched_getaffinity(0)))
    devices = spec.devices if isinstance(spec.devices, tuple) else host_devices(os.environ)
    return replica_specs(spec, (), devices)


def _probe(config: RunConfig, client: Client, inputs: Inputs) -> ProbeResult:
    probe = probe_server(
        client, model=config.model, settings=config.request, modes={r.mode for r in inputs.rows},
        cold_mode=config.cold_mode, check_reset=not (inputs.run_dir / MANIFEST_NAME).exists(),
        policy=config.retry,
    )  # fmt: skip
    probe.require()
    probe.check_stated_model(config.cache_model, config.launch_spec)
    return probe


@contextmanager
def probing_others(
    config: RunConfig, clients: list[Client], inputs: Inputs
) -> Iterator[list[Future[ProbeResult]]]:
    """The other replicas' probes, started at once while replica 0's session is prepared (its probe, plan and
    manifest); none on one server, nor for a routing endpoint's ranks, probed one after the other once replica
    0's is done (a probe's cache reset empties every rank)."""
    if dp_ranks(config) > 1 or len(clients) < 2:
        yield []
        return
    with ThreadPoolExecutor(max_workers=len(clients) - 1) as pool:
        yield [pool.submit(_probe, config, c, inputs) for c in clients[1:]]


def probe_replicas(
    session: RunSession,
    clients: list[Client],
    inputs: Inputs,
    early: Sequence[Future[ProbeResult]] = (),
) -> list[Replica]:
    """Replica 0 is the session's (already probed); the others are probed (in parallel, or `early`: started
    beside replica 0's) and compared with it, one that differs refused with the difference named (the lifecycle's
    probe step, eval/run/lifecycle.probe_lanes)."""
    config = session.config
    urls = config.topology.lane_urls
    out = [Replica(0, urls[0], clients[0], session.probe)]
    if early:
        probes = [f.result() for f in early]
    else:  # the others at once; a routing endpoint's ranks one after the other (a reset empties all)
        workers = 1 if dp_ranks(config) > 1 else max(1, len(clients) - 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            probes = list(pool.map(lambda c: _probe(config, c, inputs), clients[1:]))
    for i, (client, probe) in enumerate(zip(clients[1:], probes, strict=True), start=1):
        diffs = replica_differences(session.probe, probe)
        if diffs:
            raise ConfigError(
                f"replica {i} ({safe_url(urls[i])}) differs from replica 0 "
                f"({safe_url(urls[0])}): {'; '.join(diffs)}; every replica must serve the same"
            )
        out.append(Replica(i, urls[i], client, probe))
    return out


def _same_servers(session: RunSession, replicas: list[Replica]) -> list[bool]:
    last = session.manifest.sessions[-1].replicas if session.manifest.sessions else None
    before = {r.replica: r.server_process_start_time for r in last or []}
    return [
        before.get(r.index) is not None and before.get(r.index) == r.probe.process_start_time
        for r in replicas
    ]


def replica_lanes(
    session: RunSession, replicas: list[Replica], started: list[dict[str, Any]], pinned: bool = False
) -> Lanes:
    """A prepared session's lanes on its probed replicas (the lifecycle's start step,
    eval/run/lifecycle.start_session): its units placed (`place_units`) and what is left of them chosen, its
    session line started with every replica noted. Each lane's context stamps its records with its replica (and
    on a routing endpoint checks the pin); the session ends with every replica's counters (`merged_context`).
    `pinned` (`lbeval ab`, whose pairs run on replica i of both sides): every unit on its placed lane; else
    (`lbeval run`) a unit begun in an earlier session on the replica it began on (`where_units_began`) and a
    fresh timing repetition or scenario unit on any lane (nothing it needs is on a server)."""
    rows = session.rows
    lanes = place_units(session.units, rows, len(replicas))
    if not pinned:
        lanes.update(where_units_began(session.units, rows, session.slim, len(replicas)))
    session.resume_on(lambda u: lanes.get(unit_id(u), 0), _same_servers(session, replicas))
    session.start(started[0] if started else None)
    _note_replicas(session, replicas, started[1:])
    begun = {unit_of(r) for r in session.slim}

    def lane_of(unit: Unit) -> int | None:
        row = rows[unit.row_index]
        fresh = UnitKey(row.dataset, row.id, unit.kind, unit.repetition) not in begun
        return None if fresh and movable(unit) and not pinned else lanes[unit_id(unit)]

    return Lanes(
        lambda emit: list(_contexts(session, replicas, emit)),
        lane_of,
        lambda ctxs: merged_context(session, ctxs),
        lambda unit: unit_cost(unit, rows),
    )


def _note_replicas(session: RunSession, replicas: list[Replica], more: list[dict[str, Any]]) -> None:
    """The session line's `replicas` (never a URL's credentials; a routing endpoint's ranks with each one's pin
    header, the URLs being the same, and `dp_ranks`); the other started servers in servers.jsonl."""
    routing = dp_ranks(session.config) > 1
    session.note_replicas(
        [
            ReplicaEntry(
                r.index, safe_url(r.base_url), r.probe.version, r.probe.process_start_time,
                pin=rank_headers(r.index) if routing else None,
            )
            for r in replicas
        ],
        dp_ranks=len(replicas) if routing else None,
    )  # fmt: skip
    for server in more:
        append_server_record(session.run_dir, server)


def _contexts(
    session: RunSession, replicas: list[Replica], emit: Callable[[RequestRecord, bool], None]
) -> list[ReplicaContext]:
    seq = SendOrder(max((r.seq for r in session.slim), default=-1) + 1)
    routing = dp_ranks(session.config) > 1
    out: list[ReplicaContext] = []
    for r in replicas:
        mine: list[ReplicaContext] = []  # this replica's context, once made (the pin check reads its watch)

        def stamped(
            rec: RequestRecord, final: bool, index: int = r.index, mine: list[ReplicaContext] = mine
        ) -> None:
            rec = replace(rec, replica=index)
            emit(pin_checked(mine[0], rec) if routing and mine else rec, final)

        base = replace(session, probe=r.probe).context(r.client, stamped)
        kwargs = {
            f.name: getattr(base, f.name) for f in fields(Context) if f.init and not f.name.startswith("_")
        }
        if routing:
            kwargs["watch"] = EngineWatch(base.watch, r.index)
        mine.append(ReplicaContext(**kwargs, replica=r.index, sequence=seq))
        out.append(mine[0])
    return out


def merged_context(session: RunSession, ctxs: Sequence[Context]) -> Context | None:
    """Replica 0's context carrying every replica's counters; each replica's last process start time noted."""
    if not ctxs:
        return None
    total: dict[str, int] = {}
    for ctx in ctxs:
        for name, n in ctx.counters.items():
            total[name] = total.get(name, 0) + n
    session.note_replica_starts([ctx.watch.start_time for ctx in ctxs])
    ctxs[0].counters = total
    return ctxs[0]


# --- a routing endpoint: N data-parallel ranks behind one URL (vLLM internal load balancing) -------------------


def rank_headers(rank: int) -> dict[str, str]:
    """What pins a request to data-parallel rank `rank` (vLLM reads the header case-insensitively)."""
    return {DP_RANK_HEADER: str(rank)}


def refuse_reset_on_ranks(config: RunConfig) -> None:
    """A routing endpoint is one URL; a cache reset there empties every rank's cache, the other ranks' warm
    units' too."""
    ranks = dp_ranks(config)
    if ranks > 1 and config.cold_mode == "reset":
        raise ConfigError(
            f"--dp-ranks {ranks}: a cache reset empties every rank's cache while the others run; "
            "use --cold salt (cache_salt) on a routing endpoint"
        )


def require_engines(config: RunConfig, client: Client, metrics: bool) -> None:
    """A routing endpoint's /metrics must show an engine per rank (the `engine` label 0..N-1): else the pins
    cannot be verified (not a data-parallel server, or fewer ranks than --dp-ranks). Without /metrics there is
    nothing to check (the cached-token counts still verify every warm request)."""
    ranks = dp_ranks(config)
    if ranks <= 1 or not metrics:
        return
    try:
        found = engine_names(parse_metrics(client.metrics_text()))
    except (RequestFailed, ValueError):
        return
    missing = [str(r) for r in range(ranks) if str(r) not in found]
    if missing:
        raise ConfigError(
            f"--dp-ranks {ranks}: {safe_url(config.base_url)} /metrics shows engine(s) {found or 'none'}, not "
            f"{', '.join(missing)}; give the server's data-parallel size (vLLM --data-parallel-size)"
        )


class RankLedger(SendLedger):
    """One rank's view of the session's send ledger: what it sends still moves the shared marks (every watch
    sees it), but its answers are counted apart, since its engine's finished counter counts only them."""

    def __init__(self, shared: SendLedger, rank: int) -> None:
        super().__init__()
        self.shared = shared
        self.rank = rank

    def begin(self) -> None:
        self.shared.begin()

    def end(self) -> None:
        self.shared.end()

    def mark(self) -> int | None:
        return self.shared.mark()

    def answer(self, root: str) -> None:
        self.shared.answer(f"{root} rank {self.rank}")

    def answered(self, root: str) -> int:
        return self.shared.answered(f"{root} rank {self.rank}")


def replica_clients(
    config: RunConfig, urls: Sequence[str], ledger: SendLedger, own: bool = False
) -> list[Client]:
    """One Client per replica URL on the session's send ledger (what `lbeval run` and `lbeval ab` both open;
    the caller enters each); a routing endpoint's rank r: its pin header on every request, its own ledger
    view. `own` (`lbeval run`, whose replicas are distinct servers: `refuse_repeated_endpoints`): replica 0 on
    `ledger`, every other replica on a ledger of its own, so a request to one replica does not stop another's
    ServerWatch from reusing its settled scrape (`lbeval ab` keeps one ledger: its two sides may be one server)."""
    if dp_ranks(config) <= 1:
        ledgers = [ledger] + [SendLedger() if own else ledger for _ in urls[1:]]
        key = api_key(config)
        return [Client(u, key, config.timeout_s, ledger=led) for u, led in zip(urls, ledgers, strict=True)]
    key = api_key(config)
    return [
        Client(u, key, config.timeout_s, ledger=RankLedger(ledger, r), extra_headers=rank_headers(r))
        for r, u in enumerate(urls)
    ]


@dataclass(frozen=True)
class EngineSnapshot(Snapshot):
    """One engine's view of a scrape (`engine_view`), with the whole scrape it came from."""

    whole: Snapshot = field(default_factory=Snapshot)


class EngineWatch(ServerWatch):
    """A replica's ServerWatch on a routing endpoint: every scrape seen as its engine's (the series labelled
    `engine="<rank>"`), so restarts, settling and per-request deltas are that engine's. The last request's
    window (its before and after, whole scrapes kept) is left for the pin check."""

    def __init__(self, base: ServerWatch, rank: int) -> None:
        super().__init__(
            base.client,
            base.metrics,
            base.start_time,
            None,
            base.wait_s,
            base.polls_s,
            None,
            base.client.ledger,
        )
        self.engine = str(rank)
        self.window: tuple[EngineSnapshot | None, EngineSnapshot | None] | None = None
        snap = self.scrape()  # the engine's own finished count, not the sum over engines the probe saw
        self.finished = snap.counter(FINISHED_COUNTER) if snap is not None else None

    def scrape(self) -> EngineSnapshot | None:
        whole = super().scrape()
        return None if whole is None else EngineSnapshot(engine_view(whole, self.engine).samples, whole)

    def before(self) -> Snapshot | None:
        snap = super().before()
        self.window = (snap if isinstance(snap, EngineSnapshot) else None, None)
        return snap

    def after(
        self, before: Snapshot | None, answered: bool, keep: bool = True, requests: int = 1
    ) -> Snapshot | None:
        snap = super().after(before, answered, keep, requests)
        start = self.window[0] if self.window is not None else None
        # a scenario batch's window is the batch's, not one request's: the pin check has nothing to read
        end = snap if isinstance(snap, EngineSnapshot) else None
        self.window = (start, end) if requests == 1 else None
        return snap

    def check(self, refused: bool = False) -> int:
        self.window = None  # a request sent without a window of its own (a scenario batch): nothing to check
        return super().check(refused)

    def take_window(self) -> tuple[Snapshot, Snapshot] | None:
        """The last request's (before, after) whole scrapes, once; None when it had no window."""
        window, self.window = self.window, None
        if window is None or window[0] is None or window[1] is None:
            return None
        return window[0].whole, window[1].whole


def pin_finding(rank: int, before: Snapshot, after: Snapshot, prompt_tokens: int | None) -> str | None:
    """Why a request pinned to `rank` was answered by another engine, from two whole scrapes around it (None:
    its engine counted it, or the scrapes cannot tell). At concurrency 1 per rank with the pins honoured,
    engine `rank` counts this request alone: one finished request and its prompt's prefix-cache queries.
    Misrouted: it did not (no finished request, or other queries), and another engine did (a finished request,
    or, when ours counted someone else's, exactly this prompt's queries)."""
    finished = engine_deltas(before, after, FINISHED_COUNTER)
    queries = engine_deltas(before, after, REQUEST_COUNTERS["prefix_cache_queries"])
    own = str(rank)
    if own not in finished:
        return None  # no engine-labelled counters: nothing to check against
    mine_q = queries.get(own)
    counted = finished[own] >= 1 and (prompt_tokens is None or mine_q is None or mine_q == prompt_tokens)
    if counted:
        return None
    others = [e for e, d in finished.items() if e != own and d > 0]
    if finished[own] >= 1:  # ours counted a request, not this prompt: did this prompt land elsewhere?
        others = [e for e in others if queries.get(e) == prompt_tokens]
    if not others:
        return None
    q = "" if mine_q is None else f" and {mine_q:g} prefix-cache queries"
    size = "" if prompt_tokens is None else f" (this prompt: {prompt_tokens} tokens)"
    return (
        f"answered by another engine than the one it was pinned to ({DP_RANK_HEADER}: {rank}): engine {rank} "
        f"counted {finished[own]:g} finished requests{q}{size}, engine {', '.join(others)} moved; "
        "the router ignored the pin"
    )


def pin_checked(ctx: ReplicaContext, rec: RequestRecord) -> RequestRecord:
    """A routing endpoint's record after the pin check: `invalid`, with the reason, when another engine
    answered it (counted as `misrouted`); as it was otherwise, or when its window cannot tell."""
    watch = ctx.watch
    window = watch.take_window() if isinstance(watch, EngineWatch) else None
    if window is None or rec.status == "error" or rec.usage is None:
        return rec
    reason = pin_finding(ctx.replica, window[0], window[1], rec.usage.prompt_tokens)
    if reason is None:
        return rec
    ctx.count(MISROUTED)
    return replace(rec, status="invalid", error=reason if rec.error is None else f"{reason}; {rec.error}")
