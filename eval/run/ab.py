"""`lbeval ab`: an interleaved A/B session on two live servers, one run folder per side plus the pairing.

    execute_ab(AbConfig(a=RunConfig(...), b=RunConfig(...), seed=0)) -> (run_dir_a, run_dir_b)

Every unit of the plan (eval/run/steps.plan_units: main cold -> warm -> repeat -> controls, timing r:
timing_cold r -> timing_warm r; then the scenario units of eval/run/scenarios/plan.py: one per input and
scenario, batch, hitlen, repeats, traffic) is a pair: the unit on one side, then the same unit on the other, the
two adjacent in time; a unit is never split (each server's own cold -> warm stays back to back, a batch's
concurrent requests all go to one server, a hitlen prime and its primed request stay adjacent on one server;
only a batch's own requests run at once, everything else one at a time). Both sides must plan the very same
units, steps included. The order of a pair is drawn per input in blocks of two by a local generator seeded
with `seed`: pair 2j of an input is AB or BA at random, pair 2j+1 the opposite (randomized ABBA), so each input's
pairs are balanced up to one; the inputs run in a seeded random order (`session_order`), each input's units in
plan order (its cache units, then its scenario units). Both depend only on the seed and the plan, never on
what is left to run.

Both runs are written exactly as `lbeval run` writes them (one eval/run/session.RunSession per side: probe,
manifest, sessions, record writer and resume), under both run locks, taken before a side's managed server
starts; one send ledger serves both sides; each run folder also gets the pairing (eval/records/ab_pairs.py).
Resume: a unit complete on both sides is skipped; complete on one side only, the other side is re-run alone
and its pair line says `rerun` (not adjacent in time: left out of the paired statistics and counted).
A fault on one side is that side's error record; the pair is incomplete. A side whose server no longer answers
at all after a unit failed (its engine died: `stop_if_dead`) stops the session on both sides; the resume says
so first (`say_last_stop`). A session that fails before its run folders hold anything but their locks (a side
dead at the probe) removes the folders it created. A/A: both sides may be one server.

Replicas (eval/run/replicas.py): both sides with the same N >= 2 replicas (`--base-url-a` / `-b` repeated, or
launch specs with `replicas = N`). Each input is assigned to replica i (the same seeded, balanced assignment on
both sides: same inputs, same N), and its pairs run on replica i of A and replica i of B, in the pair's order,
still adjacent in time on that replica pair; the N replica pairs run at once, one pair each at a time. The
replicas scenario's units (which send to every replica) are paired after that, one at a time, each side's unit
on all its replicas. `--stop-when-settled` and `--timing-until` take one endpoint per side.

Time to verdict (`AbConfig.stop_check`, `lbeval ab --stop-when-settled`): after each input whose every unit has
been sent on both sides (complete or not: a failure counts), the check is asked (eval/gate/settle.py, passed in
by the command layer); when it answers settled before the last input, the stop record (eval/records/stop.py)
is written into both run folders and the session ends with the outcome "stopped early: ...". A session starts
by removing an earlier stop record: re-running without the check continues to the full run. With
`--timing-until` too, the check is also asked after each added timing round, every input run, with the
rounds' per-pair ratios: a settled answer ends the adaptive phase ("settled", eval/run/adaptive.py).
"""

from __future__ import annotations

import contextlib
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from eval.atomic import WriteFailed
from eval.errors import ConfigError, LbevalError
from eval.prepare.inputs import InputRow
from eval.records.ab_pairs import (
    ORDERS,
    PairRecord,
    PairSide,
    append_pair,
    last_pairs,
    pairing_mark,
    read_pairs,
)
from eval.records.manifest_parts import AbEntry
from eval.records.run_folder import LOCK_NAME, RECORDS_NAME, RecordWriter, run_lock
from eval.records.stop import STOP_SCHEMA_VERSION, Settlement, StopRecord, remove_stop, write_stop
from eval.records.types import RequestRecord
from eval.redact import safe_url
from eval.run.adaptive import (
    AdaptiveRecord,
    Hooks,
    Look,
    PairRatios,
    TimingTarget,
    added_units,
    extend_timing,
    input_ratios,
    pair_ratios,
    reps_recorded,
    write_adaptive,
)
from eval.run.config import RunConfig, RunIncomplete, default_run_id
from eval.run.ledger import SendLedger
from eval.run.lifecycle import Prepared, prepare_session, probe_lanes, start_session
from eval.run.passes import Context, GroupState, resume_point
from eval.run.probe import ProbeResult
from eval.run.progress import Progress
from eval.run.replicas import (
    refuse_ranks_in_ab,
    replica_clients,
    serving_replicas,
)
from eval.run.reply import RequestFailed
from eval.run.scenarios.replicas import spans_replicas
from eval.run.scheduler import Lanes, run_at_once, run_one
from eval.run.session import (
    Inputs,
    RunSession,
    open_client,
    outcome_of,
    read_inputs_of,
    run_secrets,
    run_to_end,
    serving,
)
from eval.run.steps import Unit
from eval.serve.process import sigterm_as_interrupt
from eval.terminal import echo_err, progress_bar

SIDES = ("a", "b")
UnitId = tuple[int, str, int]  # (row index, unit kind, repetition)


@dataclass(frozen=True)
class StopQuery:
    """What the stop check is asked after an input: both run folders and the inputs sent so far."""

    run_dirs: tuple[Path, Path]
    inputs_run: tuple[tuple[str, str], ...]  # (dataset, example_id), in session order
    inputs_planned: int
    adaptive: PairRatios | None = None  # the adaptive phase's per-pair ratios (every input has run)


StopCheck = Callable[[StopQuery], Settlement]


@dataclass(frozen=True)
class AbConfig:
    a: RunConfig
    b: RunConfig
    seed: int = 0
    quiet: bool = False  # no progress bar over the pairs
    stop_check: StopCheck | None = None  # --stop-when-settled (module docstring)
    timing_target: TimingTarget | None = None  # --timing-until / --timing-budget (eval/run/adaptive.py)


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
    if config.a.passes != config.b.passes or config.a.timing_reps != config.b.timing_reps:
        raise ConfigError("both sides of lbeval ab need the same passes and timing repetitions")
    if config.a.scenarios != config.b.scenarios:
        raise ConfigError("both sides of lbeval ab need the same scenarios and scenario options")
    refuse_ranks_in_ab(config.a, "A")
    refuse_ranks_in_ab(config.b, "B")
    n_a, n_b = config.a.topology.lanes, config.b.topology.lanes  # sides x lanes: the same lanes
    if n_a != n_b:
        raise ConfigError(f"both sides of lbeval ab need the same number of replicas (A {n_a}, B {n_b})")
    if n_a > 1 and (config.stop_check is not None or config.timing_target is not None):
        raise ConfigError("--stop-when-settled and --timing-until take one endpoint per side (no replicas)")


def _same_plans(a: list[Unit], b: list[Unit], rows: list[InputRow]) -> None:
    """Both sides must plan the very same units, steps included (a hitlen unit's lengths follow each server's
    block size and chunked-prefill budget): the first difference is named."""
    for ua, ub in zip(a, b, strict=False):
        if ua != ub:
            row = rows[ua.row_index]
            hint = " (hitlen: give both the same --hit-lengths)" if ua.kind == "hitlen" else ""
            raise ConfigError(
                f"the two servers' plans differ at {row.dataset}/{row.id} {ua.kind} {ua.repetition}{hint}; "
                "cannot pair them"
            )
    if len(a) != len(b):
        raise ConfigError(f"the two servers' plans differ: {len(a)} vs {len(b)} units; cannot pair them")


@dataclass
class _Side:
    name: str
    session: RunSession
    probe: ProbeResult
    ctx: Context
    progress: Progress
    todo: dict[UnitId, tuple[Unit, GroupState, int]]
    seqs: dict[int, list[int]]  # replica -> the send orders of its records (of the pair running there)
    replicas: tuple[int, ...] = (0,)  # the replicas this side's pairs send to
    peers: Sequence[Context] = ()  # every replica's context (a unit that spans the replicas)
    lock: threading.Lock | None = None  # the pairing's appends, when pairs run at once


def execute_ab(
    config: AbConfig,
    *,
    between: Callable[[str, UnitId], None] | None = None,
    ledger: SendLedger | None = None,
) -> tuple[Path, Path]:
    """Run (or resume) the interleaved session; returns both run directories. Both run folders are locked
    before a side's managed server (`Topology.spec`) starts; `ledger`: both sides' (default: a new one).
    `between(side, unit)` is called after each side's unit (tests use it to interrupt or to change a fake
    server's speed)."""
    _validate(config)
    shared = ledger or SendLedger()
    try:
        with ExitStack() as stack:
            stack.enter_context(sigterm_as_interrupt())
            sha = read_inputs_of(config.a).sha256
            id_a, id_b = ab_run_ids(config, sha)
            cfg_a, cfg_b = replace(config.a, run_id=id_a), replace(config.b, run_id=id_b)
            in_a, in_b = read_inputs_of(cfg_a), read_inputs_of(cfg_b)
            if in_a.run_dir == in_b.run_dir:
                raise ConfigError(f"both sides would write {in_a.run_dir}: give different run ids")
            created = _new_folders((in_a.run_dir, in_b.run_dir))
            stack.enter_context(run_lock(in_a.run_dir))
            stack.enter_context(run_lock(in_b.run_dir))
            # a side dead at the probe (or any failure before a run folder holds anything) leaves no folder
            stack.enter_context(_removed_if_unused(created))
            _same_partners(
                (in_a.run_dir, in_b.run_dir), (f"{cfg_a.variant}/{id_a}", f"{cfg_b.variant}/{id_b}")
            )
            if cfg_a.topology.replicated:
                _execute_replicas(config, (cfg_a, cfg_b), (in_a, in_b), shared, stack, between)
                return in_a.run_dir, in_b.run_dir
            url_a, server_a = stack.enter_context(serving(cfg_a))
            url_b, server_b = stack.enter_context(serving(cfg_b))
            cfg_a = replace(cfg_a, topology=cfg_a.topology.started((url_a,)))  # a managed server: started
            cfg_b = replace(cfg_b, topology=cfg_b.topology.started((url_b,)))
            ca = stack.enter_context(open_client(cfg_a, shared))
            cb = stack.enter_context(open_client(cfg_b, shared))
            pa = prepare_session(cfg_a, [ca], in_a, [] if server_a is None else [server_a], replicated=False)
            pb = prepare_session(cfg_b, [cb], in_b, [] if server_b is None else [server_b], replicated=False)
            la, lb = _start_sides(config, (pa, pb))
            _interleave(config, pa.session, la, pb.session, lb, stack, between)
    except WriteFailed as exc:
        raise RunIncomplete(f"{exc}; the runs are incomplete: re-run the same command to resume") from None
    return in_a.run_dir, in_b.run_dir


def _start_sides(config: AbConfig, prepared: tuple[Prepared, Prepared]) -> tuple[Lanes, Lanes]:
    """Both sides' sessions, prepared, started through the lifecycle's steps (eval/run/lifecycle.py), each step
    for both sides before the next: the two plans compared, the same session resumed, the last stop said; then
    both sides' other replicas probed and compared; then both started, each unit on its placed replica on both
    sides (`pinned`), and each session line noted as its side's. So any refusal comes before either side's
    session line is written."""
    sa, sb = prepared[0].session, prepared[1].session
    _same_plans(sa.units, sb.units, sa.rows)
    refuse_other_session(config.seed, (sa, sb))
    say_last_stop((sa, sb))
    probed = [probe_lanes(p) for p in prepared]
    lanes = (start_session(probed[0], pinned=True), start_session(probed[1], pinned=True))
    note_session(config.seed, (sa, sb))
    return lanes


def _side(name: str, session: RunSession, lanes: Lanes, stack: ExitStack) -> _Side:
    writer = stack.enter_context(RecordWriter(session.run_dir / RECORDS_NAME))
    progress = Progress(session.units, session.done_by_pass(), True)
    seqs: list[int] = []
    emit = session.emitter(writer, progress)

    def emit_seq(rec: RequestRecord, final: bool) -> None:
        emit(rec, final)
        seqs.append(rec.seq)

    ctx = lanes.contexts(emit_seq)[0]  # one endpoint: one lane
    todo = {(u.row_index, u.kind, u.repetition): (u, gs, i) for u, gs, i in session.todo}
    return _Side(name, session, session.probe, ctx, progress, todo, {0: seqs})


def _run_name(session: RunSession) -> str:
    return f"{session.manifest.variant}/{session.manifest.run_id}"


def _new_folders(run_dirs: tuple[Path, Path]) -> list[Path]:
    """The folders taking the run folders' locks will create (each run folder and its missing parents), deepest
    first."""
    out: list[Path] = []
    for run_dir in run_dirs:
        d = run_dir
        while not d.exists() and d not in out and d != d.parent:
            out.append(d)
            d = d.parent
    return sorted(out, key=lambda d: len(d.parts), reverse=True)


@contextlib.contextmanager
def _removed_if_unused(created: list[Path]) -> Iterator[None]:
    """When the session fails before a run folder this session created holds anything but its lock (a side dead at
    the probe, a plan that cannot be paired), that folder and the parents created for it are removed, the lock
    still held (a process that opened the lock file meanwhile finds it held and is refused)."""
    try:
        yield
    except BaseException:
        for d in created:
            with contextlib.suppress(OSError):
                if {p.name for p in d.iterdir()} <= {LOCK_NAME}:
                    (d / LOCK_NAME).unlink(missing_ok=True)
                    d.rmdir()
        raise


def _same_partners(dirs: tuple[Path, Path], names: tuple[str, str]) -> None:
    """A run folder that already holds a pairing resumes only the session that wrote it, the same runs as side a
    and side b: resumed with another partner (say the default run id of the base side, against a new variant),
    every unit complete on the old side would be re-run alone on the new one, leaving no adjacent pair and one
    pairing file holding two sessions."""
    for d in dirs:
        pairs = read_pairs(d)
        if pairs and pairs[0].runs != names:
            raise ConfigError(
                f"{d}: holds the pairing of the session of {pairs[0].runs[0]} (side a) with {pairs[0].runs[1]} "
                f"(side b), not {names[0]} with {names[1]}: give --run-id for a new session"
            )


def _ab_line(session: RunSession) -> AbEntry | None:
    """The `ab` entry of the run's last session that was one side of an lbeval ab session (None: none was)."""
    return next((s.ab for s in reversed(session.manifest.sessions) if s.ab is not None), None)


def refuse_other_session(seed: int, sessions: tuple[RunSession, RunSession]) -> None:
    """A resumed session is the one its run folders began: each run on the side it was, with the seed of the pairs'
    order it was (another seed draws other orders for the units left), and each side's server not the other
    side's of the last session (A and B swapped). Refused with one line naming what changed; before anything is
    written or sent."""
    changed: list[str] = []
    for side, session in zip(SIDES, sessions, strict=True):
        before = _ab_line(session)
        if before is None:
            continue
        name = _run_name(session)
        if before.side != side:
            changed.append(f"{name} was side {before.side}, now side {side}")
        if before.seed != seed and f"--seed {before.seed}" not in changed:
            changed.append(f"--seed {before.seed}, now {seed}")
    if _swapped(sessions):
        changed.append("side A's server is side B's of the last session and side B's is side A's")
    if changed:
        raise ConfigError(
            f"lbeval ab: not the session these run folders hold ({'; '.join(changed)}); it will not be resumed. "
            "Re-run with the original sides and --seed, or pass --run-id NAME for a new session."
        )


def _swapped(sessions: tuple[RunSession, RunSession]) -> bool:
    """Side A's server now is the one side B's last session ran on, and B's is A's (by URL or by process start)."""
    last = [s.manifest.sessions[-1] if s.manifest.sessions else None for s in sessions]
    if last[0] is None or last[1] is None:
        return False
    now_url = [safe_url(s.config.base_url) for s in sessions]
    now_start = [s.probe.process_start_time for s in sessions]
    for key, now in (("base_url", now_url), ("server_process_start_time", now_start)):
        was = [getattr(last[0], key), getattr(last[1], key)]
        if None not in was and was[0] != was[1] and now == [was[1], was[0]]:
            return True
    return False


def note_session(seed: int, sessions: tuple[RunSession, RunSession]) -> None:
    """Each run's session line says it was side a or b of an lbeval ab session, with the seed and its partner (what
    `refuse_other_session` reads when the session resumes)."""
    for side, session, partner in zip(SIDES, sessions, reversed(sessions), strict=True):
        session.note_ab(AbEntry(side, seed, _run_name(partner)))


def mark_pairing(sessions: tuple[RunSession, RunSession]) -> None:
    """Each run's manifest marks it one side of this session, with its pairing file as it is now (its lines and
    their sha256: eval/records/ab_pairs.PairingMark); called as the session ends, before each manifest is
    written, so a reader can tell a pairing file removed, cut or added to since."""
    for side, session, partner in zip(SIDES, sessions, reversed(sessions), strict=True):
        session.mark_interleaved(pairing_mark(session.run_dir, side, _run_name(partner)))


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
    sa: RunSession,
    la: Lanes,
    sb: RunSession,
    lb: Lanes,
    stack: ExitStack,
    between: Callable[[str, UnitId], None] | None,
) -> None:
    sides: list[_Side] = []

    def run() -> list[str]:
        sides.append(_side("a", sa, la, stack))
        sides.append(_side("b", sb, lb, stack))
        stopped: list[StopRecord] = []
        ok = _pairs(config, sides[0], sides[1], between, stopped)  # side name -> all its units complete
        if stopped:  # the manifest's session says so: stopped early, by a settled decision, after k of N
            return [f"stopped early by a settled decision: {stopped[0].headline()}"] * 2
        return [outcome_of(ok[name]) for name in SIDES]

    def contexts() -> list[Context | None]:
        return [next((x.ctx for x in sides if x.session is s), None) for s in (sa, sb)]

    run_to_end((sa, sb), run, contexts, lambda: mark_pairing((sa, sb)))


def _pairs(
    config: AbConfig,
    a: _Side,
    b: _Side,
    between: Callable[[str, UnitId], None] | None,
    stopped: list[StopRecord],
) -> dict[str, bool]:
    orders = pair_orders(a.session.units, config.seed)
    _repair_pairing(a.session.run_dir, b.session.run_dir)
    for side in (a, b):
        remove_stop(side.session.run_dir)  # this session supersedes an earlier stop (resume: the full run)
    units = session_order(a.session.units, config.seed)
    ends = _input_ends(units)
    inputs = list(dict.fromkeys(u.row_index for u in units))  # row indexes in send order
    ab_id = _ab_id(a.session.run_dir)
    ok = {"a": True, "b": True}
    left = sum(
        1 for u in a.session.units if any((u.row_index, u.kind, u.repetition) in s.todo for s in (a, b))
    )
    bar = progress_bar(
        total=len(a.session.units), initial=len(a.session.units) - left, desc="pairs   ", disable=config.quiet,
    )  # fmt: skip
    with bar:
        for unit in units:
            uid = (unit.row_index, unit.kind, unit.repetition)
            if any(uid in s.todo for s in (a, b)):  # else complete on both sides (an earlier session)
                if not _pair(a, b, unit, orders, ab_id, ok, between):
                    return {"a": False, "b": False}
                bar.update(1)
            if uid in ends and config.stop_check is not None:
                stop = _ask(config, config.stop_check, a, b, inputs, ends[uid], ab_id)
                if stop is not None:
                    stopped.append(stop)
                    return {"a": False, "b": False}
    if config.timing_target is not None:
        _adaptive(config, config.timing_target, a, b, ab_id, between)
    return ok


def _adaptive(
    config: AbConfig,
    target: TimingTarget,
    a: _Side,
    b: _Side,
    ab_id: str,
    between: Callable[[str, UnitId], None] | None,
) -> None:
    """More timing repetitions until the target (eval/run/adaptive.py); failures of added units are their own
    error records and do not make the planned run incomplete."""
    units = a.session.units
    orders = pair_orders(units + added_units(units, target.max_reps), config.seed)
    extra_ok = {"a": True, "b": True}
    rows = a.session.rows

    def send(unit: Unit) -> bool:
        row = rows[unit.row_index]
        for side in (a, b):
            mine = [r for r in side.session.slim if (r.dataset, r.example_id, r.repetition) == (row.dataset, row.id, unit.repetition)
                    and r.pass_name in ("timing_cold", "timing_warm")]  # fmt: skip
            point = resume_point(unit, mine, False)
            if point is not None:
                side.todo[(unit.row_index, unit.kind, unit.repetition)] = (unit, *point)
        return _pair(a, b, unit, orders, ab_id, extra_ok, between)

    def look() -> Look:
        pairs = list(last_pairs(read_pairs(a.session.run_dir)).values())
        sa, sb = a.session.slim, b.session.slim
        warm, cold = (input_ratios(pairs, sa, sb, name) for name in ("timing_warm", "timing_cold"))
        return Look([r.log_ratio for r in warm], _busy_seconds(a.session.run_dir), [r.log_ratio for r in cold],
                    [r.input_id for r in warm], [r.input_id for r in cold])  # fmt: skip

    def progress(record: AdaptiveRecord) -> None:
        for side in (a, b):
            write_adaptive(side.session.run_dir, record)

    hooks = Hooks(send, look, _settled_hook(config, a, b, units), progress)
    start = max(reps_recorded(s.session.slim) for s in (a, b))
    record = extend_timing(target, session_order(units, config.seed), start, hooks)
    progress(record)


def _settled_hook(config: AbConfig, a: _Side, b: _Side, units: list[Unit]) -> Callable[[Look], str | None]:
    """--stop-when-settled in the adaptive phase: the stop check asked with every input run and the rounds'
    per-pair ratios (eval/run/adaptive.py); its reason when it says settled, else None."""
    check = config.stop_check
    if check is None:
        return lambda _seen: None
    rows = a.session.rows
    order = list(dict.fromkeys(u.row_index for u in session_order(units, config.seed)))
    run = tuple((rows[i].dataset, rows[i].id) for i in order)

    def settled(seen: Look) -> str | None:
        query = StopQuery((a.session.run_dir, b.session.run_dir), run, len(order), pair_ratios(seen, units))
        settlement = check(query)
        return settlement.reason if settlement.settled else None

    return settled


def _input_ends(order: list[Unit]) -> dict[UnitId, int]:
    """The last unit of each input in send order -> how many inputs have been sent after it."""
    ends: dict[UnitId, int] = {}
    for k, unit in enumerate(order):
        if k + 1 == len(order) or order[k + 1].row_index != unit.row_index:
            ends[(unit.row_index, unit.kind, unit.repetition)] = len(ends) + 1
    return ends


def _busy_seconds(run_dir: Path) -> float:
    """Both servers' busy seconds in every pair line of the session's pairing (re-runs included)."""
    return sum(
        s.end - s.start
        for p in read_pairs(run_dir)
        for s in (p.a, p.b)
        if s.ran and s.start is not None and s.end is not None
    )


def _ask(
    config: AbConfig, check: StopCheck, a: _Side, b: _Side, order: list[int], k: int, ab_id: str
) -> StopRecord | None:
    """Ask the stop check after the k-th input of `order` (the row indexes in send order); the stop record
    (written to both runs) when it stops."""
    rows = a.session.rows
    run = tuple((rows[i].dataset, rows[i].id) for i in order[:k])
    settlement = check(StopQuery((a.session.run_dir, b.session.run_dir), run, len(order)))
    if not settlement.settled or k >= len(order):
        return None  # not settled, or settled at the last input: that is the full run
    done = set(order[:k])
    expected = [sum(len(u.steps) for u in s.session.units if u.row_index in done) for s in (a, b)]
    spent = _busy_seconds(a.session.run_dir)
    stop = StopRecord(
        STOP_SCHEMA_VERSION, ab_id, (_run_name(a.session), _run_name(b.session)), config.seed,
        settlement.policy, settlement.decision, settlement.reason, k, len(order), run,
        (expected[0], expected[1]), settlement.rules, spent, spent / k * len(order),
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )  # fmt: skip
    for side in (a, b):
        write_stop(side.session.run_dir, stop)
    return stop


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
        for r in side.replicas:
            side.seqs[r].clear()
        start = time.time()
        # a scenario unit's batches and primes all on this side's server, back to back
        done = run_one(side.ctx, rows, (unit, gs, index), side.peers)
        if not done:
            stop_if_dead(side)  # a dead side ends the session: the other side does not run on alone
        seqs = [q for r in side.replicas for q in side.seqs[r]]  # replica order: a spanning unit's send order
        result[side.name] = PairSide(True, done, seqs, start, time.time())
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
    with a.lock or contextlib.nullcontext():
        for side in (a, b):
            append_pair(side.session.run_dir, pair)
    return True


def stop_if_dead(side: _Side) -> None:
    """After a unit that did not complete: when the side's server no longer answers at all (no HTTP answer to
    GET /v1/models once its requests spent their retries), its engine died: the session stops on both sides
    (LbevalError; each manifest's session outcome says it, and a managed server's exit report leads the line)."""
    client = side.ctx.client
    try:
        client.get_json("/models", v1=True)
    except RequestFailed as exc:
        if exc.status is not None:
            return  # it answers (an HTTP error): alive; the unit's own error records say what failed
        raise LbevalError(
            f"side {side.name.upper()} ({_run_name(side.session)}): its engine died: {safe_url(client.base_url)} "
            f"no longer answers ({exc.message}); the session stopped on both sides: re-run the same command to "
            "resume once it serves again"
        ) from None


def say_last_stop(sessions: tuple[RunSession, RunSession]) -> None:
    """On resume, one stderr line when the last session stopped on an error (a side's engine died): what happened
    before the units left are sent again."""
    for session in sessions:
        outcome = (session.manifest.sessions[-1].outcome if session.manifest.sessions else None) or ""
        if outcome.startswith("stopped: "):
            echo_err(f"lbeval ab: resuming; the last session {outcome}", secrets=run_secrets(session.config))
            return


# ---------------------------------------------------------------- replicas (module docstring)


@dataclass
class _ReplicaSides:
    """One side on its N replicas: a _Side per replica (its own context), one spanning them all, the contexts."""

    per: list[_Side]
    across: _Side
    ctxs: list[Context]
    lanes: dict[UnitId, int]  # unit -> its replica pair (eval/run/replicas.place_units)


def _execute_replicas(
    config: AbConfig,
    cfgs: tuple[RunConfig, RunConfig],
    ins: tuple[Inputs, Inputs],
    shared: SendLedger,
    stack: ExitStack,
    between: Callable[[str, UnitId], None] | None,
) -> None:
    """Both sides' N servers (started or given), one Client per replica, both sessions prepared (the plan with
    the replicas scenario for N), probed and started (`_start_sides`), then the pairs on every replica pair at
    once."""
    served = [stack.enter_context(serving_replicas(cfg)) for cfg in cfgs]
    cfgs_now = [
        replace(c, topology=c.topology.started(urls)) for c, (urls, _) in zip(cfgs, served, strict=True)
    ]
    clients = [
        [stack.enter_context(c) for c in replica_clients(cfg, cfg.topology.lane_urls, shared)]
        for cfg in cfgs_now
    ]
    prepared = [
        prepare_session(c, cl, i, started, replicated=True)
        for c, cl, i, (_, started) in zip(cfgs_now, clients, ins, served, strict=True)
    ]
    lanes = _start_sides(config, (prepared[0], prepared[1]))
    sessions = [p.session for p in prepared]
    lock = threading.Lock()
    sides: list[_ReplicaSides] = []

    def run() -> list[str]:
        for name, session, side_lanes in zip(SIDES, sessions, lanes, strict=True):
            sides.append(_replica_sides(name, session, side_lanes, stack, lock))
        if sides[0].lanes != sides[1].lanes:
            raise ConfigError("the two sides place the units on replicas differently; cannot pair them")
        ok = _replica_pairs(config, sides[0], sides[1], between)
        return [outcome_of(ok[name]) for name in SIDES]

    def contexts() -> list[Context | None]:
        return [lanes[k].merged(sides[k].ctxs) if k < len(sides) else None for k in range(len(sessions))]

    run_to_end(sessions, run, contexts, lambda: mark_pairing((sessions[0], sessions[1])))


def _replica_sides(
    name: str, session: RunSession, lanes: Lanes, stack: ExitStack, lock: threading.Lock
) -> _ReplicaSides:
    writer = stack.enter_context(RecordWriter(session.run_dir / RECORDS_NAME))
    progress = Progress(session.units, session.done_by_pass(), True)
    emit = session.emitter(writer, progress)
    seqs: dict[int, list[int]] = {}

    def emit_seq(rec: RequestRecord, final: bool) -> None:  # rec.replica: its context's (stamped there)
        emit(rec, final)
        seqs[rec.replica].append(rec.seq)

    ctxs = lanes.contexts(emit_seq)
    seqs.update({i: [] for i in range(len(ctxs))})
    placed: dict[UnitId, int] = {}  # pinned: every unit but a spanning one on its placed replica
    for u in session.units:
        lane = None if spans_replicas(u) else lanes.lane_of(u)
        if lane is not None:
            placed[(u.row_index, u.kind, u.repetition)] = lane
    todo = {(u.row_index, u.kind, u.repetition): (u, gs, i) for u, gs, i in session.todo}
    per = [
        _Side(name, session, session.probe, ctx, progress, todo, seqs, (i,), (), lock)
        for i, ctx in enumerate(ctxs)
    ]
    across = _Side(
        name, session, session.probe, ctxs[0], progress, todo, seqs, tuple(seqs), tuple(ctxs), lock
    )
    return _ReplicaSides(per, across, ctxs, placed)


def _replica_pairs(
    config: AbConfig, a: _ReplicaSides, b: _ReplicaSides, between: Callable[[str, UnitId], None] | None
) -> dict[str, bool]:
    """Each replica pair's units at once (one thread each, its units' pairs in session order), then the units
    that span the replicas one pair at a time; {"a": False, "b": False} when interrupted."""
    units = a.across.session.units
    orders = pair_orders(units, config.seed)
    run_dirs = (a.across.session.run_dir, b.across.session.run_dir)
    _repair_pairing(*run_dirs)
    for run_dir in run_dirs:
        remove_stop(run_dir)
    ab_id = _ab_id(run_dirs[0])
    order = session_order(units, config.seed)
    lanes = [
        [u for u in order if not spans_replicas(u) and a.lanes[(u.row_index, u.kind, u.repetition)] == i]
        for i in range(len(a.per))
    ]
    oks = [{"a": True, "b": True} for _ in lanes]

    def lane(i: int) -> bool:
        return all(_pair(a.per[i], b.per[i], u, orders, ab_id, oks[i], between) for u in lanes[i])

    # the replica pairs' lanes on the scheduler's core: the first failure stops both sides' lanes and is raised
    if not all(run_at_once([partial(lane, i) for i in range(len(lanes))], [*a.ctxs, *b.ctxs])):
        return {"a": False, "b": False}
    across = {"a": True, "b": True}
    for unit in (u for u in order if spans_replicas(u)):
        if not _pair(a.across, b.across, unit, orders, ab_id, across, between):
            return {"a": False, "b": False}
    return {name: across[name] and all(o[name] for o in oks) for name in SIDES}
