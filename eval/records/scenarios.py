"""The scenarios as data, one registry by name: the cache scenario's spec (here: its passes are the pass
vocabulary's, eval/records/vocabulary.py) and one module per other scenario (eval/records/scenario_kinds/<name>.py:
what it isolates, its record passes, how its units are planned, what they cost, the pairs its attribution rows
compare, the gate rules it brings). This module is their one face: `SCENARIOS` (every registered scenario, read
live), the default plan, `--scenarios` parsing and the inputs the scenarios run on. The runner plans and sends
them (eval/run/scenarios/<name>.py, registered by the same name), the analysis reads the same specs
(eval/analyze/attribution.py), the report shows their wording.

A scenario is a schedule of requests with, per request, the cache state it must have (verified like the cache
scenario's) and what it varied (`RequestRecord.variation`, keys in each scenario's module). Every request sent is
a record: fillers, primes and noise too, under their own pass names.

    cache    cold, warm, repeat, timing, controls (`--passes`): what lbeval measured before scenarios existed
    the others: one module each, eval/records/scenario_kinds/<name>.py

Units: one per (input, scenario) for the scenarios other than cache, sent back to back by one worker while no
other unit runs; an interrupted unit starts again from its first request (as group g+1) on resume.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from eval.records.scenario_kinds.batch import DEFAULT_BATCH_SIZES
from eval.records.scenario_kinds.hitlen import (
    EXPECTED_CACHED,
    FULL_CACHED,
    HIT_BLOCK_MULTIPLES,
    HIT_CLASS,
    HIT_LEN,
    PRIME_LEN,
    PROMPT_IDS,
)
from eval.records.scenario_kinds.registry import (
    PairDef,
    ScenarioSpec,
    is_registered,
    names,
    register,
    registered,
    spec_of,
)
from eval.records.scenario_kinds.repeats import BATCH, DEFAULT_REPEATS, REPEAT, REPEAT_BATCH
from eval.records.scenario_kinds.replicas import REPLICA, REPLICA_ROW, REPLICAS
from eval.records.scenario_kinds.spec import BATCH_SIZE, INPUT, SLOT
from eval.records.scenario_kinds.traffic import NOISE, STOP, TRAFFIC_NOISE
from eval.records.vocabulary import CACHE_SCENARIO, RECORD_PASSES, SCENARIO_NAMES

__all__ = [
    "BATCH",
    "BATCH_SIZE",
    "CACHE",
    "DEFAULT_BATCH_SIZES",
    "DEFAULT_PLAN",
    "DEFAULT_REPEATS",
    "DEFAULT_SCENARIOS",
    "EXPECTED_CACHED",
    "FULL_CACHED",
    "HIT_BLOCK_MULTIPLES",
    "HIT_CLASS",
    "HIT_LEN",
    "INPUT",
    "NOISE",
    "PRIME_LEN",
    "PROMPT_IDS",
    "PairDef",
    "REPEAT",
    "REPEAT_BATCH",
    "REPLICA",
    "REPLICAS",
    "REPLICA_ROW",
    "SCENARIOS",
    "SLOT",
    "STOP",
    "ScenarioSpec",
    "TRAFFIC_NOISE",
    "DefaultPlan",
    "parse_scenarios",
    "scenario_inputs",
]

DEFAULT_SCENARIOS = (CACHE_SCENARIO,)


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


CACHE = register(
    ScenarioSpec(
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
        rules=(
            "cold_warm_equality",
            "warm_repeat_equality",
            "cold_scores",
            "no_invalid_warm",
            "no_errors",
            "warm_prefill_change",
            "cold_prefill_change",
            "cache_reports_consistent",
            "cross_variant_cold",
            "cache_isolation",
        ),
        order=0,
        default_plan=True,
    )
)  # fmt: skip


class _Registered(Mapping[str, ScenarioSpec]):
    """Every registered scenario by name, in the registry's order, read live (a scenario registered later is in)."""

    def __getitem__(self, name: str) -> ScenarioSpec:
        if not is_registered(name):
            raise KeyError(name)
        return spec_of(name)

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(registered())


SCENARIOS: Mapping[str, ScenarioSpec] = _Registered()

assert tuple(SCENARIOS) == SCENARIO_NAMES

DEFAULT_PLAN = DefaultPlan(
    scenarios=tuple(s.name for s in registered() if s.default_plan),
    inputs_per=12,  # 12 mini inputs: 1; 32 inputs: 2 (docs/scenarios.md: about +10-20% server-seconds either way)
    # partial hits at three depths (1 block, half the prompt's full blocks, one block short of them: partial
    # when the prompt has 2+ full blocks) and the full one
    hit_classes=("1B", "middle", "deepest partial", "last block"),
    batch_sizes=(1, 2),
    repeats=2,
    max_tokens=16,
)


def parse_scenarios(text: str) -> tuple[str, ...]:
    """`--scenarios cache,batch`: registered names, in the registry's order, each once; ValueError otherwise."""
    given = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in given if n not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario {unknown[0]!r} (choose from {', '.join(SCENARIOS)})")
    if not given:
        raise ValueError("give at least one scenario")
    return tuple(n for n in SCENARIOS if n in given)


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
