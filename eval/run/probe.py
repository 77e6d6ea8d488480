"""Server probe, before any pass: what the server is and which capabilities lbeval can rely on.

The server's kind (vLLM, SGLang, llama.cpp's llama-server, llama-cpp-python, unknown) is identified first
(eval/run/server_kinds.py) and recorded (`server_kind`, `server_evidence`, `version`); the client then speaks
that kind's dialect. Required capabilities stop the run with a message naming the server flag to add;
optional ones degrade with a warning that the manifest (and so the report) repeats. A kind that cannot
report cached tokens at all (llama-cpp-python) is not stopped: its cache state is `unverified`
(`cache_verification`), and every record, report and gate rule that depends on it says so. Every probe call goes through the run's RetryPolicy
(`with_retries`, the same loop and the same retryable failures as the passes' requests): a server still
warming up or answering 503 for a moment does not end the run; one that keeps failing ends it with one line
naming the request, the last failure and the attempts made.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from eval.errors import ConfigError, LbevalError
from eval.prepare.inputs import InputRow
from eval.records.cache_model import BLOCKS, CACHE_MODEL_KINDS, CHECKPOINTS, CacheModel
from eval.records.manifest_parts import ProbeFacts
from eval.records.types import Usage
from eval.run.client import Client
from eval.run.metrics_text import CACHE_CONFIG_INFO, FINISHED_COUNTER, PROCESS_START, Snapshot, parse_metrics
from eval.run.probe_counts import Counted, counted, counted_together
from eval.run.reply import Reply, RequestFailed
from eval.run.request import RequestSettings, build_request, endpoint_for, endpoint_path
from eval.run.retry import Retried, RetryPolicy, with_retries
from eval.run.server_kinds import (
    COLD_EVICT,
    COLD_RESET,
    COLD_SALT,
    KINDS,
    LLAMA_CPP_PYTHON,
    UNKNOWN,
    VLLM,
    ServerKind,
    identify,
)

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
    fault: bool = False  # the server offers it but it does the wrong thing (a finding, not a missing feature)


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
    # faults of the server the probe found (SALT_FAULT); each is also a warning, and stops the run only when
    # the run relies on what is broken
    findings: list[str] = field(default_factory=list)
    server_kind: str = VLLM  # eval/run/server_kinds.py KINDS
    server_label: str = "vLLM"
    server_evidence: str = ""  # what the server answered that identified it
    server_info: dict[str, Any] = field(default_factory=dict)  # kind-specific facts (SGLang's server args)
    cold_mode: str = COLD_SALT  # how cold requests miss the cache (`--cold auto` resolved for the kind)
    cold_method: str = ""  # the same, in words, with whether the server's count verifies it
    # "verified": the server reports cached tokens per request, checked against each pass's expectation;
    # "unverified": it reports none, so no record's cache state is known
    cache_verification: str = "verified"
    request_fields: dict[str, Any] = field(default_factory=dict)  # sent with every request (RequestSettings)
    # what the prefix cache can hit (eval/records/cache_model.py), measured by `_cache_model_check`; None when
    # nothing about hits can be known (no cached-token count, prefix caching off, no block size)
    cache_model: CacheModel | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def facts(self) -> ProbeFacts:
        """The probe as the manifest holds it (eval/records/manifest_parts.ProbeFacts)."""
        return ProbeFacts.from_dict(self.to_dict(), "probe")

    def missing(self) -> list[str]:
        return [
            f"{name}: {cap.detail}" + (f" (add {cap.fix})" if cap.fix else "")
            for name, cap in self.capabilities.items()
            if cap.required and cap.ok is False and not cap.fault
        ]

    def faulty(self) -> list[str]:
        """Required capabilities the server offers but gets wrong (findings, each with what to do instead)."""
        return [
            f"{cap.detail}" + (f" ({cap.fix})" if cap.fix else "")
            for cap in self.capabilities.values()
            if cap.required and cap.ok is False and cap.fault
        ]

    def check_stated_model(self, stated: str, spec: str | None) -> None:
        """Stop when a launch spec states a cache model kind the probe did not measure (one line)."""
        if not stated:
            return
        where = f"launch spec {spec}" if spec else "the launch spec"
        if stated not in CACHE_MODEL_KINDS:
            kinds = ", ".join(CACHE_MODEL_KINDS)
            raise ConfigError(f"{where}: cache_model {stated!r} is not one of {kinds}")
        got = self.cache_model
        if got is None or got.source != "probe":
            why = got.evidence if got is not None else "the server reports no cached-token count"
            raise ConfigError(
                f"{where} states cache_model {stated!r}, which the probe could not check ({why})"
            )
        if got.kind != stated:
            raise ConfigError(
                f"{where} states cache_model {stated!r}, but the server's hits follow {got.kind!r} ({got.evidence})"
            )

    def require(self) -> None:
        faulty, missing = self.faulty(), self.missing()
        if faulty:
            raise ConfigError("the server has a fault this run relies on: " + "; ".join(faulty + missing))
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


def _models(
    client: Client, wanted: str | None, policy: RetryPolicy
) -> tuple[str, list[str], int | None, str]:
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
    return model, ids, int(mml) if isinstance(mml, int) else None, str(entry.get("owned_by") or "")


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


def _other_metrics(client: Client, res: ProbeResult, kind: ServerKind, policy: RetryPolicy) -> None:
    """A kind whose metric names lbeval does not read per request (SGLang's sglang:, llama-server's llamacpp:)
    or that has no /metrics (llama-cpp-python): recorded, never scraped per request."""
    try:
        with_retries(client.metrics_text, policy).result()
        detail = f"/metrics answers, but not with the vllm: names lbeval reads per request ({kind.label})"
    except RequestFailed as exc:
        detail = f"/metrics unavailable ({exc.message})" + (
            "" if kind.metrics_fix else f": {kind.label} has none"
        )
    res.capabilities["metrics"] = Capability(False, False, detail, kind.metrics_fix)
    res.warnings.append(
        f"{kind.label}: no per-request server metrics: no server-side prefill/queue times and no cache counter "
        "cross-check; a restart is noticed only by refused connections"
    )


@dataclass(frozen=True)
class _Probing:
    """What every probe request shares."""

    client: Client
    settings: RequestSettings
    policy: RetryPolicy
    kind: ServerKind = KINDS[VLLM]


def _send_probe(pr: _Probing, res: ProbeResult, row: InputRow, salt: str) -> int | None:
    """One max_tokens=1 probe request; returns cached tokens (None if not reported). Records capabilities."""
    usage = _probe_usage(pr, res, row, salt)
    return None if usage is None else usage.cached_tokens


def _probe_usage(
    pr: _Probing, res: ProbeResult, row: InputRow, salt: str, ids: list[int] | None = None
) -> Usage | None:
    """`_send_probe`'s request (`ids`: token IDs sent as a raw row's prompt instead of its text); returns its
    usage (None when the request was refused for a capability)."""
    return _noted(pr, res, _Sent(row, salt, ids), _probe_send(pr, res, _Sent(row, salt, ids)))


@dataclass(frozen=True)
class _Sent:
    """One probe request: its row, its cache_salt and (a raw row's) prompt as token IDs."""

    row: InputRow
    salt: str
    ids: list[int] | None = None


def _probe_send(pr: _Probing, res: ProbeResult, sent: _Sent) -> Retried[Reply]:
    """The request on the wire, with the run's retries; nothing noted (`_noted` does that, in one thread)."""
    req = build_request(
        sent.row, pr.settings, model=res.model, cache_salt=sent.salt, stream=False, max_tokens=1
    )
    if sent.ids is not None:
        req["prompt"] = list(sent.ids)
    endpoint = endpoint_for(sent.row)
    return with_retries(lambda: pr.client.send(endpoint, req), pr.policy)


def _together(pr: _Probing, res: ProbeResult, sent: Sequence[_Sent]) -> list[Usage | None]:
    """Requests sent at once, each in its own thread, then noted in the order given (the first one's
    capabilities are the ones recorded, as when sent one after another)."""
    with ThreadPoolExecutor(max_workers=len(sent)) as pool:
        outs = list(pool.map(lambda one: _probe_send(pr, res, one), sent))
    return [_noted(pr, res, one, out) for one, out in zip(sent, outs, strict=True)]


def _noted(pr: _Probing, res: ProbeResult, sent: _Sent, out: Retried[Reply]) -> Usage | None:
    """One probe request's outcome into the result: a refusal that names a capability (None), another failure
    (stops the probe with one line), else the capabilities its response shows and its usage."""
    client, settings, row = pr.client, pr.settings, sent.row
    if out.failure is not None:
        exc = out.failure
        if exc.status is not None and 400 <= exc.status < 500 and "logprob" in exc.message.lower():
            detail = f"top {settings.top_logprobs} logprobs refused ({exc.message})"
            res.capabilities["top_logprobs"] = Capability(
                False, True, detail, f"--max-logprobs {settings.top_logprobs}"
            )
            return None
        if exc.status is None and not exc.retryable:
            fix = "a vLLM with return_tokens_as_token_ids" if pr.kind.token_ids == "prefix" else ""
            res.capabilities["token_ids"] = Capability(False, True, exc.message, fix)
            return None
        raise LbevalError(
            f"probe request {row.id} (POST {client.base_url}{endpoint_path(endpoint_for(row))}) failed after "
            f"{_attempts(out.attempts)} (--retries {pr.policy.retries}); last: {exc.message}"
        )
    resp = out.result()
    if res.finished_requests is not None:
        res.finished_requests += 1
    res.capabilities.setdefault(
        "top_logprobs", Capability(True, True, f"top {settings.top_logprobs} logprobs")
    )
    res.capabilities.setdefault("token_ids", Capability(True, True, _token_ids_detail(pr)))
    if "cached_tokens" not in res.capabilities:
        _note_cached_tokens(pr, res, resp.usage.cached_tokens)
    return resp.usage


def _note_cached_tokens(pr: _Probing, res: ProbeResult, cached: int | None) -> None:
    res.cached_tokens_reported = cached is not None
    kind = pr.kind
    if kind.cached_tokens:  # the kind can report them: required (the flag that turns them on is named)
        detail = kind.cached_tokens + (" reported" if cached is not None else " missing")
        res.capabilities["cached_tokens"] = Capability(cached is not None, True, detail, kind.cached_fix)
    else:
        detail = f"{kind.label} reports no cached-token count: the cache state of every request is unverified"
        res.capabilities["cached_tokens"] = Capability(False, False, detail)


def _token_ids_detail(pr: _Probing) -> str:
    kind = pr.kind
    if kind.token_ids == "prefix":
        return "tokens come back as token_id:N"
    if kind.token_ids == "field":
        return "logprob entries carry token ids"
    given = "generated ids from choices[].token_ids, " if "return_token_ids" in kind.request_fields else ""
    return f"{given}token text mapped to ids through POST {kind.tokenize_path}"


def _unverifiable(pr: _Probing, res: ProbeResult, cold_mode: str) -> None:
    """A kind without any cached-token count: salt and reset cannot be checked (nor, for llama-cpp-python,
    used); cold needs --cold evict, and every cache state is unverified."""
    kind = pr.kind
    fix = "--cold evict (or --cold auto)"
    salt = f"{kind.label} ignores cache_salt" if not kind.cache_salt else "cache_salt cannot be checked"
    res.capabilities["cache_salt"] = Capability(False, cold_mode == COLD_SALT, salt, fix)
    reset = (
        f"{kind.label} offers no prefix-cache reset" if not kind.reset else f"{kind.reset} cannot be checked"
    )
    res.capabilities["reset_prefix_cache"] = Capability(False, cold_mode == COLD_RESET, reset, fix)


SALT_FAULT = "cache_salt accepted but not honoured: a cache isolation fault"


def _salt_fault(pr: _Probing, res: ProbeResult, other: int, cold_mode: str, auto: bool) -> str:
    """A fresh salt that hit: the finding (recorded, warned), and the cold mode the run goes on with: the one
    asked for when it is not salt; the server's cache reset when `--cold auto` left the choice to lbeval and
    the server offers one (the probe then checks it); else salt, which `require` refuses with the finding."""
    finding = f"{SALT_FAULT} (a fresh cache_salt still hit {other} cached tokens)"
    res.findings.append(finding)
    switch = cold_mode == COLD_SALT and auto and bool(pr.kind.reset)
    note = "; cold requests use the cache reset instead (--cold reset), and the salted controls show the leak"
    res.warnings.append(finding + (note if switch else ""))
    fix = "salts cannot isolate requests on this server: use --cold reset or --cold auto"
    required = cold_mode == COLD_SALT and not switch
    res.capabilities["cache_salt"] = Capability(False, required, finding, fix, fault=True)
    return COLD_RESET if switch else cold_mode


USAGE_FAULT = "usage over-reports cached tokens: the server's own prefix-cache counters disagree"


def _hits(
    pr: _Probing,
    res: ProbeResult,
    row: InputRow,
    salt: str,
    ids: list[int] | None = None,
    counted_first: bool = False,
) -> int:
    """A probe request's cached tokens as the server counted them where /metrics can tell (a clean window,
    eval/run/probe_counts.py), else as its usage says. A usage claim of a hit the server did not count is a
    finding of its own (the records' counter check, the gate's cache_reports_consistent, then counts every
    such request), not a salt or reset that failed. `counted_first`: the server's count whenever it has one
    (the cache model's measurement, whose hit length a usage over-report would misname)."""
    if not res.metrics:
        usage = _probe_usage(pr, res, row, salt, ids)
        return (usage.cached_tokens if usage is not None else None) or 0
    got = counted(
        pr.client, pr.policy, lambda: _probe_usage(pr, res, row, salt, ids), expect=res.finished_requests
    )
    return _counted_hits(res, got, counted_first)


def _counted_hits(res: ProbeResult, got: Counted, counted_first: bool) -> int:
    """`_hits` of a counted request: 0 with a finding where usage claims hits the server did not count."""
    if got.usage_overreports:
        finding = (
            f"{USAGE_FAULT} (a response claimed {got.usage_cached} cached tokens, the server counted 0 hits)"
        )
        if not any(f.startswith(USAGE_FAULT) for f in res.findings):
            res.findings.append(finding)
            res.warnings.append(finding + "; the cache checks use the server's counts")
        return 0
    if counted_first and got.server_hits is not None:
        return got.server_hits  # how many, not only whether: the server's own count where it has one
    return got.usage_cached or 0


def _cache_checks(
    pr: _Probing, res: ProbeResult, row: InputRow, cold_mode: str, check_reset: bool, auto: bool = False
) -> None:
    """The probe row under a fresh salt, again (a hit), then under another fresh salt (none: the salt isolates);
    then the reset. The checks of a server whose cache model cannot be measured (`_folded_checks` otherwise)."""
    salt_a, salt_b = _probe_salt(), _probe_salt()  # fresh each time: earlier probes must not hit
    first = _send_probe(pr, res, row, salt_a)
    if first is None:
        _first_refused(pr, res, cold_mode)
        return
    again = _send_probe(pr, res, row, salt_a) or 0
    other = _hits(pr, res, row, salt_b)
    res.cache_hit_seen = again > 0
    cold_mode = _judge_salt(pr, res, again, other, cold_mode, auto)
    _reset_or_not(pr, res, cold_mode, check_reset, lambda: _hits(pr, res, row, salt_a))


def _folded_checks(
    pr: _Probing,
    res: ProbeResult,
    row: InputRow,
    ids: list[int],
    cold_mode: str,
    check_reset: bool,
    auto: bool,
) -> None:
    """`_cache_checks` and the cache model's measurement (`_measure_model`) in three requests' time instead of
    six: the first probe row (salt a) and the model row's prime (salt c) at once, both misses; the whole model
    row under salt c (the hit: the repeated prompt hit, and how much); then at once under salt b (the
    isolation) and under salt c again (the full blocks). A raw row's capabilities are the model row's (it is
    one)."""
    block = res.block_size or 0
    model_row, salt_a, salt_b, salt_c = _model_row(block), _probe_salt(), _probe_salt(), _probe_salt()
    first, prime = _first_and_prime(pr, res, _Sent(row, salt_a), _Sent(model_row, salt_c, ids[: 2 * block]))
    if first is None:
        _first_refused(pr, res, cold_mode)
        return
    hit = _hits(pr, res, model_row, salt_c, ids, counted_first=True)
    if hit > 0:
        other, again = _isolation_and_repeat(
            pr, res, _Sent(model_row, salt_b, ids), _Sent(model_row, salt_c, ids)
        )
    else:
        other, again = _hits(pr, res, model_row, salt_b, ids), 0
    res.cache_hit_seen = hit > 0
    cold_mode = _judge_salt(pr, res, hit, other, cold_mode, auto)
    if hit > 0:
        res.cache_model = _model_from(res, (prime, hit, again), len(ids), block)
    else:
        why = "not measured: the probe's repeated prompt did not hit"
        res.cache_model = CacheModel(BLOCKS, block, source="assumed", evidence=why)
    _reset_or_not(pr, res, cold_mode, check_reset, lambda: _hits(pr, res, model_row, salt_c, ids))


def _first_and_prime(pr: _Probing, res: ProbeResult, first: _Sent, prime: _Sent) -> tuple[int | None, int]:
    """The first probe request's cached tokens (None: refused, or none reported) and the prime's hits, sent at
    once in one window of the server's counts (eval/run/probe_counts.counted_together): on fresh salts neither
    can hit, and a window of 0 hits says so of each."""
    got = counted_together(
        pr.client, pr.policy, lambda: _together(pr, res, [first, prime]), expect=res.finished_requests
    )
    if got[0].usage_cached is None:
        return None, 0
    _counted_hits(res, got[0], counted_first=False)  # a usage claim the server did not count is a finding
    return got[0].usage_cached, _counted_hits(res, got[1], counted_first=True)


def _isolation_and_repeat(pr: _Probing, res: ProbeResult, other: _Sent, again: _Sent) -> tuple[int, int]:
    """The isolation request (`other`: a fresh salt, must miss) and the repeat (`again`: its full blocks) sent
    at once; their hits as `_hits` gives them. One window of the server's counts names each one's hits only
    where usage agrees with the server on the sum (eval/run/probe_counts.counted_together); where it does not
    (a usage that over- or under-reports), each is sent again alone, the isolation under another fresh salt
    (its first salt is cached now), so the two are judged as when sent one after the other."""
    got = counted_together(
        pr.client, pr.policy, lambda: _together(pr, res, [other, again]), expect=res.finished_requests
    )
    if all(g.server_hits is not None for g in got):
        return _counted_hits(res, got[0], counted_first=False), _counted_hits(res, got[1], counted_first=True)
    row, ids = other.row, other.ids
    return (
        _hits(pr, res, row, _probe_salt(), ids),
        _hits(pr, res, again.row, again.salt, again.ids, counted_first=True),
    )


def _first_refused(pr: _Probing, res: ProbeResult, cold_mode: str) -> None:
    if not res.cached_tokens_reported and not pr.kind.cached_tokens:
        _unverifiable(pr, res, cold_mode)


def _judge_salt(pr: _Probing, res: ProbeResult, hit: int, other: int, cold_mode: str, auto: bool) -> str:
    """What the repeated prompt's `hit` and another salt's `other` say of prefix caching and the salt; the cold
    mode the run goes on with."""
    if res.prefix_caching is False:
        res.capabilities["prefix_caching"] = Capability(
            False, False, "prefix caching is off", "--enable-prefix-caching"
        )
        res.warnings.append(
            "prefix caching is off: warm/repeat cannot hit; they are recorded without hit checks"
        )
    elif hit == 0:
        res.warnings.append("the probe's repeated prompt did not hit the prefix cache")
    elif other > 0 and pr.kind.name in (VLLM, UNKNOWN):
        res.salt_honored = False  # a server that takes cache_salt (vLLM) and ignores it: a fault, not a gap
        cold_mode = res.cold_mode = _salt_fault(pr, res, other, cold_mode, auto)
    else:
        res.salt_honored = other == 0
        res.capabilities["cache_salt"] = Capability(
            res.salt_honored,
            cold_mode == "salt",
            "cache_salt isolates requests"
            if res.salt_honored
            else f"a new cache_salt still hit {other} tokens",
            "a vLLM with cache_salt support, or use --cold reset (VLLM_SERVER_DEV_MODE=1)"
            if pr.kind.name in (VLLM, UNKNOWN)
            else "--cold reset (or --cold auto)",
        )
    return cold_mode


def _reset_or_not(
    pr: _Probing, res: ProbeResult, cold_mode: str, check_reset: bool, resend: Callable[[], int]
) -> None:
    if check_reset or cold_mode == "reset":
        _reset_check(pr, res, cold_mode, resend)
        salt = res.capabilities.get("cache_salt")
        if salt is not None and salt.fault and not res.reset_prefix_cache:
            salt.required = True  # no reset to fall back on: the refusal names the fault first
    else:
        detail = "not checked (it would empty the cache of the groups a resumed run continues)"
        res.capabilities["reset_prefix_cache"] = Capability(None, False, detail, pr.kind.reset_fix)


def _reset_check(pr: _Probing, res: ProbeResult, cold_mode: str, resend: Callable[[], int]) -> None:
    what = pr.kind.reset or "a prefix-cache reset"
    try:
        res.reset_prefix_cache = with_retries(pr.client.reset_prefix_cache, pr.policy).result()
        detail = f"{what} " + ("works" if res.reset_prefix_cache else "answered success false")
    except RequestFailed as exc:
        res.reset_prefix_cache = False
        detail = f"{what} failed ({exc.message})"
    if res.reset_prefix_cache and cold_mode == "reset" and res.cache_hit_seen and (resend() or 0) > 0:
        res.reset_prefix_cache = False
        detail = f"{what} said success but the cache still hit"
    required = cold_mode == "reset"
    res.capabilities["reset_prefix_cache"] = Capability(
        res.reset_prefix_cache, required, detail, pr.kind.reset_fix
    )


def _tokenize_check(pr: _Probing, res: ProbeResult) -> None:
    def tokenize() -> list[int]:
        return pr.client.tokenize(res.model, prompt="lbeval tokenize probe")

    path = pr.kind.tokenize_path or "/tokenize"
    try:
        res.tokenize = len(with_retries(tokenize, pr.policy).result()) > 0
        detail = f"POST {path} works"
    except (RequestFailed, KeyError, TypeError, ValueError) as exc:
        detail = f"POST {path} unavailable ({exc})"
        res.warnings.append(f"no {path}: the sibling-prefix control is checked as 'any hit'")
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
    policy = policy or RetryPolicy()
    name, ids, mml, owned_by = _models(client, model, policy)
    ident = identify(client, owned_by, policy)
    kind = KINDS[ident.kind]
    client.dialect, client.model_name = kind.dialect(ident.info), name
    if kind.request_fields:
        settings = replace(settings, server_fields={**kind.request_fields, **(settings.server_fields or {})})
    pr = _Probing(client, settings, policy, kind)
    asked, cold_mode = cold_mode, kind.default_cold if cold_mode == "auto" else cold_mode
    res = ProbeResult(
        model=name, model_ids=ids, max_model_len=mml, top_logprobs=settings.top_logprobs,
        server_kind=kind.name, server_label=kind.label, server_evidence=ident.evidence,
        server_info=dict(ident.info), cold_mode=cold_mode, request_fields=dict(settings.server_fields or {}),
    )  # fmt: skip
    res.capabilities["models"] = Capability(True, True, f"serves {name}")
    res.version = ident.version
    if res.version is None and kind.name in (VLLM, UNKNOWN):
        res.warnings.append("no /version: the server version is not recorded")
    if kind.metrics == "vllm:":
        _metrics(client, res, pr.policy)
    else:
        _other_metrics(client, res, kind, pr.policy)
    _kind_facts(res, ident.info)
    if cold_mode == COLD_EVICT and kind.default_cold != COLD_EVICT:
        res.capabilities["cold_evict"] = Capability(
            False, True, f"--cold evict suits a server that caches one sequence (llama-cpp-python), not {kind.label}",
            "--cold salt or --cold reset (or --cold auto)",
        )  # fmt: skip
    ordered = [m for m in ("chat", "raw") if m in modes] or ["chat"]
    _tokenize_check(pr, res)
    measurable, row = _model_ids(pr, res), _probe_row(ordered[0])
    if measurable.ids is not None and res.metrics:  # the raw mode is the model row's
        _folded_checks(pr, res, row, measurable.ids, cold_mode, check_reset, asked == "auto")
    else:
        _cache_checks(pr, res, row, cold_mode, check_reset, auto=asked == "auto")
        for mode in ordered[1:]:
            _send_probe(pr, res, _probe_row(mode), _probe_salt())
        _cache_model_check(pr, res, measurable)
    res.warnings += [n for n in kind.notes if n not in res.warnings]
    res.cache_verification = "verified" if res.cached_tokens_reported else "unverified"
    res.cold_method = cold_method(res, kind)
    return res


def _model_row(block: int) -> InputRow:
    """A raw probe row long enough for the cache-model check: more than two blocks of about one-token words."""
    vocab = _VOCAB_TEXT.split()
    words = " ".join(vocab[(i * 11) % len(vocab)] for i in range(2 * block + 48))
    return replace(_probe_row("raw"), id="probe-cache-model", prompt=f"lbeval cache model probe. {words}")


@dataclass(frozen=True)
class _ModelIds:
    """The cache-model row as token IDs (`ids`), or why the cache model cannot be measured (`why`; neither:
    nothing about hits is known: no block size, or prefix caching off)."""

    ids: list[int] | None = None
    why: str | None = None


def _model_ids(pr: _Probing, res: ProbeResult) -> _ModelIds:
    """The cache-model row's token IDs through POST /tokenize, asked before any generation request: with them
    (and the server's counts on /metrics) the probe folds its cache checks into the model's requests."""
    block = res.block_size
    if block is None or res.prefix_caching is False:
        return _ModelIds()
    if not res.tokenize:
        return _ModelIds(why="no /tokenize")
    try:
        ids = with_retries(lambda: pr.client.tokenize(res.model, prompt=_model_row(block).prompt), pr.policy)
        token_ids = ids.result()
    except (RequestFailed, KeyError, TypeError, ValueError) as exc:
        return _ModelIds(why=f"POST /tokenize failed ({exc})")
    if len(token_ids) < 2 * block + 2:
        return _ModelIds(
            why=f"the probe prompt is {len(token_ids)} tokens, not more than 2 blocks of {block}"
        )
    return _ModelIds(ids=token_ids)


def _cache_model_check(pr: _Probing, res: ProbeResult, model: _ModelIds) -> None:
    """Which cache model the server's hits follow (eval/records/cache_model.py): prime the first 2B token IDs
    of a prompt of n > 2B + 1 under a fresh salt, then send all n, twice. Dense blocks hit 2B; recurrent-state
    checkpoints hit B (the prime's replay boundary, floor((2B-1)/B)*B); both hit the full blocks on the repeat.
    Anything else is a finding; the run then expects dense blocks and says so. (`_folded_checks` sends the
    same requests where it can.)"""
    block = res.block_size
    if block is None or not res.cached_tokens_reported or res.prefix_caching is False:
        return  # nothing about hits is verified (the probe warned why)
    why = _unmeasurable(pr, res) or model.why
    if why is not None or model.ids is None:
        res.cache_model = CacheModel(BLOCKS, block, source="assumed", evidence=f"not measured: {why}")
        return
    res.cache_model = _measure_model(pr, res, model.ids, block)


def _unmeasurable(pr: _Probing, res: ProbeResult) -> str | None:
    if not res.tokenize:
        return "no /tokenize"
    if res.cache_hit_seen is False:
        return "the probe's repeated prompt did not hit"
    return None


def _measure_model(pr: _Probing, res: ProbeResult, ids: list[int], block: int) -> CacheModel:
    """The prime of 2B, the whole prompt, then the whole prompt again (`_model_from`)."""
    row, salt, primed = _model_row(block), _probe_salt(), 2 * block
    first = _hits(pr, res, row, salt, ids[:primed], counted_first=True)
    hit = _hits(pr, res, row, salt, ids, counted_first=True)
    again = _hits(pr, res, row, salt, ids, counted_first=True)
    return _model_from(res, (first, hit, again), len(ids), block)


def _model_from(res: ProbeResult, hits: tuple[int, int, int], n: int, block: int) -> CacheModel:
    """The cache model of a prime's, the whole prompt's and its repeat's hits (`hits`) on a prompt of `n` token
    IDs. Both kinds hit its full blocks on the repeat (a prompt keeps a checkpoint at its own replay boundary),
    so a server that hits less there (hits returned short) is no known model, whatever the partial hit was."""
    first, hit, again = hits
    primed, whole = 2 * block, (n - 1) // block * block
    evidence = f"a prime of {primed} of {n} token IDs, then all {n}: {hit} cached"
    if first == 0 and again == whole and hit in (primed, block):
        return CacheModel(BLOCKS if hit == primed else CHECKPOINTS, block, evidence=evidence)
    finding = (
        f"prefix-cache hits follow no known cache model ({evidence}, then {again} of {whole} on a repeat; "
        f"{first} on the prime; dense blocks would hit {primed} then {whole}, recurrent-state checkpoints "
        f"{block} then {whole}): warm hits are checked as dense blocks"
    )
    res.findings.append(finding)
    res.warnings.append(finding)
    return CacheModel(BLOCKS, block, source="assumed", evidence=evidence)


def _kind_facts(res: ProbeResult, info: dict[str, Any]) -> None:
    """What a kind's own endpoints said about its cache (SGLang's server args)."""
    page = info.get("page_size")
    if res.block_size is None and isinstance(page, int) and page > 0:
        res.block_size = page
    if info.get("disable_radix_cache") is True:
        res.prefix_caching = False
    elif "disable_radix_cache" in info and res.prefix_caching is None:
        res.prefix_caching = True


def cold_method(res: ProbeResult, kind: ServerKind) -> str:
    """How cold requests miss the cache, in words, and whether the server's count verifies it."""
    checked = (
        f"verified by {kind.cached_tokens} (0 cached tokens)"
        if res.cached_tokens_reported
        else f"NOT verified ({kind.label} reports no cached-token count)"
    )
    if res.cold_mode == COLD_SALT:
        return f"a fresh cache_salt per cold request; {checked}"
    if res.cold_mode == COLD_RESET:
        return f"a cache reset ({kind.reset or 'none offered'}) before each cold request; {checked}"
    if kind.name == LLAMA_CPP_PYTHON:
        return (
            "an unrelated prompt (another first token) before each cold request, evicting the one sequence "
            f"{kind.label} keeps cached; {checked}"
        )
    return f"an unrelated prompt before each cold request; {checked}"
