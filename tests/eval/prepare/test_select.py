"""Seeded selection depends only on (seed, dataset, set of ids)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from eval.errors import ConfigError
from eval.prepare.select import parse_n, select_ids

IDS = [f"id{i:03d}" for i in range(50)]


def expected(seed: int, dataset: str, ids: list[str], n: int) -> list[str]:
    # the README's algorithm, computed independently here
    keyed = sorted((hashlib.sha256(f"{seed}\x1f{dataset}\x1f{i}".encode()).hexdigest(), i) for i in ids)
    return [i for _, i in keyed[:n]]


def test_matches_documented_algorithm() -> None:
    assert select_ids(IDS, seed=20260909, dataset="qasper", n=16) == expected(20260909, "qasper", IDS, 16)


def test_independent_of_row_order() -> None:
    shuffled = list(reversed(IDS[25:])) + IDS[:25]
    assert select_ids(shuffled, seed=1, dataset="qasper", n=10) == select_ids(
        IDS, seed=1, dataset="qasper", n=10
    )


def test_other_seed_and_dataset_give_other_subsets() -> None:
    a = select_ids(IDS, seed=1, dataset="qasper", n=10)
    assert set(a) != set(select_ids(IDS, seed=2, dataset="qasper", n=10))
    assert set(a) != set(select_ids(IDS, seed=1, dataset="gov_report", n=10))


def test_all_and_more_than_available() -> None:
    assert sorted(select_ids(IDS, seed=3, dataset="x", n=None)) == IDS
    assert len(select_ids(IDS[:5], seed=3, dataset="x", n=16)) == 5


def test_independent_of_hash_seed() -> None:
    code = "from eval.prepare.select import select_ids; print(select_ids([f'id{i}' for i in range(30)], seed=5, dataset='q', n=5))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": s},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for s in ("0", "1", "12345")
    }
    assert len(outs) == 1


@pytest.mark.parametrize(("text", "value"), [("16", 16), ("all", None), ("ALL", None)])
def test_parse_n(text: str, value: int | None) -> None:
    assert parse_n(text) == value


@pytest.mark.parametrize("text", ["0", "-3", "x", "1.5"])
def test_parse_n_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match="--n must be"):
        parse_n(text)


def test_duplicate_ids_rejected() -> None:
    with pytest.raises(ConfigError, match="duplicate"):
        select_ids(["a", "a"], seed=1, dataset="q", n=1)
