"""The benchmark registry: every package in eval/benchmarks/ is registered, every prompt file under prompts/ is
named by exactly one benchmark, and each dataset name belongs to exactly one benchmark; a stage finds a dataset's
benchmark's entry in its mapping (one clear error without one), and no module outside eval/benchmarks/ asks is_v2.
Each stage's mapping is checked complete beside the stage's tests (tests/eval/prepare/test_build.py,
tests/eval/analyze/test_accuracy.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from eval.benchmarks.longbench.spec import load_specs
from eval.benchmarks.registry import BENCHMARKS, NoStageEntry, benchmark_of, entry_problems, stage_entry
from eval.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
NOT_TEMPLATES = {
    "__init__.py",
    "PROVENANCE.md",
}  # prompts/ is a package with provenance notes beside the data


def test_every_benchmark_package_is_registered_and_every_entry_has_a_package() -> None:
    folders = {p.parent.name for p in (ROOT / "eval" / "benchmarks").glob("*/__init__.py")}
    assert folders == {"longbench", "longbench_v2"}
    assert sorted(b.name for b in BENCHMARKS) == sorted(folders)


def test_each_prompt_file_is_named_by_exactly_one_benchmark() -> None:
    on_disk = {
        p.relative_to(ROOT / "prompts").as_posix()
        for p in (ROOT / "prompts").rglob("*")
        if p.is_file() and p.name not in NOT_TEMPLATES and "__pycache__" not in p.parts
    }
    named = [f for b in BENCHMARKS for f in b.prompt_files]
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
        assert [b.name for b in BENCHMARKS if b.owns(name)] == [benchmark_of(name).name]


def test_an_unknown_dataset_is_one_config_error_naming_the_known_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown dataset 'qasperr'; known LongBench v1 datasets: .*qasper"
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


def test_a_stage_entry_is_found_by_the_dataset_s_benchmark_and_a_missing_one_is_one_clear_error() -> None:
    entries = {"longbench": "v1 part", "longbench_v2": "v2 part"}
    assert stage_entry(entries, "gov_report_e", "x.MAP") == "v1 part"
    assert stage_entry(entries, "longbench_v2", "x.MAP") == "v2 part"
    with pytest.raises(NoStageEntry) as caught:
        stage_entry({"longbench": "v1 part"}, "longbench_v2", "eval/x.MAP")
    assert str(caught.value) == (
        "dataset 'longbench_v2' is LongBench v2's (eval/benchmarks/longbench_v2/), which has no entry in "
        'eval/x.MAP; add one line there (docs/development.md, "Adding a benchmark")'
    )
    with pytest.raises(ConfigError, match="unknown dataset 'qasperr'"):
        stage_entry(entries, "qasperr", "x.MAP")


def test_entry_problems_name_a_missing_and_a_stray_benchmark() -> None:
    assert entry_problems({"longbench": 1, "longbench_v2": 2}, "M") == []
    assert entry_problems({"longbench": 1, "longbench_3": 3}, "M") == [
        "M: no entry for benchmark 'longbench_v2'",
        "M: entry 'longbench_3' is no registered benchmark",
    ]


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
