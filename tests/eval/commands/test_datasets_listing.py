"""`lbeval datasets` lists what each registered benchmark brings (its entry in LISTING), in registry order: a new
benchmark's datasets, notes and own `--json` keys appear without any change to eval/commands/datasets.py (in a
fresh registry, apart from the process's); the shipped listing is LongBench v1's then v2's."""

from __future__ import annotations

import json

import pytest

from eval.benchmark_registry import (
    LISTING,
    REGISTRY,
    Benchmark,
    BenchmarkRegistry,
    Hook,
    ListedDataset,
    Listing,
)
from eval.commands.datasets import listing_json, listing_lines

HEADER = "dataset                metric          max_tokens  mode  lang"


def toy(name: str, listing: Listing | None) -> Benchmark:
    """A benchmark of its listing's datasets that fills only LISTING (nothing without a listing)."""
    names = [d.dataset for d in listing.datasets] if listing else []
    hooks = (Hook(LISTING, lambda: listing),) if listing else ()
    return Benchmark(name, name, (), names.__contains__, lambda: names, lambda d: "", hooks=hooks)


def registry_of(*loaded: Benchmark) -> BenchmarkRegistry:
    fresh = BenchmarkRegistry()
    for benchmark in loaded:
        fresh.register(benchmark)
    return fresh


QUIZ = Listing(
    (
        ListedDataset("quiz_qa", "exact_match", 32, "chat", "en", False),
        ListedDataset(
            "quiz_long",
            "rouge",
            1024,
            "raw",
            "zh",
            True,
            label="(Quiz)",
            json_extra={"levels": ["easy", "hard"]},
        ),
    ),
    ("  --quiz-level easy|hard",),
)
PLAIN = Listing((ListedDataset("plain_qa", "qa_f1", 64, "chat", "en", False),))


def test_a_registered_benchmark_s_listing_appears_in_the_table_in_registry_order() -> None:
    lines = listing_lines(registry_of(toy("plain", PLAIN), toy("quiet", None), toy("quiz", QUIZ)))
    assert lines == [
        HEADER,
        "plain_qa               qa_f1                   64  chat  en",
        "",
        "quiz_qa                exact_match             32  chat  en",
        "quiz_long              rouge                 1024  raw   zh  (Quiz)",
        "  --quiz-level easy|hard",
    ]
    assert listing_lines(registry_of(toy("quiz", QUIZ), toy("plain", PLAIN)))[-2:] == [
        "",
        "plain_qa               qa_f1                   64  chat  en",
    ]


def test_a_registered_benchmark_s_listing_appears_in_json_with_its_own_keys_last() -> None:
    rows = json.loads(listing_json(registry_of(toy("plain", PLAIN), toy("quiz", QUIZ))))
    assert rows == [
        {"dataset": "plain_qa", "metric": "qa_f1", "max_tokens": 64, "mode": "chat", "language": "en",
         "first_line_only": False},
        {"dataset": "quiz_qa", "metric": "exact_match", "max_tokens": 32, "mode": "chat", "language": "en",
         "first_line_only": False},
        {"dataset": "quiz_long", "metric": "rouge", "max_tokens": 1024, "mode": "raw", "language": "zh",
         "first_line_only": True, "levels": ["easy", "hard"]},
    ]  # fmt: skip
    assert list(rows[2])[-1] == "levels"


def test_a_benchmark_s_own_json_key_taking_a_common_one_is_refused_in_one_line() -> None:
    clash = Listing((ListedDataset("quiz_qa", "em", 32, "chat", "en", False, json_extra={"metric": "x"}),))
    with pytest.raises(ValueError) as caught:
        listing_json(registry_of(toy("quiz", clash)))
    assert str(caught.value) == "dataset 'quiz_qa': its own --json keys metric are every dataset's"


def test_the_shipped_listing_is_v1_then_v2_each_from_its_own_entry() -> None:
    made = {name: make() for name, make in REGISTRY.entries(LISTING).items()}
    assert list(made) == ["longbench", "longbench_v2"]
    v1, v2 = made["longbench"], made["longbench_v2"]
    names = [line.split()[0] if line else "" for line in listing_lines()]
    v1_names = [d.dataset for d in v1.datasets]
    assert len(v1_names) == 21 and [d.dataset for d in v2.datasets] == ["longbench_v2"]
    assert names == [
        "dataset",
        *v1_names,
        *(n.split()[0] for n in v1.notes),
        "",
        "longbench_v2",
        *(n.split()[0] for n in v2.notes),
    ]
    assert [n.split()[1] for n in v2.notes] == ["0shot", "cot", "nocontext"]
    assert [r["dataset"] for r in json.loads(listing_json())] == [*v1_names, "longbench_v2"]
