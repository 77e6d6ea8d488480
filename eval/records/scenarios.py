"""The scenarios as data: what each isolates, what it holds fixed and what it varies, the record passes it
produces, how its units are planned, and the pairs it compares. The runner plans and sends them
(eval/run/scenarios/), the analysis reads the same specs (eval/analyze/attribution.py), the report shows their
wording. The record passes themselves are in eval/records/vocabulary.py (SCENARIO_PASSES).

A scenario is a schedule of requests with, per request, the cache state it must have (verified like the cache
scenario's) and what it varied (`RequestRecord.variation`, keys below). Every request sent is a record: fillers,
primes and noise too, under their own pass names.

    cache    cold, warm, repeat, timing, controls (`--passes`): what lbeval measured before scenarios existed
    batch    per input: batch_alone (fresh salt), batch_warm_alone (same salt), then for each B in
             `--batch-sizes` above 1: batch_member sent at once with B-1 batch_filler (other inputs' prompts,
             fresh salts: every copy cold), and batch_warm_member (batch_alone's salt: warm) with B-1 cold fillers
    hitlen   per input (token IDs from /tokenize, sent to /v1/completions): hitlen_cold (all IDs, fresh salt),
             then per hit length L: hitlen_prime (the first L IDs, fresh salt S_L, max_tokens 1) and hitlen_full
             (all IDs, salt S_L), which must find floor(min(L, n-1)/block)*block tokens cached
    repeats  per input: repeats_alone N times (fresh salts, one at a time), repeats_batched N times (fresh salts,
             in batches of up to REPEAT_BATCH sent at once)
    traffic  per input: traffic_cold (fresh salt S), traffic_warm_idle (salt S: warm, nothing in between),
             traffic_noise k = 0..2 (other inputs' prompts, other output lengths, the last one ending on a stop
             string), traffic_warm (salt S); warm after traffic is compared with warm before it (the traffic
             alone) and with cold (the traffic and the prefix cache together)
    replicas per input, on a run with N >= 2 replicas (eval/run/replicas.py): for each replica r = 0..N-1 in
             turn, replicas_cold (fresh salt S_r, sent to replica r) and replicas_warm (salt S_r again, replica
             r: warm there); replica r's requests are compared with replica 0's. The unit owns every replica
             while it runs (the replicas' own units are done); on one replica it plans nothing

Units: one per (input, scenario) for the scenarios other than cache, sent back to back by one worker while no
other unit runs; an interrupted unit starts again from its first request (as group g+1) on resume.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eval.records.vocabulary import CACHE_SCENARIO, RECORD_PASSES, SCENARIO_NAMES, SCENARIO_PASSES

# `RequestRecord.variation` keys
BATCH_SIZE = "batch_size"  # requests in flight together (1: alone)
SLOT = "slot"  # position in the batch: 0 the member, 1..B-1 the fillers
INPUT = "input"  # "dataset/id" of the input whose prompt a filler or noise request sent
HIT_LEN = "hit_len"  # L: prompt tokens primed before the full request
HIT_CLASS = (
    "hit_class"  # how L was chosen: "1B-1", "2B", "middle", "last block", "n-1", "budget+1", "L=<L>"...
)
PRIME_LEN = "prime_len"  # P: prompt tokens the hitlen prime sent, when the cache model needs other than L
EXPECTED_CACHED = "expected_cached"  # floor(min(L, n-1)/block)*block
FULL_CACHED = "full_cached"  # floor((n-1)/block)*block: the whole prompt's blocks (a hit below it is partial)
PROMPT_IDS = "prompt_ids"  # n: the full prompt's token IDs
NOISE = "noise"  # k of the traffic_noise request
STOP = "stop"  # the stop string of the traffic noise request that must end on one
REPEAT = "repeat"  # r of a repeats request
BATCH = "batch"  # which batch of a repeats_batched request
REPLICA = "replica"  # r of a replicas request: the replica it was sent to (RequestRecord.replica must agree)
REPLICAS = "replicas"  # N: the replicas the unit was planned for
REPLICA_ROW = "replica"  # the replicas scenario's attribution row key (sub-rows replica_r<r>)

DEFAULT_SCENARIOS = (CACHE_SCENARIO,)
DEFAULT_BATCH_SIZES = (1, 4, 8)
DEFAULT_REPEATS = 10
REPEAT_BATCH = 8  # repeats_batched: copies sent at once, at most
TRAFFIC_NOISE = 3  # traffic_noise requests between cold and warm
# default hit lengths: k*block - 1, k*block, k*block + 1 for these k (those below n)
HIT_BLOCK_MULTIPLES = (1, 2, 3)


@dataclass(frozen=True)
class DefaultPlan:
    """The plan of `lbeval run`, `lbeval ab` and `make eval` when no scenario option names one (neither
    `--scenarios` nor a launch spec's `scenarios.names`): the cache passes on every input, and a little of each
    other scenario on one input per `inputs_per`, enough to catch each class of engine fault (docs/scenarios.md gives the
    cost it was tuned to): partial prefix hits at three depths and a full one (hitlen), one batch size above 1 (batch), two
    repeats (repeats), one round of traffic (traffic), and on a run with 2+ replicas the cold request and its
    warm twin on every replica (replicas; on one replica it plans nothing). Any scenario option given falls back to these values for
    the others; `--scenarios` given (`--scenarios cache`: the cache passes alone) falls back to the scenarios'
    own defaults above."""

    scenarios: tuple[str, ...]
    inputs_per: int  # one scenario input per this many inputs, at least 1 (round robin: scenario_inputs)
    hit_classes: tuple[str, ...]  # the hitlen classes kept (eval/run/scenarios/hitlen.py names them)
    batch_sizes: tuple[int, ...]
    repeats: int
    max_tokens: int  # output limit of the scenario requests: a difference shows in the first tokens' logprobs

    def scenario_inputs(self, n_inputs: int) -> int:
        return max(1, n_inputs // self.inputs_per)


DEFAULT_PLAN = DefaultPlan(
    scenarios=SCENARIO_NAMES,
    inputs_per=12,  # 12 mini inputs: 1; 32 inputs: 2 (docs/scenarios.md: about +10-20% server-seconds either way)
    # partial hits at three depths (1 block, half the prompt's full blocks, one block short of them: partial
    # when the prompt has 2+ full blocks) and the full one
    hit_classes=("1B", "middle", "deepest partial", "last block"),
    batch_sizes=(1, 2),
    repeats=2,
    max_tokens=16,
)


@dataclass(frozen=True)
class PairDef:
    """Pairs a scenario compares: `b` (the measured request) against `a` (the reference) of the same input,
    one sub-row per value of the variation key `by` (None: one row)."""

    key: str  # attribution row key
    cause: str  # what the row attributes a difference to
    a: str  # reference record pass
    b: str  # measured record pass
    by: str | None
    held_fixed: str
    varied: str


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    isolates: str
    passes: tuple[str, ...]
    units: str  # how its units are planned
    cost: str  # requests per input
    pairs: tuple[PairDef, ...]


SCENARIOS: dict[str, ScenarioSpec] = {
    CACHE_SCENARIO: ScenarioSpec(
        name=CACHE_SCENARIO,
        isolates="the prefix cache on an idle server (one request at a time at concurrency 1)",
        passes=RECORD_PASSES,
        units="per input a main unit (cold, warm, repeat, controls) and one unit per timing repetition",
        cost="3 full-length + 2 one-token controls + 2 one-token timing requests per repetition",
        pairs=(
            PairDef(
                "cache_cold_warm",
                "prefix cache",
                "cold",
                "warm",
                None,
                "prompt, salt, sampling settings, server",
                "cache state: cold (0 cached) vs warm (the prompt's full blocks cached)",
            ),
            PairDef(
                "cache_warm_repeat",
                "prefix cache, warm twice",
                "warm",
                "repeat",
                None,
                "prompt, salt, cache state (warm)",
                "nothing but time: the same warm request again",
            ),
        ),
    ),  # fmt: skip
    "batch": ScenarioSpec(
        name="batch",
        isolates="batch composition: the other requests in flight, with the cache out of the picture",
        passes=SCENARIO_PASSES["batch"],
        units="one unit per input: alone, warm alone, then per batch size B a cold batch and a warm batch",
        cost="2 + 2*sum(B) over the batch sizes B > 1 (default 1,4,8: 26), fillers included",
        pairs=(
            PairDef(
                "batch",
                "batch composition",
                "batch_alone",
                "batch_member",
                BATCH_SIZE,
                "prompt, sampling settings, cache state (every copy cold: fresh salts)",
                "batch of B: B-1 other inputs' prompts (mixed lengths) sent at the same moment",
            ),
            PairDef(
                "batch_warm",
                "warm path in a batch",
                "batch_warm_alone",
                "batch_warm_member",
                BATCH_SIZE,
                "prompt, salt (warm: the full blocks cached)",
                "batch of B with B-1 cold fillers",
            ),
        ),
    ),  # fmt: skip
    "hitlen": ScenarioSpec(
        name="hitlen",
        isolates="the prefix-hit length: how many prompt tokens the cache supplies",
        passes=SCENARIO_PASSES["hitlen"],
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
    ),  # fmt: skip
    "repeats": ScenarioSpec(
        name="repeats",
        isolates="run-to-run variation of the very same request",
        passes=SCENARIO_PASSES["repeats"],
        units="one unit per input: N alone, then N in batches of up to 8",
        cost="2N (default N = 10: 20)",
        pairs=(
            PairDef(
                "repeats_alone",
                "repeats alone",
                "repeats_alone",
                "repeats_alone",
                None,
                "prompt, sampling settings, cache state (cold: fresh salts), alone",
                "nothing: the same request again (repeat r vs repeat 0)",
            ),
            PairDef(
                "repeats_batched",
                "repeats in a batch",
                "repeats_alone",
                "repeats_batched",
                None,
                "prompt, sampling settings, cache state (cold)",
                "copies of the request in flight together (repeat r in a batch vs alone repeat 0)",
            ),
        ),
    ),  # fmt: skip
    "traffic": ScenarioSpec(
        name="traffic",
        isolates="unrelated traffic between a cold request and its warm twin",
        passes=SCENARIO_PASSES["traffic"],
        units="one unit per input: cold, warm, 3 noise requests, warm again",
        cost="6",
        pairs=(
            PairDef(
                "traffic",
                "traffic between cold and warm",
                "traffic_warm_idle",
                "traffic_warm",
                None,
                "prompt, salt, cache state (warm: the full blocks cached), alone",
                "3 unrelated requests in between (other prompts and lengths, one ending on a stop string)",
            ),
            PairDef(
                "traffic_vs_cold",
                "traffic between cold and warm",
                "traffic_cold",
                "traffic_warm",
                None,
                "prompt, salt, alone",
                "cache state (cold vs warm) and the 3 unrelated requests: includes the prefix cache's own effect",
            ),
        ),
    ),  # fmt: skip
    "replicas": ScenarioSpec(
        name="replicas",
        isolates="the replica: the same request on another server of the variant (device, driver, build)",
        passes=SCENARIO_PASSES["replicas"],
        units="one unit per input on a run with N >= 2 replicas: per replica r a cold request and its warm twin",
        cost="2N (N replicas); none on one replica",
        pairs=(
            PairDef(
                REPLICA_ROW,
                "replica",
                "replicas_cold",
                "replicas_cold",
                REPLICA,
                "prompt, sampling settings, cache state (cold: a fresh salt; warm: that salt again on the same "
                "replica), alone",
                "the replica: replica r's server vs replica 0's (cold vs cold, warm vs warm)",
            ),
        ),
    ),  # fmt: skip
}

assert tuple(SCENARIOS) == SCENARIO_NAMES


def parse_scenarios(text: str) -> tuple[str, ...]:
    """`--scenarios cache,batch`: known names, in SCENARIO_NAMES order, each once; ValueError otherwise."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario {unknown[0]!r} (choose from {', '.join(SCENARIO_NAMES)})")
    if not names:
        raise ValueError("give at least one scenario")
    return tuple(n for n in SCENARIO_NAMES if n in names)


def scenario_inputs(keys: Sequence[tuple[str, str]], limit: int | None) -> list[int]:
    """Indices of the inputs the scenarios run on: every input, or `limit` of them taken round robin over the
    datasets (in order of first appearance; each dataset's inputs in manifest order), returned in manifest order."""
    if limit is None or limit >= len(keys):
        return list(range(len(keys)))
    by_ds: dict[str, list[int]] = {}
    for i, (dataset, _) in enumerate(keys):
        by_ds.setdefault(dataset, []).append(i)
    chosen: list[int] = []
    depth = 0
    while len(chosen) < limit:
        for indices in by_ds.values():
            if depth < len(indices) and len(chosen) < limit:
                chosen.append(indices[depth])
        depth += 1
    return sorted(chosen)
