"""ROUGE-L F of the `rouge` 1.0.1 package: hand tables, randomized parity with the package, recursion policy."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import jieba
import pytest
from rouge import Rouge

from scorers.longbench.lcs import dp_rows, lcs_length, match_masks
from scorers.longbench.rouge_official import (
    OFFICIAL_RECURSION_BUDGET,
    match_rows,
    pack_hypothesis,
    rouge,
    rouge_l_f,
    rouge_sentences,
    rouge_zh,
    walk_back,
)

PROBE = Path(__file__).with_name("official_stack_probe.py")


def package(hyp: str, ref: str) -> float:
    """The oracle: the `rouge` package itself, exceptions -> 0.0 (inputs here stay far from its recursion limit)."""
    try:
        return float(Rouge().get_scores([hyp], [ref], avg=True)["rouge-l"]["f"])
    except ValueError:
        return 0.0


def f_of(llcs: int, m: int, n: int) -> float:
    """The package's formula applied to hand-counted |U|, distinct reference words m, distinct hypothesis words n."""
    r, p = llcs / m, llcs / n
    return 2.0 * ((p * r) / (p + r + 1e-8))


# (hypothesis, reference, |U|, m, n): the counts derived by hand
HAND = [
    ("the cat sat", "the cat sat", 3, 3, 3),
    # one pair: the walk from (2,2) steps left (T[1][2] = 1 is not > T[2][1] = 1) and keeps "a", not "b"
    ("a b", "b a", 1, 2, 2),
    # the choice matters: the second hypothesis sentence also keeps "a", so U = {a}, not {a, b}
    ("a b. a", "b a", 1, 2, 2),
    # sentences are split on every "." (decimal points too): "3" and "5 percent growth" each match
    ("3.5 percent growth", "3 5 percent growth", 4, 4, 4),
    # case-sensitive words, punctuation kept inside words
    ("The cat, sat", "the cat sat", 1, 3, 3),
    ("!!!", "!!!", 1, 1, 1),
    # whitespace-only text is one sentence with the single word ""
    (" ", " ", 1, 1, 1),
    ("a. ", "a", 1, 1, 2),
    # repeated words count once (sets)
    ("a a a", "a", 1, 1, 1),
    # pair 1 walks up first (T[2][3] = 2 > T[3][2] = 1) and keeps "y z"; "x" is never kept
    ("x y z. y z", "y z x", 2, 3, 3),
    # two reference sentences: U collects across them
    ("the budget rose", "the budget. rose sharply", 3, 4, 3),
]


@pytest.mark.parametrize(("hyp", "ref", "llcs", "m", "n"), HAND)
def test_hand_table(hyp: str, ref: str, llcs: int, m: int, n: int) -> None:
    assert rouge_l_f(hyp, ref) == f_of(llcs, m, n)


@pytest.mark.parametrize(
    ("hyp", "ref"), [("", "a"), ("...", "a"), (".", "."), ("a", ""), ("a", "."), ("", "")]
)
def test_no_sentence_scores_zero(hyp: str, ref: str) -> None:
    # "" and dot-only texts have no sentence: the package raises ValueError and the metric gives 0.0
    assert rouge_l_f(hyp, ref) == 0.0


def test_sentence_split() -> None:
    assert rouge_sentences("A b.. c  d .\t") == [["A", "b"], ["c", "d"], [""]]
    assert rouge_sentences("") == []


def _text(rng: random.Random, vocab: list[str], max_words: int) -> str:
    parts = []
    for _ in range(rng.randint(0, max_words)):
        parts.append(rng.choice(vocab))
        parts.append(rng.choice([" ", " ", " ", ". ", ".", "  ", "\n", ". . "]))
    return "".join(parts)


def test_parity_with_the_package_on_random_short_texts() -> None:
    rng = random.Random(20260909)
    vocab = ["a", "b", "c", "d", "A", "the", "x,", "!!", "...", " ", "é", "3.5", ""]
    for _ in range(3000):
        hyp, ref = _text(rng, vocab, 18), _text(rng, vocab, 18)
        assert rouge_l_f(hyp, ref) == package(hyp, ref), (hyp, ref)


def test_parity_with_the_package_on_random_longer_texts() -> None:
    rng = random.Random(11)
    for _ in range(150):
        vocab = [f"w{i}" for i in range(rng.randint(3, 60))]
        period = rng.choice([0.0, 0.03, 0.1, 0.3])
        words = [
            rng.choice(vocab) + ("." if rng.random() < period else "") for _ in range(rng.randint(0, 160))
        ]
        ref_words = [
            rng.choice(vocab) + ("." if rng.random() < period else "") for _ in range(rng.randint(0, 160))
        ]
        hyp, ref = " ".join(words), " ".join(ref_words)
        assert rouge_l_f(hyp, ref) == package(hyp, ref)


def test_rouge_zh_parity_with_jieba_and_the_package() -> None:
    rng = random.Random(5)
    words = [
        "会议",
        "讨论",
        "了",
        "项目",
        "进度",
        "和",
        "预算",
        "安排",
        "我们",
        "需要",
        "提高",
        "效率",
        "北京",
        "3.5",
        "。",
        "，",
    ]
    for _ in range(200):
        pred = "".join(rng.choices(words, k=rng.randint(0, 40)))
        ref = "".join(rng.choices(words, k=rng.randint(0, 40)))
        expected = package(" ".join(jieba.cut(pred, cut_all=False)), " ".join(jieba.cut(ref, cut_all=False)))
        assert rouge_zh(pred, ref) == expected


def _calls(hyp: str, ref: str) -> int:
    """The most recursive calls any sentence pair needs (the package's walk depth)."""
    packed = pack_hypothesis(hyp)
    assert packed is not None
    worst = 0
    for sent in rouge_sentences(ref):
        rows = dp_rows(sent, packed.masks, packed.full)
        for t, words in enumerate(packed.sentences):
            matches = match_rows(sent, packed.word_sets[t])
            worst = max(worst, walk_back(sent, rows, packed.masks, packed.offsets[t], len(words), matches)[1])
    return worst


def test_walk_call_counts_by_hand() -> None:
    # no common word: left steps only, from column 3 to 0: 3 steps + the base call
    assert _calls("x y z", "a") == 4
    # "a" at both starts: 3 left steps to column 1, 2 up steps to row 1, 1 diagonal, base call
    assert _calls("a x y z", "a b c") == 3 + 2 + 1 + 1
    # identical: 3 diagonal steps + base
    assert _calls("a b c", "a b c") == 4


def _near_threshold(q: int) -> tuple[str, str]:
    """A '.'-free pair whose walk needs q + 2 calls (q left steps, one diagonal, the base call)."""
    return "a " + " ".join(f"w{i}" for i in range(q)), "a"


def test_budget_zeroes_exactly_the_pairs_that_need_more_calls() -> None:
    budget = OFFICIAL_RECURSION_BUDGET["rouge"]
    assert budget == 991
    hyp, ref = _near_threshold(budget - 2)
    assert _calls(hyp, ref) == budget
    assert rouge(hyp, ref) == rouge_l_f(hyp, ref, budget=None) > 0.0
    hyp, ref = _near_threshold(budget - 1)
    assert _calls(hyp, ref) == budget + 1
    assert rouge(hyp, ref) == 0.0
    assert rouge_l_f(hyp, ref, budget=None) == f_of(1, 1, budget)


def test_official_stack_threshold_matches_the_budget() -> None:
    """A top-level script with eval.py's call nesting crashes (-> 0.0) exactly where the budget says."""
    cases, ours = [], []
    for metric, scorer in (("rouge", rouge), ("rouge_zh", rouge_zh)):
        budget = OFFICIAL_RECURSION_BUDGET[metric]
        for q in range(budget - 4, budget + 1):
            hyp, ref = _near_threshold(q)
            cases.append([metric, hyp, ref])
            ours.append(scorer(hyp, ref))
    rng = random.Random(3)
    for _ in range(10):  # random pairs around the threshold, with matches on the way
        vocab = [f"v{i}" for i in range(rng.randint(100, 2000))]
        n1 = rng.randint(300, 700)
        hyp, ref = (
            " ".join(rng.choices(vocab, k=n1)),
            " ".join(rng.choices(vocab, k=1000 - n1 + rng.randint(-15, 15))),
        )
        metric = rng.choice(["rouge", "rouge_zh"])
        cases.append([metric, hyp, ref])
        ours.append((rouge if metric == "rouge" else rouge_zh)(hyp, ref))
    out = subprocess.run(
        [sys.executable, str(PROBE)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    official = json.loads(out.stdout)
    assert ours == official
    assert 0.0 in official and any(x > 0.0 for x in official)  # both sides of the threshold were exercised


def test_lcs_rows_match_the_textbook_table() -> None:
    rng = random.Random(2)
    for _ in range(200):
        a = rng.choices("abcd", k=rng.randint(0, 12))
        segments = [rng.choices("abcde", k=rng.randint(1, 9)) for _ in range(rng.randint(1, 4))]
        masks, offsets, full = match_masks(segments)
        rows = dp_rows(a, masks, full)  # type: ignore[arg-type]
        for seg, offset in zip(segments, offsets, strict=True):
            table = [[0] * (len(seg) + 1) for _ in range(len(a) + 1)]
            for i in range(1, len(a) + 1):
                for j in range(1, len(seg) + 1):
                    same = a[i - 1] == seg[j - 1]
                    table[i][j] = table[i - 1][j - 1] + 1 if same else max(table[i - 1][j], table[i][j - 1])
            for i, v in enumerate(rows):
                for j in range(len(seg) + 1):
                    assert j - ((v >> offset) & ((1 << j) - 1)).bit_count() == table[i][j]
            assert lcs_length(a, seg) == table[-1][-1]
