"""Patches: a fix under test, applied inside vLLM the way the faults are (docs/servers/seedfix.md).

A patch is the opposite of a fault: it changes the engine the way a proposed fix would, so that `lbeval ab` can
judge the shipped engine against the fixed one on the same server. Selected by LBEVAL_PATCH (comma-joined names);
pinned to the patched function's source like every fault (points.py); a no-op without LBEVAL_PATCH.

seedfix: the hybrid KV-cache coordinator's shared-prefix candidate capped by every full-attention group's hit.
`HybridKVCacheCoordinator.find_longest_cache_hit` returns `num_uncached_common_prefix_tokens = longest_hit_length
- hit_length`, where `longest_hit_length` is the longest hit any single group found; `get_computed_blocks` pins
`hit_length + num_uncached` as the shared-prefix boundary where a recurrent-state checkpoint is kept. With two
full-attention groups (a target and a draft with another attention shape) the longest single-group hit can be a
boundary the other full-attention group cannot reuse (the target's 96 where the draft found 80). The fix caps the
candidate by every full-attention group's discovered hit, before the truncation to the reconciled hit. The wrapper
recomputes that cap rather than copying vLLM's function: each group's hit from the coordinator's own per-group
lookup (`find_longest_cache_hit_per_group`: independent lookups, no side effects; for a full-attention group,
downward-closed, the smallest of these equals the smallest hit the reconciling loop discovers).

LBEVAL_PATCH_DEBUG=1 logs, for every lookup, the groups the coordinator sees, each group's hit, the reconciled
hit, the longest single-group hit, num_uncached as vLLM computed it and as capped, to stderr (the server log), one
line `lbeval-engine-patches: lookup {...}`. It works with or without a patch (observe only).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .faults import mark
from .points import PatchPointError, by_name, check, env_names

PATCH_MARK = "__lbeval_patch__"
DEBUG_ENV = "LBEVAL_PATCH_DEBUG"


def capped_uncached(hit_length: int, num_uncached: int, full_attention_hits: Sequence[int]) -> int:
    """The seed fix's rule: the shared-prefix candidate (hit_length + num_uncached, the longest single-group hit)
    capped by every full-attention group's discovered hit, never below the reconciled hit; returned as the
    uncached-common-prefix token count. Without full-attention groups nothing caps it."""
    longest = hit_length + num_uncached
    if full_attention_hits:
        longest = min(longest, *full_attention_hits)
    return max(longest, hit_length) - hit_length


@dataclass(frozen=True)
class GroupView:
    """One attention group as the coordinator sees it (a SpecGroup of one or more KV cache groups)."""

    kind: str  # the spec's class name
    group_ids: tuple[int, ...]
    block_size: int
    use_eagle: bool
    full_attention: bool


def group_views(coordinator: Any) -> list[GroupView]:
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    views = []
    for spec, group_ids, _manager_cls, use_eagle in coordinator.attention_groups:
        manager = coordinator.single_type_managers[group_ids[0]]
        views.append(
            GroupView(
                type(spec).__name__,
                tuple(int(g) for g in group_ids),
                int(manager.block_size),
                bool(use_eagle),
                isinstance(spec, FullAttentionSpec),
            )
        )
    return views


def full_attention_hits(views: Sequence[GroupView], per_group: Sequence[int]) -> list[int]:
    return [int(per_group[v.group_ids[0]]) for v in views if v.full_attention]


def debug_line(
    views: Sequence[GroupView], per_group: Sequence[int], hit: int, uncached: int, capped: int, max_len: int
) -> str:
    record = {
        "pid": os.getpid(),
        "max_cache_hit_length": max_len,
        "groups": [
            {
                "kind": v.kind,
                "group_ids": list(v.group_ids),
                "block_size": v.block_size,
                "eagle": v.use_eagle,
                "hit": int(per_group[v.group_ids[0]]),
            }
            for v in views
        ],
        "hit_length": hit,
        "longest_hit_length": hit + uncached,
        "num_uncached": uncached,
        "num_uncached_capped": capped,
    }
    return "lbeval-engine-patches: lookup " + json.dumps(record, sort_keys=True)


def install_coordinator(names: frozenset[str], debug: bool) -> None:
    """Wrap HybridKVCacheCoordinator.find_longest_cache_hit: vLLM's result, then (seedfix) its num_uncached
    capped by every full-attention group's hit; (debug) one log line per lookup."""
    from vllm.v1.core.kv_cache_coordinator import HybridKVCacheCoordinator

    orig = HybridKVCacheCoordinator.find_longest_cache_hit
    fix = "seedfix" in names

    def find_longest_cache_hit(self: Any, block_hashes: Any, max_cache_hit_length: int) -> Any:
        blocks, hit, uncached = orig(self, block_hashes, max_cache_hit_length)
        if not debug and not (fix and uncached):
            return blocks, hit, uncached
        views = group_views(self)
        _, per_group = self.find_longest_cache_hit_per_group(block_hashes, max_cache_hit_length)
        capped = capped_uncached(hit, uncached, full_attention_hits(views, per_group))
        if debug:
            line = debug_line(views, per_group, hit, uncached, capped, max_cache_hit_length)
            print(line, file=sys.stderr, flush=True)
        return blocks, hit, capped if fix else uncached

    mark(find_longest_cache_hit, orig)
    setattr(find_longest_cache_hit, PATCH_MARK, True)
    HybridKVCacheCoordinator.find_longest_cache_hit = find_longest_cache_hit


@dataclass(frozen=True)
class Patch:
    points: tuple[str, ...]  # patch points (points.POINTS names), all checked before any patch
    install: Callable[[frozenset[str], bool], None]
    what: str


COORDINATOR = ("coordinator.find_longest_cache_hit", "coordinator.find_longest_cache_hit_per_group")
PATCHES: dict[str, Patch] = {
    "seedfix": Patch(
        COORDINATOR,
        install_coordinator,
        "the shared-prefix candidate capped by every full-attention group's discovered hit",
    ),
}


def selected(env: dict[str, str]) -> list[str]:
    return env_names(env, "LBEVAL_PATCH", PATCHES, "lbeval-engine-patches", "patch")


def debug_on(env: dict[str, str]) -> bool:
    raw = env.get(DEBUG_ENV, "").strip()
    if raw not in ("", "0", "1"):
        raise PatchPointError(f"lbeval-engine-patches: {DEBUG_ENV}={raw!r} must be 0 or 1")
    return raw == "1"


def activate(env: dict[str, str]) -> str | None:
    """Install the patches LBEVAL_PATCH names and/or the lookup log (LBEVAL_PATCH_DEBUG=1); None: nothing to do.
    Every patch point is checked first; installing twice in one process is a no-op."""
    names = selected(env)
    debug = debug_on(env)
    if not names and not debug:
        return None
    from .points import lookup

    if getattr(lookup(by_name(COORDINATOR[0])), PATCH_MARK, False):
        return ",".join(names) or "debug"
    for point in COORDINATOR:
        check(by_name(point))
    install_coordinator(frozenset(names), debug)
    joined = ",".join(names) or "none"
    print(
        f"lbeval-engine-patches: patch {joined} active in pid {os.getpid()} (lookup log {'on' if debug else 'off'})",
        file=sys.stderr,
    )
    return joined
