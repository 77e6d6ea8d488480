"""The standard ROUGE-L F-measure (Google's `rouge-score` 0.1.2), offered as a secondary column.

`rouge_score_l(prediction, answers)` = max over answers (starting from 0.0) of what
`rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False).score(answer, prediction)["rougeL"].fmeasure`
gives: tokens from rouge-score's own tokenizer (lowercase, every run of characters outside a-z0-9 is a
separator, so non-ASCII text such as Chinese yields no tokens and scores 0.0), LCS length over the whole
texts (no sentence split), P = lcs / len(prediction tokens), R = lcs / len(answer tokens),
F = 2 * P * R / (P + R) (0.0 when either side has no token or P + R is 0). It differs from the official
LongBench number, which comes from the `rouge` 1.0.1 package (see `rouge_official`). The LCS length is
computed bit-parallel here instead of rouge-score's Python table, which is the only change.
"""

from __future__ import annotations

from collections.abc import Sequence

from rouge_score import tokenize as rs_tokenize

from scorers.longbench.lcs import lcs_length


def rouge_score_tokens(text: str) -> list[str]:
    """rouge-score's default tokens (no stemming)."""
    return list(rs_tokenize.tokenize(text, None))


def rouge_l_fmeasure(prediction_tokens: Sequence[str], target_tokens: Sequence[str]) -> float:
    if not target_tokens or not prediction_tokens:
        return 0.0
    lcs = lcs_length(target_tokens, prediction_tokens)
    precision = lcs / len(prediction_tokens)
    recall = lcs / len(target_tokens)
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def rouge_score_l(prediction: str, answers: Sequence[str]) -> float:
    """Best rouge-score ROUGE-L F-measure of the prediction over the answers (0.0 with no answer)."""
    pred = rouge_score_tokens(prediction)
    return max([0.0, *(rouge_l_fmeasure(pred, rouge_score_tokens(a)) for a in answers)])
