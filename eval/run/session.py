"""The run session: one object owning one run folder's session, from the probe to the manifest's last write.

    inputs = read_inputs_of(config)                        # checked inputs and the run folder
    with run_lock(inputs.run_dir), serving(config) as (url, server):  # the lock, then a managed server
        config = replace(config, topology=config.topology.started((url,)))
        client = open_client(config, ledger)                  # on the session's send ledger
        session = RunSession.prepare(config, client, inputs)  # probe, plan, manifest, what is left
        session.start(server)                                 # the session's line in the manifest
        with RecordWriter(...) as writer:
            ctx = session.context(client, session.emitter(writer, progress))  # ServerWatch on the ledger
            ...                                               # the units (eval/run/scheduler.py, eval/run/ab.py)
        session.end(ctx, outcome, failure)                    # stats, warnings, LATEST (in run_to_end)

`lbeval run` (eval/run/runner.execute_run) drives one session; `lbeval ab` (eval/run/ab.py) two, one per side,
with one send ledger for both (`SendLedger`: what was sent between two /metrics scrapes, by either side).
`open_client` makes a session's Client; `serving` starts a RunConfig's managed server (a launch spec) once the
run folder's lock is held, so a second run refused by the lock never starts a server.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from eval.atomic import WriteFailed
from eval.errors import ConfigError, DataError, LbevalError
from eval.prepare.inputs import InputRow, InputsHeader, inputs_digest, read_inputs
from eval.provenance import git_state, host_info, lbeval_version, package_versions
from eval.records.cache_model import with_blocks
from eval.records.final import UnitKey, describe_duplicates, select_final, unit_of
from eval.records.manifest_parts import (
    AbEntry,
    ClientVersions,
    HostFacts,
    InputsHeaderFacts,
    PairingMark,
    ProbeFacts,
    ReplicaEntry,
    RunSettings,
    RunStats,
    SessionEntry,
)
from eval.records.run_folder import (
    MANIFEST_NAME,
    RECORDS_NAME,
    RecordWriter,
    RunManifest,
    append_server_record,
    read_manifest,
    repair_records,
    write_latest,
    write_manifest,
)
from eval.records.server_figures import checked_cached
from eval.records.server_identity import server_differences
from eval.records.types import RECORD_SCHEMA_VERSION, RequestRecord
from eval.records.vocabulary import choice_of
from eval.redact import Secrets, api_key_from_env, safe_url
from eval.run.client import Client
from eval.run.config import (
    CLIENT_PACKAGES,
    RunConfig,
    default_run_id,
    now_iso,
    resolved_for_server,
    run_settings,
    validate_config,
)
from eval.run.ledger import SendLedger
from eval.run.passes import Context, GroupState, resume_point
from eval.run.probe import ProbeResult, probe_server
from eval.run.progress import Progress
from eval.run.scenarios.execute import scenario_warnings
from eval.run.scenarios.plan import (
    fetch_token_ids,
    is_scenario_unit,
    plan_scenario_units,
    scenario_resume_point,
)
from eval.run.scenarios.settings import resolve_budget, sized_default_plan
from eval.run.server_watch import ServerWatch
from eval.run.steps import CacheFacts, Unit, plan_units, short_hit
from eval.serve.process import start
from eval.terminal import echo_err

Todo = tuple[Unit, GroupState, int]  # a unit left to run, the state of its group, its first step


def api_key(config: RunConfig) -> str | None:
    """The API key from `config.api_key_env` (ConfigError when unset); `run_secrets` redacts it."""
    return api_key_from_env(config.api_key_env)


def run_secrets(config: RunConfig) -> Secrets:
    """The session's secrets: what its launch spec read from the environment and its API key (`--api-key-env`),
    redacted wherever the session writes or prints them (never another session's: nothing is process-wide)."""
    started = config.topology.spec
    spec = config.secrets if started is None else config.secrets | started.secrets
    return spec.with_(os.environ.get(config.api_key_env) if config.api_key_env else None)


def open_client(config: RunConfig, ledger: SendLedger) -> Client:
    """The session's Client for `config.base_url`, noting what it sends in `ledger`."""
    return Client(config.base_url, api_key(config), config.timeout_s, ledger=ledger)


@contextmanager
def serving(
    config: RunConfig, ledger: SendLedger | None = None
) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """(base URL, what lbeval started) for the session: the config's launch spec (`Topology.spec`, not started
    yet), started here and stopped on exit, its log under the runs folder; else (config.base_url, None). Called
    with the run folder's lock held; the session's config then takes the URL (the manifest records it). With
    the session's send `ledger`, a managed server whose engine dies is reported with the request it died on."""
    spec = config.topology.spec
    if spec is None or not config.topology.to_start:
        yield config.base_url, None
        return
    secrets = run_secrets(config)
    say = lambda message: echo_err(message, secrets=secrets)  # noqa: E731
    with start(spec, echo=say, runs=config.out) as server:
        answered = None if ledger is None else lambda: ledger.answered(server.root_url)
        with server.reported_if_dead(answered):  # a server that dies during the session is reported dead,
            yield server.base_url, server.describe()  # with the session's ledger: on which request


@dataclass(frozen=True)
class Inputs:
    header: InputsHeader
    rows: list[InputRow]
    sha256: str
    run_dir: Path


def read_inputs_of(config: RunConfig) -> Inputs:
    """The run's inputs, checked, and its run folder (the configuration is checked first)."""
    validate_config(config)
    header, rows = read_inputs(config.inputs)
    if not rows:
        raise DataError(config.inputs, None, None, "no inputs to run")
    keys = Counter(r.key for r in rows)
    dup = next((k for k, n in keys.items() if n > 1), None)
    if dup is not None:
        raise DataError(config.inputs, None, "id", f"{dup[0]}/{dup[1]} appears twice")
    sha = inputs_digest(config.inputs)
    run_id = config.run_id or default_run_id(sha)
    return Inputs(header, rows, sha, config.out / config.variant / run_id)


@dataclass
class RunSession:
    """One session on one run folder (`lbeval run`, or one side of `lbeval ab`): the probe's findings, the plan,
    the manifest, the records on disk and the units left (its send ledger is its Clients' and ServerWatch's own).
    Made by `prepare`, under the run folder's lock (the caller holds it until after `end`)."""

    config: RunConfig
    run_dir: Path
    manifest: RunManifest
    rows: list[InputRow]
    units: list[Unit]
    todo: list[Todo]
    slim: list[RequestRecord]  # every record on disk and written now, without top-k
    torn_dropped: int
    probe: ProbeResult
    on_record: Callable[[RequestRecord], None] | None = None
    written: int = 0
    completed_units: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def prepare(cls, config: RunConfig, client: Client, inputs: Inputs) -> RunSession:
        """Probe, plan and read the run folder (under its lock)."""
        return _prepare(config, client, inputs)

    def start(self, server: Mapping[str, Any] | None = None) -> None:
        """The session's line in the manifest; `server`: what lbeval started for it (servers.jsonl)."""
        _start_session(self, self.probe)
        if server is not None:
            append_server_record(self.run_dir, server)

    def done_by_pass(self) -> Counter[str]:
        """Final records on disk by progress group (the bars' starting points)."""
        return Counter(choice_of(r.pass_name) for r in select_final(self.slim).final.values())

    def emitter(self, writer: RecordWriter, progress: Progress) -> Callable[[RequestRecord, bool], None]:
        """What the passes call with each record: written, kept (slim), counted, shown, passed on."""
        return _emit_to(self, writer, progress)

    def context(self, client: Client, emit: Callable[[RequestRecord, bool], None]) -> Context:
        """The passes' context: the client, the probe's facts, a ServerWatch on this session's ledger."""
        return _context(self, client, self.probe, emit)

    def end(self, ctx: Context | None, outcome: str, failure: BaseException | None) -> None:
        """Write the session's outcome, stats and warnings, and LATEST; when that fails too after a failed
        write (`failure`), one message says both."""
        _end(self, self.probe, [ctx] if ctx is not None else [], outcome, failure)

    # what the drivers tell the session (eval/run/replicas.py, eval/run/ab.py); nothing else writes its state

    def resume_on(self, lane: Callable[[Unit], int], same_server: Sequence[bool]) -> None:
        """The units left when each unit runs on replica `lane(unit)` (`same_server[r]`: replica r's process is
        the last session's): `units_left`, before the session starts."""
        self.todo = units_left(self.units, self.rows, self.slim, same_server, lane)

    def note_replicas(self, replicas: Sequence[ReplicaEntry], dp_ranks: int | None = None) -> None:
        """This session's line lists its replicas (and a routing endpoint's ranks); the manifest is written."""
        self._note(replicas=list(replicas), **({} if dp_ranks is None else {"dp_ranks": dp_ranks}))

    def note_replica_starts(self, starts: Sequence[float | None]) -> None:
        """Each replica's server process start time as its ServerWatch last saw it (written as the session ends)."""
        line = self.manifest.sessions[-1]
        entries = list(line.replicas or [])
        for i, began in enumerate(starts[: len(entries)]):
            entries[i] = replace(entries[i], server_process_start_time=began)
        self.manifest.sessions[-1] = replace(line, replicas=entries)

    def note_ab(self, entry: AbEntry) -> None:
        """This session's line says it is one side of an lbeval ab session; the manifest is written."""
        self._note(ab=entry)

    def mark_interleaved(self, mark: PairingMark) -> None:
        """The manifest marks the run one side of an lbeval ab session with its pairing file as it is now
        (written as the session ends)."""
        self.manifest.interleaved = mark

    def _note(self, **fields: Any) -> None:
        self.manifest.sessions[-1] = replace(self.manifest.sessions[-1], **fields)
        write_manifest(self.run_dir, self.manifest)


def _prepare(config: RunConfig, client: Client, inputs: Inputs) -> RunSession:
    """Probe, plan and read the run folder (under its lock: see execute_run)."""
    run_dir, rows = inputs.run_dir, inputs.rows
    resuming = (run_dir / MANIFEST_NAME).exists()
    modes = {r.mode for r in rows}
    probe = probe_server(
        client, model=config.model, settings=config.request, modes=modes, cold_mode=config.cold_mode,
        check_reset=not resuming, policy=config.retry,
    )  # fmt: skip
    probe.require()
    probe.check_stated_model(config.cache_model, config.launch_spec)
    config = resolved_for_server(config, probe)
    announce_server(probe)
    config = replace(
        config, scenarios=sized_default_plan(resolve_budget(config.scenarios, client), len(rows))
    )
    cot_rows = frozenset(i for i, r in enumerate(rows) if r.answer_template is not None)  # LongBench v2 CoT
    units = (
        plan_units(len(rows), config.passes, config.timing_reps, config.stream_all, cot_rows)
        if config.scenarios.cache
        else []
    )
    units += plan_scenario_units(
        config.scenarios, rows, cache_model=with_blocks(probe.cache_model, probe.block_size),
        max_tokens_override=config.request.max_tokens_override,
        token_ids=fetch_token_ids(config.scenarios, rows, client, probe, config.request),
        replicas=config.topology.lanes,
    )  # fmt: skip
    expected = sum(len(u.steps) for u in units)
    fresh = _new_manifest(config, run_dir.name, inputs.header, inputs.sha256, probe, expected)
    manifest = _open_manifest(config, run_dir, fresh)
    records, torn = _existing(run_dir)
    last = manifest.sessions[-1].server_process_start_time if manifest.sessions else None
    same_server = last is not None and last == probe.process_start_time
    todo = units_left(units, rows, records, [same_server])
    return RunSession(config, run_dir, manifest, rows, units, todo, records, torn, probe)


def announce_server(probe: ProbeResult) -> None:
    """One stderr line, before any pass, when the server is not vLLM or its cache state cannot be verified
    (the manifest's warnings say it again at the end)."""
    if probe.server_kind == "vllm" and probe.cache_verification == "verified":
        return
    version = f" {probe.version}" if probe.version else ""
    state = "verified" if probe.cache_verification == "verified" else "UNVERIFIED (no cached-token count)"
    echo_err(
        f"lbeval run: server: {probe.server_label}{version} ({probe.server_evidence}); cache state {state}; "
        f"cold: {probe.cold_method}"
    )


def _differences(old: RunManifest, inputs_sha: str, model: str, settings: RunSettings) -> list[str]:
    diffs: list[str] = []
    if old.inputs_sha256 != inputs_sha:
        diffs.append(f"inputs_sha256 {old.inputs_sha256[:12]} -> {inputs_sha[:12]}")
    if old.model != model:
        diffs.append(f"model {old.model!r} -> {model!r}")
    diffs += [f"{key} {before!r} -> {now!r}" for key, before, now in old.settings.differences(settings)]
    return diffs


def _new_manifest(
    config: RunConfig, run_id: str, header: InputsHeader, sha: str, probe: ProbeResult, expected: int
) -> RunManifest:
    commit, dirty = git_state()
    return RunManifest(
        schema_version=RECORD_SCHEMA_VERSION,
        run_id=run_id,
        variant=config.variant,
        inputs_path=str(config.inputs),
        inputs_sha256=sha,
        inputs_header=InputsHeaderFacts.from_dict(header.to_dict()),  # as the inputs manifest wrote it
        model=probe.model,
        probe=probe.facts(),
        settings=run_settings(config),
        lbeval_version=lbeval_version(),
        git_commit=commit,
        git_dirty=dirty,
        client_versions=ClientVersions.from_dict(package_versions(CLIENT_PACKAGES)),
        host=HostFacts.from_dict(host_info()),
        started_at=now_iso(),
        ended_at=None,
        complete=False,
        warnings=[],
        expected_records=expected,
    )


def _open_manifest(config: RunConfig, run_dir: Path, fresh: RunManifest) -> RunManifest:
    if not (run_dir / MANIFEST_NAME).exists():
        return fresh
    old = read_manifest(run_dir)
    refuse_other_server(run_dir, old.probe, fresh.probe)  # first: another server explains other settings too
    diffs = _differences(old, fresh.inputs_sha256, fresh.model, fresh.settings)
    if diffs:
        cache_only = old.settings.scenarios is None and fresh.settings.scenarios is not None
        old_plan = " (a cache-only run: add --scenarios cache to resume it)" if cache_only else ""
        raise ConfigError(
            f"{run_dir} holds a run with a different configuration ({'; '.join(diffs)}); it will not be resumed "
            f"into. Pass --run-id NAME for a new run, or run with the original configuration{old_plan}."
        )
    # the latest probe and provenance describe the server and client now; the first start time stays
    probe = fresh.probe
    if probe.reset_prefix_cache is None:  # not re-checked on resume: keep what the first session saw
        capabilities = {**probe.capabilities}
        if "reset_prefix_cache" in old.probe.capabilities:
            capabilities["reset_prefix_cache"] = old.probe.capabilities["reset_prefix_cache"]
        else:
            capabilities.pop("reset_prefix_cache", None)
        probe = replace(probe, reset_prefix_cache=old.probe.reset_prefix_cache, capabilities=capabilities)
    return replace(
        old,
        probe=probe,
        git_commit=fresh.git_commit,
        git_dirty=fresh.git_dirty,
        client_versions=fresh.client_versions,
        host=fresh.host,
        inputs_path=fresh.inputs_path,
        ended_at=None,
        complete=False,
    )


def refuse_other_server(run_dir: Path, before: ProbeFacts, now: ProbeFacts) -> None:
    """A run is measured on one server: a resume whose probe names another (kind, version, model, block size,
    context length, prefix caching, cold mode, cache model: eval/records/server_identity.py) is refused, one line
    naming what differs; the earlier sessions' probe is kept as it was."""
    diffs = server_differences(before, now)
    if diffs:
        said = "; ".join(f"{key} {old!r} -> {new!r}" for key, old, new in diffs)
        raise ConfigError(
            f"{run_dir} was measured on another server ({said}); it will not be resumed against this one. "
            "Resume against the original server, or pass --run-id NAME for a new run."
        )


def _existing(run_dir: Path) -> tuple[list[RequestRecord], int]:
    scan = repair_records(run_dir / RECORDS_NAME)
    return scan.records, len(scan.torn_lines)


def units_left(
    units: Sequence[Unit],
    rows: Sequence[InputRow],
    records: Sequence[RequestRecord],
    same_server: Sequence[bool],
    lane: Callable[[Unit], int] | None = None,
) -> list[Todo]:
    """The units left, each to run on replica `lane(unit)` (None: replica 0, one server). A unit whose latest
    group has records from another replica than its own (the replica count changed) and is not complete
    restarts as a whole, as the next group; otherwise it resumes as on one server (`same_server[r]`: replica
    r's process is the one of the last session)."""
    by_unit: dict[UnitKey, list[RequestRecord]] = {}
    for r in records:
        by_unit.setdefault(unit_of(r), []).append(r)
    todo: list[Todo] = []
    for unit in units:
        row = rows[unit.row_index]
        mine = by_unit.get(UnitKey(row.dataset, row.id, unit.kind, unit.repetition), [])
        target = 0 if lane is None else lane(unit)
        resume = scenario_resume_point if is_scenario_unit(unit) else resume_point
        point = resume(unit, mine, same_server[target])
        if point is None:
            continue
        latest = max((r.group for r in mine), default=0)
        moved = any(r.replica != target for r in mine if r.group == latest)
        todo.append((unit, GroupState(group=latest + 1), 0) if moved else (unit, *point))
    return todo


def _stats(session: RunSession, counters: dict[str, int]) -> RunStats:
    sel = select_final(session.slim)
    finals = sel.final
    by_pass: dict[str, dict[str, int]] = {}
    for rec in finals.values():
        by_pass.setdefault(rec.pass_name, {"ok": 0, "invalid": 0, "error": 0})[rec.status] += 1
    retried = Counter(r.pass_name for r in session.slim if r.status == "invalid" and r.attempt == 0)
    return RunStats(
        records=len(session.slim),
        slots_final=len(finals),
        by_pass=by_pass,
        invalid_attempts=dict(retried),
        transport_retries=sum(r.retries for r in session.slim),
        duplicate_records=sum(sel.duplicates.values()),
        counters=dict(sorted(counters.items())),
    )


def _warnings(session: RunSession, probe: ProbeResult, stats: RunStats, complete: bool) -> list[str]:
    config = session.config
    out = list(probe.warnings)
    if config.concurrency != 1:
        out.append(
            f"concurrency {config.concurrency}: timing figures are not valid (timing needs concurrency 1)"
        )
    errors = stats.errors
    if errors:
        out.append(f"{errors} request(s) failed after retries; re-run the same command to retry them")
    missing = session.manifest.expected_records - stats.slots_final
    if not complete and missing > 0:
        out.append(
            f"incomplete: {missing} of {session.manifest.expected_records} request slots have no record yet"
        )
    warm = ("warm", "repeat", "timing_warm")
    short = [r for r in session.slim if r.pass_name in warm and r.attempt == 0 and short_hit(r)]
    warm_invalid = sum(n for p, n in stats.invalid_attempts.items() if p in warm) - len(short)
    if warm_invalid:
        out.append(
            f"{warm_invalid} warm/repeat request(s) missed the prefix cache, were marked invalid and retried"
        )
    if short:
        first = short[0]
        out.append(
            f"{len(short)} warm/repeat request(s) found fewer cached tokens than the prompt's full blocks (first: "
            f"{first.dataset}/{first.example_id} {first.pass_name} found {checked_cached(first)} of "
            f"{first.expected_cached_tokens}): short hits, kept invalid, not retried"
        )
    duplicated = describe_duplicates(select_final(session.slim))
    if duplicated is not None:
        out.append(f"damaged: {duplicated}; the run cannot be completed, start a new one with --run-id")
    if session.torn_dropped:
        out.append(
            f"{session.torn_dropped} torn record line(s) from an interrupted run were dropped on resume"
        )
    if stats.counter("cached_tokens_mismatch"):
        out.append(
            f"{stats.counter('cached_tokens_mismatch')} request(s): usage's cached tokens differ from the server's "
            "prefix-cache hits (cache_finding in records.jsonl); their cache checks read the server's count"
        )
    if stats.counter("foreign_figures"):
        out.append(
            f"{stats.counter('foreign_figures')} request(s): the server's figures were not the request's own (another "
            "request counted in the window); left out of every timing statistic (server_foreign)"
        )
    out += scenario_warnings(session.slim)
    return out


COMPLETE, INCOMPLETE = "complete", "incomplete"  # a session's outcome when its units ran to their end


def outcome_of(ok: bool) -> str:
    """The outcome of a session whose units all ran: complete when every one completed."""
    return COMPLETE if ok else INCOMPLETE


def failure_outcome(exc: BaseException) -> str:
    """The outcome of a session its failure ended: "stopped: <the message>" for lbeval's own (a 4xx, a full disk,
    a dead engine), "interrupted" for anything else (Ctrl-C, SIGTERM)."""
    return f"stopped: {exc}" if isinstance(exc, LbevalError) else "interrupted"


def run_to_end(
    sessions: Sequence[RunSession],
    run: Callable[[], Sequence[str]],
    contexts: Callable[[], Sequence[Context | None]],
    before_end: Callable[[], None] = lambda: None,
) -> None:
    """The one place a session's outcome is written: `run` sends the units and gives each session's outcome
    (`outcome_of`, or its own such as a stop); then `before_end` (the progress bars closed, the pairing marked)
    and each session ends with its context (`contexts`: what each session's units counted, None before one was
    made). A failure ends every session with `failure_outcome` and is raised again. `lbeval run` on one server
    or on replicas and `lbeval ab` on one endpoint or on replicas per side all end here."""
    try:
        outcomes = run()
    except BaseException as exc:  # a 4xx, a full disk, Ctrl-C or SIGTERM: recorded, then raised
        before_end()
        outcome = failure_outcome(exc)
        for session, ctx in zip(sessions, contexts(), strict=True):
            session.end(ctx, outcome, exc)
        raise
    before_end()
    for session, ctx, outcome in zip(sessions, contexts(), outcomes, strict=True):
        session.end(ctx, outcome, None)


def _finish(session: RunSession, probe: ProbeResult, ctx: Context | None, outcome: str) -> None:
    counters = dict(ctx.counters) if ctx is not None else {}
    stats = _stats(session, counters)
    complete = outcome == "complete" and stats.slots_final >= session.manifest.expected_records
    complete = complete and not stats.errors and not stats.duplicate_records
    m = session.manifest
    m.sessions[-1] = replace(
        m.sessions[-1],
        ended_at=now_iso(),
        outcome=outcome,
        records_written=session.written,
        server_process_start_time=ctx.watch.start_time if ctx is not None else probe.process_start_time,
    )
    m.stats = stats
    m.complete = complete
    m.ended_at = now_iso() if complete else None
    m.warnings = _warnings(session, probe, stats, complete)
    write_manifest(session.run_dir, m)


def _emit_to(
    session: RunSession, writer: RecordWriter, progress: Progress
) -> Callable[[RequestRecord, bool], None]:
    def emit(rec: RequestRecord, final: bool) -> None:
        if writer.closed:
            return  # a worker finishing after an interrupt: the next run re-sends it
        writer.write(rec)
        with session.lock:
            session.written += 1
            session.slim.append(replace(rec, topk=None, output_token_ids=None, output_text=None))
        progress.record(rec, final)
        if session.on_record is not None:
            session.on_record(rec)

    return emit


def _context(
    session: RunSession, client: Client, probe: ProbeResult, emit: Callable[[RequestRecord, bool], None]
) -> Context:
    config = session.config
    return Context(
        client=client,
        settings=config.request,
        model=probe.model,
        run_id=session.manifest.run_id,
        variant=config.variant,
        cold_mode=config.cold_mode,
        facts=CacheFacts(
            probe.prefix_caching,
            probe.block_size,
            reported=probe.cached_tokens_reported,
            cache_model=probe.cache_model,
        ),  # fmt: skip
        policy=config.retry,
        per_request_metrics=probe.metrics and config.concurrency == 1,
        tokenize=probe.tokenize,
        watch=ServerWatch(
            client,
            probe.metrics,
            probe.process_start_time,
            probe.finished_requests,
            config.metrics_wait_s,
            filtered=None,
            ledger=client.ledger,  # the session's, or its replica's (eval/run/replicas.replica_clients)
        ),
        emit=emit,
        seq_start=max((r.seq for r in session.slim), default=-1) + 1,
    )


def _start_session(session: RunSession, probe: ProbeResult) -> None:
    config = session.config
    session.manifest.sessions.append(
        SessionEntry(
            started_at=now_iso(),
            base_url=safe_url(config.base_url),
            server_version=probe.version,
            server_process_start_time=probe.process_start_time,
            records_on_disk=len(session.slim),
            units_to_run=len(session.todo),
            torn_lines_dropped=session.torn_dropped,
            retry=asdict(config.retry),
            timeout_s=config.timeout_s,
            quiet=config.quiet,
            # the launch spec given and its declared numerics change (the gate's cross_variant_cold names it)
            launch_spec=config.launch_spec,
            numerics=config.numerics,
        )
    )
    write_manifest(session.run_dir, session.manifest)


def _end(
    session: RunSession, probe: ProbeResult, ctx: list[Context], outcome: str, failure: BaseException | None
) -> None:
    """Write the session's outcome and LATEST. When that fails too after a failed write, one message says both."""
    try:
        _finish(session, probe, ctx[0] if ctx else None, outcome)
        write_latest(session.run_dir)
    except WriteFailed as exc:
        if isinstance(failure, WriteFailed):
            message = f"{failure}; {exc.path.name} could not be updated either"
            raise WriteFailed(message, failure.path, failure.errno) from None
        raise
