"""Seeded subsets that depend only on (seed, dataset name, the set of `_id`s).

Algorithm: each row gets the key SHA-256(f"{seed}\\x1f{dataset}\\x1f{_id}") (UTF-8); rows are sorted by
(key, _id) and the first n are taken, in that order. Nothing depends on file row order, the Python
version, the platform or PYTHONHASHSEED; a different seed gives an independent permutation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

from eval.errors import ConfigError

T = TypeVar("T")


def selection_key(seed: int, dataset: str, example_id: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{dataset}\x1f{example_id}".encode()).hexdigest()


def select_ids(ids: Sequence[str], *, seed: int, dataset: str, n: int | None) -> list[str]:
    """The first `n` ids (all if None) in seeded order."""
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{dataset}: duplicate _id values; cannot select a subset")
    if n is not None and n < 0:
        raise ConfigError(f"--n must be a positive integer or 'all', got {n}")
    ordered = sorted(ids, key=lambda i: (selection_key(seed, dataset, i), i))
    return ordered if n is None else ordered[:n]


def parse_n(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        raise ConfigError(f"--n must be a positive integer or 'all', got {text!r}") from None
    if n <= 0:
        raise ConfigError(f"--n must be a positive integer or 'all', got {text!r}")
    return n
