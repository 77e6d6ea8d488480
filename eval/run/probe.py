"""Server probe, before any pass: what the server is and which capabilities lbeval can rely on.

Required capabilities stop the run with a message naming the vLLM flag to add; optional ones degrade with a
warning that the manifest (and so the report) repeats. Every probe call goes through the run's RetryPolicy
(`with_retries`, the same loop and the same retryable failures as the passes' requests): a server still
warming up or answering 503 for a moment does not end the run; one that keeps failing ends it with one line
naming the request, the last failure and the attempts made.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from eval.errors import ConfigError, LbevalError
from eval.prepare.inputs import InputRow
from eval.run.client import Client, RequestFailed, RequestSettings, build_request, endpoint_for, endpoint_path
from eval.run.metrics_text import CACHE_CONFIG_INFO, FINISHED_COUNTER, PROCESS_START, Snapshot, parse_metrics
from eval.run.retry import RetryPolicy, with_retries

# Common words (about one token each on most tokenizers): ~300 tokens, two or more 128-token blocks, cheap to
# prefill on a CPU server.
PROBE_WORDS = 280
_VOCAB_TEXT = (
    "the of and to in is was for on that with as by at from it his an were are which this be or has had not "
    "first one their its new after but who they have her she two been other when there all during into school "
    "time may years more most only over city some world would where later up such used many can state about"
)


@dataclass
class Capability:
    ok: bool | None  # None: not checked
    required: bool
    detail: str
    fix: str = ""  # the server flag or setting that provides it


@dataclass
class ProbeResult:
    model: str
    model_ids: list[str]
    max_model_len: int | None = None
    version: str | None = None
    metrics: bool = False
    prefix_caching: bool | None = None
    block_size: int | None = None
    cached_tokens_reported: bool = False
    top_logprobs: int = 20
    cache_hit_seen: bool | None = None  # the probe's repeated prompt hit the cache
    salt_honored: bool | None = None
    reset_prefix_cache: bool | None = None
    tokenize: bool = False
    process_start_time: float | None = None
    # vllm:request_success once the probe's own requests are counted (the runner waits for it)
    finished_requests: float | None = None
    capabilities: dict[str, Capability] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def missing(self) -> list[str]:
        return [
            f"{name}: {cap.detail}" + (f" (add {cap.fix})" if cap.fix else "")
            for name, cap in self.capabilities.items()
            if cap.required and cap.ok is False
        ]

    def require(self) -> None:
        missing = self.missing()
        if missing:
            raise ConfigError("the server lacks what lbeval needs: " + "; ".join(missing))


def _probe_row(mode: str) -> InputRow:
    vocab = _VOCAB_TEXT.split()
    words = " ".join(vocab[(i * 7) % len(vocab)] for i in range(PROBE_WORDS))
    text = f"lbeval capability probe. {words} Reply with one word."
    return InputRow(
        dataset="lbeval_probe",
        id=f"probe-{mode}",
        prompt=text,
        mode=mode,
        max_tokens=1,
        prompt_sha256="",
        prompt_tokens=None,
        truncated=False,
        answers=[],
        all_classes=None,
        length=0,
    )


def _probe_salt() -> str:
    return "lbeval-probe-" + secrets.token_hex(8)


def _attempts(n: int) -> str:
    return f"{n} attempt" + ("" if n == 1 else "s")


def _models(client: Client, wanted: str | None, policy: RetryPolicy) -> tuple[str, list[str], int | None]:
    out = with_retries(client.models, policy)
    if out.failure is not None:
        raise LbevalError(
            f"cannot list models at {client.base_url}/models after {_attempts(out.attempts)}: "
            f"{out.failure.message}"
        )
    entries = out.result()
    ids = [str(e.get("id")) for e in entries if e.get("id")]
    if not ids:
        raise LbevalError(f"{client.base_url}/models lists no model")
    model = wanted or ids[0]
    if model not in ids:
        raise ConfigError(f"model {model!r} is not served at {client.base_url} (served: {', '.join(ids)})")
    entry = next(e for e in entries if e.get("id") == model)
    mml = entry.get("max_model_len")
    return model, ids, int(mml) if isinstance(mml, int) else None


def _metrics(client: Client, res: ProbeResult, policy: RetryPolicy) -> Snapshot | None:
    try:
        snap = parse_metrics(with_retries(client.metrics_text, policy).result())
    except (RequestFailed, ValueError) as exc:
        msg = exc.message if isinstance(exc, RequestFailed) else str(exc)
        res.capabilities["metrics"] = Capability(
            False, False, f"/metrics unavailable ({msg})", "remove --disable-log-stats"
        )
        res.warnings.append(
            "no /metrics: no server-side prefill/queue times and no cache counter cross-check"
        )
        return None
    res.metrics = True
    res.process_start_time = snap.total(PROCESS_START)
    res.finished_requests = snap.counter(FINISHED_COUNTER)
    info = snap.info_labels(CACHE_CONFIG_INFO) or {}
    if "enable_prefix_caching" in info:
        res.prefix_caching = info["enable_prefix_caching"].lower() == "true"
    if info.get("block_size", "").isdigit():
        res.block_size = int(info["block_size"])
    res.capabilities["metrics"] = Capability(True, False, "/metrics answers")
    if res.block_size is None:
        res.warnings.append("vllm:cache_config_info gives no block_size: warm hits are checked as 'any hit'")
    return snap


@dataclass(frozen=True)
class _Probing:
    """What every probe request shares."""

    client: Client
    settings: RequestSettings
    policy: RetryPolicy


def _send_probe(pr: _Probing, res: ProbeResult, row: InputRow, salt: str) -> int | None:
    """One max_tokens=1 probe request; returns cached tokens (None if not reported). Records capabilities."""
    client, settings = pr.client, pr.settings
    endpoint = endpoint_for(row)
    req = build_request(row, settings, model=res.model, cache_salt=salt, stream=False, max_tokens=1)
    out = with_retries(lambda: client.send(endpoint, req), pr.policy)
    if out.failure is not None:
        exc = out.failure
        if exc.status is not None and 400 <= exc.status < 500 and "logprob" in exc.message.lower():
            detail = f"top {settings.top_logprobs} logprobs refused ({exc.message})"
            res.capabilities["top_logprobs"] = Capability(
                False, True, detail, f"--max-logprobs {settings.top_logprobs}"
            )
            return None
        if exc.status is None and not exc.retryable:
            fix = "a vLLM with return_tokens_as_token_ids"
            res.capabilities["token_ids"] = Capability(False, True, exc.message, fix)
            return None
        raise LbevalError(
            f"probe request {row.id} (POST {client.base_url}{endpoint_path(endpoint)}) failed after "
            f"{_attempts(out.attempts)} (--retries {pr.policy.retries}); last: {exc.message}"
        )
    resp = out.result()
    if res.finished_requests is not None:
        res.finished_requests += 1
    res.capabilities.setdefault(
        "top_logprobs", Capability(True, True, f"top {settings.top_logprobs} logprobs")
    )
    res.capabilities.setdefault("token_ids", Capability(True, True, "tokens come back as token_id:N"))
    cached = resp.usage.cached_tokens
    if "cached_tokens" not in res.capabilities:
        res.cached_tokens_reported = cached is not None
        detail = "usage.prompt_tokens_details.cached_tokens " + (
            "reported" if cached is not None else "missing"
        )
        res.capabilities["cached_tokens"] = Capability(
            cached is not None, True, detail, "--enable-prompt-tokens-details"
        )
    return cached


def _cache_checks(pr: _Probing, res: ProbeResult, row: InputRow, cold_mode: str, check_reset: bool) -> None:
    salt_a, salt_b = _probe_salt(), _probe_salt()  # fresh each time: earlier probes must not hit
    first = _send_probe(pr, res, row, salt_a)
    if first is None:
        return
    again = _send_probe(pr, res, row, salt_a) or 0
    other = _send_probe(pr, res, row, salt_b) or 0
    res.cache_hit_seen = again > 0
    if res.prefix_caching is False:
        res.capabilities["prefix_caching"] = Capability(
            False, False, "prefix caching is off", "--enable-prefix-caching"
        )
        res.warnings.append(
            "prefix caching is off: warm/repeat cannot hit; they are recorded without hit checks"
        )
    elif again == 0:
        res.warnings.append("the probe's repeated prompt did not hit the prefix cache")
    else:
        res.salt_honored = other == 0
        res.capabilities["cache_salt"] = Capability(
            res.salt_honored,
            cold_mode == "salt",
            "cache_salt isolates requests"
            if res.salt_honored
            else f"a new cache_salt still hit {other} tokens",
            "a vLLM with cache_salt support, or use --cold reset (VLLM_SERVER_DEV_MODE=1)",
        )
    if check_reset or cold_mode == "reset":
        _reset_check(pr, res, cold_mode, lambda: _send_probe(pr, res, row, salt_a))
    else:
        detail = "not checked (it would empty the cache of the groups a resumed run continues)"
        res.capabilities["reset_prefix_cache"] = Capability(None, False, detail, "VLLM_SERVER_DEV_MODE=1")


def _reset_check(pr: _Probing, res: ProbeResult, cold_mode: str, resend: Any) -> None:
    try:
        res.reset_prefix_cache = with_retries(pr.client.reset_prefix_cache, pr.policy).result()
        detail = "POST /reset_prefix_cache " + (
            "works" if res.reset_prefix_cache else "answered success false"
        )
    except RequestFailed as exc:
        res.reset_prefix_cache = False
        detail = f"POST /reset_prefix_cache failed ({exc.message})"
    if res.reset_prefix_cache and cold_mode == "reset" and res.cache_hit_seen and (resend() or 0) > 0:
        res.reset_prefix_cache = False
        detail = "POST /reset_prefix_cache said success but the cache still hit"
    required = cold_mode == "reset"
    res.capabilities["reset_prefix_cache"] = Capability(
        res.reset_prefix_cache, required, detail, "VLLM_SERVER_DEV_MODE=1"
    )


def _tokenize_check(pr: _Probing, res: ProbeResult) -> None:
    def tokenize() -> list[int]:
        return pr.client.tokenize(res.model, prompt="lbeval tokenize probe")

    try:
        res.tokenize = len(with_retries(tokenize, pr.policy).result()) > 0
        detail = "POST /tokenize works"
    except (RequestFailed, KeyError, TypeError, ValueError) as exc:
        detail = f"POST /tokenize unavailable ({exc})"
        res.warnings.append("no /tokenize: the sibling-prefix control is checked as 'any hit'")
    res.capabilities["tokenize"] = Capability(res.tokenize, False, detail)


def probe_server(
    client: Client,
    *,
    model: str | None,
    settings: RequestSettings,
    modes: set[str],
    cold_mode: str = "salt",
    check_reset: bool = True,
    policy: RetryPolicy | None = None,
) -> ProbeResult:
    """Probe `client`'s server; call `.require()` on the result to stop on missing required capabilities.

    `check_reset=False` skips trying POST /reset_prefix_cache in salt mode (a resume must keep the cache).
    `policy`: the run's retry policy (default RetryPolicy()), applied to every probe call."""
    pr = _Probing(client, settings, policy or RetryPolicy())
    name, ids, mml = _models(client, model, pr.policy)
    res = ProbeResult(model=name, model_ids=ids, max_model_len=mml, top_logprobs=settings.top_logprobs)
    res.capabilities["models"] = Capability(True, True, f"serves {name}")
    try:
        res.version = with_retries(client.version, pr.policy).result()
    except RequestFailed:
        res.warnings.append("no /version: the server version is not recorded")
    _metrics(client, res, pr.policy)
    ordered = [m for m in ("chat", "raw") if m in modes] or ["chat"]
    _cache_checks(pr, res, _probe_row(ordered[0]), cold_mode, check_reset)
    for mode in ordered[1:]:
        _send_probe(pr, res, _probe_row(mode), _probe_salt())
    _tokenize_check(pr, res)
    return res
