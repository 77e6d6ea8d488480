"""`lbeval run`: probe the server, then send every unit of the plan, appending one record per request.

    execute_run(RunConfig(variant=..., inputs=..., topology=endpoints(url))) -> run directory

Re-running the same configuration resumes into the same run (run_id defaults to one derived from the inputs
file's hash): complete units are kept, missing ones are sent, nothing is sent twice. A run directory made with
other inputs, model or settings is refused with the differences. Ctrl-C or SIGTERM stops after flushing (the
session's outcome "interrupted" is written, the CLI exits 130); the manifest says the run is incomplete until a
later invocation completes it.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path

from eval.atomic import WriteFailed
from eval.records.run_folder import RECORDS_NAME, RecordWriter, refuse_ab_folder, run_lock
from eval.records.types import RequestRecord
from eval.run.client import Client
from eval.run.config import (
    COLD_MODES,
    DEFAULT_PASSES,
    EXIT_INCOMPLETE,
    RunConfig,
    RunIncomplete,
    Topology,
    default_run_id,
    resolve_topology,
    resolved_for_server,
    run_settings,
    validate_name,
)
from eval.run.ledger import SendLedger
from eval.run.passes import Context, GroupState, run_unit
from eval.run.progress import Progress
from eval.run.replicas import replicated, run_replicated
from eval.run.scenarios.execute import run_scenario_unit
from eval.run.scenarios.plan import is_scenario_unit
from eval.run.session import RunSession, open_client, outcome_of, read_inputs_of, run_to_end, serving
from eval.run.steps import Unit
from eval.serve.process import sigterm_as_interrupt

__all__ = [  # the run's public faces, for `lbeval run` and the tests (defined in config.py and here)
    "COLD_MODES",
    "DEFAULT_PASSES",
    "EXIT_INCOMPLETE",
    "RunConfig",
    "RunIncomplete",
    "Topology",
    "default_run_id",
    "execute_run",
    "resolve_topology",
    "resolved_for_server",
    "run_settings",
    "validate_name",
]


def execute_run(
    config: RunConfig,
    *,
    on_record: Callable[[RequestRecord], None] | None = None,
    ledger: SendLedger | None = None,
) -> Path:
    """Run (or resume) the passes against the server at `config.base_url`; returns the run directory.

    The whole session holds the run folder's lock (`run_lock`: RunBusy when another process is writing it),
    from before the manifest is read until after it is last written, and before `Topology.spec` (a launch spec)
    is started: a run refused by the lock starts no server. The started server is noted in servers.jsonl.
    `ledger`: the session's send ledger (default: a new one).

    A file that cannot be written (a full disk) ends the session: RunIncomplete (exit EXIT_INCOMPLETE, 3), one
    line naming the file, the reason and the space left; the records on disk stay whole lines, and once the
    file can be written the same command resumes."""
    try:
        # SIGTERM (CI, process managers) stops the session like Ctrl-C: outcome "interrupted", exit 130
        with sigterm_as_interrupt():
            inputs = read_inputs_of(config)
            with run_lock(inputs.run_dir):
                refuse_ab_folder(inputs.run_dir)  # an `lbeval ab` run folder is resumed by lbeval ab only
                if replicated(config.topology, inputs):  # N lanes (eval/run/replicas.py)
                    run_replicated(config, inputs, ledger or SendLedger(), on_record)
                    return inputs.run_dir
                ledger = ledger or SendLedger()
                with serving(config, ledger) as (url, server):
                    config = replace(config, topology=config.topology.started((url,)))  # a managed server's
                    with open_client(config, ledger) as client:
                        session = RunSession.prepare(config, client, inputs)
                        session.on_record = on_record
                        session.start(server)
                        _send(session, client)
    except WriteFailed as exc:
        space = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        hint = "free space, then re-run" if space else "once it can be written, re-run"
        raise RunIncomplete(f"{exc}; the run is incomplete: {hint} the same command to resume") from None
    return inputs.run_dir


def _send(session: RunSession, client: Client) -> None:
    """Send the pending units; the session's outcome is written to the manifest however they end."""
    progress = Progress(session.units, session.done_by_pass(), session.config.quiet)
    ctx: list[Context] = []

    def run() -> list[str]:
        with RecordWriter(session.run_dir / RECORDS_NAME) as writer:
            ctx.append(session.context(client, session.emitter(writer, progress)))
            return [outcome_of(_run_all(session, ctx[0]))]

    run_to_end([session], run, lambda: ctx or [None], progress.close)


def _run_all(session: RunSession, ctx: Context) -> bool:
    """Run every pending unit; True when all completed. The other scenarios' units run one at a time after the
    cache scenario's (which may run --concurrency at once): a scenario unit owns the server while it runs."""
    ok = _run_units(session, ctx, [t for t in session.todo if not is_scenario_unit(t[0])])
    ctx.stop.clear()  # set by the pool once its units are done (an interrupt raises instead)
    for unit, gs, _ in (t for t in session.todo if is_scenario_unit(t[0])):
        if ctx.stop.is_set():
            return False
        ok = run_scenario_unit(ctx, session.rows, unit, gs) and ok
    return ok


def _run_units(session: RunSession, ctx: Context, todo: list[tuple[Unit, GroupState, int]]) -> bool:
    rows = session.rows
    if session.config.concurrency == 1:
        ok = True
        for unit, gs, index in todo:
            ok = run_unit(ctx, rows[unit.row_index], unit, gs, index) and ok
        return ok
    with ThreadPoolExecutor(max_workers=session.config.concurrency) as pool:
        futures = [pool.submit(run_unit, ctx, rows[u.row_index], u, gs, i) for u, gs, i in todo]
        try:
            while True:
                done, pending = wait(futures, timeout=0.2, return_when=FIRST_EXCEPTION)
                if any(f.exception() is not None for f in done) or not pending:
                    break
        except BaseException:
            ctx.stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        ctx.stop.set()
        for f in futures:
            if f.done() and f.exception() is not None:
                raise f.exception()  # type: ignore[misc]
        return all(f.done() and f.result() for f in futures)
