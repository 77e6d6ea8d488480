"""The pass vocabulary: the one list of record passes, the `--passes` choices that produce them, and the cache
condition each pass must meet. Every stage that names a pass reads it from here.

Record passes (`RequestRecord.pass_name`):
    cold            first request of an input, with a fresh cache_salt (or after /reset_prefix_cache)
    warm            the same prompt and salt right after cold (must hit the prefix cache)
    repeat          warm again
    timing_cold     max_tokens=1, repetition r in [0, R), fresh salt each time
    timing_warm     max_tokens=1, repetition r, same salt as the timing_cold of the same r
    control_salt    a warm prompt re-sent with a new salt: must hit 0 cached tokens
    control_sibling the same context with a different question: must hit about the context's blocks

Units: the runner sends a run as units, each a group of steps that starts from cold. An input's "main" unit
holds cold, warm, repeat and the controls; each timing repetition r is a "timing" unit of its own.
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


def choice_of(pass_name: str) -> str:
    """The `--passes` choice that produces a record pass (timing_warm -> timing)."""
    for choice, produced in PASS_CHOICES.items():
        if pass_name in produced:
            return choice
    raise KeyError(pass_name)


def unit_kind(pass_name: str) -> str:
    return UNIT_TIMING if pass_name in PASS_CHOICES["timing"] else UNIT_MAIN
