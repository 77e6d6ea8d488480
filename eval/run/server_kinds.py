"""Server kinds: what each OpenAI-compatible server offers lbeval, and how the probe tells them apart.

`KINDS` holds one row per kind (data only): where the per-request cached-token count is, how the prefix cache
is reset, whether `cache_salt` isolates requests, how token ids come back, the tokenize endpoint, the metrics
names, and the request fields a kind needs for lbeval's greedy sampling. Sources: docs/servers/ (llama-cpp-python
measured; SGLang and llama.cpp's C++ `llama-server` from their documentation and source only).

`identify` asks the server what it is, from what it answers (first match wins):

    /v1/models owned_by "vllm" | "sglang" | "llamacpp"    vllm | sglang | llama-server
    GET /version {"version": ...}                         vllm
    GET /server_info (or /get_server_info, /get_model_info)   sglang (server args: enable_cache_report, page_size)
    GET /openapi.json info.title "... llama.cpp Python API"   llama-cpp-python (info.version)
    GET /props with build_info                            llama-server
    anything else                                         unknown: read as vLLM-compatible, every capability
                                                          still checked by the probe

What a kind lacks is not assumed away: the probe records it, and a cache state the server cannot report is
labelled `unverified` in the records, the reports and the gate (README "Servers other than vLLM").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from eval.run.client import Client
from eval.run.reply import RequestFailed
from eval.run.retry import RetryPolicy, with_retries
from eval.run.wire import WireDialect

VLLM, SGLANG, LLAMA_SERVER, LLAMA_CPP_PYTHON, UNKNOWN = (
    "vllm",
    "sglang",
    "llama-server",
    "llama-cpp-python",
    "unknown",
)
COLD_SALT, COLD_RESET, COLD_EVICT = "salt", "reset", "evict"


@dataclass(frozen=True)
class ServerKind:
    name: str
    label: str
    cached_tokens: str  # where the per-request cached-token count is ("" : nowhere)
    cached_fix: str  # the server flag that turns it on ("" : none exists)
    reset: str  # the cache reset request ("" : none)
    reset_fix: str
    cache_salt: bool  # documented to isolate requests (the probe still checks it)
    token_ids: str  # wire.WireDialect.token_ids
    tokenize_path: str | None
    tokenize_key: str
    metrics: str  # the metric name prefix lbeval can read per request ("" : none it reads)
    metrics_fix: str
    health_path: str
    default_cold: str  # what `--cold auto` uses: salt | reset | evict
    request_fields: Mapping[str, Any] = field(default_factory=dict)  # sent with every generation request
    one_at_a_time: bool = False  # the server serializes requests (concurrency measures queueing)
    streaming_usage: bool = True  # streamed answers carry usage (with stream_options.include_usage)
    notes: tuple[str, ...] = ()  # stated in the run's warnings: what lbeval does without what the kind lacks

    def dialect(self, info: Mapping[str, Any]) -> WireDialect:
        """The client's wire dialect for this kind (`info`: what identify read, e.g. SGLang's server args)."""
        return WireDialect(
            token_ids=self.token_ids,
            cached_absent_is_zero=self.name == SGLANG and info.get("enable_cache_report") is True,
            tokenize_path=self.tokenize_path,
            tokenize_key=self.tokenize_key,
            reset=self.name if self.reset else "",
        )


_VLLM_KIND = ServerKind(
    VLLM,
    "vLLM",
    cached_tokens="usage.prompt_tokens_details.cached_tokens",
    cached_fix="--enable-prompt-tokens-details",
    reset="POST /reset_prefix_cache",
    reset_fix="VLLM_SERVER_DEV_MODE=1",
    cache_salt=True,
    token_ids="prefix",
    tokenize_path="/tokenize",
    tokenize_key="prompt",
    metrics="vllm:",
    metrics_fix="remove --disable-log-stats",
    health_path="/health",
    default_cold=COLD_SALT,
)

KINDS: dict[str, ServerKind] = {
    VLLM: _VLLM_KIND,
    UNKNOWN: replace(
        _VLLM_KIND,
        name=UNKNOWN,
        label="an unidentified OpenAI-compatible server",
        notes=(
            "the server was not identified: lbeval reads it as vLLM-compatible and checks every capability",
        ),
    ),
    SGLANG: ServerKind(
        SGLANG,
        "SGLang",
        cached_tokens="usage.prompt_tokens_details.cached_tokens (left out when 0)",
        cached_fix="--enable-cache-report",
        reset="POST /flush_cache",
        reset_fix="",
        cache_salt=True,
        token_ids="text",
        tokenize_path="/tokenize",
        tokenize_key="prompt",
        metrics="",
        metrics_fix="--enable-metrics (sglang: names; lbeval reads vllm: names per request)",
        health_path="/health",
        default_cold=COLD_SALT,
        request_fields={"return_token_ids": True},
        notes=(
            "SGLang support is implemented from its documentation and tested against a fake server only "
            "(untested on a real SGLang)",
            "SGLang: top-k alternatives come as token text and are mapped to ids through its /tokenize",
        ),
    ),
    LLAMA_SERVER: ServerKind(
        LLAMA_SERVER,
        "llama.cpp llama-server",
        cached_tokens="timings.cache_n (or usage.prompt_tokens_details.cached_tokens)",
        cached_fix="",
        reset="POST /slots/{id}?action=erase",
        reset_fix="/slots on (not --no-slots)",
        cache_salt=False,
        token_ids="field",
        tokenize_path="/tokenize",
        tokenize_key="content",
        metrics="",
        metrics_fix="--metrics (llamacpp: names; lbeval reads vllm: names per request)",
        health_path="/health",
        default_cold=COLD_RESET,
        request_fields={"repeat_penalty": 1.0},
        notes=(
            "llama-server support is implemented from its documentation only (untested on a real llama-server)",
            "llama-server: repeat_penalty 1.0 is sent with every request (greedy decoding without penalties)",
        ),
    ),
    LLAMA_CPP_PYTHON: ServerKind(
        LLAMA_CPP_PYTHON,
        "llama-cpp-python",
        cached_tokens="",
        cached_fix="",
        reset="",
        reset_fix="",
        cache_salt=False,
        token_ids="text",
        tokenize_path="/extras/tokenize",
        tokenize_key="input",
        metrics="",
        metrics_fix="",
        health_path="/v1/models",
        default_cold=COLD_EVICT,
        request_fields={"repeat_penalty": 1.0},
        one_at_a_time=True,
        streaming_usage=False,
        notes=(
            "llama-cpp-python reports no cached-token count, offers no cache reset and ignores cache_salt: the "
            "cache state of every request is UNVERIFIED (cold: an unrelated prompt is sent before each cold "
            "request to evict the single cached sequence; warm: the server's implicit prefix reuse)",
            "llama-cpp-python returns token text without ids: ids are mapped from the text through "
            "/extras/tokenize (a text that is not exactly one token gets a stable synthetic id below 0)",
            "llama-cpp-python: repeat_penalty 1.0 is sent with every request (its default 1.1 is not greedy)",
            "llama-cpp-python: no /metrics (no server-side timings), no usage in streamed answers, one request "
            "at a time",
        ),
    ),
}


@dataclass(frozen=True)
class Identity:
    kind: str
    version: str | None
    evidence: str  # what the server answered that identified it
    info: dict[str, Any] = field(default_factory=dict)  # kind-specific facts read on the way


_SGLANG_INFO_KEYS = ("enable_cache_report", "disable_radix_cache", "page_size", "served_model_name")


def _get(client: Client, path: str, policy: RetryPolicy) -> Any:
    """GET a JSON endpoint; None when it is not there (404, not JSON, a transport failure after retries)."""

    def call() -> Any:
        return client.get_json(path)

    try:
        out = with_retries(call, policy)
        return out.result() if out.failure is None else None
    except (RequestFailed, ValueError):
        return None


def _sglang(client: Client, policy: RetryPolicy, evidence: str) -> Identity:
    for path in ("/server_info", "/get_server_info"):
        data = _get(client, path, policy)
        if isinstance(data, dict):
            info = {k: data[k] for k in _SGLANG_INFO_KEYS if k in data}
            version = data.get("version")
            return Identity(SGLANG, str(version) if version else None, f"{evidence}; GET {path}", info)
    return Identity(SGLANG, None, evidence + " (no /server_info: enable_cache_report unknown)")


def identify(client: Client, owned_by: str, policy: RetryPolicy) -> Identity:
    """What the server is (see the module docstring); never raises for a missing endpoint."""
    if owned_by == SGLANG:
        return _sglang(client, policy, 'owned_by "sglang"')
    if owned_by == "llamacpp":
        props = _get(client, "/props", policy)
        build = props.get("build_info") if isinstance(props, dict) else None
        return Identity(LLAMA_SERVER, str(build) if build else None, 'owned_by "llamacpp"')
    version = _get(client, "/version", policy)
    if isinstance(version, dict) and version.get("version"):
        return Identity(VLLM, str(version["version"]), "GET /version")
    if owned_by != VLLM:
        for path in ("/server_info", "/get_server_info", "/get_model_info"):
            if isinstance(_get(client, path, policy), dict):
                return _sglang(client, policy, f"GET {path}")
        spec = _get(client, "/openapi.json", policy)
        api = spec.get("info") if isinstance(spec, dict) else None
        if isinstance(api, dict) and "llama.cpp Python API" in str(api.get("title", "")):
            found = api.get("version")
            return Identity(LLAMA_CPP_PYTHON, str(found) if found else None, "GET /openapi.json info.title")
        props = _get(client, "/props", policy)
        if isinstance(props, dict) and props.get("build_info"):
            return Identity(LLAMA_SERVER, str(props["build_info"]), "GET /props build_info")
    if owned_by == VLLM:
        return Identity(VLLM, None, 'owned_by "vllm" (no /version)')
    return Identity(
        UNKNOWN,
        None,
        f"none of /version, /server_info, /openapi.json, /props identified it (owned_by {owned_by!r})",
    )
