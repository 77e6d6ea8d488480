"""The benchmark registry: every package in eval/benchmarks/ is loaded, every prompt file under prompts/ is named by
exactly one benchmark, and each dataset name belongs to exactly one benchmark; a stage finds a dataset's
benchmark's entry in its slot (one clear error without one), every benchmark fills the slots every benchmark
needs, and no module outside eval/benchmarks/ asks is_v2."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

import pytest

from eval import benchmark_registry as registry
from eval.analyze.accuracy import SCORING
from eval.benchmark_registry import (
    LISTING,
    Benchmark,
    BenchmarkRegistry,
    NoStageEntry,
    Slot,
    benchmark_of,
    benchmarks,
    entries,
    entry_problems,
    register,
    stage_entry,
)
from eval.benchmarks.longbench.plugin import BENCHMARK as V1
from eval.benchmarks.longbench.spec import load_specs
from eval.benchmarks.plugins import load_benchmarks
from eval.errors import ConfigError
from eval.prepare.benchmark_part import PREPARE_ARGS, PREPARE_PART
from eval.prepare.inputs import ROW_CHECK
from eval.report.benchmark_tables import REPORT_TABLES
from tests.eval.benchmarks.swap import without_entry

ROOT = Path(__file__).resolve().parents[3]
NOT_TEMPLATES = {
    "__init__.py",
    "PROVENANCE.md",
}  # prompts/ is a package with provenance notes beside the data


def test_every_benchmark_package_is_registered_and_every_entry_has_a_package() -> None:
    folders = {p.parent.name for p in (ROOT / "eval" / "benchmarks").glob("*/__init__.py")}
    assert folders == {"longbench", "longbench_v2"}
    assert sorted(b.name for b in benchmarks()) == sorted(folders)


def test_each_prompt_file_is_named_by_exactly_one_benchmark() -> None:
    on_disk = {
        p.relative_to(ROOT / "prompts").as_posix()
        for p in (ROOT / "prompts").rglob("*")
        if p.is_file() and p.name not in NOT_TEMPLATES and "__pycache__" not in p.parts
    }
    named = [f for b in benchmarks() for f in b.prompt_files]
    assert sorted(named) == sorted(on_disk)  # no file twice, none missing, none unclaimed
    assert "dataset2prompt.json" in on_disk and "v2/0shot_cot_ans.txt" in on_disk


@pytest.mark.parametrize(
    ("dataset", "benchmark"),
    [
        ("qasper", "longbench"),
        ("gov_report_e", "longbench"),
        ("lcc", "longbench"),
        ("longbench_v2", "longbench_v2"),
    ],
)
def test_a_dataset_name_finds_its_benchmark(dataset: str, benchmark: str) -> None:
    assert benchmark_of(dataset).name == benchmark


def test_no_dataset_belongs_to_two_benchmarks() -> None:
    for name in [*load_specs(), "longbench_v2"]:
        assert [b.name for b in benchmarks() if b.owns(name)] == [benchmark_of(name).name]


def test_an_unknown_dataset_is_one_config_error_naming_the_known_ones() -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown dataset 'qasperr'; known datasets of LongBench v1: .*qasper.*; LongBench v2: longbench_v2$",
    ):
        benchmark_of("qasperr")


def test_the_run_stage_asks_the_registry_where_a_context_ends_and_how_to_answer() -> None:
    """What run/steps.py needs of a benchmark comes from its registry entry: v1's context end is its template's
    text between {context} and {input} (read here from prompts/dataset2prompt.json), v2's the text that follows
    the document in every v2 template file; only v2 has a two-call (CoT) answer prompt."""
    v1_templates = json.loads((ROOT / "prompts" / "dataset2prompt.json").read_text(encoding="utf-8"))
    qasper = v1_templates["qasper"]
    v1, v2 = benchmark_of("qasper"), benchmark_of("longbench_v2")
    assert v1.context_end("qasper") == qasper[qasper.index("{context}") + 9 : qasper.index("{input}")]
    end = v2.context_end("longbench_v2")
    with_context = [p for p in (ROOT / "prompts" / "v2").glob("*.txt") if "$DOC$" in p.read_text("utf-8")]
    assert with_context and all(end in p.read_text(encoding="utf-8") for p in with_context)
    assert v1.insert_answer is None and v2.insert_answer is not None
    assert v2.insert_answer("A: $COT$ so", "  because  ") == "A: because so"


def test_a_stage_entry_is_found_by_the_dataset_s_benchmark_and_a_missing_one_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    v1, v2 = benchmark_of("qasper"), benchmark_of("longbench_v2")
    assert stage_entry(SCORING, "gov_report_e") is v1.entry(SCORING) is not v2.entry(SCORING)
    assert stage_entry(SCORING, "longbench_v2") is v2.entry(SCORING) is not None
    assert list(entries(SCORING)) == ["longbench", "longbench_v2"] and list(entries(ROW_CHECK)) == [
        "longbench_v2"
    ]
    with pytest.raises(ConfigError, match="unknown dataset 'qasperr'"):
        stage_entry(SCORING, "qasperr")
    without_entry(monkeypatch, "longbench_v2", SCORING)
    with pytest.raises(NoStageEntry) as caught:
        stage_entry(SCORING, "longbench_v2")
    assert str(caught.value) == (
        "dataset 'longbench_v2' is LongBench v2's (eval/benchmarks/longbench_v2/), which has no entry in "
        "eval/analyze/accuracy.SCORING; add a Hook for it to eval/benchmarks/longbench_v2/plugin.py"
    )
    assert list(entries(SCORING)) == ["longbench"]


# the slots every benchmark fills, its `lbeval datasets` listing among them (ROW_CHECK and REPORT_TABLES only a
# benchmark with fields or figures of its own)
REQUIRED = {
    "PREPARE_PART": PREPARE_PART,
    "PREPARE_ARGS": PREPARE_ARGS,
    "SCORING": SCORING,
    "LISTING": LISTING,
}


def test_every_benchmark_fills_every_required_slot_and_a_missing_entry_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert entry_problems(REQUIRED) == []
    assert {b.name for b in benchmarks() if b.entry(REPORT_TABLES)} == {"longbench_v2"}
    without_entry(monkeypatch, "longbench", PREPARE_PART)
    assert entry_problems({**REQUIRED, "NEW": Slot("eval/x.NEW")}) == [
        "eval/prepare/benchmark_part.PREPARE_PART: no entry for benchmark 'longbench'",
        "eval/x.NEW: no entry for benchmark 'longbench'",
        "eval/x.NEW: no entry for benchmark 'longbench_v2'",
    ]


def test_loading_twice_changes_nothing_and_a_second_benchmark_of_one_name_is_refused() -> None:
    before = benchmarks()
    load_benchmarks()
    assert benchmarks() == before and all(a is b for a, b in zip(benchmarks(), before, strict=True))
    impostor = Benchmark("longbench", "another", (), V1.owns, V1.datasets, V1.context_end)
    with pytest.raises(ValueError, match="two benchmarks are named 'longbench'"):
        register(impostor)
    assert benchmarks() == before


def test_a_stage_asking_before_the_benchmarks_are_loaded_is_one_clear_error() -> None:
    with pytest.raises(NoStageEntry, match="no benchmark is loaded: .*load_benchmarks"):
        BenchmarkRegistry().benchmark_of("qasper")


def test_a_fresh_registry_is_apart_from_the_process_s() -> None:
    """A test registers in a registry of its own: the process's REGISTRY (which the module's functions are
    bound to) neither sees it nor changes, and loading the shipped benchmarks into it gives the same ones."""
    before = benchmarks()
    fresh = BenchmarkRegistry()
    toy = Benchmark("toy", "Toy", (), lambda d: d == "toy_qa", lambda: ["toy_qa"], V1.context_end)
    assert fresh.register(toy) is toy and fresh.benchmarks() == (toy,)
    assert fresh.benchmark_of("toy_qa") is toy
    with pytest.raises(ValueError, match=r"^two benchmarks are named 'toy'$"):
        fresh.register(replace(toy, title="Toy again"))
    assert benchmarks() == before and registry.REGISTRY.benchmarks() == before
    with pytest.raises(ConfigError, match="unknown dataset 'toy_qa'"):
        benchmark_of("toy_qa")
    shipped = load_benchmarks(BenchmarkRegistry())
    assert shipped is not registry.REGISTRY and shipped.benchmarks() == before


def names_is_v2(source: str) -> list[int]:
    """The lines of a module's source that name `is_v2` (a call, an attribute, an import)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
        name = (
            node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        )
        if name == "is_v2" or "is_v2" in names:
            lines.append(node.lineno)
    return sorted(lines)


def test_no_module_outside_the_benchmark_packages_asks_is_v2() -> None:
    """Which benchmark a dataset is comes from the registry (each stage's mapping), not from is_v2 branches."""
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in ("eval", "scorers", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.relative_to(ROOT).parts[:2] != ("eval", "benchmarks")
        for line in names_is_v2(path.read_text(encoding="utf-8"))
    ]
    assert found == []
    # and the scan can fail: an import, a call, an attribute
    assert names_is_v2(
        "from eval.benchmarks.longbench_v2.spec import is_v2\nif is_v2(ds): pass\nv2.is_v2"
    ) == [
        1,
        2,
        3,
    ]
