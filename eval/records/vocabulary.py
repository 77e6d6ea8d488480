"""The pass vocabulary: the one list of record passes, the `--passes` choices that produce them, and the cache
condition each pass must meet. Every stage that names a pass reads it from here.

Record passes of the `cache` scenario (`RequestRecord.pass_name`; RECORD_PASSES):
    cold            first request of an input, with a fresh cache_salt (or after /reset_prefix_cache)
    warm            the same prompt and salt right after cold (must hit the prefix cache)
    repeat          warm again
    timing_cold     max_tokens=1, repetition r in [0, R), fresh salt each time
    timing_warm     max_tokens=1, repetition r, same salt as the timing_cold of the same r
    control_salt    a warm prompt re-sent with a new salt: must hit 0 cached tokens
    control_sibling the same context with a different question: must hit about the context's blocks

Units: the runner sends a run as units, each a group of steps that starts from cold. An input's "main" unit
holds cold, warm, repeat and the controls; each timing repetition r is a "timing" unit of its own.

The other scenarios (eval/records/scenarios.py says what each isolates) have record passes of their own
(SCENARIO_PASSES), and one unit per input whose kind is the scenario's name; the repetition of such a record is
its index among the unit's records of that pass, and `RequestRecord.variation` says what it varied.
"""

from __future__ import annotations

RECORD_PASSES = ("cold", "warm", "repeat", "timing_cold", "timing_warm", "control_salt", "control_sibling")
STATUSES = ("ok", "error", "invalid")

# `lbeval run --passes` choices -> the record passes each produces, in send order
PASS_CHOICES: dict[str, tuple[str, ...]] = {
    "cold": ("cold",),
    "warm": ("warm",),
    "repeat": ("repeat",),
    "timing": ("timing_cold", "timing_warm"),
    "controls": ("control_salt", "control_sibling"),
}
GENERATION_PASSES = ("cold", "warm", "repeat")  # full-length outputs, scored for accuracy
WARM_CONDITION = ("warm", "repeat", "timing_warm")  # must hit the prefix cache
COLD_CONDITION = ("cold", "timing_cold")  # must miss it
MISS_EXPECTED = ("cold", "timing_cold", "control_salt")  # verified as 0 cached tokens

UNIT_MAIN = "main"
UNIT_TIMING = "timing"

# scenario -> its record passes (the `cache` scenario's are RECORD_PASSES above)
SCENARIO_PASSES: dict[str, tuple[str, ...]] = {
    "batch": ("batch_alone", "batch_warm_alone", "batch_member", "batch_warm_member", "batch_filler"),
    "hitlen": ("hitlen_cold", "hitlen_prime", "hitlen_full"),
    "repeats": ("repeats_alone", "repeats_batched"),
    "traffic": ("traffic_cold", "traffic_noise", "traffic_warm"),
}
CACHE_SCENARIO = "cache"
SCENARIO_NAMES = (CACHE_SCENARIO, *SCENARIO_PASSES)
SCENARIO_OF_PASS = {p: name for name, produced in SCENARIO_PASSES.items() for p in produced}
ALL_PASSES = RECORD_PASSES + tuple(SCENARIO_OF_PASS)
PROGRESS_GROUPS = (*PASS_CHOICES, *SCENARIO_PASSES)  # one progress bar each (`choice_of`)


def scenario_of(pass_name: str) -> str:
    """The scenario a record pass belongs to (`cache` for RECORD_PASSES)."""
    return SCENARIO_OF_PASS.get(pass_name, CACHE_SCENARIO)


def choice_of(pass_name: str) -> str:
    """The `--passes` choice that produces a record pass (timing_warm -> timing); a scenario pass's scenario."""
    if pass_name in SCENARIO_OF_PASS:
        return SCENARIO_OF_PASS[pass_name]
    for choice, produced in PASS_CHOICES.items():
        if pass_name in produced:
            return choice
    raise KeyError(pass_name)


def unit_kind(pass_name: str) -> str:
    """main | timing for the cache scenario's passes; the scenario's name for the others."""
    if pass_name in SCENARIO_OF_PASS:
        return SCENARIO_OF_PASS[pass_name]
    return UNIT_TIMING if pass_name in PASS_CHOICES["timing"] else UNIT_MAIN
