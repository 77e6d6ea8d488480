"""Which server a run was measured on: the probe facts (the manifest's `probe`) that name one server build and
cache configuration, and the one comparison of two probes on them.

    server_differences(old_probe, new_probe) -> [("block_size", 16, 128), ...]

Read where two probes must describe the same server: a resumed run against the server of its earlier sessions
(eval/run/session.py), every replica of a variant against replica 0 (eval/run/replicas.py, with the replica's
own reporting facts on top), the two sides of an A/A session (eval/analyze/aa_floor.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from eval.records.cache_model import CacheModel

# the probe facts that identify the server (ProbeResult fields, in the order a refusal names them)
SERVER_IDENTITY_KEYS = (
    "server_kind",
    "version",
    "model",
    "block_size",
    "max_model_len",
    "prefix_caching",
    "cold_mode",
)
# the server's cache model (eval/records/cache_model.CacheModel in the probe): compared only when both probes
# have one, on what names the cache (its kind and hit granularity), not on how the probe saw it (evidence, source)
CACHE_MODEL_KEY = "cache_model"
CACHE_MODEL_IDENTITY = ("kind", "block_size")


class ProbeLike(Protocol):
    """What a comparison of two servers reads: the probe's facts (manifest_parts.ProbeFacts, as a manifest
    holds them, or eval/run/probe.ProbeResult, as a probe returns them)."""

    @property
    def cache_model(self) -> CacheModel | None: ...


def server_differences(
    old: ProbeLike, new: ProbeLike, keys: tuple[str, ...] = SERVER_IDENTITY_KEYS
) -> list[tuple[str, Any, Any]]:
    """(key, old value, new value) for every identity fact two probes disagree on, in the order of `keys`; the
    cache model too when both have one. Empty: the same server."""
    out = [
        (key, getattr(old, key), getattr(new, key)) for key in keys if getattr(old, key) != getattr(new, key)
    ]
    before, now = _cache_model(old.cache_model), _cache_model(new.cache_model)
    if before is not None and now is not None and before != now:
        out.append((CACHE_MODEL_KEY, before, now))
    return out


def _cache_model(model: CacheModel | None) -> dict[str, Any] | None:
    return None if model is None else {key: getattr(model, key) for key in CACHE_MODEL_IDENTITY}
