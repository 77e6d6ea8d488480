"""The hitlen scenario: the prefix-hit length, how many prompt tokens the cache supplies.

Per input (token IDs from /tokenize, sent to /v1/completions): hitlen_cold (all IDs, fresh salt), then per hit
length L: hitlen_prime (the first L IDs, fresh salt S_L, max_tokens 1) and hitlen_full (all IDs, salt S_L), which
must find floor(min(L, n-1)/block)*block tokens cached. Planner: eval/run/scenarios/hitlen.py.
"""

from __future__ import annotations

from eval.records.scenario_kinds.spec import PairDef, ScenarioSpec, register

# `RequestRecord.variation` keys
HIT_LEN = "hit_len"  # L: prompt tokens primed before the full request
HIT_CLASS = (
    "hit_class"  # how L was chosen: "1B-1", "2B", "middle", "last block", "n-1", "budget+1", "L=<L>"...
)
PRIME_LEN = "prime_len"  # P: prompt tokens the hitlen prime sent, when the cache model needs other than L
EXPECTED_CACHED = "expected_cached"  # floor(min(L, n-1)/block)*block
FULL_CACHED = "full_cached"  # floor((n-1)/block)*block: the whole prompt's blocks (a hit below it is partial)
PROMPT_IDS = "prompt_ids"  # n: the full prompt's token IDs

# default hit lengths: k*block - 1, k*block, k*block + 1 for these k (those below n)
HIT_BLOCK_MULTIPLES = (1, 2, 3)

SPEC = register(
    ScenarioSpec(
        name="hitlen",
        order=20,
        default_plan=True,
        isolates="the prefix-hit length: how many prompt tokens the cache supplies",
        passes=("hitlen_cold", "hitlen_prime", "hitlen_full"),
        units="one unit per input: the cold reference, then a prime and a full request per hit length L",
        cost="1 + 2 per hit length (the primes are max_tokens 1); about 14 hit lengths by default",
        pairs=(
            PairDef(
                "hitlen",
                "prefix-hit length",
                "hitlen_cold",
                "hitlen_full",
                HIT_CLASS,
                "prompt token IDs (/v1/completions), sampling settings, alone",
                "cached prefix: L tokens primed, floor(min(L, n-1)/block)*block found",
            ),
        ),
        rules=("hitlen_cache_honoured", "hitlen_equality"),
        settings=("hit_lengths", "hit_budget", "hit_classes"),
    )
)
