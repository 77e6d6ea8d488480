"""LongBench v1 prompts as the official pred.py builds them: the dataset's template, then the middle truncation.

The prompt is `template.format(context=..., input=...)` (`spec.DatasetSpec.format`, the templates in
prompts/dataset2prompt.json). Truncation follows pred.py: tokenize the formatted prompt (with the tokenizer's
special tokens, as `tokenizer(prompt)` does); if it is longer than the input budget L, keep the first int(L/2)
and the last int(L/2) tokens, decode each half separately without special tokens and join the strings. The
budget is the prepare stage's (eval/prepare/tokenizers.py: the model's window minus the output limit minus the
chat template's overhead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from eval.errors import ConfigError


class Codec(Protocol):
    """What the truncation needs of a tokenizer (the prepare stage's Tokenizer has it)."""

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass(frozen=True)
class Truncated:
    text: str
    original_tokens: int
    truncated: bool


def middle_truncate(prompt: str, tokenizer: Codec, budget: int) -> Truncated:
    if budget < 2:
        raise ConfigError(f"input budget of {budget} tokens is too small to truncate into two halves")
    ids = tokenizer.encode(prompt)
    if len(ids) <= budget:
        return Truncated(prompt, len(ids), False)
    half = budget // 2
    text = tokenizer.decode(ids[:half]) + tokenizer.decode(ids[-half:])
    return Truncated(text, len(ids), True)
