"""A run's configuration (`RunConfig`), its checks and the settings a resume must match.

RunConfig(variant=..., inputs=..., topology=endpoints(url))   # eval/commands/run.run_config builds it from the options
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
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
class Topology:
    """Where one session's requests go, resolved once before the session starts (`resolve_topology`, the one
    place it is checked): its lanes, each one server (or one data-parallel rank of a routing endpoint) that runs
    its units at --concurrency, all lanes at once. `lbeval ab` runs two sides of the same lanes
    (eval/run/ab.py)."""

    lanes: int  # 1: one server; N: N replicas, or a routing endpoint's N ranks
    ranks: int  # a routing endpoint's data-parallel ranks, its lanes sharing one URL (1: none)
    # the running endpoints: given (one per replica; a routing endpoint's one URL), or once a launch spec's
    # servers are started, theirs (`started`); () before then
    urls: tuple[str, ...]
    spec: LaunchSpec | None  # the launch spec the session starts (its `replicas` servers, or its one router)

    @property
    def routing(self) -> bool:
        """A routing endpoint: one URL, a lane per data-parallel rank (pinned by a header)."""
        return self.ranks > 1

    @property
    def replicated(self) -> bool:
        return self.lanes > 1

    @property
    def base_url(self) -> str:
        """The first endpoint's URL ("" while a launch spec's servers are not started yet)."""
        return self.urls[0] if self.urls else ""

    @property
    def lane_urls(self) -> tuple[str, ...]:
        """Each lane's URL: every replica's, or a routing endpoint's one URL once per rank."""
        return self.urls * self.ranks if self.routing else self.urls

    @property
    def to_start(self) -> bool:
        """A launch spec whose servers the session starts (not started yet)."""
        return self.spec is not None and not self.urls

    def started(self, urls: Sequence[str]) -> Topology:
        """The same lanes at the URLs the session's started servers (or the running endpoints) answer on."""
        return replace(self, urls=tuple(urls))


def resolve_topology(urls: Sequence[str] = (), spec: LaunchSpec | None = None, dp_ranks: int = 1) -> Topology:
    """Where the requests go, from the options, checked (the one place): `urls` the running endpoints
    (`--base-url` repeated, a running spec's url list), or `spec` a launch spec the session starts (its
    `replicas`); `dp_ranks` (`--dp-ranks`, else the spec's `dp_ranks`) makes the one endpoint that many lanes."""
    if not urls and spec is None:
        raise ConfigError("give --base-url (the server's .../v1 URL)")
    refuse_repeated_endpoints(urls)  # replicas are distinct servers, however each is spelled
    if len(urls) > MAX_REPLICAS:
        raise ConfigError(f"--base-url: at most {MAX_REPLICAS} replicas, got {len(urls)}")
    ranks = dp_ranks if dp_ranks > 1 else (spec.dp_ranks if spec is not None else 1)
    if ranks > 1 and (len(urls) > 1 or (spec is not None and spec.replicas > 1)):
        raise ConfigError(f"--dp-ranks {ranks} routes through one endpoint: give one --base-url (or spec)")
    lanes = ranks if ranks > 1 else (spec.replicas if spec is not None else len(urls))
    return Topology(lanes, ranks, tuple(urls), spec)


def endpoints(*urls: str, dp_ranks: int = 1) -> Topology:
    """Running endpoints: one server, N replicas, or (`dp_ranks`) a routing endpoint's ranks."""
    return resolve_topology(urls, None, dp_ranks)


@dataclass(frozen=True)
class RunConfig:
    variant: str
    inputs: Path
    topology: Topology  # where the requests go (`resolve_topology`)
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

    @property
    def base_url(self) -> str:
        """The first endpoint's URL (`Topology.base_url`)."""
        return self.topology.base_url


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
