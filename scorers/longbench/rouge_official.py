"""ROUGE-L F exactly as the `rouge` 1.0.1 package computes it for LongBench, but fast.

LongBench's rouge and rouge_zh metrics call `Rouge().get_scores([pred], [ref], avg=True)["rouge-l"]["f"]`
and turn any exception into 0.0. This module reproduces that number (the same float, bit for bit) without
the package, in its own implementation:

Text -> sentences -> words. The text is split on every "." (no other sentence rule, decimal points
included); each non-empty piece (`len > 0`, so a whitespace-only piece counts) has its whitespace collapsed
(`" ".join(piece.split())`) and is split on " " into words. A whitespace-only piece is therefore one
sentence holding the single word "". Matching is case-sensitive and punctuation stays part of the words.
A text with no sentence at all ("", ".", "...") makes the package raise: the score is 0.0.

Summary-level union LCS. For every reference sentence r and every hypothesis sentence h, the package
builds the LCS table of (r, h) and reconstructs one LCS by walking back from the bottom-right corner: on
equal words step diagonally and keep the word; otherwise step up (drop a reference word) when
T[i-1][j] > T[i][j-1], else left (drop a hypothesis word). Which LCS is kept matters, because only its
words (as a set) are used: U = the union over all (r, h) pairs of the kept words. With m = number of
distinct reference words and n = number of distinct hypothesis words (both counting "" when present):
    R = |U| / m,  P = |U| / n,  F = 2.0 * ((P * R) / (P + R + 1e-8))   (this expression, in this order).

How it is made fast (about 100x): the hypothesis sentences are packed into one big integer and each
reference sentence is run through a bit-parallel LCS (`scorers.longbench.lcs`), one integer expression per
reference word for all hypothesis sentences at once. The walk back is done on the bit rows, jumping over
runs of left steps (the next stop in row i is the nearest column at or left of j that either holds the
row's word or where the row steps up). Pairs whose common words are already all in U are not walked at
all: they cannot change the union.

Recursion policy (the one place where the official number is not a pure function of the text).
The package walks back recursively, one Python call per step, so a pair of long "."-free sentences (rare
in English, common after jieba in Chinese: vcsum, dureader) exceeds Python's recursion limit; the official
`except:` then turns the whole answer's score into 0.0, and the exact threshold depends on how deep the
caller's stack already is. lbeval never looks at its own stack. It counts the walk's steps exactly and
applies a fixed budget: when some sentence pair needs more than `budget` calls (steps + 1), the score is
0.0, as the official run gets it. The default budgets are those of the official `python eval.py` on
CPython 3.11 with the default recursion limit of 1000: 991 calls for rouge and 990 for rouge_zh (whose
metric adds one Python frame); see `OFFICIAL_RECURSION_BUDGET`. Pass `budget=None` for the value the
package would give with unlimited recursion. On other CPython versions the official threshold can move by a
call or two; only sentence pairs needing about 989-993 calls could then score differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scorers.longbench.lcs import dp_rows, match_masks
from scorers.longbench.normalize import jieba_cut

#: Under the official `python eval.py` (CPython 3.11, recursion limit 1000: at most 1000 Python frames),
#: 9 frames sit below the package's first recursive call for rouge (module, scorer, metric, get_scores,
#: _get_avg_scores, the metric lambda, rouge_l_summary_level, _union_lcs, _recon_lcs) and 10 for rouge_zh
#: (`rouge_zh_score` calls `rouge_score`). The budget is what is left for the walk's calls.
OFFICIAL_RECURSION_LIMIT = 1000
OFFICIAL_FRAMES_BELOW_WALK: dict[str, int] = {"rouge": 9, "rouge_zh": 10}
OFFICIAL_RECURSION_BUDGET: dict[str, int] = {
    name: OFFICIAL_RECURSION_LIMIT - frames for name, frames in OFFICIAL_FRAMES_BELOW_WALK.items()
}


def rouge_sentences(text: str) -> list[list[str]]:
    """The package's sentences and words: split on ".", keep non-empty pieces, collapse whitespace."""
    sentences = []
    for piece in text.split("."):
        if piece:
            sentences.append(piece.split() or [""])
    return sentences


@dataclass(frozen=True)
class PackedHypothesis:
    """A hypothesis prepared once for scoring against several references."""

    sentences: list[list[str]]
    word_sets: list[frozenset[str]]
    vocabulary: frozenset[str]
    masks: dict[str, int]
    offsets: list[int]
    full: int


def pack_hypothesis(text: str) -> PackedHypothesis | None:
    """Sentences, vocabularies and bit masks of a hypothesis; None when it has no sentence."""
    sentences = rouge_sentences(text)
    if not sentences:
        return None
    masks, offsets, full = match_masks(sentences)
    word_sets = [frozenset(s) for s in sentences]
    return PackedHypothesis(
        sentences=sentences,
        word_sets=word_sets,
        vocabulary=frozenset().union(*word_sets),
        masks=masks,
        offsets=offsets,
        full=full,
    )


def match_rows(ref: Sequence[str], words: frozenset[str]) -> list[int]:
    """The table rows (1-based, descending) whose reference word occurs in a hypothesis sentence."""
    return [i for i in range(len(ref), 0, -1) if ref[i - 1] in words]


def walk_back(
    ref: Sequence[str], rows: list[int], masks: dict[str, int], offset: int, width: int, matches: list[int]
) -> tuple[list[str], int]:
    """The package's LCS reconstruction of (ref, one packed hypothesis sentence).

    `matches` = `match_rows(ref, words of that sentence)`. Returns the kept reference words and the number
    of recursive calls the package makes (steps + 1). A run of rows whose word is not in the sentence has
    the same bit row inside the segment, so after its first stop the walk goes straight up through it: the
    run costs one jump here (and one step per row in the count).
    """
    i, j, steps, k, n_matches = len(ref), width, 0, 0, len(matches)
    kept: list[str] = []
    while i and j:
        low = (1 << j) - 1
        if k < n_matches and matches[k] == i:
            k += 1
            word = ref[i - 1]
            here = masks[word] >> offset
            stops = ((~rows[i] >> offset) | here) & low
            if not stops:  # only left steps remain, down to column 0
                steps += j
                break
            col = stops.bit_length() - 1  # the stop is at table column col + 1
            steps += j - col  # (j - col - 1) left steps, then one diagonal or up step
            i -= 1
            if (here >> col) & 1:
                kept.append(word)
                j = col
            else:
                j = col + 1
        else:
            below = matches[k] if k < n_matches else 0  # the run is rows below + 1 .. i
            stops = (~rows[i] >> offset) & low
            if not stops:
                steps += j
                break
            col = stops.bit_length() - 1
            steps += (j - col) + (i - below - 1)  # to the stop and up, then straight up the run
            i, j = below, col + 1
    return kept, steps + 1


def union_lcs_size(ref_sentences: list[list[str]], hyp: PackedHypothesis, budget: int | None) -> int | None:
    """|U|, the size of the union of kept words; None when a pair needs more than `budget` calls."""
    union: set[str] = set()
    widths = [len(s) for s in hyp.sentences]
    for ref in ref_sentences:
        todo = (set(ref) & hyp.vocabulary) - union
        rows: list[int] | None = None
        for t, width in enumerate(widths):
            check = budget is not None and len(ref) + width > budget
            if not check and (not todo or todo.isdisjoint(hyp.word_sets[t])):
                continue
            if rows is None:
                rows = dp_rows(ref, hyp.masks, hyp.full)
            matches = match_rows(ref, hyp.word_sets[t])
            kept, calls = walk_back(ref, rows, hyp.masks, hyp.offsets[t], width, matches)
            if check and calls > budget:  # type: ignore[operator]
                return None
            if kept:
                union.update(kept)
                todo.difference_update(kept)
    return len(union)


def rouge_l_f_packed(hyp: PackedHypothesis | None, reference: str, budget: int | None) -> float:
    """ROUGE-L F of a packed hypothesis against one reference (0.0 where the package raises)."""
    ref_sentences = rouge_sentences(reference)
    if hyp is None or not ref_sentences:
        return 0.0
    llcs = union_lcs_size(ref_sentences, hyp, budget)
    if llcs is None:
        return 0.0
    m = len(frozenset().union(*ref_sentences))
    n = len(hyp.vocabulary)
    r_lcs = llcs / m
    p_lcs = llcs / n
    return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8))


def rouge_l_f(
    hypothesis: str, reference: str, *, budget: int | None = OFFICIAL_RECURSION_BUDGET["rouge"]
) -> float:
    """`rouge` 1.0.1 `get_scores(hyp, ref, avg=True)["rouge-l"]["f"]`, 0.0 where it raises."""
    return rouge_l_f_packed(pack_hypothesis(hypothesis), reference, budget)


def zh_words(text: str) -> str:
    """rouge_zh's input: jieba tokens joined by single spaces."""
    return " ".join(jieba_cut(text))


def rouge(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float:
    """LongBench `rouge` (gov_report, qmsum, multi_news, samsum)."""
    return rouge_l_f(prediction, reference, budget=OFFICIAL_RECURSION_BUDGET["rouge"])


def rouge_zh(prediction: str, reference: str, *, all_classes: Sequence[str] | None = None) -> float:
    """LongBench `rouge_zh` (dureader, vcsum): jieba tokens joined by spaces, then rouge."""
    return rouge_l_f(zh_words(prediction), zh_words(reference), budget=OFFICIAL_RECURSION_BUDGET["rouge_zh"])


def best_rouge(prediction: str, answers: Sequence[str], all_classes: Sequence[str] | None = None) -> float:
    """max(0.0, rouge over answers), packing the prediction once."""
    hyp = pack_hypothesis(prediction)
    budget = OFFICIAL_RECURSION_BUDGET["rouge"]
    return max([0.0, *(rouge_l_f_packed(hyp, a, budget) for a in answers)])


def best_rouge_zh(prediction: str, answers: Sequence[str], all_classes: Sequence[str] | None = None) -> float:
    """max(0.0, rouge_zh over answers), segmenting and packing the prediction once."""
    if not answers:
        return 0.0
    hyp = pack_hypothesis(zh_words(prediction))
    budget = OFFICIAL_RECURSION_BUDGET["rouge_zh"]
    return max([0.0, *(rouge_l_f_packed(hyp, zh_words(a), budget) for a in answers)])
