"""LongBench metrics against tables of hand-derived cases (the derivation is in each row's comment)."""

from __future__ import annotations

import difflib
import random
from pathlib import Path

import pytest

from scorers.longbench import METRICS
from scorers.longbench.classification import classification, surviving_matches
from scorers.longbench.code import code_sim, first_code_line, fuzz_ratio
from scorers.longbench.normalize import first_line, jieba_cut, normalize_answer, normalize_zh_token
from scorers.longbench.qa import qa_f1, qa_f1_zh, token_f1
from scorers.longbench.retrieval import count, retrieval, retrieval_zh

# -- qa_f1 -------------------------------------------------------------------------------------------

QA_F1 = [
    # normalized: "cat sat on mat" both sides
    ("The cat sat on the mat.", "a cat sat on a mat", 1.0),
    # [paris, france] vs [paris]: p=1/2, r=1 -> 2/3
    ("Paris, France", "Paris", 2 / 3),
    # both normalize to nothing: no common token -> 0
    ("the", "the", 0.0),
    ("", "x", 0.0),
    # "the" only as a whole word: [theory, of, case] vs [theory] -> p=1/3, r=1 -> 1/2
    ("theory of the case", "Theory", 0.5),
    # punctuation dropped before articles: "ab testing results positive" vs 3 of them -> p=3/4, r=1 -> 6/7
    ("A-B testing; results: positive!", "ab testing results", 6 / 7),
    # multiset overlap {x:1, y:1} = 2 of 3 on each side -> 2/3
    ("x x y", "x y y", 2 / 3),
    ("an apple a day", "apple day", 1.0),
    # "a-the" -> "athe" is no article: [athe, b] vs [b] -> 2/3
    ("a-the b", "b", 2 / 3),
    ("Ünïcödé café", "ünïcödé", 2 / 3),
    ("don't", "dont", 1.0),
    # Unicode punctuation is not ASCII punctuation: "“yes”" stays one token unlike "yes"
    ("\u201cyes\u201d", "yes", 0.0),
]


@pytest.mark.parametrize(("pred", "ref", "expected"), QA_F1)
def test_qa_f1_table(pred: str, ref: str, expected: float) -> None:
    assert qa_f1(pred, ref) == pytest.approx(expected, abs=1e-15)


def test_normalize_answer_steps() -> None:
    assert normalize_answer("  The  QUICK, brown fox!  ") == "quick brown fox"
    assert normalize_answer("a.b") == "ab"
    assert normalize_answer("An-an") == "anan"


def test_token_f1_uses_the_official_expression() -> None:
    # same=1, p=1/3, r=1/7: (2 * p * r) / (p + r), evaluated in that order
    p, r = 1.0 * 1 / 3, 1.0 * 1 / 7
    assert token_f1(["a", "b", "c"], ["a", "d", "e", "f", "g", "h", "i"]) == (2 * p * r) / (p + r)
    assert token_f1([], []) == 0.0


# -- qa_f1_zh ----------------------------------------------------------------------------------------


def test_jieba_segmentation_assumed_by_the_zh_table() -> None:
    assert jieba_cut("我爱北京") == ["我", "爱", "北京"]
    assert jieba_cut("《北京》") == ["《", "北京", "》"]
    assert jieba_cut("北京．") == ["北京", "．"]
    assert jieba_cut("Hello 世界") == ["Hello", " ", "世界"]


QA_F1_ZH = [
    ("北京。", "北京", 1.0),  # "。" is in the official list -> token dropped
    ("《北京》", "北京", 2 / 3),  # "》" is in the list, "《" is not: [《, 北京] vs [北京]
    ("北京．", "北京", 2 / 3),  # fullwidth full stop U+FF0E is not in the list
    ("我爱北京", "北京", 0.5),  # [我, 爱, 北京] vs [北京]: p=1/3, r=1
    ("Hello 世界", "hello", 2 / 3),  # the " " token normalizes to "" and is dropped; lowercased
    ("", "北京", 0.0),
]


@pytest.mark.parametrize(("pred", "ref", "expected"), QA_F1_ZH)
def test_qa_f1_zh_table(pred: str, ref: str, expected: float) -> None:
    assert qa_f1_zh(pred, ref) == pytest.approx(expected, abs=1e-15)


def test_normalize_zh_token() -> None:
    assert normalize_zh_token("“ＡＢ”") == "ａｂ"  # quotes removed, fullwidth letters lowercased, kept
    assert normalize_zh_token(" a\u3000b ") == "ab"  # all whitespace removed, ideographic space included
    assert normalize_zh_token("《") == "《"
    assert normalize_zh_token("》") == ""


# -- classification ----------------------------------------------------------------------------------

CLASSIFICATION = [
    # [a, ab, abc] all match; visiting "a" removes it, "ab" slides under the iterator and is skipped
    (["a", "ab", "abc"], "abc", "abc", ["ab", "abc"], 0.5),
    (["a", "b", "ab"], "ab", "ab", ["b", "ab"], 0.5),
    # matching is case-sensitive: "Location" is not in "Other location"; "Other" is removed
    (["Other", "Location", "Other location"], "Other location", "Other location", ["Other location"], 1.0),
    # ... but with "Location" matching, it slides under the iterator when "Other" goes, and survives
    (
        ["Other", "Location", "Other Location"],
        "Other Location",
        "Other Location",
        ["Location", "Other Location"],
        0.5,
    ),
    (["Location", "City"], "City", "City", ["City"], 1.0),
    (["Animal", "Date"], "Date Animal", "Animal", ["Animal", "Date"], 0.5),
    (["Animal", "Date"], "Country", "Animal", [], 0.0),
    (["Animal", "Date"], "Date", "Animal", ["Date"], 0.0),
    # duplicates: list.remove drops the first equal entry each time
    (["x", "xy", "x"], "xy", "xy", ["xy"], 1.0),
    (["农业、农村", "农业"], "农业、农村", "农业、农村", ["农业、农村"], 1.0),
]


@pytest.mark.parametrize(("classes", "pred", "ref", "survivors", "expected"), CLASSIFICATION)
def test_classification_table(
    classes: list[str], pred: str, ref: str, survivors: list[str], expected: float
) -> None:
    assert surviving_matches(pred, ref, classes) == survivors
    assert classification(pred, ref, all_classes=classes) == expected


def test_classification_needs_classes() -> None:
    with pytest.raises(ValueError, match="all_classes"):
        classification("City", "City")


# -- retrieval, retrieval_zh, count ------------------------------------------------------------------

RETRIEVAL = [
    ("Paragraph 3", "Paragraph 3", 1.0),
    ("Paragraph 3 and Paragraph 13", "Paragraph 3", 0.5),
    ("The answer is Paragraph 30, not 3", "Paragraph 3", 0.5),
    ("no number here", "Paragraph 3", 0.0),
    ("\uff13", "Paragraph 3", 0.0),  # fullwidth 3 is a \d run but not the string "3"
    ("paragraph 3 (see 3)", "The answer: Paragraph 3 ... Paragraph 9", 1.0),  # first id in the reference
]


@pytest.mark.parametrize(("pred", "ref", "expected"), RETRIEVAL)
def test_retrieval_table(pred: str, ref: str, expected: float) -> None:
    assert retrieval(pred, ref) == expected


def test_retrieval_zh_and_missing_id() -> None:
    assert retrieval_zh("段落3", "段落3") == 1.0
    assert retrieval_zh("段落3和段落5", "段落5") == 0.5
    assert retrieval_zh("Paragraph 3", "段落3") == 1.0  # only digits count in the prediction
    with pytest.raises(ValueError, match="paragraph"):
        retrieval("Paragraph 3", "3")
    with pytest.raises(ValueError, match="paragraph"):
        retrieval_zh("段落3", "Paragraph 3")


@pytest.mark.parametrize(
    ("pred", "ref", "expected"),
    [
        ("There are 7 paragraphs", "7", 1.0),
        ("7 or 8", "7", 0.5),
        ("07", "7", 0.0),
        ("", "7", 0.0),
        ("77 7 7", "7", 2 / 3),
    ],
)
def test_count_table(pred: str, ref: str, expected: float) -> None:
    assert count(pred, ref) == expected


# -- code_sim ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("abcd", "abce", 75),  # 3 matches of 8 characters: 2*3/8
        ("", "", 100),  # equality is checked before emptiness
        ("", "a", 0),
        ("a", "", 0),
        (None, "a", 0),
        ("abcdefgh", "aijklmno", 12),  # 2*1/16 = 12.5 -> round half to even -> 12
        ("abcdefgh", "abcijklm", 38),  # 2*3/16 = 37.5 -> 38
        ("    return total", "    return total;", 97),  # 2*16/33 = 96.97
    ],
)
def test_fuzz_ratio_table(a: str | None, b: str, expected: int) -> None:
    assert fuzz_ratio(a, b) == expected


@pytest.mark.parametrize(
    ("pred", "line"),
    [
        ("```python\nx = compute(a, b)\n```", "x = compute(a, b)"),
        ("# a comment\n// another\n    return total", "    return total"),
        ("x = 1  # set x\n", ""),  # the empty line after it is the first clean line
        ("x = 1  # set x", ""),  # no clean line at all
        ("\n\nfoo()", "foo()"),
        ("url = 'http://example.com'\nbar()", "bar()"),
    ],
)
def test_first_code_line(pred: str, line: str) -> None:
    assert first_code_line(pred) == line


def test_code_sim() -> None:
    assert code_sim("```python\nx = compute(a, b)\n```", "x = compute(a, b)") == 1.0
    assert code_sim("# c\n    return total", "    return total;") == 0.97
    assert code_sim("x = 1  # set x\n", "x = 1") == 0.0
    assert code_sim("", "") == 1.0


@pytest.mark.filterwarnings("ignore:Using slow pure-python SequenceMatcher")
def test_fuzz_ratio_matches_fuzzywuzzy_on_difflib() -> None:
    """fuzzywuzzy itself (when it runs on difflib) gives the same ints, long autojunk strings included."""
    from fuzzywuzzy import fuzz

    if fuzz.SequenceMatcher is not difflib.SequenceMatcher:  # pragma: no cover - python-Levenshtein present
        pytest.skip("fuzzywuzzy is using python-Levenshtein here; the oracle must be its difflib backend")
    rng = random.Random(7)
    alphabet = "ab c(d)e=f.x_y\t;"
    for _ in range(400):
        a = "".join(rng.choices(alphabet, k=rng.randint(0, 300)))
        b = "".join(rng.choices(alphabet, k=rng.randint(0, 300)))
        assert fuzz_ratio(a, b) == fuzz.ratio(a, b)
        assert fuzz_ratio(a, a) == fuzz.ratio(a, a)


def test_code_sim_does_not_use_fuzzywuzzy() -> None:
    """The backend fuzzywuzzy would pick depends on python-Levenshtein; lbeval's code_sim never asks."""
    import scorers.longbench.code as module

    source = Path(module.__file__).read_text(encoding="utf-8")
    assert "import fuzzywuzzy" not in source and "from fuzzywuzzy" not in source


# -- the registry ------------------------------------------------------------------------------------


def test_metrics_registry_has_the_nine_metrics_with_one_signature() -> None:
    assert set(METRICS) == {
        "qa_f1",
        "qa_f1_zh",
        "rouge",
        "rouge_zh",
        "classification",
        "retrieval",
        "retrieval_zh",
        "count",
        "code_sim",
    }
    same = {"retrieval_zh": "段落1", "count": "1"}
    for name, score in METRICS.items():
        text = same.get(name, "Paragraph 1")
        classes = [text] if name == "classification" else None
        assert score(text, text, all_classes=classes) > 0.99, name
        assert score("", text, all_classes=classes) == 0.0, name


def test_first_line() -> None:
    assert first_line("\n\nParis\nFrance") == "Paris"
    assert first_line("  Paris\n") == "  Paris"
    assert first_line("\r\nParis") == "\r"
    assert first_line("") == ""
