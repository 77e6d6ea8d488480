"""A fake OpenAI-compatible vLLM server for tests and benches: a test double, not a product feature (it is not
in the installed package, and nothing in eval/ or scorers/ imports it; tests/eval/test_architecture.py).

Serves on 127.0.0.1 (free port) from a thread: /v1/models, /v1/chat/completions, /v1/completions (whole or
streamed), /version, /health, /metrics (vllm:* counters and histograms), /tokenize, /detokenize and
/reset_prefix_cache. It behaves like vLLM where lbeval depends on it:

- Tokens: every whitespace-separated word is one token (`t<N>` is token N, others hash to an id), "\\n" is
  NEWLINE_ID. Chat adds CHAT_PREFIX before and CHAT_SUFFIX after the user text.
- Prefix cache: blocks of `block_size` tokens, chained hashes with the cache_salt mixed into the first block;
  a request reports cached_tokens for whole leading blocks found, never covering the last prompt token.
- Output: deterministic greedy tokens from the prompt tokens and seed, top-k alternatives with float32
  logprobs, tokens returned as "token_id:N" when return_tokens_as_token_ids is set.
- /metrics: prefix_cache_queries/hits counters, request prefill/queue/TTFT/e2e histograms, cache_config_info,
  process_start_time_seconds; optionally updated after a lag (vLLM records them after answering).

Faults (`Fault`): 5xx N times, a 4xx with a message, a dropped connection mid-stream or mid-body, a slow
(trickling) stream or whole body, a divergence from generated position p, a warm cache miss (the prompt's
blocks evicted first), a restart before a request (counters, version start time and cache reset).
`restart(down_s)` also closes the port for a while (connection refused, then back).

Causes a scenario isolates (knobs set on the server, each off by default; tests/eval/run/test_scenarios.py):
- `batch_effect` (BatchEffect): outputs depend on batch composition. Every generation request waits `window_s`;
  one that saw another generation request in flight meanwhile gets `jitter` added to every logprob and, with
  `flip_at`, its greedy tokens change from that position on. With `window_s=None` a batch forms on a count of
  arrivals instead of a time window: `expect_batch(bodies)` announces one (tests/eval/batch_hook.py does, from
  lbeval's batch sender), each announced request waits until every member has arrived and is then a batch of
  that size; a request nobody announced is alone, at once.
- `prefix_effect` (PrefixEffect): outputs depend on the prefix-hit length. The fake remembers each salt's
  prompts; when an earlier prompt with the same salt is a proper prefix of this one (length p), p % modulus ==
  residue makes the output diverge from `position`, and p in `drop_hit_at` drops the hit to 0 (cached_tokens 0).
- `stop_effect` (StopEffect): after a request that ended on a stop string (`stop` in the body: the text is cut
  before the first occurrence, finish_reason "stop"), the next generation request diverges from `position`.
- `repeat_flips` ({k, ...}) with `repeat_flip_position`: the k-th time (0-based) the same prompt token IDs are
  generated, the output diverges from that position (variation between repeats).
- `logprob_shift` (nats): added to every reported logprob of every generation request, tokens untouched (the
  plugin's logprob_shift fault: a server that agrees with itself but reports other numbers than the base).
Prompts given as token-ID lists (/v1/completions `prompt: [ids]`) are served like their text.

Dialects (`dialect`, DIALECTS; docs/servers/): the same model behind another server's wire format.
- "vllm" (default): as above.
- "sglang": owned_by "sglang"; no /version; GET /server_info and /get_server_info (enable_cache_report =
  report_cached_tokens, page_size = block_size, disable_radix_cache, version) and /get_model_info (each can be
  turned off with `server_info_enabled`); GET|POST /flush_cache (plain text; 400 when reset_success is false)
  instead of /reset_prefix_cache; usage.prompt_tokens_details only when the flag is on AND the count is > 0
  (null otherwise); logprob tokens as text, the generated ids in choices[].token_ids with return_token_ids;
  /metrics with sglang: names (sglang:prompt_tokens_total, sglang:cache_hit_rate, ...).
- "llama-cpp-python": owned_by "me" (the model id is a path); no /version, /health, /metrics, /tokenize,
  /reset_prefix_cache (404); GET /openapi.json with info.title "🦙 llama.cpp Python API"; POST
  /extras/tokenize {"input"} and /extras/detokenize; no cached-token count anywhere, no usage in streams;
  cache_salt ignored; logprob tokens as text only; repeat_penalty defaults to 1.1, and a request without
  repeat_penalty 1.0 diverges from generated position 1 (the penalty changes greedy picks).
`owned_by` overrides the models list's owned_by (identification by endpoints).

Routing mode (`dp_engines` N > 1): one endpoint in front of N engines, as vLLM's internal data-parallel load
balancing: each engine has its own prefix cache and counters, /metrics labels every engine's series
`engine="e"`, and a generation request goes to the engine its `X-data-parallel-rank` header names (DP_RANK_HEADER;
a rank out of range is a 400), else round-robin. `dp_honor_header=False` ignores the header (round-robin for
every request: a router that does not pin; with `dp_ignore_to` E, every request goes to engine E, so a request
pinned elsewhere is misrouted on every attempt whatever the timing of concurrent ranks; with `dp_by_salt`, a
request goes to the engine its cache_salt hashes to, so requests of one salt meet one cache whatever else is in
flight, as behind a cache-aware router). /reset_prefix_cache empties every engine's cache; `routed` lists the
(engine, prompt text, cache_salt) of every generation request.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import re
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from eval.terminal import echo

NEWLINE_ID = 198
CHAT_PREFIX = [1, 882, 198]  # <|im_start|> user \n
CHAT_SUFFIX = [2, 198, 1, 520, 198]  # <|im_end|> \n <|im_start|> assistant \n
VOCAB_LOW, VOCAB_HIGH = 1000, 49_000
DIALECTS = ("vllm", "sglang", "llama-cpp-python")
LLAMA_CPP_TITLE = "🦙 llama.cpp Python API"
BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, float("inf"))
_WORD = re.compile(r"\n|[^\s]+")
DP_RANK_HEADER = "X-data-parallel-rank"  # vLLM's per-request pin to a data-parallel rank (case-insensitive)


def tokenize_text(text: str) -> list[int]:
    out: list[int] = []
    for word in _WORD.findall(text):
        if word == "\n":
            out.append(NEWLINE_ID)
        elif word[0] == "t" and word[1:].isdigit():
            out.append(int(word[1:]))
        else:
            out.append(VOCAB_LOW + zlib.crc32(word.encode("utf-8")) % (VOCAB_HIGH - VOCAB_LOW))
    return out


def detokenize(ids: list[int]) -> str:
    return "".join("\n" if i == NEWLINE_ID else f" t{i}" for i in ids)


def _dumps(obj: Any) -> str:
    """Compact JSON, as vLLM (pydantic) sends it."""
    return json.dumps(obj, separators=(",", ":"))


def f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


@dataclass
class Fault:
    """One injected fault. Matches requests whose prompt contains `match` (None: any), optionally only the
    n-th request with the same prompt and salt (`salt_seen`: 0 cold, 1 warm, 2 repeat...) and only those with
    `max_tokens`. Affects `times` matching requests (-1: all)."""

    # "5xx" | "4xx" | "drop" | "slow" | "divergence" | "warm_miss" | "restart" | "jitter" | "overreport" (usage
    # claims the prompt's full blocks cached, whatever the cache did; /metrics count the real hits) | "short_hit"
    # (a hit reported one block short: cached_tokens one block fewer than found, never below 0)
    kind: str
    match: str | None = None
    salt_seen: int | None = None
    max_tokens: int | None = None
    stream: bool | None = None
    times: int = 1
    status: int = 503
    message: str = "injected failure"
    after_chunks: int = (
        2  # drop: stream chunks sent before the connection is closed (non-stream: half the body)
    )
    position: int = 0  # divergence: first generated position that differs
    delay_s: float = 0.02  # slow: before each streamed chunk (and each body piece)
    body_pieces: int = 0  # slow: a whole body is sent in this many pieces, delay_s before each (0: at once)
    # slow: wait for this event before each chunk or piece instead of delay_s (a test holds a request until it
    # has done what it must do while the request is in flight: no wall-clock race)
    hold: threading.Event | None = None
    amount: float = 1e-5  # jitter: added to every logprob

    def pause(self) -> None:
        """slow: before each chunk or piece, wait for `hold` when set, else delay_s."""
        if self.hold is not None:
            self.hold.wait()
        else:
            time.sleep(self.delay_s)

    def matches(self, prompt: str, seen: int, body: dict[str, Any]) -> bool:
        if self.times == 0:
            return False
        if self.match is not None and self.match not in prompt:
            return False
        if self.salt_seen is not None and self.salt_seen != seen:
            return False
        if self.max_tokens is not None and body.get("max_tokens") != self.max_tokens:
            return False
        return self.stream is None or bool(body.get("stream")) == self.stream


@dataclass
class BatchEffect:
    # how long each request waits, seeing who else is in flight (None: batches form as announced, expect_batch)
    window_s: float | None = 0.15
    jitter: float = 3e-5  # added to every logprob of a request that was in a batch
    flip_at: int | None = None  # and its tokens change from this position


# what tells an announced batch's members apart
BATCH_KEYS = ("messages", "prompt", "cache_salt", "max_tokens")
BATCH_GUARD_S = 60.0  # an announced member that never comes: a guard against a hang, never a batch window


def batch_key(body: dict[str, Any]) -> str:
    return json.dumps({k: body.get(k) for k in BATCH_KEYS}, sort_keys=True)


@dataclass
class AnnouncedBatch:
    """A batch announced by `FakeServer.expect_batch`: the members still to arrive, and how many there are."""

    waiting: list[str]  # batch_key of each member not arrived yet
    size: int


@dataclass
class PrefixEffect:
    modulus: int = 16
    residue: int | None = None  # diverge when the primed prefix length p has p % modulus == residue
    position: int = 0
    drop_hit_at: frozenset[int] = frozenset()  # primed prefix lengths whose hit is dropped to 0


@dataclass
class StopEffect:
    position: int = 1  # the request after one that ended on a stop string diverges from here


@dataclass
class Histogram:
    total: float = 0.0
    count: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))

    def observe(self, value: float) -> None:
        self.total += value
        self.count += 1
        for i, edge in enumerate(BUCKETS):
            if value <= edge:
                self.buckets[i] += 1


@dataclass
class FakeState:
    start_time: float = field(default_factory=time.time)
    cache: set[bytes] = field(default_factory=set)
    # cache_checkpoints: the block hashes whose end a recurrent-state checkpoint was kept at (a hit ends there)
    checkpoints: set[bytes] = field(default_factory=set)
    seen: dict[tuple[str, str | None], int] = field(default_factory=dict)
    queries: int = 0
    hits: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    success: int = 0
    hist: dict[str, Histogram] = field(default_factory=dict)
    prompts_by_salt: dict[str | None, list[tuple[int, ...]]] = field(default_factory=dict)
    occurrences: dict[tuple[int, ...], int] = field(default_factory=dict)
    after_stop: bool = False
    # speculative decoding (FakeServer.spec_tokens): drafts, draft tokens, accepted tokens by position
    spec: list[float] = field(default_factory=lambda: [0.0, 0.0])
    spec_accepted: dict[int, float] = field(default_factory=dict)


HISTOGRAMS = (
    "vllm:request_prefill_time_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
)


class FakeServer:
    def __init__(
        self,
        *,
        model: str = "fake-model",
        block_size: int = 16,
        max_model_len: int = 8192,
        max_logprobs: int = 20,
        prefix_caching: bool = True,
        report_cached_tokens: bool = True,
        honor_salt: bool = True,
        reset_enabled: bool = True,
        reset_success: bool = True,
        tokenize_enabled: bool = True,
        metrics_enabled: bool = True,
        metrics_lag_s: float = 0.0,
        metrics_lag_scrapes: int = 0,
        metrics_first: bool = False,
        metrics_filter: bool = False,
        api_key: str | None = None,
        version: str = "0.0.0+fake",
        output_prefix: str = "",
        dialect: str = "vllm",
        server_info_enabled: bool = True,
        owned_by: str | None = None,
        dp_engines: int = 1,
        dp_honor_header: bool = True,
        dp_ignore_to: int | None = None,
        dp_by_salt: bool = False,
        cache_checkpoints: bool = False,
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"dialect {dialect!r}: one of {', '.join(DIALECTS)}")
        self.dialect = dialect
        self.server_info_enabled = server_info_enabled
        self.owned_by = owned_by or {"sglang": "sglang", "llama-cpp-python": "me"}.get(dialect, "fake")
        self.model = model
        self.block_size = block_size
        # a hybrid model's cache (vLLM --mamba-cache-mode align; eval/records/cache_model.py CHECKPOINTS): a hit
        # ends only where a checkpoint was kept: at each prompt's replay boundary floor((n-1)/B)*B, and at the
        # attention hit of a request whose blocks hit further than any checkpoint (the shared-prefix junction)
        self.cache_checkpoints = cache_checkpoints
        self.max_model_len = max_model_len
        self.max_logprobs = max_logprobs
        self.prefix_caching = prefix_caching
        self.report_cached_tokens = report_cached_tokens
        self.honor_salt = honor_salt
        self.reset_enabled = reset_enabled
        self.reset_success = reset_success
        self.tokenize_enabled = tokenize_enabled
        self.metrics_enabled = metrics_enabled
        self.metrics_lag_s = metrics_lag_s
        # count a request only once this many /metrics scrapes after its answer have shown it uncounted (a lag in
        # scrapes, not seconds: whatever the machine's load, the first after-scrape misses it and a later one sees it)
        self.metrics_lag_scrapes = metrics_lag_scrapes
        self._lagging: list[
            list[Any]
        ] = []  # [scrapes left, the count to apply] of each request not yet counted
        self.metrics_first = metrics_first  # count a request in /metrics before answering it (not after)
        self.metrics_filter = metrics_filter  # serve /metrics/?name[]=... (prometheus_client's filter)
        self.api_key = api_key
        self.version = version
        self.output_prefix = output_prefix  # put before every generated text (hostile-output tests)
        self.faults: list[Fault] = []
        self.slowdown = 1.0  # multiplies the prefill time /metrics reports (drift tests)
        self.warm_slowdown = 1.0  # multiplies it for requests with a prefix hit only (bench/bench_power.py)
        self.prefill_noise: Callable[[], float] | None = None  # per request: log factor on its prefill
        self.latency_s = 0.0  # a wait before answering each generation request (bench_replicas)
        self.batch_effect: BatchEffect | None = None
        self.prefix_effect: PrefixEffect | None = None
        self.stop_effect: StopEffect | None = None
        self.repeat_flips: set[int] = set()
        self.repeat_flip_position = 0
        self.logprob_shift = 0.0  # added to every reported logprob (see the module docstring)
        # speculative decoding's counters (vllm:spec_decode_*; 0: no draft, no series): per request of c output
        # tokens, c // 2 drafts of spec_tokens tokens each, of which position 0 is always accepted, no other
        self.spec_tokens = 0
        self.words: dict[int, str] = {}  # token id -> word, from /tokenize (token-ID prompts' text)
        self._in_flight: list[dict[str, int]] = []
        self._announced: list[AnnouncedBatch] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []  # (path, body) of every generation request
        # called with each generation request's body as it arrives, before it is answered (tests/eval/run/
        # test_foreign.py: a second client that sends alongside chosen requests, whatever the machine's load)
        self.on_request: Callable[[dict[str, Any]], None] | None = None
        self.reset_calls = 0
        self.restarts = 0
        self.metrics_gets = 0  # GET /metrics answered (bench_gap, test_gap: scrapes per request)
        self.metrics_filtered_gets = 0  # of which GET /metrics/?name[]=...
        # what each generation request added to the metrics, in the order recorded: (prompt, cached, prefill)
        self.observed: list[tuple[int, int, float]] = []
        self.lock = threading.RLock()
        self._batch_formed = threading.Condition(self.lock)  # an announced batch's last member arrived
        if dp_engines < 1:
            raise ValueError(f"dp_engines must be at least 1, got {dp_engines}")
        self.engine_states = [FakeState() for _ in range(dp_engines)]  # routing mode: one per engine
        if dp_ignore_to is not None and not 0 <= dp_ignore_to < dp_engines:
            raise ValueError(f"dp_ignore_to {dp_ignore_to} is not an engine of {dp_engines}")
        self.dp_honor_header = dp_honor_header
        # with the header ignored: every request goes to this engine (None: round-robin)
        self.dp_ignore_to = dp_ignore_to
        # with the header ignored: a request goes to the engine its cache_salt hashes to (a cache-aware router)
        self.dp_by_salt = dp_by_salt
        # (engine, prompt text, cache_salt) of every generation request, in order
        self.routed: list[tuple[int, str, str | None]] = []
        self._next_engine = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._conns: set[socket.socket] = set()
        self.connections = 0  # connections accepted (a client that keeps its connections opens one)
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def state(self) -> FakeState:
        """Engine 0's state (the only one outside routing mode): cache, counters and the process start time."""
        return self.engine_states[0]

    @state.setter
    def state(self, value: FakeState) -> None:
        self.engine_states[0] = value

    def route(self, header: str | None, prompt: str = "", salt: str | None = None) -> int:
        """The engine a generation request goes to (routing mode): the pinned rank when the header is honoured
        and given, else `dp_ignore_to` when set, else the salt's engine with `dp_by_salt`, else round-robin. Raises ValueError for a rank that is not an
        engine's."""
        n = len(self.engine_states)
        with self.lock:
            if header is not None and self.dp_honor_header and n > 1:
                rank = int(header) if header.strip().isdigit() else -1
                if not 0 <= rank < n:
                    raise ValueError(f"data_parallel_rank {header!r} is out of range [0, {n})")
            elif self.dp_ignore_to is not None:
                rank = self.dp_ignore_to
            elif self.dp_by_salt and salt is not None:
                rank = int(hashlib.sha256(salt.encode()).hexdigest(), 16) % n
            else:
                rank, self._next_engine = self._next_engine % n, self._next_engine + 1
            self.routed.append((rank, prompt, salt))
            return rank

    # lifecycle -------------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        httpd = _QuietServer(("127.0.0.1", self.port), handler)
        httpd.daemon_threads = True
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the port and every open connection (keep-alive ones included), like a dying process."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        with self.lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def restart(self, down_s: float = 0.0, background: bool = False) -> None:
        """Simulate a server restart: cache, counters and start time reset. With down_s > 0 the port and
        all connections close first and the server is back after down_s (in a thread when `background`)."""
        if down_s > 0:
            self.stop()
            if background:
                threading.Thread(target=self._come_back, args=(down_s,), daemon=True).start()
                return
            time.sleep(down_s)
        self._reset_state()
        if down_s > 0:
            self._come_back(0.0)

    def _reset_state(self) -> None:
        with self.lock:
            start = max(time.time(), self.state.start_time + 1.0)
            self.engine_states = [FakeState(start_time=start) for _ in self.engine_states]
            self.restarts += 1

    def _come_back(self, after_s: float) -> None:
        time.sleep(after_s)
        if after_s > 0:
            self._reset_state()
        for _ in range(100):
            try:
                self.start()
                return
            except OSError:
                time.sleep(0.05)

    def add_fault(self, fault: Fault) -> Fault:
        with self.lock:
            self.faults.append(fault)
        return fault

    def take_faults(self, prompt: str, seen: int, body: dict[str, Any]) -> list[Fault]:
        with self.lock:
            hit = [f for f in self.faults if f.matches(prompt, seen, body)]
            for f in hit:
                if f.times > 0:
                    f.times -= 1
            return hit

    # model ----------------------------------------------------------------------------------------------

    def prompt_ids(self, body: dict[str, Any], chat: bool) -> tuple[str, list[int]]:
        if chat:
            text = "".join(str(m.get("content", "")) for m in body.get("messages", []))
            return text, CHAT_PREFIX + tokenize_text(text) + CHAT_SUFFIX
        prompt = body.get("prompt", "")
        if isinstance(prompt, list):  # token IDs
            ids = [int(t) for t in prompt]
            return " ".join(self.words.get(t, f"t{t}") for t in ids), ids
        return str(prompt), tokenize_text(str(prompt))

    def remember_words(self, text: str) -> None:
        for word in _WORD.findall(text):
            if word != "\n":
                self.words.setdefault(tokenize_text(word)[0], word)

    def expect_batch(self, bodies: list[dict[str, Any]]) -> None:
        """Announce a batch (BatchEffect with window_s None): these requests will arrive together."""
        with self.lock:
            self._announced.append(AnnouncedBatch([batch_key(b) for b in bodies], len(bodies)))

    def _join_announced(self, body: dict[str, Any]) -> int:
        """The announced batch this request belongs to, once all its members arrived: its size - 1 (0: alone)."""
        key = batch_key(body)
        with self._batch_formed:
            batch = next((b for b in self._announced if key in b.waiting), None)
            if batch is None:
                return 0
            batch.waiting.remove(key)
            if not batch.waiting:
                self._announced.remove(batch)
                self._batch_formed.notify_all()
            elif not self._batch_formed.wait_for(lambda: not batch.waiting, timeout=BATCH_GUARD_S):
                raise RuntimeError(f"fake server: an announced batch of {batch.size} never completed")
            return batch.size - 1

    def in_batch(self, body: dict[str, Any]) -> int:
        """With batch_effect: wait its window (or its announced batch); the number of other generation requests
        seen in flight (in the batch)."""
        effect = self.batch_effect
        if effect is None:
            return 0
        if effect.window_s is None:
            return self._join_announced(body)
        entry = {"peers": 0}
        with self.lock:
            entry["peers"] = len(self._in_flight)
            for other in self._in_flight:
                other["peers"] += 1
            self._in_flight.append(entry)
        time.sleep(effect.window_s)
        with self.lock:
            self._in_flight.remove(entry)
        return entry["peers"]

    def scenario_effects(
        self, ids: list[int], salt: str | None, peers: int
    ) -> tuple[int | None, float, bool]:
        """(diverge at, logprob jitter, drop the hit) from the knobs above, for one request."""
        diverge: list[int] = []
        jitter = 0.0
        drop = False
        with self.lock:
            st = self.state
            key = tuple(ids)
            seen = st.occurrences.get(key, 0)
            st.occurrences[key] = seen + 1
            if seen in self.repeat_flips:
                diverge.append(self.repeat_flip_position)
            if self.stop_effect is not None and st.after_stop:
                st.after_stop = False
                diverge.append(self.stop_effect.position)
            pe = self.prefix_effect
            if pe is not None:
                earlier = st.prompts_by_salt.setdefault(salt, [])
                p = max((len(q) for q in earlier if len(q) < len(ids) and key[: len(q)] == q), default=0)
                earlier.append(key)
                if p and pe.residue is not None and p % pe.modulus == pe.residue:
                    diverge.append(pe.position)
                drop = p in pe.drop_hit_at
        if peers and self.batch_effect is not None:
            jitter = self.batch_effect.jitter
            if self.batch_effect.flip_at is not None:
                diverge.append(self.batch_effect.flip_at)
        return (min(diverge) if diverge else None), jitter, drop

    def stop_strings(self, out: list[int], body: dict[str, Any]) -> tuple[int, str] | None:
        """(tokens kept, text) when a `stop` string occurs in the output: the text is cut before it."""
        stops = body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else list(stops)
        for k in range(1, len(out) + 1):
            text = detokenize(out[:k])
            found = [text.find(s) for s in stops if s and s in text]
            if found:
                return k, text[: min(found)]
        return None

    def _block_hashes(self, ids: list[int], salt: str | None) -> list[bytes]:
        out: list[bytes] = []
        parent = hashlib.sha256((salt or "").encode() if self.honor_salt else b"").digest()
        for b in range(len(ids) // self.block_size):
            block = ids[b * self.block_size : (b + 1) * self.block_size]
            parent = hashlib.sha256(parent + struct.pack(f"<{len(block)}i", *block)).digest()
            out.append(parent)
        return out

    def cache_lookup_and_fill(self, ids: list[int], salt: str | None, evict: bool, engine: int = 0) -> int:
        """Cached tokens for this prompt (whole blocks, never the last token) in `engine`'s cache, then cache its
        full blocks there."""
        if not self.prefix_caching:
            return 0
        hashes = self._block_hashes(ids, salt)
        with self.lock:
            cache = self.engine_states[engine].cache
            if evict:
                cache.difference_update(hashes)
            usable = (len(ids) - 1) // self.block_size
            hit_blocks = 0
            for h in hashes[:usable]:
                if h not in cache:
                    break
                hit_blocks += 1
            cache.update(hashes)
            if self.cache_checkpoints:
                hit_blocks = self._checkpoint_hit(hashes, hit_blocks, usable, engine)
        return hit_blocks * self.block_size

    def _checkpoint_hit(self, hashes: list[bytes], attention: int, usable: int, engine: int) -> int:
        """Blocks hit on a checkpointed cache: the last checkpoint within the attention hit; then keep one at
        the replay boundary and, when the attention blocks hit further, at that junction."""
        kept = self.engine_states[engine].checkpoints
        hit = next((j for j in range(attention, 0, -1) if hashes[j - 1] in kept), 0)
        if usable >= 1:
            kept.add(hashes[usable - 1])
        if attention > hit:
            kept.add(hashes[attention - 1])
        return hit

    def generate(
        self, ids: list[int], body: dict[str, Any], diverge_at: int | None, jitter: float
    ) -> tuple[list[int], list[list[tuple[int, float]]], str]:
        """Greedy tokens with their top-k alternatives; a stop token id (after min_tokens) ends generation."""
        k = max(
            int(body.get("top_logprobs") or 0),
            int(body.get("logprobs") or 0) if "messages" not in body else 0,
        )
        seed = hashlib.sha256(struct.pack(f"<{len(ids)}i", *ids) + str(body.get("seed")).encode()).digest()
        rng = random.Random(seed)
        stops = set(body.get("stop_token_ids") or ())
        min_tokens = int(body.get("min_tokens") or 0)
        out: list[int] = []
        tops: list[list[tuple[int, float]]] = []
        finish = "length"
        for pos in range(int(body.get("max_tokens") or 16)):
            if pos == diverge_at:
                rng = random.Random(seed + b"diverged")
            first = NEWLINE_ID if rng.random() < 0.08 else rng.randrange(VOCAB_LOW, VOCAB_HIGH)
            alts = [first] + [rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(max(k, 1) - 1)]
            lps = sorted(
                (-rng.random() * 0.05 if i == 0 else -1.0 - rng.random() * 12.0) for i in range(len(alts))
            )
            lps.reverse()
            row = [(tid, f32(lp + jitter)) for tid, lp in zip(alts, lps, strict=True)]
            out.append(first)
            tops.append(row)
            if first in stops and pos + 1 >= min_tokens:
                finish = "stop"
                break
        return out, tops, finish

    def observe(self, prompt_tokens: int, cached: int, completion: int, engine: int = 0) -> None:
        def record() -> None:
            with self.lock:
                st = self.engine_states[engine]
                st.queries += prompt_tokens
                st.hits += cached
                st.prompt_tokens += prompt_tokens
                st.generation_tokens += completion
                st.success += 1
                if self.spec_tokens:
                    drafts = completion // 2
                    st.spec[0] += drafts
                    st.spec[1] += drafts * self.spec_tokens
                    for k in range(self.spec_tokens):
                        st.spec_accepted[k] = st.spec_accepted.get(k, 0.0) + (drafts if k == 0 else 0)
                prefill = (1e-4 + (prompt_tokens - cached) * 1e-5) * self.slowdown
                prefill *= self.warm_slowdown if cached else 1.0
                if self.prefill_noise is not None:  # noise models of bench/bench_coverage.py
                    prefill *= math.exp(self.prefill_noise())
                values = (prefill, 2e-4, prefill + 3e-4, prefill + 3e-4 + completion * 1e-4)
                for name, value in zip(HISTOGRAMS, values, strict=True):
                    st.hist.setdefault(name, Histogram()).observe(value)
                self.observed.append((prompt_tokens, cached, prefill))

        if self.metrics_lag_scrapes > 0:
            with self.lock:
                self._lagging.append([self.metrics_lag_scrapes, record])
        elif self.metrics_lag_s > 0:
            threading.Timer(self.metrics_lag_s, record).start()
        else:
            record()

    def scraped(self) -> None:
        """A /metrics scrape is being answered: the requests it is the lag for are counted first; the others
        have one scrape less to wait (metrics_lag_scrapes)."""
        with self.lock:
            self.metrics_gets += 1
            waiting = []
            for entry in self._lagging:
                if entry[0] == 0:
                    entry[1]()
                else:
                    entry[0] -= 1
                    waiting.append(entry)
            self._lagging = waiting

    def _spec_lines(self, labs: list[tuple[str, FakeState]]) -> list[str]:
        if not self.spec_tokens:
            return []
        lines = []
        for lab, st in labs:
            accepted = math.fsum(st.spec_accepted.values())
            for name, value in (
                ("drafts", st.spec[0]),
                ("draft_tokens", st.spec[1]),
                ("accepted_tokens", accepted),
            ):
                lines.append(f"vllm:spec_decode_num_{name}_total{{{lab}}} {value}")
            for k in range(self.spec_tokens):
                value = st.spec_accepted.get(k, 0.0)
                lines.append(
                    f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{k}"}} {value}'
                )
        return lines

    def sglang_metrics(self) -> str:
        with self.lock:
            st = self.state
            lab = f'model_name="{self.model}"'
            rate = st.hits / st.queries if st.queries else 0.0
            lines = [
                "# TYPE sglang:prompt_tokens_total counter",
                f"sglang:prompt_tokens_total{{{lab}}} {float(st.prompt_tokens)}",
                "# TYPE sglang:generation_tokens_total counter",
                f"sglang:generation_tokens_total{{{lab}}} {float(st.generation_tokens)}",
                "# TYPE sglang:cache_hit_rate gauge",
                f"sglang:cache_hit_rate{{{lab}}} {rate}",
                "# TYPE sglang:token_usage gauge",
                f"sglang:token_usage{{{lab}}} 0.01",
            ]
            return "\n".join(lines) + "\n"

    def server_info(self) -> dict[str, Any]:
        return {
            "model_path": self.model,
            "served_model_name": self.model,
            "enable_cache_report": self.report_cached_tokens,
            "disable_radix_cache": not self.prefix_caching,
            "page_size": self.block_size,
            "version": "0.5.0+fake",
        }

    def metrics(self) -> str:
        """vLLM's exposition: the process start time once, every engine's series labelled engine="e"."""
        with self.lock:
            engines = list(enumerate(self.engine_states))
            labs = [(f'engine="{e}",model_name="{self.model}"', st) for e, st in engines]
            lines = [
                "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
                "# TYPE process_start_time_seconds gauge",
                f"process_start_time_seconds {self.state.start_time}",
                "# TYPE vllm:cache_config_info gauge",
            ]
            lines += [
                f'vllm:cache_config_info{{block_size="{self.block_size}",cache_dtype="auto",'
                f'enable_prefix_caching="{self.prefix_caching}",engine="{e}",num_gpu_blocks="4096"}} 1.0'
                for e, _ in engines
            ]
            for name, field_name in (
                ("vllm:prefix_cache_queries", "queries"),
                ("vllm:prefix_cache_hits", "hits"),
                ("vllm:prompt_tokens", "prompt_tokens"),
                ("vllm:generation_tokens", "generation_tokens"),
            ):
                lines.append(f"# TYPE {name} counter")
                for lab, st in labs:
                    lines.append(f"{name}_total{{{lab}}} {float(getattr(st, field_name))}")
                    lines.append(f"{name}_created{{{lab}}} {st.start_time}")
            lines += self._spec_lines(labs)
            lines += ["# TYPE vllm:request_success counter"]
            for lab, st in labs:
                lines.append(
                    f'vllm:request_success_total{{{lab},finished_reason="length"}} {float(st.success)}'
                )
            for name in HISTOGRAMS:
                lines.append(f"# TYPE {name} histogram")
                for lab, st in labs:
                    h = st.hist.get(name, Histogram())
                    for edge, count in zip(BUCKETS, h.buckets, strict=True):
                        le = "+Inf" if edge == float("inf") else repr(edge)
                        lines.append(f'{name}_bucket{{{lab},le="{le}"}} {float(count)}')
                    lines += [f"{name}_count{{{lab}}} {float(h.count)}", f"{name}_sum{{{lab}}} {h.total!r}"]
            return "\n".join(lines) + "\n"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that drop connections (and injected drops) are normal here


class _Handler(BaseHTTPRequestHandler):
    fake: FakeServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as uvicorn does
        with self.fake.lock:
            self.fake._conns.add(self.connection)
            self.fake.connections += 1

    def finish(self) -> None:
        with self.fake.lock:
            self.fake._conns.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence the default stderr log
        pass

    # plumbing --------------------------------------------------------------------------------------------

    def _send(self, status: int, payload: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, _dumps(obj).encode())

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": {"message": message, "type": "BadRequestError", "code": status}})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        obj = json.loads(raw or b"{}")
        return obj if isinstance(obj, dict) else {}

    def _authorized(self) -> bool:
        key = self.fake.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(401, "Unauthorized")
        return False

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # routes ----------------------------------------------------------------------------------------------

    def _dialect_get(self) -> bool:
        """GET routes of the sglang and llama-cpp-python dialects; True when answered here."""
        fake = self.fake
        if fake.dialect == "sglang":
            if self.path in ("/server_info", "/get_server_info") and fake.server_info_enabled:
                self._json(200, fake.server_info())
            elif self.path == "/get_model_info" and fake.server_info_enabled:
                self._json(
                    200, {"model_path": fake.model, "tokenizer_path": fake.model, "is_generation": True}
                )
            elif self.path == "/flush_cache":
                self._flush_cache()
            elif self.path == "/metrics" and fake.metrics_enabled:
                self._send(200, fake.sglang_metrics().encode(), "text/plain; version=0.0.4")
            elif self.path in ("/version", "/metrics"):
                self._json(404, {"detail": "Not Found"})
            else:
                return False
            return True
        if self.path == "/openapi.json":
            self._json(200, {"openapi": "3.1.0", "info": {"title": LLAMA_CPP_TITLE, "version": "0.3.36"}})
        elif self.path != "/v1/models":
            self._json(404, {"detail": "Not Found"})
        else:
            return False
        return True

    def _flush_cache(self) -> None:
        fake = self.fake
        with fake.lock:
            fake.reset_calls += 1
            if fake.reset_success:
                fake.state.cache.clear()
                fake.state.checkpoints.clear()
        if fake.reset_success:
            self._send(200, b"Cache flushed.\nPlease check backend logs for more details.", "text/plain")
        else:
            self._send(400, b"Cache not flushed.", "text/plain")

    def do_GET(self) -> None:  # noqa: N802
        fake = self.fake
        if fake.dialect != "vllm" and self._dialect_get():
            return
        if self.path == "/v1/models":
            if self._authorized():
                data = [
                    {
                        "id": fake.model,
                        "object": "model",
                        "owned_by": fake.owned_by,
                        "max_model_len": fake.max_model_len,
                    }
                ]
                if fake.dialect == "llama-cpp-python":  # no context length there
                    data = [
                        {"id": fake.model, "object": "model", "owned_by": fake.owned_by, "permissions": []}
                    ]
                self._json(200, {"object": "list", "data": data})
        elif self.path == "/version":
            self._json(200, {"version": fake.version})
        elif self.path == "/health":
            self._send(200, b"")
        elif self.path == "/metrics" and fake.metrics_enabled:
            fake.scraped()
            self._send(200, fake.metrics().encode(), "text/plain; version=0.0.4")
        elif self.path.startswith("/metrics/?") and fake.metrics_enabled and fake.metrics_filter:
            names = set(parse_qs(urlsplit(self.path).query).get("name[]", []))
            fake.scraped()
            with fake.lock:
                fake.metrics_filtered_gets += 1
            kept = [
                line
                for line in fake.metrics().splitlines()
                if re.split(r"[{ ]", line, maxsplit=1)[0] in names
            ]
            self._send(200, "".join(line + "\n" for line in kept).encode(), "text/plain; version=0.0.4")
        else:
            self._json(404, {"detail": "Not Found"})

    def _dialect_post(self, body: dict[str, Any]) -> bool:
        """POST routes of the sglang and llama-cpp-python dialects; True when answered here."""
        fake = self.fake
        if fake.dialect == "sglang" and self.path == "/flush_cache":
            self._flush_cache()
        elif self.path == "/reset_prefix_cache" or (
            fake.dialect == "llama-cpp-python" and self.path in ("/tokenize", "/detokenize")
        ):
            self._json(404, {"detail": "Not Found"})
        elif fake.dialect == "llama-cpp-python" and self.path == "/extras/tokenize":
            text = str(body.get("input", ""))
            with fake.lock:
                fake.remember_words(text)
            self._json(200, {"tokens": tokenize_text(text)})
        elif fake.dialect == "llama-cpp-python" and self.path == "/extras/detokenize":
            self._json(200, {"text": detokenize([int(t) for t in body.get("tokens", [])])})
        else:
            return False
        return True

    def do_POST(self) -> None:  # noqa: N802
        fake = self.fake
        body = self._body()
        if fake.dialect != "vllm" and self._dialect_post(body):
            return
        if self.path in ("/v1/chat/completions", "/v1/completions"):
            if self._authorized():
                self._generate(body, chat=self.path == "/v1/chat/completions")
        elif self.path == "/reset_prefix_cache" and fake.reset_enabled:
            with fake.lock:
                fake.reset_calls += 1
                if fake.reset_success:
                    for st in fake.engine_states:
                        st.cache.clear()
                        st.checkpoints.clear()
            self._json(200, {"success": fake.reset_success})
        elif self.path == "/tokenize" and fake.tokenize_enabled:
            text, ids = fake.prompt_ids(body, chat="messages" in body)
            with fake.lock:
                fake.remember_words(text)
            self._json(200, {"tokens": ids, "count": len(ids), "max_model_len": fake.max_model_len})
        elif self.path == "/detokenize" and fake.tokenize_enabled:
            self._json(200, {"prompt": detokenize([int(t) for t in body.get("tokens", [])])})
        else:
            self._json(404, {"detail": "Not Found"})

    def _generate(self, body: dict[str, Any], chat: bool) -> None:
        fake = self.fake
        with fake.lock:
            fake.requests.append((self.path, body))
        if fake.on_request is not None:
            fake.on_request(body)
        err = self._validate(body, chat)
        if err is not None:
            self._error(400, err)
            return
        if fake.latency_s:  # outside the lock: requests to one fake overlap, like a server's batch
            time.sleep(fake.latency_s)
        prompt, ids = fake.prompt_ids(body, chat)
        salt = body.get("cache_salt") if fake.dialect != "llama-cpp-python" else None  # ignored there
        with fake.lock:
            seen = fake.state.seen.get((prompt, salt), 0)
            fake.state.seen[(prompt, salt)] = seen + 1
        faults = {f.kind: f for f in fake.take_faults(prompt, seen, body)}
        if "restart" in faults:
            fake.restart()
        for kind in ("5xx", "4xx"):
            if kind in faults:
                self._error(faults[kind].status, faults[kind].message)
                return
        if len(ids) + int(body.get("max_tokens") or 16) > fake.max_model_len:
            self._error(400, f"This model's maximum context length is {fake.max_model_len} tokens.")
            return
        try:
            engine = fake.route(self.headers.get(DP_RANK_HEADER), prompt, salt)
        except ValueError as exc:
            self._error(400, str(exc))
            return
        peers = fake.in_batch(body)
        cached = fake.cache_lookup_and_fill(ids, salt, evict="warm_miss" in faults, engine=engine)
        diverge = faults["divergence"].position if "divergence" in faults else None
        jitter = faults["jitter"].amount if "jitter" in faults else 0.0
        effect_at, effect_jitter, drop_hit = fake.scenario_effects(ids, salt, peers)
        if drop_hit:
            cached = 0
        if "short_hit" in faults:
            cached = max(0, cached - fake.block_size)
        if effect_at is not None:
            diverge = effect_at if diverge is None else min(diverge, effect_at)
        if fake.dialect == "llama-cpp-python" and body.get("repeat_penalty", 1.1) != 1.0:
            diverge = (
                1 if diverge is None else min(diverge, 1)
            )  # its default repeat_penalty 1.1 is not greedy
        out, tops, finish = fake.generate(ids, body, diverge, jitter + effect_jitter + fake.logprob_shift)
        stopped = fake.stop_strings(out, body)
        if stopped is not None:
            out, tops, finish = out[: stopped[0]], tops[: stopped[0]], "stop"
            with fake.lock:
                fake.state.after_stop = True
        usage: dict[str, Any] = {
            "prompt_tokens": len(ids),
            "completion_tokens": len(out),
            "total_tokens": len(ids) + len(out),
        }
        if fake.dialect == "sglang":  # with --enable-cache-report, and only when something was cached
            details = {"cached_tokens": cached} if fake.report_cached_tokens and cached > 0 else None
            usage["prompt_tokens_details"] = details
        elif fake.report_cached_tokens and fake.dialect == "vllm":
            claimed = (
                (len(ids) - 1) // fake.block_size * fake.block_size if "overreport" in faults else cached
            )
            usage["prompt_tokens_details"] = {
                "cached_tokens": claimed
            }  # overreport: the metrics get `cached`
        answer = _Answer(chat, body, out, tops, finish, usage)
        answer.dialect = fake.dialect
        if fake.dialect != "vllm":
            answer.as_ids = False  # token text only (return_tokens_as_token_ids is vLLM's)
        answer.prefix = fake.output_prefix
        answer.stop_text = None if stopped is None else stopped[1]
        if fake.metrics_first:
            fake.observe(len(ids), cached, len(out), engine)
        if body.get("stream"):
            self._stream(answer, faults)
        else:
            payload = _dumps(answer.whole()).encode()
            if "drop" in faults:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 2])
                self._drop()
                return
            if "slow" in faults and faults["slow"].body_pieces > 0:
                self._trickle(payload, faults["slow"])
            else:
                self._send(200, payload)
        if not fake.metrics_first:
            fake.observe(len(ids), cached, len(out), engine)

    def _validate(self, body: dict[str, Any], chat: bool) -> str | None:
        fake = self.fake
        if body.get("model") != fake.model:
            return f"The model `{body.get('model')}` does not exist."
        k = int(body.get("top_logprobs") or 0) if chat else int(body.get("logprobs") or 0)
        if k > fake.max_logprobs:
            return f"Requested sample logprobs of {k}, which is greater than max allowed: {fake.max_logprobs}"
        if "prompt_logprobs" in body:
            return "fake server: lbeval must never send prompt_logprobs"
        return None

    def _trickle(self, payload: bytes, slow: Fault) -> None:
        """A whole body with its Content-Length, sent in slow.body_pieces pieces, slow.delay_s before each."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.flush()
        size = -(-len(payload) // slow.body_pieces)
        for start in range(0, len(payload), size):
            slow.pause()
            self.wfile.write(payload[start : start + size])
            self.wfile.flush()

    def _stream(self, answer: _Answer, faults: dict[str, Fault]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        drop = faults.get("drop")
        slow = faults.get("slow")
        for n, chunk in enumerate(answer.chunks()):
            if drop is not None and n >= drop.after_chunks:
                self._drop()
                return
            if slow is not None:
                slow.pause()
            data = b"data: " + chunk + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


class _Answer:
    """Renders one generation as a vLLM-shaped whole body or stream of chunks."""

    def __init__(
        self,
        chat: bool,
        body: dict[str, Any],
        out: list[int],
        tops: list[list[tuple[int, float]]],
        finish: str,
        usage: dict[str, Any],
    ) -> None:
        self.chat, self.body, self.out, self.tops, self.finish, self.usage = (
            chat,
            body,
            out,
            tops,
            finish,
            usage,
        )
        self.as_ids = bool(body.get("return_tokens_as_token_ids"))
        self.dialect = "vllm"
        self.prefix = ""
        self.stop_text: str | None = None  # the whole text when a stop string cut it
        self.k = int(body.get("top_logprobs") or 0) if chat else int(body.get("logprobs") or 0)
        self.want = bool(body.get("logprobs")) if chat else body.get("logprobs") is not None

    def _tok(self, tid: int) -> str:
        return f"token_id:{tid}" if self.as_ids else detokenize([tid])

    def _chat_lp(self, i: int) -> dict[str, Any]:
        def entry(tid: int, lp: float) -> dict[str, Any]:
            tok = self._tok(tid)
            return {"token": tok, "logprob": lp, "bytes": list(tok.encode())}

        row = self.tops[i]
        return {**entry(self.out[i], row[0][1]), "top_logprobs": [entry(t, lp) for t, lp in row[: self.k]]}

    def _cmpl_lp(self, idx: range) -> dict[str, Any]:
        return {
            "text_offset": [0 for _ in idx],
            "token_logprobs": [self.tops[i][0][1] for i in idx],
            "tokens": [self._tok(self.out[i]) for i in idx],
            "top_logprobs": [{self._tok(t): lp for t, lp in self.tops[i][: self.k + 1]} for i in idx],
        }

    def _text(self, idx: range) -> str:
        prefix = self.prefix if idx.start == 0 else ""
        if self.stop_text is not None:  # stop strings: whole bodies only
            return prefix + self.stop_text if idx.start == 0 else ""
        return prefix + detokenize(
            [self.out[i] for i in idx if not (i == len(self.out) - 1 and self.finish == "stop")]
        )

    def whole(self) -> dict[str, Any]:
        idx = range(len(self.out))
        if self.chat:
            lp = {"content": [self._chat_lp(i) for i in idx]} if self.want else None
            msg = {"role": "assistant", "content": self._text(idx), "reasoning_content": None}
            choice: dict[str, Any] = {
                "index": 0,
                "message": msg,
                "logprobs": lp,
                "finish_reason": self.finish,
            }
            obj = "chat.completion"
        else:
            choice = {
                "index": 0,
                "text": self._text(idx),
                "logprobs": self._cmpl_lp(idx) if self.want else None,
            }
            choice["finish_reason"] = self.finish
            obj = "text_completion"
        if self.dialect == "sglang" and self.body.get("return_token_ids"):
            choice["token_ids"] = list(self.out)
        return {
            "id": "fake-1",
            "object": obj,
            "model": self.body["model"],
            "choices": [choice],
            "usage": self.usage,
        }

    def chunks(self) -> list[bytes]:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        base = {"id": "fake-1", "object": obj, "model": self.body["model"]}
        out: list[bytes] = []
        if self.chat:
            out.append(
                _dumps(
                    {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
                ).encode()
            )
        for i in range(len(self.out)):
            last = i == len(self.out) - 1
            if self.chat:
                choice: dict[str, Any] = {"index": 0, "delta": {"content": self._text(range(i, i + 1))}}
                choice["logprobs"] = {"content": [self._chat_lp(i)]} if self.want else None
            else:
                choice = {"index": 0, "text": self._text(range(i, i + 1))}
                choice["logprobs"] = self._cmpl_lp(range(i, i + 1)) if self.want else None
            choice["finish_reason"] = self.finish if last else None
            out.append(_dumps({**base, "choices": [choice]}).encode())
        if (self.body.get("stream_options") or {}).get(
            "include_usage"
        ) and self.dialect != "llama-cpp-python":
            out.append(_dumps({**base, "choices": [], "usage": self.usage}).encode())
        out.append(b"[DONE]")
        return out


def main(argv: list[str] | None = None) -> None:
    """`python -m tests.support.fake_server [--port N] [--block-size B] [--latency S]`: serve until interrupted."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before answering each generation")
    args = parser.parse_args(argv)
    server = FakeServer(block_size=args.block_size, max_model_len=args.max_model_len)
    server.latency_s = args.latency
    server.port = args.port
    server.start()
    echo(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
