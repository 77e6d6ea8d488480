"""Middle truncation against a tokenizer with a known vocabulary (one token per word, space-joined)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from eval.benchmarks.longbench.prompting import middle_truncate
from eval.errors import ConfigError
from eval.prepare.tokenizers import chat_overhead, input_budget


class WordTokenizer:
    """Vocabulary: BOS=0, then every distinct word in order of first sight. decode joins with spaces.

    encode adds BOS like `tokenizer(prompt)` does for Llama-style tokenizers; decode drops it
    (skip_special_tokens). The chat template adds 3 tokens before and 2 after the user text.
    """

    BOS = 0

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.inverse: dict[int, str] = {}

    def _id(self, word: str) -> int:
        if word not in self.vocab:
            self.vocab[word] = len(self.vocab) + 1
            self.inverse[self.vocab[word]] = word
        return self.vocab[word]

    def encode(self, text: str) -> list[int]:
        return [self.BOS] + [self._id(w) for w in text.split()]

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.inverse[i] for i in ids if i != self.BOS)

    def chat_token_count(self, text: str) -> int:
        return len(self.encode(text)) + 5

    def max_model_len(self) -> int | None:
        return 64

    def describe(self) -> dict[str, Any]:
        return {"kind": "test-words"}


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


@pytest.mark.parametrize(
    ("n_words", "budget", "expected"),
    [
        # 10 words -> 11 tokens (BOS + 10). At the budget: untouched.
        (10, 11, words(10)),
        (10, 12, words(10)),
        # budget 10: keep first 5 tokens (BOS w0..w3) and last 5 (w5..w9): w4 is cut
        (10, 10, "w0 w1 w2 w3" + "w5 w6 w7 w8 w9"),
        # odd budget 9: int(9/2)=4 each side: BOS w0 w1 w2 | w6 w7 w8 w9
        (10, 9, "w0 w1 w2" + "w6 w7 w8 w9"),
        # smallest budget: one token each side -> BOS (dropped) | w9
        (10, 2, "" + "w9"),
    ],
)
def test_middle_truncate(n_words: int, budget: int, expected: str) -> None:
    tok = WordTokenizer()
    out = middle_truncate(words(n_words), tok, budget)
    assert out.text == expected
    assert out.original_tokens == n_words + 1
    assert out.truncated == (n_words + 1 > budget)


def test_halves_are_decoded_separately_and_joined_without_separator() -> None:
    tok = WordTokenizer()
    out = middle_truncate("a b c d e f", tok, 4)
    # tokens: BOS a b c d e f -> first 2 (BOS a) + last 2 (e f): "a" + "e f"
    assert out.text == "ae f"


def test_budget_too_small() -> None:
    with pytest.raises(ConfigError, match="too small"):
        middle_truncate("a b c", WordTokenizer(), 1)


def test_chat_overhead_is_measured() -> None:
    assert chat_overhead(WordTokenizer()) == 5


def test_input_budget() -> None:
    assert input_budget(4096, 128, 5) == 3963
    with pytest.raises(ConfigError, match="no room for input"):
        input_budget(100, 99, 5)
