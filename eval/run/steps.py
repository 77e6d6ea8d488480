"""The schedule of requests per input and the cache state each request must show.

A *unit* is what must run back to back on one server for its cache state to mean something:
    main unit of an input     cold -> warm -> repeat -> control_salt -> control_sibling
    timing unit r of an input timing_cold r -> timing_warm r   (max_tokens=1, streamed for TTFT)
Units of one input run in that order (main, then timing r = 0..R-1: cold and warm interleaved per input).

Verification per request (vLLM caches whole blocks and never the last prompt token):
    cold, timing_cold, control_salt   must report 0 cached tokens
    warm, repeat, timing_warm         must report floor((prompt_tokens - 1) / block) * block cached tokens
    control_sibling                   must report floor(min(shared, n - 1) / block) * block cached tokens
The block and what a hit can be come from the server's cache model (eval/records/cache_model.py, the probe's):
on recurrent-state checkpoints (a hybrid model) a prompt that shares only part of one sent before finds only a
checkpoint kept below its shared prefix, so a partial-share request (the control, a CoT answer call whose reasoning
diverged) is preceded by a prime of its own first shared+1 token IDs (its salt, max_tokens 1, counted as
`partial_primes`, not recorded: eval/run/passes.py), which keeps a checkpoint at the shared prefix's last block.

LongBench v2 CoT inputs (a row with `answer_template`): each of cold, warm and repeat is the reasoning call, and
the main unit ends with its answer calls, cold_answer -> warm_answer -> repeat_answer, each prompt built from
the reasoning output of its own pass (`answer_prompt`: `$COT$` replaced as pred.py does). The answer calls have
a salt of their own: cold_answer takes a fresh one (or a reset), so it misses, and warm_answer / repeat_answer
reuse it. warm_answer must hit what its prompt shares with cold_answer's (repeat_answer: with warm_answer's):
the whole prompt's blocks when the two reasonings are the same, the common prefix (as tokenized) when a
reasoning diverged, since its tail then differs. The answer calls come after the controls, so that in reset
mode the reset before cold_answer empties nothing that a later reasoning-prompt request needs.

`eval/run/passes.py` sends a unit and checks each request with `verify`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from eval.benchmark_registry import benchmark_of
from eval.errors import ConfigError
from eval.prepare.inputs import InputRow
from eval.records.cache_model import CacheModel, block_hit, with_blocks
from eval.records.server_figures import checked_cached
from eval.records.types import RequestRecord, Usage
from eval.records.vocabulary import ANSWER_PASSES, PASS_CHOICES, UNIT_MAIN, UNIT_TIMING

MAIN_ORDER = ("cold", "warm", "repeat")
SIBLING_QUESTION = "\n\nQuestion: Which topic does the text above discuss first?\n\nAnswer:"
EVICT_PROMPT = "~ lbeval cache eviction: an unrelated short prompt sent before a cold request."
# a CoT answer call's warm reference: the answer call whose prompt it must share (what is cached under its salt)
ANSWER_REFERENCE = {"warm": "cold", "repeat": "warm"}


@dataclass(frozen=True)
class Step:
    pass_name: str
    repetition: int = 0
    salt: str = (
        "group"  # "fresh": a new salt that becomes the group's; "group": the group's; "new": throwaway
    )
    expect: str = "hit"  # "miss" | "hit" | "sibling"
    max_tokens: int | None = None  # None: the example's limit
    stream: bool = False
    retry_invalid: bool = True  # retry once when verification fails (not for controls: they measure)
    sibling: bool = False
    answer_of: str | None = None  # a CoT answer call: the generation pass whose reasoning output it completes


@dataclass(frozen=True)
class Unit:
    row_index: int
    kind: str  # "main" | "timing"
    repetition: int
    steps: tuple[Step, ...]


def validate_passes(passes: tuple[str, ...]) -> None:
    unknown = [p for p in passes if p not in PASS_CHOICES]
    if unknown:
        raise ConfigError(f"--passes: unknown pass {unknown[0]!r} (choose from {', '.join(PASS_CHOICES)})")
    needs_cold = [p for p in passes if p in ("warm", "repeat", "controls")]
    if needs_cold and "cold" not in passes:
        raise ConfigError(
            f"--passes: {needs_cold[0]} needs cold (it re-sends the cold request's prompt and salt)"
        )
    if "repeat" in passes and "warm" not in passes:
        raise ConfigError("--passes: repeat needs warm")
    if not passes:
        raise ConfigError("--passes: give at least one pass")


def main_steps(passes: tuple[str, ...], stream: bool) -> tuple[Step, ...]:
    steps: list[Step] = []
    if "cold" in passes:
        steps.append(Step("cold", salt="fresh", expect="miss", stream=stream))
    for name in ("warm", "repeat"):
        if name in passes:
            steps.append(Step(name, stream=stream))
    if "controls" in passes:
        steps.append(Step("control_salt", salt="new", expect="miss", max_tokens=1, retry_invalid=False))
        steps.append(
            Step("control_sibling", expect="sibling", max_tokens=1, retry_invalid=False, sibling=True)
        )
    return tuple(steps)


def answer_steps(passes: tuple[str, ...], stream: bool) -> tuple[Step, ...]:
    """A CoT input's answer calls, one per generation pass asked (see the module docstring)."""
    steps = []
    for name in ("cold", "warm", "repeat"):
        if name in passes:
            cold = name == "cold"
            salt, expect = ("fresh", "miss") if cold else ("group", "hit")
            steps.append(Step(ANSWER_PASSES[name], salt=salt, expect=expect, stream=stream, answer_of=name))
    return tuple(steps)


def answer_prompt(row: InputRow, reasoning: str) -> str:
    """A CoT row's answer call: its answer_template with the reasoning call's output (stripped) as `$COT$`."""
    insert = benchmark_of(row.dataset).insert_answer
    if row.answer_template is None or insert is None:
        raise ValueError(f"{row.dataset}/{row.id} is not a CoT input")
    return insert(row.answer_template, reasoning)


def timing_steps(r: int) -> tuple[Step, ...]:
    return (
        Step("timing_cold", r, salt="fresh", expect="miss", max_tokens=1, stream=True),
        Step("timing_warm", r, expect="hit", max_tokens=1, stream=True),
    )


def plan_units(
    n_rows: int,
    passes: tuple[str, ...],
    timing_reps: int,
    stream_all: bool = False,
    cot_rows: frozenset[int] = frozenset(),
) -> list[Unit]:
    """Every unit of a run, in send order; the rows in `cot_rows` (CoT inputs) end their main unit with the
    answer calls."""
    main = main_steps(passes, stream_all)
    answers = answer_steps(passes, stream_all)
    units: list[Unit] = []
    for i in range(n_rows):
        if main:
            units.append(Unit(i, UNIT_MAIN, 0, main + answers if i in cot_rows else main))
        if "timing" in passes:
            units.extend(Unit(i, UNIT_TIMING, r, timing_steps(r)) for r in range(timing_reps))
    return units


expected_cached = (
    block_hit  # cached tokens vLLM reports: whole blocks of the shared prefix, never the last token
)


@dataclass(frozen=True)
class CacheFacts:
    prefix_caching: bool | None  # None: unknown (treated as on)
    block_size: int | None
    reported: bool = True  # the server reports cached tokens per request (False: nothing can be verified)
    # what a hit can be (the probe's cache model; eval/records/cache_model.py): None reads as dense blocks
    cache_model: CacheModel | None = None

    @property
    def model(self) -> CacheModel | None:
        """The cache model every expectation reads (dense blocks of block_size when the probe had none)."""
        return with_blocks(self.cache_model, self.block_size)


def verify(
    expect: str, usage: Usage, facts: CacheFacts, shared_tokens: int | None = None
) -> tuple[str, str | None, int | None]:
    """(status, reason, expected_cached_tokens) of one response, by the rules in the module docstring."""
    if not facts.reported:
        return "ok", None, None  # answered; its cache state is unverified (the record says so)
    cached = usage.cached_tokens
    if cached is None:
        return "invalid", "the server reported no usage.prompt_tokens_details.cached_tokens", None
    if expect == "miss":
        if cached == 0:
            return "ok", None, 0
        return "invalid", f"expected a prefix-cache miss, but {cached} tokens were cached", 0
    if facts.prefix_caching is False:
        return "ok", None, 0  # warm cannot hit on this server: recorded, not verified (the probe warned)
    n = usage.prompt_tokens
    shared = n if expect == "hit" else shared_tokens
    model = facts.model
    if model is None or n is None or shared is None:
        if cached > 0:
            return "ok", None, None
        return "invalid", f"expected a prefix-cache hit ({expect}), but 0 tokens were cached", None
    expected = model.expected_hit(n, shared)
    if cached >= expected:
        return "ok", None, expected
    if cached > 0:
        return "invalid", f"found {cached} of {expected} cached tokens ({expect}): a short hit", expected
    return "invalid", f"expected {expected} cached tokens ({expect}), the server reported {cached}", expected


def short_hit(rec: RequestRecord) -> bool:
    """An invalid hit-condition record that found some but fewer cached tokens than expected: what the server
    does, not a transient miss, so it is never retried (`verify` names it "found N of M cached tokens")."""
    cached, expected = checked_cached(rec), rec.expected_cached_tokens
    return rec.status == "invalid" and cached is not None and expected is not None and 0 < cached < expected


def sibling_prompt(row: InputRow) -> str:
    """The same context with a different question: the prompt up to the end of its context, then
    SIBLING_QUESTION. The context's end is found from the dataset template's text that follows {context};
    without a usable template, the last tenth of the prompt is replaced."""
    tail = ""
    try:
        tail = benchmark_of(row.dataset).context_end(row.dataset)  # the benchmark's templates know it
    except Exception:  # noqa: BLE001 - unknown dataset or template without {context}: fall back
        tail = ""
    cut = row.prompt.rfind(tail) if len(tail.strip()) >= 8 else -1
    if cut <= 0:
        cut = len(row.prompt) - max(1, len(row.prompt) // 10)
    return row.prompt[:cut] + SIBLING_QUESTION


def new_salt() -> str:
    return "lbeval-" + secrets.token_hex(12)
