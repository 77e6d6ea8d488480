"""The served model's tokenizer (the server's /tokenize, or a local Hugging Face one) and the input budget.

The budget is max_model_len - output limit - chat template overhead, where the overhead is measured
with the tokenizer (tokens of the prompt wrapped as one chat user message with the generation prompt,
minus tokens of the bare prompt); raw datasets have no chat overhead. How a prompt is cut to the budget is
the benchmark's (eval/benchmarks/*/prompting.py: pred.py's middle truncation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from eval.errors import ConfigError, LbevalError

OVERHEAD_PROBE = "Answer the question based on the passage."


class Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...
    def chat_token_count(self, text: str) -> int: ...
    def describe(self) -> dict[str, Any]: ...
    def max_model_len(self) -> int | None: ...


def chat_overhead(tokenizer: Tokenizer) -> int:
    """Tokens the chat template adds around one user message (measured, never negative)."""
    return max(0, tokenizer.chat_token_count(OVERHEAD_PROBE) - len(tokenizer.encode(OVERHEAD_PROBE)))


def input_budget(max_model_len: int, max_tokens: int, overhead: int) -> int:
    budget = max_model_len - max_tokens - overhead
    if budget < 2:
        raise ConfigError(
            f"no room for input: max_model_len {max_model_len} - output limit {max_tokens} "
            f"- chat overhead {overhead} = {budget} tokens"
        )
    return budget


def status_line(status: int, body: str) -> str:
    """An HTTP error as one line: the status, the start of the body, and for 401/403 the option that sends a key."""
    text = " ".join(body.split())[:300]
    hint = "; give the server's API key with --api-key-env VAR" if status in (401, 403) else ""
    return f"HTTP {status}: {text}{hint}"


class ServerTokenizer:
    """The running vLLM server's /tokenize and /detokenize (no model download needed).

    A server without /tokenize (404) that has llama-cpp-python's /extras/tokenize and /extras/detokenize is
    read through those instead (its text tokenization adds the model's own special tokens, as /tokenize does);
    its chat prompt's token count is then the usage.prompt_tokens of a one-token chat completion, and its
    context length must be given (--max-model-len: it does not report one)."""

    def __init__(
        self, base_url: str, model: str | None = None, timeout: float = 60.0, api_key: str | None = None
    ) -> None:
        import httpx2

        self.base_url = base_url.rstrip("/")
        self.root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}  # never stored, never printed
        self._http = httpx2.Client(timeout=timeout, headers=headers)
        self._max_len: int | None = None
        self._extras = False  # llama-cpp-python: /extras/tokenize and /extras/detokenize
        self.model = model or self._first_model()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx2

        try:
            resp = self._http.post(f"{self.root}{path}", json=body)
        except httpx2.HTTPError as exc:
            raise LbevalError(f"tokenizer server {self.root}{path}: {exc}") from None
        if resp.status_code != 200:
            raise LbevalError(
                f"tokenizer server {self.root}{path}: {status_line(resp.status_code, resp.text)}"
            )
        data: dict[str, Any] = resp.json()
        return data

    def _tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /tokenize; on a 404 with /extras/tokenize there, switch to llama-cpp-python's endpoints."""
        if not self._extras:
            try:
                return self._post("/tokenize", body)
            except LbevalError as exc:
                if "HTTP 404" not in str(exc):
                    raise
                self._extras = True
        if "messages" in body:  # no chat tokenization there: the template's count from a 1-token completion
            chat = {"model": self.model, "messages": body["messages"], "max_tokens": 1, "temperature": 0}
            usage = self._post("/v1/chat/completions", chat).get("usage") or {}
            return {"count": int(usage["prompt_tokens"])}
        return self._post("/extras/tokenize", {"input": body["prompt"]})

    def _first_model(self) -> str:
        import httpx2

        url = f"{self.base_url}/models"
        try:
            resp = self._http.get(url)
        except httpx2.HTTPError as exc:
            raise LbevalError(f"cannot list models at {url}: {exc}") from None
        if resp.status_code != 200:
            raise LbevalError(f"cannot list models at {url}: {status_line(resp.status_code, resp.text)}")
        try:
            models = resp.json()["data"]
        except (KeyError, TypeError, ValueError) as exc:
            raise LbevalError(f"cannot list models at {url}: not a model list ({exc})") from None
        if not models:
            raise LbevalError(f"{self.base_url}/models lists no model")
        self._max_len = models[0].get("max_model_len")
        return str(models[0]["id"])

    def encode(self, text: str) -> list[int]:
        data = self._tokenize({"model": self.model, "prompt": text, "add_special_tokens": True})
        self._max_len = data.get("max_model_len", self._max_len)
        return [int(t) for t in data["tokens"]]

    def decode(self, ids: Sequence[int]) -> str:
        if self._extras:
            return str(self._post("/extras/detokenize", {"tokens": list(ids)})["text"])
        return str(self._post("/detokenize", {"model": self.model, "tokens": list(ids)})["prompt"])

    def chat_token_count(self, text: str) -> int:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": text}],
            "add_generation_prompt": True,
        }
        return int(self._tokenize(body)["count"])

    def max_model_len(self) -> int | None:
        return self._max_len

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "server",
            "base_url": self.base_url,
            "model": self.model,
            "max_model_len": self._max_len,
        }
        if self._extras:
            out["endpoints"] = "/extras/tokenize, /extras/detokenize (llama-cpp-python)"
        return out


class LocalTokenizer:
    """A local Hugging Face tokenizer folder (needs `transformers`: the `tokenizer` extra)."""

    def __init__(self, path: str, max_model_len: int | None = None) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise ConfigError(
                "--tokenizer needs the `transformers` package: install the `tokenizer` extra "
                "(pip install 'lbeval[tokenizer]')"
            ) from None
        self.path = path
        self._tok = AutoTokenizer.from_pretrained(path)
        self._max_len = max_model_len

    def encode(self, text: str) -> list[int]:
        return list(self._tok(text)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=True))

    def chat_token_count(self, text: str) -> int:
        out = self._tok.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
        )
        # transformers >= 5 returns a BatchEncoding (a mapping); older releases a list of ids
        ids: Any = out["input_ids"] if hasattr(out, "keys") else out  # type: ignore[call-overload,index,unused-ignore]
        return len(ids)

    def max_model_len(self) -> int | None:
        return self._max_len

    def describe(self) -> dict[str, Any]:
        return {"kind": "local", "path": self.path, "max_model_len": self._max_len}
