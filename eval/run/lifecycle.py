"""A session's lifecycle over its topology (one server, N replicas, a routing endpoint's ranks), step by step:

    prepared = prepare_session(config, clients, inputs, started, replicated)  # lane 0: probe, plan, manifest
    probed = probe_lanes(prepared, early)          # every other lane's server probed and compared with lane 0's
    lanes = start_session(probed, pinned)          # units placed and left, the session line, replicas noted
    scheduler.send(prepared.session, lanes)        # run, then end (run_to_end); lbeval ab: its own pairs

The one place a session is prepared, probed and started over its lanes: `lbeval run` (eval/run/runner.py)
calls the steps back to back; `lbeval ab` (eval/run/ab.py) calls each step for both sides before the next,
with its checks between (both plans the same, the same session resumed), so a side whose replica differs is
refused before either side's session line is written. `pinned` (ab): every unit on the replica `place_units`
gives it, the same on both sides; else (run) a fresh movable unit runs on the first lane free and a unit begun
in an earlier session on the replica it began on.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any

from eval.run.client import Client
from eval.run.config import RunConfig
from eval.run.probe import ProbeResult
from eval.run.replicas import (
    Replica,
    probe_replicas,
    refuse_reset_on_ranks,
    replica_lanes,
    require_engines,
)
from eval.run.scheduler import Lanes, one_lane
from eval.run.session import Inputs, RunSession


@dataclass(frozen=True)
class Prepared:
    """A session prepared on lane 0 (its probe, plan, manifest and units left), with every lane's Client and
    what lbeval started for it; `replicated`: the replicas' path (eval/run/replicas.replicated)."""

    session: RunSession
    clients: list[Client]
    inputs: Inputs
    started: list[dict[str, Any]]
    replicated: bool


@dataclass(frozen=True)
class Probed:
    """A prepared session whose lanes' servers are all probed and compared with lane 0's (`replicas`: each
    replica's; none on one server, whose probe is the session's)."""

    prepared: Prepared
    replicas: list[Replica]


def prepare_session(
    config: RunConfig,
    clients: list[Client],
    inputs: Inputs,
    started: list[dict[str, Any]],
    replicated: bool,
) -> Prepared:
    """The session prepared on lane 0 (`RunSession.prepare`: probe, plan, manifest, records on disk, units
    left); nothing written yet."""
    return Prepared(RunSession.prepare(config, clients[0], inputs), clients, inputs, started, replicated)


def probe_lanes(prepared: Prepared, early: Sequence[Future[ProbeResult]] = ()) -> Probed:
    """On replicas: a routing endpoint's reset refused and its engines required, then every other replica
    probed (`early`: probes started beside lane 0's preparation) and compared with replica 0, a difference
    refused with one line; nothing written yet. On one server: nothing to probe."""
    if not prepared.replicated:
        return Probed(prepared, [])
    session = prepared.session
    refuse_reset_on_ranks(session.config)  # --cold auto may have chosen it
    require_engines(session.config, prepared.clients[0], session.probe.metrics)
    return Probed(prepared, probe_replicas(session, prepared.clients, prepared.inputs, early))


def start_session(probed: Probed, pinned: bool = False) -> Lanes:
    """The session started (its line in the manifest, a started server in servers.jsonl) and its lanes for the
    scheduler: one server's one lane, or the replicas' (units placed and left, replicas noted; `pinned`: module
    docstring)."""
    prepared = probed.prepared
    session = prepared.session
    if not prepared.replicated:
        session.start(prepared.started[0] if prepared.started else None)
        return one_lane(session, partial(session.context, prepared.clients[0]))
    return replica_lanes(session, probed.replicas, prepared.started, pinned)
