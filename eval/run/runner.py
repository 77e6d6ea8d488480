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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from eval.atomic import WriteFailed
from eval.records.run_folder import refuse_ab_folder, run_lock
from eval.records.types import RequestRecord
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
from eval.run.lifecycle import prepare_session, probe_lanes, start_session
from eval.run.replicas import (
    probing_others,
    refuse_reset_on_ranks,
    replica_clients,
    replicated,
    serving_replicas,
)
from eval.run.scheduler import send
from eval.run.session import Inputs, read_inputs_of, serving
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
                _run_session(config, inputs, ledger or SendLedger(), on_record)
    except WriteFailed as exc:
        space = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        hint = "free space, then re-run" if space else "once it can be written, re-run"
        raise RunIncomplete(f"{exc}; the run is incomplete: {hint} the same command to resume") from None
    return inputs.run_dir


def _run_session(
    config: RunConfig,
    inputs: Inputs,
    ledger: SendLedger,
    on_record: Callable[[RequestRecord], None] | None,
) -> None:
    """One lifecycle for one server and for replicas (the run folder's lock held): the servers (a launch spec's,
    started now), a Client per lane, the session prepared on lane 0 (probe, plan, manifest; the other
    replicas probed meanwhile), the other lanes' probes compared, the session started over its lanes
    (eval/run/lifecycle.py), then the units run and the session ended by the one scheduler
    (eval/run/scheduler.send)."""
    on_replicas = replicated(config.topology, inputs)  # N lanes, or a run folder that ran on replicas
    refuse_reset_on_ranks(config)
    with ExitStack() as stack:
        config, started = stack.enter_context(_serving(config, ledger, on_replicas))
        lane_urls = config.topology.lane_urls
        clients = [stack.enter_context(c) for c in replica_clients(config, lane_urls, ledger, own=True)]
        early = stack.enter_context(probing_others(config, clients, inputs))
        prepared = prepare_session(config, clients, inputs, started, on_replicas)
        prepared.session.on_record = on_record
        lanes = start_session(probe_lanes(prepared, early))
        send(prepared.session, lanes)


@contextmanager
def _serving(
    config: RunConfig, ledger: SendLedger, on_replicas: bool
) -> Iterator[tuple[RunConfig, list[dict[str, Any]]]]:
    """The session's config at its servers' URLs, and what lbeval started: a launch spec's replicas, each on its
    own cores or devices (eval/run/replicas.serving_replicas), or its one server (eval/run/session.serving: a
    dead engine reported with the request it died on); else the endpoints given."""
    if on_replicas:
        with serving_replicas(config) as (urls, started):
            yield replace(config, topology=config.topology.started(urls)), started
        return
    with serving(config, ledger) as (url, server):
        yield replace(config, topology=config.topology.started((url,))), [] if server is None else [server]
