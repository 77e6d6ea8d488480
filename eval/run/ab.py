"""`lbeval ab`: an interleaved A/B session on two live servers, one run folder per side plus the pairing.

    execute_ab(AbConfig(a=RunConfig(...), b=RunConfig(...), seed=0)) -> (run_dir_a, run_dir_b)

Every unit of the plan (eval/run/passes.plan_units: main cold -> warm -> repeat -> controls, timing r:
timing_cold r -> timing_warm r) is a pair: the unit on one side, then the same unit on the other, the two
adjacent in time; a unit is never split (each server's own cold -> warm stays back to back). The order of a
pair is drawn per input in blocks of two by a local generator seeded with `seed`: pair 2j of an input is AB or
BA at random, pair 2j+1 the opposite (randomized ABBA), so each input's pairs are balanced up to one; the inputs
run in a seeded random order (`session_order`), each input's units in plan order. Both depend only on the seed
and the plan, never on what is left to run.

Both runs are written exactly as `lbeval run` writes them (the runner's probe, manifest, sessions, record
writer and resume), under both run locks; each run folder also gets the pairing (eval/records/pairing.py).
Resume: a unit complete on both sides is skipped; complete on one side only, the other side is re-run alone
and its pair line says `rerun` (not adjacent in time: left out of the paired statistics and counted).
A fault on one side is that side's error record; the pair is incomplete. A/A: both sides may be one server.
"""

from __future__ import annotations

import random
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from tqdm import tqdm

from eval.atomic import WriteFailed
from eval.errors import ConfigError, LbevalError
from eval.records.final import select_final
from eval.records.pairing import ORDERS, PairRecord, PairSide, append_pair, read_pairs
from eval.records.run_folder import RECORDS_NAME, RecordWriter, append_server_record, run_lock
from eval.records.types import RequestRecord
from eval.records.vocabulary import choice_of
from eval.run.client import Client
from eval.run.passes import Context, GroupState, Unit, run_unit
from eval.run.probe import ProbeResult
from eval.run.runner import (
    Progress,
    RunConfig,
    RunIncomplete,
    Session,
    _api_key,
    _context,
    _emit_to,
    _end,
    _prepare,
    _read_inputs,
    _start_session,
    default_run_id,
)
from eval.serve.process import sigterm_as_interrupt

SIDES = ("a", "b")
UnitId = tuple[int, str, int]  # (row index, unit kind, repetition)


@dataclass(frozen=True)
class AbConfig:
    a: RunConfig
    b: RunConfig
    seed: int = 0
    quiet: bool = False  # no progress bar over the pairs


def ab_run_ids(config: AbConfig, sha: str) -> tuple[str, str]:
    """Default run ids: ab-<sha12> (distinct from `lbeval run`'s); -a / -b when both sides share a variant."""
    base = f"ab-{default_run_id(sha)[4:]}"
    a = config.a.run_id or (f"{base}-a" if config.a.variant == config.b.variant else base)
    b = config.b.run_id or (f"{base}-b" if config.a.variant == config.b.variant else base)
    return a, b


def pair_orders(units: list[Unit], seed: int) -> dict[UnitId, str]:
    """The order of every unit's pair (see the module docstring): per input, blocks of two, AB/BA drawn."""
    rng = random.Random(seed)
    out: dict[UnitId, str] = {}
    count: dict[int, int] = {}
    last: dict[int, int] = {}  # row -> index in ORDERS of its last pair's order
    for unit in units:
        j = count.get(unit.row_index, 0)
        count[unit.row_index] = j + 1
        k = rng.randrange(2) if j % 2 == 0 else 1 - last[unit.row_index]
        last[unit.row_index] = k
        out[(unit.row_index, unit.kind, unit.repetition)] = ORDERS[k]
    return out


def session_order(units: list[Unit], seed: int) -> list[Unit]:
    """The units in the session's send order: the inputs in an order shuffled by a generator seeded with
    `seed + 1` (so input length is not confounded with session time in the drift check), each input's units in
    plan order (main, then timing 0..R-1)."""
    rows = sorted({u.row_index for u in units})
    random.Random(seed + 1).shuffle(rows)
    rank = {row: k for k, row in enumerate(rows)}
    return sorted(units, key=lambda u: rank[u.row_index])  # stable: plan order within an input


def _validate(config: AbConfig) -> None:
    for side in (config.a, config.b):
        if side.concurrency != 1:
            raise ConfigError("lbeval ab sends one request at a time (--concurrency 1)")
        if set(side.scenarios.scenarios) != {"cache"}:
            raise ConfigError("lbeval ab interleaves the cache scenario's passes only (no --scenarios yet)")
    if config.a.passes != config.b.passes or config.a.timing_reps != config.b.timing_reps:
        raise ConfigError("both sides of lbeval ab need the same passes and timing repetitions")


@dataclass
class _Side:
    name: str
    session: Session
    probe: ProbeResult
    ctx: Context
    progress: Progress
    todo: dict[UnitId, tuple[Unit, GroupState, int]]
    seqs: list[int]


def execute_ab(
    config: AbConfig,
    *,
    servers: tuple[dict[str, object] | None, dict[str, object] | None] = (None, None),
    between: Callable[[str, UnitId], None] | None = None,
) -> tuple[Path, Path]:
    """Run (or resume) the interleaved session; returns both run directories. `between(side, unit)` is called
    after each side's unit (tests use it to interrupt or to change a fake server's speed)."""
    _validate(config)
    try:
        with ExitStack() as stack:
            stack.enter_context(sigterm_as_interrupt())
            ca = stack.enter_context(Client(config.a.base_url, _api_key(config.a), config.a.timeout_s))
            cb = stack.enter_context(Client(config.b.base_url, _api_key(config.b), config.b.timeout_s))
            sha = _read_inputs(config.a).sha256
            id_a, id_b = ab_run_ids(config, sha)
            cfg_a, cfg_b = replace(config.a, run_id=id_a), replace(config.b, run_id=id_b)
            in_a, in_b = _read_inputs(cfg_a), _read_inputs(cfg_b)
            if in_a.run_dir == in_b.run_dir:
                raise ConfigError(f"both sides would write {in_a.run_dir}: give different run ids")
            stack.enter_context(run_lock(in_a.run_dir))
            stack.enter_context(run_lock(in_b.run_dir))
            sa, pa = _prepare(cfg_a, ca, in_a)
            sb, pb = _prepare(cfg_b, cb, in_b)
            if [(u.row_index, u.kind, u.repetition) for u in sa.units] != [
                (u.row_index, u.kind, u.repetition) for u in sb.units
            ]:
                raise ConfigError("the two servers' plans differ (CoT inputs or passes); cannot pair them")
            for session, probe, server in ((sa, pa, servers[0]), (sb, pb, servers[1])):
                _start_session(session, probe)
                if server is not None:
                    append_server_record(session.run_dir, server)
            _interleave(config, sa, pa, ca, sb, pb, cb, stack, between)
    except WriteFailed as exc:
        raise RunIncomplete(f"{exc}; the runs are incomplete: re-run the same command to resume") from None
    return in_a.run_dir, in_b.run_dir


def _side(name: str, session: Session, probe: ProbeResult, client: Client, stack: ExitStack) -> _Side:
    writer = stack.enter_context(RecordWriter(session.run_dir / RECORDS_NAME))
    progress = Progress(session.units, _done(session), True)
    seqs: list[int] = []
    emit = _emit_to(session, writer, progress)

    def emit_seq(rec: RequestRecord, final: bool) -> None:
        emit(rec, final)
        seqs.append(rec.seq)

    ctx = _context(session, client, probe, emit_seq)
    todo = {(u.row_index, u.kind, u.repetition): (u, gs, i) for u, gs, i in session.todo}
    return _Side(name, session, probe, ctx, progress, todo, seqs)


def _done(session: Session) -> Counter[str]:
    return Counter(choice_of(r.pass_name) for r in select_final(session.slim).final.values())


def _run_name(session: Session) -> str:
    return f"{session.manifest.variant}/{session.manifest.run_id}"


def _repair_pairing(a: Path, b: Path) -> None:
    """A kill between the two appends of a pair line left one file a line short: append it there."""
    pa, pb = read_pairs(a), read_pairs(b)
    longer, shorter, short_dir = (pa, pb, b) if len(pa) >= len(pb) else (pb, pa, a)
    if len(longer) == len(shorter) + 1 and longer[: len(shorter)] == shorter:
        append_pair(short_dir, longer[-1])


def _ab_id(run_dir: Path) -> str:
    pairs = read_pairs(run_dir)
    return pairs[0].ab_id if pairs else secrets.token_hex(6)


def _interleave(
    config: AbConfig,
    sa: Session,
    pa: ProbeResult,
    ca: Client,
    sb: Session,
    pb: ProbeResult,
    cb: Client,
    stack: ExitStack,
    between: Callable[[str, UnitId], None] | None,
) -> None:
    sides: list[_Side] = []
    try:
        sides.append(_side("a", sa, pa, ca, stack))
        sides.append(_side("b", sb, pb, cb, stack))
        ok = _pairs(config, sides[0], sides[1], between)  # side name -> all its units complete
    except BaseException as exc:
        outcome = f"stopped: {exc}" if isinstance(exc, LbevalError) else "interrupted"
        for s, p in ((sa, pa), (sb, pb)):
            ctx = [x.ctx for x in sides if x.session is s]
            _end(s, p, ctx, outcome, exc)
        raise
    for side in sides:
        _end(side.session, side.probe, [side.ctx], "complete" if ok[side.name] else "incomplete", None)


def _pairs(
    config: AbConfig, a: _Side, b: _Side, between: Callable[[str, UnitId], None] | None
) -> dict[str, bool]:
    orders = pair_orders(a.session.units, config.seed)
    _repair_pairing(a.session.run_dir, b.session.run_dir)
    ab_id = _ab_id(a.session.run_dir)
    ok = {"a": True, "b": True}
    left = sum(
        1 for u in a.session.units if any((u.row_index, u.kind, u.repetition) in s.todo for s in (a, b))
    )
    bar = tqdm(
        total=len(a.session.units), initial=len(a.session.units) - left, desc="pairs   ", disable=config.quiet,
        file=sys.stderr, dynamic_ncols=True,
    )  # fmt: skip
    with bar:
        for unit in session_order(a.session.units, config.seed):
            if not any((unit.row_index, unit.kind, unit.repetition) in s.todo for s in (a, b)):
                continue  # complete on both sides (an earlier session)
            if not _pair(a, b, unit, orders, ab_id, ok, between):
                return {"a": False, "b": False}
            bar.update(1)
    return ok


def _pair(
    a: _Side,
    b: _Side,
    unit: Unit,
    orders: dict[UnitId, str],
    ab_id: str,
    ok: dict[str, bool],
    between: Callable[[str, UnitId], None] | None,
) -> bool:
    """Run one unit's pair (the pending sides, in the pair's order) and append its line; False on a stop."""
    rows = a.session.rows
    uid = (unit.row_index, unit.kind, unit.repetition)
    pending = [s for s in (a, b) if uid in s.todo]
    if not pending:
        return True
    order = orders[uid]
    result: dict[str, PairSide] = {}
    for side in (a, b) if order == "AB" else (b, a):
        if side not in pending:
            result[side.name] = PairSide(ran=False, complete=True)
            continue
        _, gs, index = side.todo[uid]
        side.seqs.clear()
        start = time.time()
        done = run_unit(side.ctx, rows[unit.row_index], unit, gs, index)
        result[side.name] = PairSide(True, done, list(side.seqs), start, time.time())
        ok[side.name] = ok[side.name] and done
        if side.ctx.stop.is_set():
            return False
        if between is not None:
            between(side.name, uid)
    row = rows[unit.row_index]
    rerun = pending[0].name if len(pending) == 1 else None
    complete = result["a"].complete and result["b"].complete
    runs = (_run_name(a.session), _run_name(b.session))
    pair = PairRecord(
        ab_id, row.dataset, row.id, unit.kind, unit.repetition, order, result["a"], result["b"], rerun, complete,
        runs,
    )  # fmt: skip
    for side in (a, b):
        append_pair(side.session.run_dir, pair)
    return True
