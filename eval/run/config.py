"""A run's configuration (`RunConfig`), its checks and the settings a resume must match.

RunConfig(variant=..., inputs=..., base_url=...)   # eval/commands/run.run_config builds it from the options
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from eval.errors import ConfigError, LbevalError
from eval.records.manifest_parts import RunSettings
from eval.records.run_folder import refuse_reserved_variant
from eval.records.vocabulary import PASS_CHOICES
from eval.redact import NO_SECRETS, Secrets
from eval.run.probe import ProbeResult
from eval.run.request import RequestSettings
from eval.run.retry import RetryPolicy
from eval.run.scenarios.settings import (
    ScenarioSettings,
    fit_default_plan,
    scenario_settings,
    validate_scenarios,
)
from eval.run.steps import validate_passes
from eval.serve.endpoints import MAX_REPLICAS, refuse_repeated_endpoints
from eval.serve.launch_specs import LaunchSpec

EXIT_INCOMPLETE = 3  # `lbeval run`: the run is not complete (interrupted, errors left, a file not written)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
COLD_MODES = ("auto", "salt", "reset", "evict")
DEFAULT_PASSES = tuple(PASS_CHOICES)
CLIENT_PACKAGES = ("openai", "httpx2", "httpcore2", "msgspec", "numpy", "tqdm")


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
    # a launch spec lbeval starts for the session, under the run folder's lock (eval/run/session.py); the
    # session then talks to the started server (base_url is not used)
    server: LaunchSpec | None = None
    # replicas of the variant (eval/run/replicas.py): every endpoint's URL, `--base-url` repeated; base_url is the
    # first's. Empty: one endpoint, base_url
    base_urls: tuple[str, ...] = ()
    # a routing endpoint's data-parallel ranks (`--dp-ranks N`: each replica is rank r of the one endpoint, pinned by
    # the X-data-parallel-rank header; eval/run/replicas.py). 1: none (a launch spec's dp_ranks may still say N)
    dp_ranks: int = 1
    # the launch spec the run was given (its name, None without one) and its declared numerics change
    # ("changed: REASON", "" none): written into each session of the manifest for the gate (eval/gate/cross_numerics.py)
    launch_spec: str | None = None
    numerics: str = ""
    # the cache model kind the launch spec states ("" none): the probe's measured one must agree
    # (`check_stated_model`; eval/records/cache_model.py)
    cache_model: str = ""
    # what the launch spec read from the environment (its ${VAR}s): the session's secrets, with the API key
    # (eval/run/session.run_secrets); never written, never shown
    secrets: Secrets = field(default=NO_SECRETS, repr=False, compare=False)


@dataclass(frozen=True)
class Topology:
    """Where one session's requests go, resolved once from its RunConfig (`topology_of`) before the session
    starts: its lanes, each one server (or one data-parallel rank of a routing endpoint) that runs its units at
    --concurrency, all lanes at once. `lbeval ab` runs two sides of the same lanes (eval/run/ab.py)."""

    lanes: int  # 1: one server; N: N replicas, or a routing endpoint's N ranks
    ranks: int  # a routing endpoint's data-parallel ranks, its lanes sharing one URL (1: none)
    urls: tuple[
        str, ...
    ]  # the running endpoints given (one per replica); () when a launch spec's are started
    spec: LaunchSpec | None  # the launch spec the session starts (its `replicas` servers, or its one router)

    @property
    def routing(self) -> bool:
        """A routing endpoint: one URL, a lane per data-parallel rank (pinned by a header)."""
        return self.ranks > 1

    @property
    def replicated(self) -> bool:
        return self.lanes > 1


def topology_of(config: RunConfig) -> Topology:
    """The session's lanes from the four ways a RunConfig names them: `--dp-ranks` (else the launch spec's
    `dp_ranks`) makes the one endpoint that many lanes; else a launch spec's `replicas`; else one lane per
    `--base-url` given (base_urls), at least the one base_url."""
    spec = config.server
    ranks = config.dp_ranks if config.dp_ranks > 1 else (spec.dp_ranks if spec is not None else 1)
    if ranks > 1:
        lanes = ranks
    elif spec is not None:
        lanes = spec.replicas
    else:
        lanes = max(1, len(config.base_urls))
    urls = () if spec is not None else (config.base_urls or (config.base_url,))
    return Topology(lanes, ranks, urls, spec)


def validate_name(kind: str, name: str) -> str:
    if not NAME_RE.match(name) or ".." in name:
        raise ConfigError(
            f"{kind} {name!r}: use letters, digits, '.', '_' and '-' (not starting with '.' or '-')"
        )
    return name


def validate_config(config: RunConfig) -> None:
    validate_name("variant", config.variant)
    refuse_reserved_variant(config.variant)
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
    refuse_repeated_endpoints(config.base_urls)  # replicas are distinct servers, however each is spelled
    if len(config.base_urls) > MAX_REPLICAS:
        raise ConfigError(f"--base-url: at most {MAX_REPLICAS} replicas, got {len(config.base_urls)}")


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


def run_settings(config: RunConfig) -> RunSettings:
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
    return RunSettings.from_dict(json.loads(json.dumps(settings)), "settings")  # as it reads back


def default_run_id(inputs_sha256: str) -> str:
    return f"run-{inputs_sha256[:12]}"


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
