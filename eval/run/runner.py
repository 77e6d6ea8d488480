"""`lbeval run`: probe the server, then send every unit of the plan, appending one record per request.

    execute_run(RunConfig(variant=..., inputs=..., base_url=...)) -> run directory

Re-running the same configuration resumes into the same run (run_id defaults to one derived from the inputs
file's hash): complete units are kept, missing ones are sent, nothing is sent twice. A run directory made with
other inputs, model or settings is refused with the differences. Ctrl-C or SIGTERM stops after flushing (the
session's outcome "interrupted" is written, the CLI exits 130); the manifest says the run is incomplete until a
later invocation completes it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm import tqdm

from eval.atomic import WriteFailed
from eval.errors import ConfigError, DataError, LbevalError
from eval.prepare.inputs import InputRow, inputs_digest, read_inputs
from eval.provenance import git_state, host_info, lbeval_version, package_versions
from eval.records.final import UnitKey, describe_duplicates, select_final, unit_of
from eval.records.run_folder import (
    MANIFEST_NAME,
    RECORDS_NAME,
    RecordWriter,
    RunManifest,
    append_server_record,
    read_manifest,
    repair_records,
    run_lock,
    write_latest,
    write_manifest,
)
from eval.records.types import RECORD_SCHEMA_VERSION, RequestRecord
from eval.records.vocabulary import PASS_CHOICES, PROGRESS_GROUPS, choice_of
from eval.redact import remember, safe_url
from eval.run.client import Client, RequestSettings
from eval.run.passes import (
    CacheFacts,
    Context,
    GroupState,
    RetryPolicy,
    ServerWatch,
    Unit,
    plan_units,
    resume_point,
    run_unit,
    short_hit,
    validate_passes,
)
from eval.run.probe import ProbeResult, probe_server
from eval.run.scenarios.execute import run_scenario_unit, scenario_warnings
from eval.run.scenarios.plan import (
    fetch_token_ids,
    is_scenario_unit,
    plan_scenario_units,
    scenario_resume_point,
)
from eval.run.scenarios.settings import (
    ScenarioSettings,
    fit_default_plan,
    resolve_budget,
    scenario_settings,
    sized_default_plan,
    validate_scenarios,
)
from eval.serve.process import sigterm_as_interrupt
from eval.terminal import echo_err, printable

EXIT_INCOMPLETE = 3  # `lbeval run`: the run is not complete (interrupted, errors left, a file not written)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
COLD_MODES = ("auto", "salt", "reset", "evict")
DEFAULT_PASSES = tuple(PASS_CHOICES)
CLIENT_PACKAGES = ("openai", "httpx", "httpx2", "msgspec", "numpy", "tqdm")


class RunIncomplete(LbevalError):
    """The session stopped and left the run incomplete (a full disk); re-running the same command resumes."""

    exit_code = EXIT_INCOMPLETE


@dataclass(frozen=True)
class RunConfig:
    variant: str
    inputs: Path
    base_url: str
    out: Path = Path("runs")
    model: str | None = None
    api_key_env: str | None = None  # name of the environment variable holding the key (never the key)
    passes: tuple[str, ...] = DEFAULT_PASSES
    timing_reps: int = 5
    concurrency: int = 1
    # "salt": a fresh cache_salt per cold request; "reset": the server's cache reset before each; "evict": an
    # unrelated prompt before each (llama-cpp-python, unverified); "auto": the server kind's (probe.cold_mode)
    cold_mode: str = "salt"
    request: RequestSettings = field(default_factory=RequestSettings)
    stream_all: bool = False  # stream cold/warm/repeat too (TTFT everywhere; costs more client CPU)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: float = 600.0
    run_id: str | None = None
    quiet: bool = False
    metrics_wait_s: float = 2.0
    scenarios: ScenarioSettings = field(default_factory=ScenarioSettings)  # eval/run/scenarios/settings.py


def validate_name(kind: str, name: str) -> str:
    if not NAME_RE.match(name) or ".." in name:
        raise ConfigError(
            f"{kind} {name!r}: use letters, digits, '.', '_' and '-' (not starting with '.' or '-')"
        )
    return name


def _validate(config: RunConfig) -> None:
    validate_name("variant", config.variant)
    if config.run_id is not None:
        validate_name("run id", config.run_id)
    validate_passes(config.passes)
    if config.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if "timing" in config.passes and config.timing_reps < 1:
        raise ConfigError("--timing-reps must be at least 1 with the timing pass")
    if config.cold_mode not in COLD_MODES:
        raise ConfigError(f"--cold must be one of {', '.join(COLD_MODES)}")
    _validate_cold(config)
    if not 0 <= config.request.top_logprobs <= 20:
        raise ConfigError("--top-logprobs must be between 0 and 20")
    validate_scenarios(config.scenarios, cold_mode="salt" if config.cold_mode == "auto" else config.cold_mode)


def _validate_cold(config: RunConfig) -> None:
    if config.cold_mode == "reset" and config.concurrency != 1:
        raise ConfigError("--cold reset needs --concurrency 1 (a reset would empty other requests' cache)")
    if config.cold_mode == "evict" and config.concurrency != 1:
        raise ConfigError(
            "--cold evict needs --concurrency 1 (the eviction prompt must come just before its cold)"
        )


def resolved_for_server(config: RunConfig, probe: ProbeResult) -> RunConfig:
    """The run's configuration for the server the probe found: `--cold auto` resolved for its kind and the
    request fields its kind needs (llama.cpp: repeat_penalty 1.0), both recorded in the manifest's settings."""
    fields = dict(probe.request_fields) or None
    out = replace(config, cold_mode=probe.cold_mode, request=replace(config.request, server_fields=fields))
    if config.cold_mode == "auto":
        _validate_cold(out)
        try:
            validate_scenarios(out.scenarios, cold_mode=out.cold_mode)
        except ConfigError as exc:  # e.g. the salts these scenarios need do not isolate (probe.SALT_FAULT)
            raise ConfigError("; ".join([*probe.findings, str(exc)])) from None
    scenarios, dropped = fit_default_plan(
        out.scenarios, cold_mode=out.cold_mode, tokenize=probe.tokenize, block_size=probe.block_size
    )
    probe.warnings += [w for w in dropped if w not in probe.warnings]  # the manifest's warnings repeat them
    return replace(out, scenarios=scenarios)


def _api_key(config: RunConfig) -> str | None:
    if config.api_key_env is None:
        return None
    key = os.environ.get(config.api_key_env)
    if not key:
        raise ConfigError(f"--api-key-env {config.api_key_env}: that environment variable is not set")
    remember(key)  # redacted wherever lbeval writes or prints it
    return key


def run_settings(config: RunConfig) -> dict[str, Any]:
    """The settings a resume must match (operational ones such as retries and the URL are per session)."""
    req = config.request
    settings = {
        "temperature": req.temperature,
        "top_p": req.top_p,
        "seed": req.seed,
        "top_logprobs": req.top_logprobs,
        "chat_template_kwargs": req.chat_template_kwargs,
        "max_tokens_override": req.max_tokens_override,
        "return_tokens_as_token_ids": True,
        "passes": list(config.passes) if config.scenarios.cache else [],
        "timing_reps": config.timing_reps if "timing" in config.passes and config.scenarios.cache else 0,
        "cold_mode": config.cold_mode,
        "concurrency": config.concurrency,
        "stream_all": config.stream_all,
        "endpoints": {"chat": "/v1/chat/completions", "raw": "/v1/completions"},
        **scenario_settings(config.scenarios),  # {} without scenarios beyond cache
    }
    if req.server_fields:  # what the server kind needs (eval/run/server_kinds.py); absent for vLLM
        settings["server_fields"] = dict(req.server_fields)
    normalized: dict[str, Any] = json.loads(json.dumps(settings))  # as it reads back from the manifest
    return normalized


def default_run_id(inputs_sha256: str) -> str:
    return f"run-{inputs_sha256[:12]}"


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _differences(old: RunManifest, inputs_sha: str, model: str, settings: dict[str, Any]) -> list[str]:
    diffs: list[str] = []
    if old.inputs_sha256 != inputs_sha:
        diffs.append(f"inputs_sha256 {old.inputs_sha256[:12]} -> {inputs_sha[:12]}")
    if old.model != model:
        diffs.append(f"model {old.model!r} -> {model!r}")
    for key in sorted(set(old.settings) | set(settings)):
        if old.settings.get(key) != settings.get(key):
            diffs.append(f"{key} {old.settings.get(key)!r} -> {settings.get(key)!r}")
    return diffs


def _new_manifest(
    config: RunConfig, run_id: str, header: dict[str, Any], sha: str, probe: ProbeResult, expected: int
) -> RunManifest:
    commit, dirty = git_state()
    return RunManifest(
        schema_version=RECORD_SCHEMA_VERSION,
        run_id=run_id,
        variant=config.variant,
        inputs_path=str(config.inputs),
        inputs_sha256=sha,
        inputs_header=header,
        model=probe.model,
        probe=probe.to_dict(),
        settings=run_settings(config),
        lbeval_version=lbeval_version(),
        git_commit=commit,
        git_dirty=dirty,
        client_versions=package_versions(CLIENT_PACKAGES),
        host=host_info(),
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
    diffs = _differences(old, fresh.inputs_sha256, fresh.model, fresh.settings)
    if diffs:
        cache_only = "scenarios" not in old.settings and "scenarios" in fresh.settings
        old_plan = " (a cache-only run: add --scenarios cache to resume it)" if cache_only else ""
        raise ConfigError(
            f"{run_dir} holds a run with a different configuration ({'; '.join(diffs)}); it will not be resumed "
            f"into. Pass --run-id NAME for a new run, or run with the original configuration{old_plan}."
        )
    # the latest probe and provenance describe the server and client now; the first start time stays
    probe = dict(fresh.probe)
    if probe.get("reset_prefix_cache") is None:  # not re-checked on resume: keep what the first session saw
        probe["reset_prefix_cache"] = old.probe.get("reset_prefix_cache")
        probe["capabilities"]["reset_prefix_cache"] = old.probe.get("capabilities", {}).get(
            "reset_prefix_cache"
        )
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


# --- progress ----------------------------------------------------------------------------------------------------


class Progress:
    """One tqdm bar per pass (ETA, errors, invalid samples); silent with --quiet."""

    def __init__(self, units: list[Unit], done: Counter[str], quiet: bool) -> None:
        totals: Counter[str] = Counter(choice_of(s.pass_name) for u in units for s in u.steps)
        self.bars: dict[str, Any] = {}
        self.errors: Counter[str] = Counter()
        self.invalid: Counter[str] = Counter()
        self._lock = threading.Lock()
        for pos, name in enumerate(b for b in PROGRESS_GROUPS if b in totals):
            self.bars[name] = tqdm(
                total=totals[name], initial=done[name], desc=f"{name:8}", position=pos, disable=quiet,
                file=sys.stderr, dynamic_ncols=True, leave=True,
            )  # fmt: skip

    def record(self, rec: RequestRecord, final: bool) -> None:
        name = choice_of(rec.pass_name)
        with self._lock:
            if rec.status == "error":
                self.errors[name] += 1
            elif rec.status == "invalid":
                self.invalid[name] += 1
            bar = self.bars[name]
            if final:
                bar.update(1)
            postfix = f"errors={self.errors[name]} invalid={self.invalid[name]}"
            bar.set_postfix_str(printable(postfix), refresh=final)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


# --- the run -----------------------------------------------------------------------------------------------------


@dataclass
class Session:
    """State of one invocation of `lbeval run` on a run directory."""

    config: RunConfig
    run_dir: Path
    manifest: RunManifest
    rows: list[InputRow]
    units: list[Unit]
    todo: list[tuple[Unit, GroupState, int]]
    slim: list[RequestRecord]  # every record on disk and written now, without top-k
    torn_dropped: int
    on_record: Callable[[RequestRecord], None] | None = None
    written: int = 0
    completed_units: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _existing(run_dir: Path) -> tuple[list[RequestRecord], int]:
    scan = repair_records(run_dir / RECORDS_NAME)
    return scan.records, len(scan.torn_lines)


def _todo(
    units: list[Unit], rows: list[InputRow], records: list[RequestRecord], same_server: bool
) -> list[tuple[Unit, GroupState, int]]:
    by_unit: dict[UnitKey, list[RequestRecord]] = {}
    for r in records:
        by_unit.setdefault(unit_of(r), []).append(r)
    todo: list[tuple[Unit, GroupState, int]] = []
    for unit in units:
        row = rows[unit.row_index]
        point = (scenario_resume_point if is_scenario_unit(unit) else resume_point)(
            unit, by_unit.get(UnitKey(row.dataset, row.id, unit.kind, unit.repetition), []), same_server
        )
        if point is not None:
            todo.append((unit, *point))
    return todo


@dataclass(frozen=True)
class Inputs:
    header: dict[str, Any]
    rows: list[InputRow]
    sha256: str
    run_dir: Path


def _read_inputs(config: RunConfig) -> Inputs:
    _validate(config)
    header, rows = read_inputs(config.inputs)
    if not rows:
        raise DataError(config.inputs, None, None, "no inputs to run")
    keys = Counter(r.key for r in rows)
    dup = next((k for k, n in keys.items() if n > 1), None)
    if dup is not None:
        raise DataError(config.inputs, None, "id", f"{dup[0]}/{dup[1]} appears twice")
    sha = inputs_digest(config.inputs)
    run_id = config.run_id or default_run_id(sha)
    return Inputs(asdict(header), rows, sha, config.out / config.variant / run_id)


def _prepare(config: RunConfig, client: Client, inputs: Inputs) -> tuple[Session, ProbeResult]:
    """Probe, plan and read the run folder (under its lock: see execute_run)."""
    run_dir, rows = inputs.run_dir, inputs.rows
    resuming = (run_dir / MANIFEST_NAME).exists()
    modes = {r.mode for r in rows}
    probe = probe_server(
        client, model=config.model, settings=config.request, modes=modes, cold_mode=config.cold_mode,
        check_reset=not resuming, policy=config.retry,
    )  # fmt: skip
    probe.require()
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
        config.scenarios, rows, block_size=probe.block_size, max_tokens_override=config.request.max_tokens_override,
        token_ids=fetch_token_ids(config.scenarios, rows, client, probe, config.request),
    )  # fmt: skip
    expected = sum(len(u.steps) for u in units)
    fresh = _new_manifest(config, run_dir.name, inputs.header, inputs.sha256, probe, expected)
    manifest = _open_manifest(config, run_dir, fresh)
    records, torn = _existing(run_dir)
    last = manifest.sessions[-1].get("server_process_start_time") if manifest.sessions else None
    same_server = last is not None and last == probe.process_start_time
    todo = _todo(units, rows, records, same_server)
    session = Session(config, run_dir, manifest, rows, units, todo, records, torn)
    return session, probe


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


def _stats(session: Session, counters: dict[str, int]) -> dict[str, Any]:
    sel = select_final(session.slim)
    finals = sel.final
    by_pass: dict[str, dict[str, int]] = {}
    for rec in finals.values():
        by_pass.setdefault(rec.pass_name, {"ok": 0, "invalid": 0, "error": 0})[rec.status] += 1
    retried = Counter(r.pass_name for r in session.slim if r.status == "invalid" and r.attempt == 0)
    return {
        "records": len(session.slim),
        "slots_final": len(finals),
        "by_pass": by_pass,
        "invalid_attempts": dict(retried),
        "transport_retries": sum(r.retries for r in session.slim),
        "duplicate_records": sum(sel.duplicates.values()),
        **{k: v for k, v in sorted(counters.items())},
    }


def _warnings(session: Session, probe: ProbeResult, stats: dict[str, Any], complete: bool) -> list[str]:
    config = session.config
    out = list(probe.warnings)
    if config.concurrency != 1:
        out.append(
            f"concurrency {config.concurrency}: timing figures are not valid (timing needs concurrency 1)"
        )
    errors = sum(p["error"] for p in stats["by_pass"].values())
    if errors:
        out.append(f"{errors} request(s) failed after retries; re-run the same command to retry them")
    missing = session.manifest.expected_records - stats["slots_final"]
    if not complete and missing > 0:
        out.append(
            f"incomplete: {missing} of {session.manifest.expected_records} request slots have no record yet"
        )
    warm = ("warm", "repeat", "timing_warm")
    short = [r for r in session.slim if r.pass_name in warm and r.attempt == 0 and short_hit(r)]
    warm_invalid = sum(n for p, n in stats["invalid_attempts"].items() if p in warm) - len(short)
    if warm_invalid:
        out.append(
            f"{warm_invalid} warm/repeat request(s) missed the prefix cache, were marked invalid and retried"
        )
    if short:
        first = short[0]
        out.append(
            f"{len(short)} warm/repeat request(s) found fewer cached tokens than the prompt's full blocks (first: "
            f"{first.dataset}/{first.example_id} {first.pass_name} found {first.usage.cached_tokens} of "
            f"{first.expected_cached_tokens}): short hits, kept invalid, not retried"
        )
    duplicated = describe_duplicates(select_final(session.slim))
    if duplicated is not None:
        out.append(f"damaged: {duplicated}; the run cannot be completed, start a new one with --run-id")
    if session.torn_dropped:
        out.append(
            f"{session.torn_dropped} torn record line(s) from an interrupted run were dropped on resume"
        )
    if stats.get("cached_tokens_mismatch"):
        out.append(
            f"{stats['cached_tokens_mismatch']} request(s): /metrics cache hits differ from cached_tokens"
        )
    out += scenario_warnings(session.slim)
    return out


def _finish(session: Session, probe: ProbeResult, ctx: Context | None, outcome: str) -> None:
    counters = dict(ctx.counters) if ctx is not None else {}
    stats = _stats(session, counters)
    complete = outcome == "complete" and stats["slots_final"] >= session.manifest.expected_records
    complete = complete and not any(p["error"] for p in stats["by_pass"].values())
    complete = complete and not stats["duplicate_records"]
    m = session.manifest
    m.sessions[-1].update(
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
    session: Session, writer: RecordWriter, progress: Progress
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


def _run_all(session: Session, ctx: Context) -> bool:
    """Run every pending unit; True when all completed. The other scenarios' units run one at a time after the
    cache scenario's (which may run --concurrency at once): a scenario unit owns the server while it runs."""
    ok = _run_units(session, ctx, [t for t in session.todo if not is_scenario_unit(t[0])])
    ctx.stop.clear()  # set by the pool once its units are done (an interrupt raises instead)
    for unit, gs, _ in (t for t in session.todo if is_scenario_unit(t[0])):
        if ctx.stop.is_set():
            return False
        ok = run_scenario_unit(ctx, session.rows, unit, gs) and ok
    return ok


def _run_units(session: Session, ctx: Context, todo: list[tuple[Unit, GroupState, int]]) -> bool:
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


def _context(
    session: Session, client: Client, probe: ProbeResult, emit: Callable[[RequestRecord, bool], None]
) -> Context:
    config = session.config
    return Context(
        client=client,
        settings=config.request,
        model=probe.model,
        run_id=session.manifest.run_id,
        variant=config.variant,
        cold_mode=config.cold_mode,
        facts=CacheFacts(probe.prefix_caching, probe.block_size, reported=probe.cached_tokens_reported),
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
        ),
        emit=emit,
        seq_start=max((r.seq for r in session.slim), default=-1) + 1,
    )


def _start_session(session: Session, probe: ProbeResult) -> None:
    config = session.config
    session.manifest.sessions.append(
        {
            "started_at": now_iso(),
            "base_url": safe_url(config.base_url),
            "server_version": probe.version,
            "server_process_start_time": probe.process_start_time,
            "records_on_disk": len(session.slim),
            "units_to_run": len(session.todo),
            "torn_lines_dropped": session.torn_dropped,
            "retry": asdict(config.retry),
            "timeout_s": config.timeout_s,
            "quiet": config.quiet,
        }
    )
    write_manifest(session.run_dir, session.manifest)


def execute_run(
    config: RunConfig,
    *,
    on_record: Callable[[RequestRecord], None] | None = None,
    server: Mapping[str, Any] | None = None,
) -> Path:
    """Run (or resume) the passes against the server at `config.base_url`; returns the run directory.

    The whole session holds the run folder's lock (`run_lock`: RunBusy when another process is writing it),
    from before the manifest is read until after it is last written. `server`: what lbeval started for this
    session (a managed server), noted in servers.jsonl under the same lock.

    A file that cannot be written (a full disk) ends the session: RunIncomplete (exit EXIT_INCOMPLETE, 3), one
    line naming the file, the reason and the space left; the records on disk stay whole lines, and once the
    file can be written the same command resumes."""
    try:
        # SIGTERM (CI, process managers) stops the session like Ctrl-C: outcome "interrupted", exit 130
        with sigterm_as_interrupt(), Client(config.base_url, _api_key(config), config.timeout_s) as client:
            inputs = _read_inputs(config)
            with run_lock(inputs.run_dir):
                session, probe = _prepare(config, client, inputs)
                session.on_record = on_record
                _start_session(session, probe)
                if server is not None:
                    append_server_record(inputs.run_dir, server)
                _send(session, client, probe)
    except WriteFailed as exc:
        space = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        hint = "free space, then re-run" if space else "once it can be written, re-run"
        raise RunIncomplete(f"{exc}; the run is incomplete: {hint} the same command to resume") from None
    return inputs.run_dir


def _send(session: Session, client: Client, probe: ProbeResult) -> None:
    """Send the pending units; the session's outcome is written to the manifest however they end."""
    config = session.config
    done = Counter(choice_of(r.pass_name) for r in select_final(session.slim).final.values())
    progress = Progress(session.units, done, config.quiet)
    ctx: list[Context] = []
    try:
        with RecordWriter(session.run_dir / RECORDS_NAME) as writer:
            ctx.append(_context(session, client, probe, _emit_to(session, writer, progress)))
            outcome = "complete" if _run_all(session, ctx[0]) else "incomplete"
    except BaseException as exc:  # a 4xx, a full disk, Ctrl-C or SIGTERM: recorded, then raised
        progress.close()
        _end(session, probe, ctx, f"stopped: {exc}" if isinstance(exc, LbevalError) else "interrupted", exc)
        raise
    progress.close()
    _end(session, probe, ctx, outcome, None)


def _end(
    session: Session, probe: ProbeResult, ctx: list[Context], outcome: str, failure: BaseException | None
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
