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
    cold_answer     LongBench v2 CoT only: the answer call of cold, its prompt built from cold's output (the
                    reasoning), with a fresh salt of its own (the answer group's): must miss
    warm_answer     the answer call of warm (prompt from warm's reasoning), the answer group's salt: must hit what
                    it shares with cold_answer's prompt (all of it when the two reasonings are the same)
    repeat_answer   the answer call of repeat (prompt from repeat's reasoning), likewise against warm_answer

Units: the runner sends a run as units, each a group of steps that starts from cold. An input's "main" unit
holds cold, warm, repeat and the controls (and, on a CoT input, then the three answer calls); each timing
repetition r is a "timing" unit of its own.

The other scenarios (eval/records/scenario_kinds/, one module each, say what each isolates) have record passes
of their own (SCENARIO_PASSES), and one unit per input whose kind is the scenario's name; the repetition of such
a record is its index among the unit's records of that pass, and `RequestRecord.variation` says what it varied.
"""

from __future__ import annotations

from eval.records.scenario_kinds.registry import pass_owner, registered

# LongBench v2 CoT: generation pass -> the pass of its answer call (eval/run/passes.py, eval/analyze/accuracy.py)
ANSWER_PASSES: dict[str, str] = {"cold": "cold_answer", "warm": "warm_answer", "repeat": "repeat_answer"}
REASONING_OF = {answer: reasoning for reasoning, answer in ANSWER_PASSES.items()}
RECORD_PASSES = (
    "cold", "warm", "repeat", "timing_cold", "timing_warm", "control_salt", "control_sibling",
    *ANSWER_PASSES.values(),
)  # fmt: skip
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
# must hit the prefix cache
WARM_CONDITION = ("warm", "repeat", "timing_warm", "warm_answer", "repeat_answer")
COLD_CONDITION = ("cold", "timing_cold", "cold_answer")  # must miss it
MISS_EXPECTED = ("cold", "timing_cold", "control_salt", "cold_answer")  # verified as 0 cached tokens

UNIT_MAIN = "main"
UNIT_TIMING = "timing"

CACHE_SCENARIO = "cache"
# scenario -> its record passes, from the scenario registry (eval/records/scenario_kinds/: one module each; the
# `cache` scenario's are RECORD_PASSES above)
SCENARIO_PASSES: dict[str, tuple[str, ...]] = {
    s.name: s.passes for s in registered() if s.name != CACHE_SCENARIO
}
SCENARIO_NAMES = (CACHE_SCENARIO, *SCENARIO_PASSES)
SCENARIO_OF_PASS = {p: name for name, produced in SCENARIO_PASSES.items() for p in produced}
ALL_PASSES = RECORD_PASSES + tuple(SCENARIO_OF_PASS)
PROGRESS_GROUPS = (*PASS_CHOICES, *SCENARIO_PASSES)  # one progress bar each (`choice_of`)


def _scenario_pass(pass_name: str) -> str | None:
    """The registered scenario beyond cache whose pass this is (the registry's, so a scenario registered later
    counts too), else None."""
    owner = pass_owner(pass_name)
    return owner if owner is not None and owner != CACHE_SCENARIO else None


def scenario_of(pass_name: str) -> str:
    """The scenario a record pass belongs to (`cache` for RECORD_PASSES)."""
    return _scenario_pass(pass_name) or CACHE_SCENARIO


def choice_of(pass_name: str) -> str:
    """The `--passes` choice that produces a record pass (timing_warm -> timing); a scenario pass's scenario."""
    owner = _scenario_pass(pass_name)
    if owner is not None:
        return owner
    pass_name = REASONING_OF.get(pass_name, pass_name)  # a CoT answer call comes with its generation pass
    for choice, produced in PASS_CHOICES.items():
        if pass_name in produced:
            return choice
    raise KeyError(pass_name)


def unit_kind(pass_name: str) -> str:
    """main | timing for the cache scenario's passes; the scenario's name for the others."""
    owner = _scenario_pass(pass_name)
    if owner is not None:
        return owner
    return UNIT_TIMING if pass_name in PASS_CHOICES["timing"] else UNIT_MAIN
