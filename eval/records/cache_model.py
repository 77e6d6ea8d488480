"""What a server's prefix cache can hit: one value per server, learned by the probe, written in the manifest
(`probe.cache_model`), read by every expectation (eval/run/steps.py, the hitlen scenario, the controls).

Two kinds are known (docs/servers/hybrid.md has the measurements they rest on):

    blocks       dense attention (vLLM's default): every full block of a prompt sent is cached, so a later
                 prompt sharing s tokens with it hits floor(min(s, n-1)/B)*B tokens, never the last token.
    checkpoints  a hybrid model whose recurrent state (Gated DeltaNet or Mamba layers) vLLM keeps as state
                 checkpoints (`--mamba-cache-mode align`): a hit can only end where a checkpoint was kept. A prompt
                 of m tokens keeps one at its own replay boundary, floor((m-1)/B)*B; a request whose attention
                 blocks hit further than any checkpoint (a shared prefix seen before, but never as a whole prompt)
                 finds only the checkpoint below, and the engine keeps a checkpoint at the shared-prefix junction
                 (the attention hit) while that request prefills, so the next prompt sharing it hits there.

lbeval sends what each kind needs for one expectation to hold on both: a prime of `prime_tokens(s, n)` tokens
before a request that extends a shared prefix of s tokens (one more than s on checkpoints: the prime's replay
boundary is then floor(s/B)*B; nothing more on dense blocks). The hitlen scenario's primes are these; so is the
prime lbeval sends before the sibling control and a CoT answer call whose reasoning diverged (the first
prime_tokens(s, n) of the request's own token IDs). With those, a prompt of n tokens sharing s with what was
primed must hit `expected_hit(n, s)` = floor(min(s, n-1)/B)*B on both kinds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

BLOCKS = "blocks"
CHECKPOINTS = "checkpoints"
CACHE_MODEL_KINDS = (BLOCKS, CHECKPOINTS)
CACHE_MODEL_VERSION = 1


@dataclass(frozen=True)
class CacheModel:
    """A server's prefix cache as lbeval's expectations read it."""

    kind: str  # CACHE_MODEL_KINDS
    block_size: int  # the hit granularity in tokens (the attention block; checkpoints are aligned to it)
    source: str = "probe"  # "probe": measured; "assumed": no measurement possible (block size only)
    evidence: str = ""  # what the probe sent and saw
    version: int = CACHE_MODEL_VERSION

    def __post_init__(self) -> None:
        if self.kind not in CACHE_MODEL_KINDS:
            raise ValueError(f"cache model kind {self.kind!r}: one of {', '.join(CACHE_MODEL_KINDS)}")
        if self.block_size < 1:
            raise ValueError(f"cache model block_size {self.block_size}: at least 1")

    def prime_tokens(self, hit_len: int, prompt_tokens: int) -> int:
        """Tokens to prime so that a prompt of `prompt_tokens` tokens then hits `expected_hit(n, hit_len)`."""
        if self.kind == CHECKPOINTS:
            return min(hit_len + 1, prompt_tokens)
        return hit_len

    def expected_hit(self, prompt_tokens: int, shared_tokens: int) -> int:
        """Cached tokens a prompt of `prompt_tokens` tokens must report when `shared_tokens` of them were sent
        before as lbeval primes them: whole blocks, never covering the last prompt token."""
        return block_hit(prompt_tokens, shared_tokens, self.block_size)

    def describe(self) -> str:
        if self.kind == CHECKPOINTS:
            return (
                f"recurrent-state checkpoints every {self.block_size} tokens, kept only where a prompt ended or "
                "a shared prefix was seen twice (hits end there)"
            )
        return f"dense blocks of {self.block_size} tokens (any full block of a prompt sent can hit)"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def block_hit(prompt_tokens: int, shared_tokens: int, block_size: int) -> int:
    """floor(min(s, n-1)/B)*B: the whole blocks of a shared prefix, never covering the last prompt token."""
    usable = max(0, min(shared_tokens, prompt_tokens - 1))
    return (usable // block_size) * block_size


def with_blocks(model: CacheModel | None, block_size: int | None) -> CacheModel | None:
    """The model a run's expectations read: the probe's, else dense blocks of the server's block size (a run
    from before cache models, or a server whose hits cannot be measured), else None (no block size known)."""
    if model is not None:
        return model
    return None if block_size is None else CacheModel(BLOCKS, block_size, source="assumed")


def cache_model_from_dict(raw: Any, where: str) -> CacheModel | None:
    """The manifest's `probe.cache_model` (None when absent: a run from before cache models, read as blocks
    by whoever needs one); a malformed one raises ValueError naming `where`."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: cache_model is not an object")
    kind, block = raw.get("kind"), raw.get("block_size")
    if not isinstance(kind, str) or kind not in CACHE_MODEL_KINDS:
        raise ValueError(f"{where}: cache_model.kind {kind!r} is not one of {', '.join(CACHE_MODEL_KINDS)}")
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise ValueError(f"{where}: cache_model.block_size {block!r} is not a positive integer")
    version = raw.get("version", CACHE_MODEL_VERSION)
    if version != CACHE_MODEL_VERSION:
        raise ValueError(f"{where}: cache_model.version {version!r}: this lbeval reads {CACHE_MODEL_VERSION}")
    return CacheModel(
        kind=kind,
        block_size=block,
        source=str(raw.get("source", "probe")),
        evidence=str(raw.get("evidence", "")),
    )
