"""Whether a run's cache state was verified: the server it ran against, how cold requests missed the cache,
and how many of its final records the server's cached-token count could confirm.

A run against a server that reports no cached tokens (llama-cpp-python) has every record `cache_check =
"unverified"`: its cold, warm and repeat passes are what lbeval sent, not what the cache did. Every report
that shows a cache state reads it from here and labels it `unverified`; the gate gives no verdict on a rule
that needs a verified cache state unless the policy accepts an unverified one (eval/gate/cache_state.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from eval.records.cache_model import CHECKPOINTS, CacheModel
from eval.records.final import Selection
from eval.records.run_folder import RunManifest
from eval.records.types import CACHE_UNVERIFIED

VERIFIED, UNVERIFIED, PARTLY = "verified", "unverified", "partly verified"

# `settings.cold_mode` -> how cold requests were made, for runs whose probe did not describe it
_COLD = {
    "salt": "a fresh cache_salt per cold request",
    "reset": "a cache reset before each cold request",
    "evict": "an unrelated prompt before each cold request, evicting the server's one cached sequence",
}


@dataclass(frozen=True)
class CacheVerification:
    server_kind: str  # eval/run/server_kinds.py (runs made before server kinds were recorded: "vllm")
    server_label: str
    server_version: str | None
    state: str  # VERIFIED | UNVERIFIED | PARTLY
    unverified_records: int  # final records whose cache state the server could not confirm
    records: int  # final records
    cold_mode: str  # salt | reset | evict
    cold_method: str  # how cold requests missed the cache, in words, and whether that was verified
    reason: str  # why the cache state is unverified ("" when verified)
    # what a hit can be on this server (the probe's, eval/records/cache_model.py; None: a run from before)
    cache_model: CacheModel | None = None

    @property
    def verified(self) -> bool:
        return self.state == VERIFIED

    def describe(self) -> str:
        """One line: the server and the cache state (what the reports and the gate say)."""
        version = f" {self.server_version}" if self.server_version else ""
        if self.verified:
            hits = ""
            if self.cache_model is not None and self.cache_model.kind == CHECKPOINTS:
                hits = f"; prefix cache: {self.cache_model.describe()}"
            return f"{self.server_label}{version}: cache state verified (cold: {self.cold_method}){hits}"
        counted = f"{self.unverified_records}/{self.records} records"
        return f"{self.server_label}{version}: cache state {self.state.upper()} ({counted}; {self.reason})"


def cache_verification(manifest: RunManifest, sel: Selection) -> CacheVerification:
    probe = manifest.probe
    finals = list(sel.final.values())
    unverified = sum(r.cache_check == CACHE_UNVERIFIED for r in finals)
    probe_says = probe.cache_verification == UNVERIFIED
    if unverified == 0 and not probe_says:
        state = VERIFIED
    elif unverified == len(finals):
        state = UNVERIFIED
    else:
        state = PARTLY
    label = probe.server_label
    reason = ""
    if state != VERIFIED:
        cached = probe.capabilities.get("cached_tokens")
        reason = (cached.detail if cached is not None else "") or f"{label} reported no cached-token count"
    cold_mode = manifest.settings.cold_mode
    method = probe.cold_method or _COLD.get(cold_mode, cold_mode)  # a probe from before cold_method
    return CacheVerification(
        server_kind=probe.server_kind,
        server_label=label,
        server_version=probe.version or None,
        state=state,
        unverified_records=unverified,
        records=len(finals),
        cold_mode=cold_mode,
        cold_method=method,
        reason=reason,
        cache_model=probe.cache_model,
    )
