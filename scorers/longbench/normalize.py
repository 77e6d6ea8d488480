"""Text normalisation shared by the LongBench metrics, written from the official definitions.

- `normalize_answer` (English QA): lowercase; drop every ASCII punctuation character
  (`string.punctuation`); replace each whole word `a`, `an`, `the` (regex `\\b(a|an|the)\\b`, Unicode word
  boundaries) by a space; collapse whitespace (`" ".join(s.split())`). The steps run in that order.
- `normalize_zh_token` (Chinese QA, applied to each jieba token): lowercase; drop ASCII punctuation and the
  official list of Chinese/typographic punctuation (`ZH_PUNCTUATION`, which has `》` but not `《` and no
  fullwidth full stop `．`: the list is reproduced character for character); remove all whitespace.
- `first_line`: the rule for trec, triviaqa, samsum and lsht: `pred.lstrip("\\n").split("\\n")[0]`.
- `jieba_cut`: `jieba.cut(text, cut_all=False)` (precise mode, HMM on), as a list.
"""

from __future__ import annotations

import logging
import re
import string
from functools import lru_cache
from types import ModuleType

# The official Chinese punctuation list, by code point (U+FF01 ... U+FE4F, then ASCII ".").
_ZH_EXTRA = (
    "\uff01\uff1f\uff61\u3002\uff02\uff03\uff04\uff05\uff06\uff07\uff08\uff09\uff0a\uff0b\uff0c\uff0d"
    "\uff0f\uff1a\uff1b\uff1c\uff1d\uff1e\uff20\uff3b\uff3c\uff3d\uff3e\uff3f\uff40\uff5b\uff5c\uff5d"
    "\uff5e\uff5f\uff60\uff62\uff63\uff64\u3001\u3003\u300b\u300c\u300d\u300e\u300f\u3010\u3011\u3014"
    "\u3015\u3016\u3017\u3018\u3019\u301a\u301b\u301c\u301d\u301e\u301f\u3030\u303e\u303f\u2013\u2014"
    "\u2018\u2019\u201b\u201c\u201d\u201e\u201f\u2026\u2027\ufe4f."
)
ASCII_PUNCTUATION: frozenset[str] = frozenset(string.punctuation)
ZH_PUNCTUATION: frozenset[str] = frozenset(string.punctuation + _ZH_EXTRA)

_DROP_ASCII = {ord(c): None for c in ASCII_PUNCTUATION}
_DROP_ZH = {ord(c): None for c in ZH_PUNCTUATION}
_ARTICLES = re.compile(r"\b(a|an|the)\b")

FIRST_LINE_DATASETS: frozenset[str] = frozenset({"trec", "triviaqa", "samsum", "lsht"})


def normalize_answer(text: str) -> str:
    """Lowercase, drop ASCII punctuation, articles -> space, collapse whitespace (in this order)."""
    text = text.lower().translate(_DROP_ASCII)
    return " ".join(_ARTICLES.sub(" ", text).split())


def normalize_zh_token(token: str) -> str:
    """Lowercase, drop ASCII + official Chinese punctuation, remove all whitespace (in this order)."""
    return "".join(token.lower().translate(_DROP_ZH).split())


def first_line(prediction: str) -> str:
    """The first line of a prediction after leading newlines: `pred.lstrip("\\n").split("\\n")[0]`."""
    return prediction.lstrip("\n").split("\n")[0]


@lru_cache(maxsize=1)
def _jieba() -> ModuleType:
    import jieba

    module: ModuleType = jieba
    module.setLogLevel(logging.WARNING)  # its dictionary-loading chatter would drown the CLI's table
    module.initialize()
    return module


def warm_up_jieba() -> None:
    """Load jieba's dictionary now (about 1 s), e.g. before forking worker processes."""
    _jieba()


def jieba_cut(text: str) -> list[str]:
    """jieba's precise-mode segmentation, `list(jieba.cut(text, cut_all=False))`."""
    return list(_jieba().cut(text, cut_all=False))
