"""The secondary column: rouge-score's ROUGE-L F-measure, checked against rouge-score itself."""

from __future__ import annotations

import random

import pytest
from rouge_score import rouge_scorer

from scorers.longbench import rouge_score_l


def google(prediction: str, answers: list[str]) -> float:
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    return max([0.0, *(scorer.score(a, prediction)["rougeL"].fmeasure for a in answers)])


def test_hand_values() -> None:
    # tokens lowercased, punctuation is a separator: [the, cat, sat] vs [the, cat, sat, down] -> lcs 3
    p, r = 3 / 3, 3 / 4
    assert rouge_score_l("The cat, sat.", ["the cat sat down"]) == pytest.approx(
        2 * p * r / (p + r), abs=1e-15
    )
    assert rouge_score_l("a b", ["b a"]) == 0.5  # lcs 1 of 2 and 2
    assert rouge_score_l("北京", ["北京"]) == 0.0  # no a-z0-9 token at all
    assert rouge_score_l("anything", []) == 0.0
    assert rouge_score_l("", ["x"]) == 0.0


def test_parity_with_rouge_score() -> None:
    rng = random.Random(4)
    for _ in range(300):
        vocab = [f"w{i}" for i in range(rng.randint(2, 30))] + ["The", "the", "a-b", "3.5", "!", "é"]
        pred = " ".join(rng.choices(vocab, k=rng.randint(0, 80)))
        answers = [" ".join(rng.choices(vocab, k=rng.randint(0, 80))) for _ in range(rng.randint(1, 3))]
        assert rouge_score_l(pred, answers) == google(pred, answers)
