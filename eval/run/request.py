"""Request building, pure: one InputRow plus the run's RequestSettings -> the keyword arguments of the openai
package's `create` call (vLLM-specific parameters under `extra_body`), tested by dict equality; the wire body
the server receives and what a record keeps of it. `eval/run/client.py` sends what this builds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eval.prepare.inputs import InputRow

ENDPOINTS = {"chat": "chat", "raw": "completions"}


@dataclass(frozen=True)
class RequestSettings:
    """What every request of a run shares (recorded in the manifest; changing it refuses a resume)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    top_logprobs: int = 20
    chat_template_kwargs: dict[str, Any] | None = field(default_factory=lambda: {"enable_thinking": False})
    max_tokens_override: int | None = None  # replaces every example's max_tokens (smoke runs)
    # fields the server kind needs for the sampling above (llama.cpp: repeat_penalty 1.0), sent with every
    # generation request (eval/run/server_kinds.py; set by the probe)
    server_fields: dict[str, Any] | None = None


def endpoint_for(row: InputRow) -> str:
    """ "chat" (/v1/chat/completions) for chat datasets, "completions" (/v1/completions) for raw ones."""
    try:
        return ENDPOINTS[row.mode]
    except KeyError:
        raise ValueError(f"{row.dataset}/{row.id}: unknown mode {row.mode!r}") from None


def build_request(
    row: InputRow,
    settings: RequestSettings,
    *,
    model: str,
    cache_salt: str | None,
    stream: bool,
    max_tokens: int | None = None,
    prompt: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create` or `client.completions.create`.

    `max_tokens` overrides the example's limit (timing passes and re-primes use 1); `prompt` replaces the
    example's prompt (the sibling-prefix control). Never sets `prompt_logprobs`: vLLM skips prefix-cache reads
    for such requests, which would make a warm pass cold.
    """
    endpoint = endpoint_for(row)
    text = row.prompt if prompt is None else prompt
    override = settings.max_tokens_override  # 0 is a limit (refused by the options), never "the example's"
    limit = max_tokens if max_tokens is not None else (row.max_tokens if override is None else override)
    req: dict[str, Any] = {"model": model}
    if endpoint == "chat":
        req["messages"] = [{"role": "user", "content": text}]
    else:
        req["prompt"] = text
    req.update(temperature=settings.temperature, top_p=settings.top_p, seed=settings.seed, max_tokens=limit)
    if endpoint == "chat":
        req.update(logprobs=True, top_logprobs=settings.top_logprobs)
    else:
        req["logprobs"] = settings.top_logprobs
    req["stream"] = stream
    if stream:
        req["stream_options"] = {"include_usage": True}
    extra: dict[str, Any] = {"return_tokens_as_token_ids": True}
    if endpoint == "chat" and settings.chat_template_kwargs is not None:
        extra["chat_template_kwargs"] = dict(settings.chat_template_kwargs)
    if cache_salt is not None:
        extra["cache_salt"] = cache_salt
    if row.stop_token_ids:
        extra["stop_token_ids"] = list(row.stop_token_ids)
        extra["min_tokens"] = 1
    extra.update(settings.server_fields or {})
    req["extra_body"] = extra
    return req


def endpoint_path(endpoint: str) -> str:
    """The path under the /v1 base URL of an endpoint_for() endpoint."""
    return "/chat/completions" if endpoint == "chat" else "/completions"


def wire_body(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON body the server receives (extra_body merged in)."""
    body = {k: v for k, v in request.items() if k != "extra_body"}
    body.update(request.get("extra_body") or {})
    return body


def request_settings(request: dict[str, Any]) -> dict[str, Any]:
    """What a record keeps of a request: the body minus the prompt text (never credentials)."""
    return {k: v for k, v in wire_body(request).items() if k not in ("messages", "prompt")}
