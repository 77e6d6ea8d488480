"""The LongBench v2 dataset spec: one dataset, `longbench_v2`, asked in one of three modes.

    mode       template(s) (prompts/v2/, byte for byte)          output limit (pred.py)
    0shot      0shot.txt                                          128
    cot        0shot_cot.txt, then 0shot_cot_ans.txt with $COT$   1,024 (the reasoning call), then 128 (the answer)
    nocontext  0shot_no_context.txt                               128

Every mode is one user chat message (the server applies the chat template), scored by the official answer
extraction (scorers.longbench_v2). The RAG template (0shot_rag.txt) is kept with the others but not offered: the
Hub data has no retrieved chunks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from eval.benchmark_registry import CliOption, ListedDataset, Listing
from eval.benchmarks.longbench_v2.prompting import (
    MAX_NEW_TOKENS,
    MAX_NEW_TOKENS_COT,
    PROMPT_DIR,
    TEMPLATE_FILES,
)
from eval.errors import ConfigError
from eval.prepare.benchmark_part import PrepareArgs

V2_DATASET = "longbench_v2"
V2_METRIC = "v2_accuracy"  # the official answer extraction; accuracy over every input (scorers.longbench_v2)
V2_CHAT_MODE = "chat"
TEMPLATE_ORIGIN = "THUDM/LongBench prompts/ @ 2e00731f (prompts/v2/PROVENANCE.md)"


@dataclass(frozen=True)
class V2Mode:
    name: str
    template: str  # key of eval.benchmarks.longbench_v2.prompting.TEMPLATE_FILES
    max_tokens: int  # the (first) call's official output limit
    answer_template: str | None = None  # CoT: the second call's template key
    answer_max_tokens: int | None = None  # CoT: the second call's official output limit
    description: str = ""

    def template_files(self) -> list[str]:
        keys = [self.template] + ([self.answer_template] if self.answer_template else [])
        return [TEMPLATE_FILES[k] for k in keys]


V2_MODES: dict[str, V2Mode] = {
    "0shot": V2Mode(
        "0shot", "zero_shot", MAX_NEW_TOKENS, description="the document, the question, 4 choices"
    ),
    "cot": V2Mode(
        "cot",
        "cot",
        MAX_NEW_TOKENS_COT,
        "cot_answer",
        MAX_NEW_TOKENS,
        "a reasoning call, then an answer call built from its output",
    ),  # fmt: skip
    "nocontext": V2Mode(
        "nocontext", "no_context", MAX_NEW_TOKENS, description="the question and 4 choices, no document"
    ),
}
DEFAULT_V2_MODE = "0shot"


@dataclass(frozen=True)
class V2Options:
    """LongBench v2's own prepare options (`lbeval prepare --v2-mode`), handed to its part through prepare
    (PrepareJob.options, under the benchmark's name); the mode is checked when the part is made."""

    mode: str = DEFAULT_V2_MODE


MODE_OPTION = CliOption(
    "v2-mode",
    f"how {V2_DATASET} is asked: 0shot, cot (reasoning call, then answer call) or nocontext (default %(default)s)",
    DEFAULT_V2_MODE,
    tuple(V2_MODES),
)


def options_from(values: Mapping[str, str]) -> V2Options:
    """The parsed `lbeval prepare` options (by dest) as LongBench v2's options object."""
    return V2Options(mode=values[MODE_OPTION.dest])


# what LongBench v2 adds to `lbeval prepare`'s command line (its entry in eval/prepare/benchmark_part.PREPARE_ARGS)
PREPARE_ARGS = PrepareArgs(f"{V2_DATASET} (LongBench v2)", (MODE_OPTION,), options_from)


def listing() -> Listing:
    """What `lbeval datasets` lists of LongBench v2 (its entry in eval/benchmark_registry.LISTING): its dataset at
    the default mode's output limit, and each mode's limits and what it asks (`--json`: its template files)."""
    default = V2_MODES[DEFAULT_V2_MODE]
    modes = {
        m.name: {
            "templates": m.template_files(),
            "max_tokens": m.max_tokens,
            "answer_max_tokens": m.answer_max_tokens,
        }
        for m in V2_MODES.values()
    }
    row = ListedDataset(
        V2_DATASET,
        V2_METRIC,
        default.max_tokens,
        V2_CHAT_MODE,
        language="en",
        first_line_only=False,
        label="(LongBench v2)",
        json_extra={"v2_modes": modes, "default_v2_mode": DEFAULT_V2_MODE},
    )
    return Listing((row,), tuple(mode_line(mode) for mode in V2_MODES.values()))


def mode_line(mode: V2Mode) -> str:
    """A mode's line under the v2 row of `lbeval datasets`: its flag, output limit(s) and what it asks."""
    limits = f"{mode.max_tokens}" + (f" then {mode.answer_max_tokens}" if mode.answer_max_tokens else "")
    return f"  --{MODE_OPTION.name} {mode.name:<10} max_tokens {limits:<14} {mode.description}"


PROMPT_FILES = tuple(f"{PROMPT_DIR}/{name}" for name in TEMPLATE_FILES.values())  # under prompts/, rag's too


def is_v2(dataset: str) -> bool:
    return dataset == V2_DATASET


CONTEXT_END = "</text>\n\nWhat is the correct answer"  # what follows the document in the v2 templates


def context_end(dataset: str) -> str:
    """Where a v2 prompt's document ends (every v2 template closes it the same way)."""
    return CONTEXT_END


def get_v2_mode(name: str) -> V2Mode:
    mode = V2_MODES.get(name)
    if mode is None:
        raise ConfigError(f"--v2-mode: unknown mode {name!r} (choose from {', '.join(V2_MODES)})")
    return mode


def template_sha256(mode: V2Mode) -> dict[str, str]:
    """SHA-256 of each template file the mode uses (the bytes in prompts/v2/)."""
    folder = resources.files("prompts").joinpath(PROMPT_DIR)
    return {
        name: hashlib.sha256(folder.joinpath(name).read_bytes()).hexdigest() for name in mode.template_files()
    }
