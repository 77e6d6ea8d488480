"""The fault classes: each changes ONE thing inside vLLM, as a real bug would (docs/faults.md).

The numerics faults add seeded Gaussian noise (sigma LBEVAL_FAULT_SCALE) to the logits of the requests their
condition selects, in the model runner, before sampling, so both the sampled tokens and the (raw) logprobs move.
The noise is a function of the request's prompt tokens and its position (deterministic: the same request gets the
same perturbation in every run), except run_noise's, which is seeded by vLLM's per-request id (different every
request and every run). logprob_shift leaves the logits and the sampled tokens alone and moves only the logprobs
the server reports. Everything else is left as it was.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .points import PatchPointError, by_name, check, env_names

RUNNER = (
    "model_runner.execute_model",
    "model_runner._sample",
    "cpu_model_runner",
    "scheduler_output.new_request",
)
MARK = "__lbeval_fault__"


@dataclass(frozen=True)
class Params:
    scale: float  # LBEVAL_FAULT_SCALE: sigma of the logit noise
    slowdown: float  # LBEVAL_FAULT_SLOWDOWN: extra fraction of an engine step's time
    usage: str  # LBEVAL_FAULT_USAGE: "over" (a miss claims its full-block hit) or "under" (a hit claims 0)
    block: int  # LBEVAL_FAULT_BLOCK: block size assumed where vLLM's is not at hand (the API server)
    shift: float = 0.3  # LBEVAL_FAULT_SHIFT: nats every reported logprob is moved down by (logprob_shift)
    depth: int = 3  # LBEVAL_FAULT_DEPTH: deep_partial's K, the fewest blocks a hit it perturbs has


def read_params(env: dict[str, str]) -> Params:
    def number(name: str, default: str) -> float:
        raw = env.get(name, default)
        try:
            value = float(raw)
        except ValueError:
            raise PatchPointError(f"lbeval-engine-faults: {name}={raw!r} is not a number") from None
        if not value >= 0:
            raise PatchPointError(f"lbeval-engine-faults: {name}={raw!r} must be >= 0")
        return value

    usage = env.get("LBEVAL_FAULT_USAGE", "over")
    if usage not in ("over", "under"):
        raise PatchPointError(f"lbeval-engine-faults: LBEVAL_FAULT_USAGE={usage!r} must be over or under")
    block = int(number("LBEVAL_FAULT_BLOCK", "128"))
    depth = number("LBEVAL_FAULT_DEPTH", str(DEPTH))
    if depth != int(depth) or depth < 1:
        raise PatchPointError(
            f"lbeval-engine-faults: LBEVAL_FAULT_DEPTH={depth:g} must be a whole number of blocks, at least 1"
        )
    return Params(
        number("LBEVAL_FAULT_SCALE", "0.2"),
        number("LBEVAL_FAULT_SLOWDOWN", "0.2"),
        usage,
        max(block, 1),
        number("LBEVAL_FAULT_SHIFT", "0.3"),
        int(depth),
    )


@dataclass(frozen=True)
class ReqInfo:
    hit: int  # num_computed_tokens when first scheduled: the prefix-cache hit
    prompt_len: int
    seed: int  # from the prompt tokens
    after_other: bool  # the previous new request started with another first block (unrelated traffic)


@dataclass
class RunnerState:
    """What the patched model runner remembers; one per runner instance (no module-level state)."""

    block: int
    reqs: dict[str, ReqInfo] = field(default_factory=dict)
    scheduled: dict[str, int] = field(default_factory=dict)
    last_first_block: bytes | None = None


def token_digest(tokens: list[int]) -> bytes:
    return hashlib.sha256(struct.pack(f"<{len(tokens)}q", *tokens)).digest()


def seed_of(*parts: bytes | int | str) -> int:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return int.from_bytes(h.digest()[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


Condition = Callable[[ReqInfo, int, int], bool]  # (request, requests in the step, block size) -> perturb?


def full_blocks(info: ReqInfo, block: int) -> int:
    """Blocks a full hit covers: vLLM recomputes the last prompt token, so at most (n - 1) // block."""
    return (info.prompt_len - 1) // block


def deep_partial(depth: int) -> Condition:
    """A partial hit at least `depth` blocks deep: `depth` <= hit // block < the full blocks."""
    return lambda info, batch, block: depth <= info.hit // block < full_blocks(info, block)


DEPTH = 3  # deep_partial's default depth (LBEVAL_FAULT_DEPTH)
CONDITIONS: dict[str, Condition] = {
    "warm_numerics": lambda info, batch, block: info.hit > 0,
    "partial_prefix": lambda info, batch, block: (
        info.hit > 0 and info.hit // block < full_blocks(info, block)
    ),
    "deep_partial": deep_partial(DEPTH),  # perturb() reads the depth from Params
    "batch_numerics": lambda info, batch, block: batch > 1,
    "run_noise": lambda info, batch, block: True,
    "traffic_corruption": lambda info, batch, block: info.hit > 0 and info.after_other,
}


def runner_state(runner: Any) -> RunnerState:
    state = runner.__dict__.get("_lbeval_fault_state")
    if state is None:
        state = RunnerState(block=int(runner.cache_config.block_size))
        runner.__dict__["_lbeval_fault_state"] = state
    assert isinstance(state, RunnerState)
    return state


def begin_step(state: RunnerState, scheduler_output: Any) -> None:
    """Remember each new request's prefix hit and prompt; forget finished ones."""
    for new in scheduler_output.scheduled_new_reqs:
        prompt = list(new.prompt_token_ids or [])
        first = token_digest(prompt[: state.block])
        after_other = state.last_first_block is not None and first != state.last_first_block
        state.last_first_block = first
        state.reqs[new.req_id] = ReqInfo(
            int(new.num_computed_tokens), len(prompt), seed_of(token_digest(prompt)), after_other
        )
    for req_id in scheduler_output.finished_req_ids:
        state.reqs.pop(req_id, None)
    state.scheduled = dict(scheduler_output.num_scheduled_tokens)


def perturb(
    runner: Any, state: RunnerState, fault: str, scale: float, logits: Any, depth: int = DEPTH
) -> Any:
    import torch

    req_ids = list(runner.input_batch.req_ids)
    if logits.shape[0] != len(req_ids):
        raise RuntimeError(f"lbeval-engine-faults: {logits.shape[0]} logit rows for {len(req_ids)} requests")
    condition = deep_partial(depth) if fault == "deep_partial" else CONDITIONS[fault]
    out = logits
    for row, req_id in enumerate(req_ids):
        info = state.reqs.get(req_id)
        if info is None or not condition(info, len(req_ids), state.block):
            continue
        position = int(runner.requests[req_id].num_computed_tokens) + state.scheduled.get(req_id, 0)
        seed = seed_of(req_id, position) if fault == "run_noise" else seed_of(info.seed, position)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        noise = torch.randn(logits.shape[1], generator=gen, dtype=torch.float32) * scale
        if out is logits:
            out = logits.clone()
        out[row] += noise.to(device=logits.device, dtype=logits.dtype)
    return out


def install_runner(names: frozenset[str], params: Params) -> None:
    """Patch GPUModelRunner (the CPU runner inherits both methods): step bookkeeping, noise, slowdown. `names`
    are the runner faults asked for (one, or several combined: `partial_prefix,warm_slowdown`), installed once."""
    noise = sorted(n for n in names if n in CONDITIONS)  # at most one (`selected` refuses more)
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    orig_execute = GPUModelRunner.execute_model
    orig_sample = GPUModelRunner._sample

    def execute_model(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        state = runner_state(self)
        begin_step(state, scheduler_output)
        hit_scheduled = any(state.reqs[r].hit > 0 for r in state.scheduled if r in state.reqs)
        if "warm_slowdown" not in names or not hit_scheduled:
            return orig_execute(self, scheduler_output, *args, **kwargs)
        t0 = time.perf_counter()
        out = orig_execute(self, scheduler_output, *args, **kwargs)
        time.sleep((time.perf_counter() - t0) * params.slowdown)
        return out

    def _sample(self: Any, logits: Any, spec_decode_metadata: Any) -> Any:
        if logits is not None and noise:
            logits = perturb(self, runner_state(self), noise[0], params.scale, logits, params.depth)
        return orig_sample(self, logits, spec_decode_metadata)

    mark(execute_model, orig_execute)
    mark(_sample, orig_sample)
    GPUModelRunner.execute_model = execute_model
    GPUModelRunner._sample = _sample


def install_salt_ignored(names: frozenset[str], params: Params) -> None:
    """Drop ('cache_salt', salt) from the block hash keys: equal prompts share blocks whatever their salts."""
    from vllm.v1.core import kv_cache_utils

    orig = kv_cache_utils.generate_block_hash_extra_keys

    def generate_block_hash_extra_keys(request: Any, start: int, end: int, start_mm_idx: int) -> Any:
        keys, next_mm_idx = orig(request, start, end, start_mm_idx)
        if keys:
            kept = tuple(k for k in keys if not (isinstance(k, tuple) and k[:1] == ("cache_salt",)))
            keys = kept or None
        return keys, next_mm_idx

    mark(generate_block_hash_extra_keys, orig)
    kv_cache_utils.generate_block_hash_extra_keys = generate_block_hash_extra_keys


def install_short_hits(names: frozenset[str], params: Params) -> None:
    """A prefix-cache hit of 2+ blocks comes back one block short (the last block recomputed: lost reuse)."""
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    orig = KVCacheManager.get_computed_blocks

    def get_computed_blocks(self: Any, request: Any) -> Any:
        blocks, num_computed, boundary = orig(self, request)
        groups = [list(g) for g in blocks.blocks]
        if not groups or len(groups[0]) < 2:
            return blocks, num_computed, boundary
        block = num_computed // len(groups[0])
        trimmed = tuple(g[:-1] for g in groups)
        return self.create_kv_cache_blocks(trimmed), num_computed - block, boundary

    mark(get_computed_blocks, orig)
    KVCacheManager.get_computed_blocks = get_computed_blocks


def install_usage(names: frozenset[str], params: Params) -> None:
    """usage's cached_tokens lies (the scheduler and /metrics do not): over, a miss claims the full-block hit;
    under, a hit claims 0."""
    from vllm.outputs import RequestOutput

    orig = RequestOutput.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        cached, prompt = self.num_cached_tokens, self.prompt_token_ids
        if cached is None or not prompt:
            return
        if params.usage == "over" and cached == 0:
            self.num_cached_tokens = (len(prompt) - 1) // params.block * params.block
        elif params.usage == "under" and cached > 0:
            self.num_cached_tokens = 0

    mark(__init__, orig)
    RequestOutput.__init__ = __init__


def install_logprob_shift(names: frozenset[str], params: Params) -> None:
    """Every logprob the sampler gathers for the response (the top-k and the sampled token's) moved down by
    LBEVAL_FAULT_SHIFT nats, after sampling: the sampled tokens, their ranks and the top-k IDs are untouched (a
    bug in the reported numbers alone, e.g. a wrong normalisation of the logprobs)."""
    from vllm.v1.sample.sampler import Sampler

    orig = Sampler.gather_logprobs

    def gather_logprobs(logprobs: Any, num_logprobs: int, token_ids: Any) -> Any:
        out = orig(logprobs, num_logprobs, token_ids)
        return out._replace(logprobs=out.logprobs - params.shift)

    mark(gather_logprobs, orig)
    Sampler.gather_logprobs = staticmethod(gather_logprobs)


def mark(wrapper: Callable[..., Any], orig: Callable[..., Any]) -> None:
    setattr(wrapper, MARK, True)
    wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
    wrapper.__qualname__ = getattr(orig, "__qualname__", wrapper.__qualname__)


@dataclass(frozen=True)
class Fault:
    points: tuple[str, ...]  # the patch points it needs (points.POINTS names), all checked before any patch
    install: Callable[[frozenset[str], Params], None]  # called once with every asked fault it installs
    row: str  # where lbeval must see it (docs/faults.md; bench/faults.py holds the expected rule and row)


FAULTS: dict[str, Fault] = {
    "warm_numerics": Fault(RUNNER, install_runner, "cache (cold vs warm)"),
    "partial_prefix": Fault(RUNNER, install_runner, "hitlen partial lengths"),
    "deep_partial": Fault(
        RUNNER, install_runner, "hitlen partial lengths at least LBEVAL_FAULT_DEPTH blocks deep"
    ),
    "batch_numerics": Fault(RUNNER, install_runner, "batch"),
    "run_noise": Fault(RUNNER, install_runner, "repeats, warm/repeat"),
    "traffic_corruption": Fault(RUNNER, install_runner, "traffic"),
    "warm_slowdown": Fault(RUNNER, install_runner, "warm timing (lbeval ab)"),
    "salt_ignored": Fault(
        ("block_hash.extra_keys", "block_hash.request_hasher"), install_salt_ignored, "salt"
    ),
    "short_hits": Fault(("kv_cache_manager.get_computed_blocks",), install_short_hits, "hitlen honoured"),
    "usage_overreport": Fault(("request_output.num_cached_tokens",), install_usage, "usage vs /metrics"),
    "logprob_shift": Fault(
        ("sampler.gather_logprobs",), install_logprob_shift, "cold numerics across variants"
    ),
}


def already_installed(fault: Fault) -> bool:
    from .points import lookup

    return any(getattr(lookup(by_name(p)), MARK, False) for p in fault.points)


def selected(env: dict[str, str]) -> list[str]:
    """The faults LBEVAL_FAULT names: one, or several joined by commas (a "before the fix" variant with two bugs:
    `partial_prefix,warm_slowdown`); unknown or repeated names are refused."""
    names = env_names(env, "LBEVAL_FAULT", FAULTS, "lbeval-engine-faults", "fault")
    noise = [n for n in names if n in CONDITIONS]
    if len(noise) > 1:
        raise PatchPointError(
            f"lbeval-engine-faults: at most one logit-noise fault at a time, not {','.join(noise)}"
        )
    return names


def activate(env: dict[str, str]) -> str | None:
    """Install the faults LBEVAL_FAULT names (None: nothing to do). Every patch point is checked first; faults
    that share an installer (the model runner's) are installed by one call."""
    names = selected(env)
    if not names:
        return None
    params = read_params(env)
    chosen = [FAULTS[n] for n in names]
    if any(already_installed(f) for f in chosen):
        return ",".join(names)
    for fault in chosen:
        for point in fault.points:
            check(by_name(point))
    installers: dict[Callable[[frozenset[str], Params], None], set[str]] = {}
    for name, fault in zip(names, chosen, strict=True):
        installers.setdefault(fault.install, set()).add(name)
    for install, group in installers.items():
        install(frozenset(group), params)
    joined = ",".join(names)
    print(f"lbeval-engine-faults: fault {joined} active in pid {os.getpid()} ({params})", file=sys.stderr)
    return joined
