"""One scheduler: a session's units left, run over its lanes.

    send(session, Lanes(contexts, lane_of, merged))   # lbeval run: one server (one lane) or N replicas (N lanes)

A lane is where one unit sends at a time (or, at --concurrency above 1, its cache units at once): one server,
one replica, or one data-parallel rank of a routing endpoint; each has its own context (Client, ServerWatch).
Every unit runs on one lane: its own (`lane_of`: lane 0 on one server; on replicas an input's main unit on
the input's replica, and a unit resumed on the replica it began on), or, a fresh unit that needs nothing a
server holds (a timing repetition, a scenario unit: `lane_of` None), on whichever lane is free first, the
costliest first (`SharedUnits`), so the lanes end together however far the costs are off. Every lane runs in a
thread of its own, all lanes at once (one lane: in the calling thread):

- a lane's cache units first, at --concurrency (one at a time at 1), its own and then the shared ones, then its
  scenario units one at a time, its own and then the shared ones (a scenario unit owns its lane while it runs);
  at --concurrency 1 the shared cache and scenario units are one queue, the costliest first;
- a unit that spans the lanes (the replicas scenario) runs beside them, its part on each lane in that lane's
  turn (`LaneLock`), up to one per lane at a time;
- the first failure (a 4xx, a full disk, a dead engine) stops every lane (each context's `stop`: a unit stops
  at its next request, a unit not started sends nothing) and is raised once the lanes have stopped; an
  interrupt (Ctrl-C, SIGTERM) stops them and is raised at once, the requests in flight not waited for (a record
  they bring after the session ended is not written: eval/run/session.RunSession.emitter). One lane runs in
  the calling thread, so there an interrupt also stops the request in flight.

`send` is the one lifecycle of a prepared and started session's units: the records file open, the lanes'
contexts made, the units run, and the session ended by `run_to_end` however they end. `run_at_once` is the
threads-and-stops core, which `lbeval ab` also runs its replica pairs' lanes on (eval/run/ab.py).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial

from eval.prepare.inputs import InputRow
from eval.records.run_folder import RECORDS_NAME, RecordWriter
from eval.records.types import RequestRecord
from eval.run.passes import Context, run_unit
from eval.run.progress import Progress
from eval.run.scenarios.execute import run_scenario_unit
from eval.run.scenarios.plan import is_scenario_unit
from eval.run.scenarios.replicas import spans_replicas
from eval.run.session import RunSession, Todo, outcome_of, run_to_end
from eval.run.steps import Unit

Emit = Callable[[RequestRecord, bool], None]
POLL_S = 0.2  # the main thread waits in short steps, so Ctrl-C and SIGTERM reach it


LaneOf = Callable[[Unit], int | None]  # a unit's lane; None: any lane, whichever is free first


def _no_cost(unit: Unit) -> int:
    return 0


@dataclass(frozen=True)
class Lanes:
    """A started session's lanes: each lane's context, made once the records file is open (`contexts`, given
    the session's emitter); each unit's lane (`lane_of`, never asked of a unit that spans the lanes; None: any
    lane); the context the session ends with (`merged`: its counters, from the contexts made; None before one
    was); and a unit's cost, the shared units' order (`cost`: the costliest first)."""

    contexts: Callable[[Emit], list[Context]]
    lane_of: LaneOf
    merged: Callable[[list[Context]], Context | None]
    cost: Callable[[Unit], int] = _no_cost


class SharedUnits:
    """The units any lane may run, in the order given; each is taken once, by the first lane to ask."""

    def __init__(self, todo: Sequence[Todo]) -> None:
        self._todo = deque(todo)
        self._lock = threading.Lock()

    def take(self) -> Todo | None:
        with self._lock:
            return self._todo.popleft() if self._todo else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._todo)


def one_lane(session: RunSession, ctx_of: Callable[[Emit], Context]) -> Lanes:
    """One server: one lane, every unit on it, its context the session's (records not stamped with a replica)."""
    return Lanes(lambda emit: [ctx_of(emit)], lambda _unit: 0, lambda ctxs: ctxs[0] if ctxs else None)


def send(session: RunSession, lanes: Lanes) -> None:
    """Run the session's units left over its lanes; the session's outcome is written however they end."""
    progress = Progress(session.units, session.done_by_pass(), session.config.quiet)
    ctxs: list[Context] = []

    def run() -> list[str]:
        with RecordWriter(session.run_dir / RECORDS_NAME) as writer:
            ctxs.extend(lanes.contexts(session.emitter(writer, progress)))
            ok = run_lanes(
                session.todo, session.rows, session.config.concurrency, ctxs, lanes.lane_of, lanes.cost
            )
            return [outcome_of(ok)]

    run_to_end([session], run, lambda: [lanes.merged(ctxs)], progress.close)


def run_lanes(
    todo: Sequence[Todo],
    rows: Sequence[InputRow],
    concurrency: int,
    ctxs: Sequence[Context],
    lane_of: LaneOf,
    cost: Callable[[Unit], int] = _no_cost,
) -> bool:
    """Every unit left on its lane or on the first lane free (`lane_of` None: the costliest first), all lanes
    at once, and the units that span the lanes beside them (module docstring); True when every unit completed.
    The first failure stops every lane and is raised."""
    mine: list[list[Todo]] = [[] for _ in ctxs]
    free: list[Todo] = []
    for t in todo:
        if not spans_replicas(t[0]):
            lane = lane_of(t[0])
            (free if lane is None else mine[lane]).append(t)
    free.sort(key=lambda t: -cost(t[0]))  # stable: plan order among equal costs
    shared = _shared(free, concurrency)
    turns = [LaneLock() for _ in ctxs]
    jobs: list[Callable[[], bool]] = [
        partial(_run_lane, rows, concurrency, ctx, units, turn, shared)
        for ctx, units, turn in zip(ctxs, mine, turns, strict=True)
    ]
    jobs += [partial(_run_spanning, rows, ctxs, t, turns) for t in todo if spans_replicas(t[0])]
    return all(run_at_once(jobs, ctxs, workers=2 * len(ctxs)))


def _shared(free: Sequence[Todo], concurrency: int) -> tuple[SharedUnits, SharedUnits]:
    """The shared units a lane takes with its cache units and those it takes with its scenario units. One at a
    time (--concurrency 1) a scenario unit owns its lane anyway: one queue, the costliest first, so a long
    scenario unit starts early and the short units fill the lanes around it. Above 1 the cache units run
    together and a scenario unit alone: two queues."""
    if concurrency == 1:
        return SharedUnits(free), SharedUnits(())
    return (
        SharedUnits([t for t in free if not is_scenario_unit(t[0])]),
        SharedUnits([t for t in free if is_scenario_unit(t[0])]),
    )


def run_at_once(
    jobs: Sequence[Callable[[], bool]], ctxs: Sequence[Context], workers: int | None = None
) -> list[bool]:
    """Each job in a thread (`workers` at a time, default one each); their results. The first failure sets
    every context's `stop` and is raised once the running jobs have returned; an interrupt sets them and is
    raised at once (the jobs' requests in flight are not waited for, the jobs not started never start). One
    job (one server: one lane) runs in this thread, so an interrupt stops its request in flight at once."""
    if len(jobs) == 1:
        try:
            return [jobs[0]()]
        except BaseException:
            _stop(ctxs)
            raise
    with ThreadPoolExecutor(max_workers=max(1, workers or len(jobs))) as pool:
        futures = [pool.submit(job) for job in jobs]
        try:
            failed = _first_failure(futures)
        except BaseException:  # Ctrl-C, SIGTERM
            _stop(ctxs)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        if failed is not None:
            _stop(ctxs)
            raise failed
        return [f.result() for f in futures]


def _run_lane(
    rows: Sequence[InputRow],
    concurrency: int,
    ctx: Context,
    todo: list[Todo],
    turn: LaneLock,
    shared: tuple[SharedUnits, SharedUnits],
) -> bool:
    """One lane's units, each in the lane's turn: the cache units at --concurrency (one turn for them all
    above 1), its own and then the shared ones (`shared`: cache, scenario), then its scenario units one at a
    time, its own and then the shared ones (a scenario unit owns its lane while it runs)."""
    cache = [t for t in todo if not is_scenario_unit(t[0])]
    ok = _run_cache_units(rows, concurrency, ctx, cache, turn, shared[0])
    for t in _then_shared([t for t in todo if is_scenario_unit(t[0])], shared[1]):
        if ctx.stop.is_set():
            return False
        with turn:
            ok = run_one(ctx, rows, (t[0], t[1], 0)) and ok
    return ok


def _then_shared(own: Sequence[Todo], shared: SharedUnits) -> Iterator[Todo]:
    """A lane's own units, then shared ones until none is left (each taken when the lane is ready for it)."""
    yield from own
    while (t := shared.take()) is not None:
        yield t


def _run_cache_units(
    rows: Sequence[InputRow],
    concurrency: int,
    ctx: Context,
    todo: list[Todo],
    turn: LaneLock,
    shared: SharedUnits,
) -> bool:
    """A lane's cache units, its own and then shared ones: one after the other, or `concurrency` at once; the
    first unit that fails stops the lane's other units (its `stop` is set before its thread takes another
    unit) and is raised."""
    ok = True
    if concurrency == 1:
        for t in _then_shared(todo, shared):
            if ctx.stop.is_set():
                return False
            with turn:
                ok = run_one(ctx, rows, t) and ok
        return ok
    if not todo and not len(shared):
        return ok
    with turn, ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(_stopping_on_failure, ctx, rows, t) for t in todo]
        futures += [pool.submit(_taking_shared, ctx, rows, shared) for _ in range(concurrency)]
        try:
            failed = _first_failure(futures, ctx.stop)
        except BaseException:  # Ctrl-C, SIGTERM (one lane: this is the main thread)
            ctx.stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        if failed is not None:
            raise failed
    return all(not f.cancelled() and f.result() for f in futures)


def _run_spanning(
    rows: Sequence[InputRow], ctxs: Sequence[Context], todo: Todo, turns: Sequence[LaneLock]
) -> bool:
    """A unit whose requests go to every lane (the replicas scenario), its part on each in that lane's turn."""
    if ctxs[0].stop.is_set():
        return False
    return run_one(ctxs[0], rows, todo, ctxs, turns)


def run_one(
    ctx: Context,
    rows: Sequence[InputRow],
    todo: Todo,
    peers: Sequence[Context] = (),
    turns: Sequence[LaneLock] = (),
) -> bool:
    """One unit on a lane's context, the one place a unit is run (the lanes here, `lbeval ab`'s pairs): a
    scenario unit (its batches and primes; a spanning unit's parts on `peers`, each in its `turns`), or a cache
    unit from its first step left; True when it completed."""
    unit, gs, index = todo
    if is_scenario_unit(unit):
        return run_scenario_unit(ctx, rows, unit, gs, peers, turns)
    return run_unit(ctx, rows[unit.row_index], unit, gs, index)


def _first_failure(
    futures: Sequence[Future[bool]], stop: threading.Event | None = None
) -> BaseException | None:
    """Wait (in short steps) until every future is done or one has failed (its exception, the futures not
    started cancelled); when `stop` is set first, the futures not started are cancelled and the running ones
    (which see the stop themselves) waited for."""
    while True:
        done, pending = wait(futures, timeout=POLL_S, return_when=FIRST_EXCEPTION)
        failed = next((f.exception() for f in futures if f in done and _failed(f)), None)
        if failed is not None or (stop is not None and stop.is_set()):
            for f in pending:
                f.cancel()
            stop = None
        if failed is not None or not pending:
            return failed


def _failed(future: Future[bool]) -> bool:
    return not future.cancelled() and future.exception() is not None


def _stopping_on_failure(ctx: Context, rows: Sequence[InputRow], todo: Todo) -> bool:
    """`run_one`; a unit that fails stops its lane at once, in the thread that ran it, before that thread takes
    the lane's next unit."""
    try:
        return run_one(ctx, rows, todo)
    except BaseException:
        ctx.stop.set()
        raise


def _taking_shared(ctx: Context, rows: Sequence[InputRow], shared: SharedUnits) -> bool:
    """One of a lane's --concurrency workers, once the lane's own units have all started: shared units, one at
    a time, until none is left or the lane stops."""
    ok = True
    while not ctx.stop.is_set() and (t := shared.take()) is not None:
        ok = _stopping_on_failure(ctx, rows, t) and ok
    return ok and not ctx.stop.is_set()


def _stop(ctxs: Sequence[Context]) -> None:
    for ctx in ctxs:
        ctx.stop.set()


class LaneLock:
    """A lane's turn: one unit at a time sends to it (a lane's unit, or a spanning unit's part on it), in the
    order they asked, so a lane's next unit never overtakes a spanning unit waiting for the lane."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._asked = 0
        self._served = 0

    def acquire(self) -> bool:
        with self._cond:
            ticket = self._asked
            self._asked += 1
            self._cond.wait_for(lambda: self._served == ticket)
        return True

    def release(self) -> None:
        with self._cond:
            self._served += 1
            self._cond.notify_all()

    def __enter__(self) -> LaneLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
