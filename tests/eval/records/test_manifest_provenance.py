"""The manifest's provenance parts (inputs_header, host, client_versions) and scores.json's run settings are typed
parts: read at the boundary, damage named by file and field (exit 2), written back byte for byte."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.score import score_run
from eval.prepare.inputs import InputsSource, InputsTokenizer, read_inputs
from eval.records.manifest_parts import ClientVersions, HostFacts, InputsHeaderFacts, ManifestError
from eval.records.run_folder import read_manifest, write_manifest
from eval.report.json_out import scores_json
from tests.eval.records.test_run_folder import make_manifest
from tests.eval.runfactory import RunSpec, make_rows, write_inputs_file, write_run

# a header as `lbeval prepare` writes it (every field, schema 3), as the manifest copies it
FULL_HEADER: dict[str, Any] = {
    "source": {
        "kind": "hub",
        "repo": "THUDM/LongBench",
        "revision": "abc",
        "file": "data.zip",
        "sha256": "00",
        "files": {"qasper": {"file": "data.zip:data/qasper.jsonl", "sha256": "01", "rows": 200}},
    },
    "seed": 1234,
    "n": 2,
    "datasets": ["qasper", "gov_report"],
    "selected_ids": {"qasper": ["q1", "q2"], "gov_report": ["g1"]},
    "templates": {
        "origin": "LongBench config",
        "files": {"datasets.toml": "11"},
        "template_sha256": {"qasper": "12"},
    },
    "tokenizer": {"kind": "server", "base_url": "http://h/v1", "model": "m", "max_model_len": 4096},
    "max_input_tokens": {"qasper": 3000, "gov_report": 3000},
    "max_tokens": {"qasper": 128, "gov_report": 512},
    "lbeval_version": "0.9.0",
    "git_commit": None,
    "git_dirty": None,
    "schema_version": 3,
    "extra": {},
    "n_taken": {"qasper": 2, "gov_report": 1},
    "n_available": {"qasper": 200, "gov_report": 200},
}
FULL_HOST = {"hostname": "box", "platform": "Linux-6.1-x86_64", "python": "3.11.9"}
FULL_VERSIONS = {"openai": "1.50.0", "httpx2": "not installed", "numpy": "2.1.0"}


def _manifest_with(tmp_path: Path, **parts: Any) -> dict[str, Any]:
    """manifest.json of a run whose given parts are replaced by raw JSON values."""
    write_manifest(tmp_path, make_manifest())
    obj: dict[str, Any] = json.loads((tmp_path / "manifest.json").read_text())
    obj.update(parts)
    (tmp_path / "manifest.json").write_text(
        json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    )
    return obj


# (part, raw JSON, what reading it must show: attribute -> value)
READ_CASES = [
    ("inputs_header", FULL_HEADER, {"seed": 1234, "n": 2, "datasets": ["qasper", "gov_report"], "inputs_taken": 3}),
    ("inputs_header", {"seed": 1}, {"seed": 1, "n": None, "datasets": [], "n_taken": {}, "inputs_taken": None}),
    ("inputs_header", {}, {"seed": None, "schema_version": None, "tokenizer": InputsTokenizer(), "inputs_taken": None}),
    (  # schema 1 inputs (before n_taken and n_available)
        "inputs_header",
        {k: v for k, v in FULL_HEADER.items() if k not in ("n_taken", "n_available")} | {"schema_version": 1},
        {"schema_version": 1, "n_taken": {}, "n_available": {}, "inputs_taken": None},
    ),
    (  # a server tokenizer that did not say its context length (written as null, kept as null)
        "inputs_header",
        {"tokenizer": {"kind": "server", "base_url": "u", "max_model_len": None}, "source": {"kind": "mini"}},
        {"tokenizer": InputsTokenizer("server", base_url="u"), "source": InputsSource(kind="mini")},
    ),
    ("host", FULL_HOST, {"hostname": "box", "platform": "Linux-6.1-x86_64", "python": "3.11.9"}),
    ("host", {"hostname": "h"}, {"hostname": "h", "platform": "", "python": ""}),
    ("client_versions", FULL_VERSIONS, {"packages": FULL_VERSIONS}),
    ("client_versions", {}, {"packages": {}}),
]  # fmt: skip


@pytest.mark.parametrize(("part", "raw", "expected"), READ_CASES)
def test_a_provenance_part_reads_good_and_sparse_manifests_and_writes_the_same_bytes(
    tmp_path: Path, part: str, raw: dict[str, Any], expected: dict[str, Any]
) -> None:
    _manifest_with(tmp_path, **{part: raw})
    before = (tmp_path / "manifest.json").read_bytes()
    m = read_manifest(tmp_path)
    value = getattr(m, part)
    assert {name: getattr(value, name) for name in expected} == expected
    write_manifest(tmp_path, m)
    assert (tmp_path / "manifest.json").read_bytes() == before


def test_the_parts_answer_by_name() -> None:
    assert ClientVersions.from_dict(FULL_VERSIONS).version_of("openai") == "1.50.0"
    assert ClientVersions.from_dict(FULL_VERSIONS).version_of("requests") is None
    # made in code (not read): every field written
    assert HostFacts(hostname="h").to_dict() == {"hostname": "h", "platform": "", "python": ""}


# (part, raw JSON, the field named, the message)
DAMAGE_CASES = [
    ("inputs_header", [1], "inputs_header", "must be an object, got list"),
    ("inputs_header", {"seed": "1"}, "inputs_header.seed", "must be int | None, got str '1'"),
    ("inputs_header", {"n": 1.5}, "inputs_header.n", "must be int | None, got float 1.5"),
    ("inputs_header", {"datasets": "qasper"}, "inputs_header.datasets", "must be list[str], got str"),
    ("inputs_header", {"selected_ids": {"q": [1]}}, "inputs_header.selected_ids", "must be dict[str, list[str]]"),
    ("inputs_header", {"source": []}, "inputs_header.source", "must be an object, got []"),
    ("inputs_header", {"source": {"kind": 1}}, "inputs_header.source.kind", "must be a string, got 1"),
    ("inputs_header", {"source": {"repo": None}}, "inputs_header.source.repo", "must be a string, got null"),
    ("inputs_header", {"source": {"url": "x"}}, "inputs_header.source.url", "unknown field"),
    ("inputs_header", {"source": {"files": []}}, "inputs_header.source.files", "must be an object, got []"),
    ("inputs_header", {"source": {"files": {"q": "00"}}}, "inputs_header.source.files.q", 'must be an object, got "00"'),
    ("inputs_header", {"source": {"files": {"q": {"rows": -1}}}}, "inputs_header.source.files.q.rows", "must be at least 0, got -1"),
    ("inputs_header", {"templates": {"q": "11"}}, "inputs_header.templates.q", "unknown field"),
    ("inputs_header", {"templates": {"files": {"a": 1}}}, "inputs_header.templates.files", "must be an object of strings, got {"),
    ("inputs_header", {"tokenizer": "none"}, "inputs_header.tokenizer", 'must be an object, got "none"'),
    ("inputs_header", {"tokenizer": {"max_model_len": "4096"}}, "inputs_header.tokenizer.max_model_len", "must be an integer or null"),
    ("inputs_header", {"tokenizer": {"max_model_len": 0}}, "inputs_header.tokenizer.max_model_len", "must be at least 1, got 0"),
    ("inputs_header", {"tokenizer": {"present": []}}, "inputs_header.tokenizer.present", "unknown field"),
    ("inputs_header", {"max_input_tokens": {"q": "9"}}, "inputs_header.max_input_tokens", "must be dict[str, int]"),
    ("inputs_header", {"git_dirty": "no"}, "inputs_header.git_dirty", "must be bool | None, got str"),
    ("inputs_header", {"n_taken": {"q": True}}, "inputs_header.n_taken", "must be dict[str, int], got dict"),
    ("inputs_header", {"record": "inputs_header"}, "inputs_header.record", "unknown field"),
    ("inputs_header", {"part_version": 2}, "inputs_header.part_version", "this lbeval reads version 1"),
    ("host", "box", "host", "must be an object, got str"),
    ("host", {"hostname": 7}, "host.hostname", "must be str, got int 7"),
    ("host", {"python": None}, "host.python", "must be str, got NoneType"),
    ("host", {"cpu": "x"}, "host.cpu", "unknown field"),
    ("client_versions", ["openai"], "client_versions", "must be an object, got list"),
    ("client_versions", {"openai": 1}, "client_versions.openai", "must be str, got int"),
    ("client_versions", {"numpy": None}, "client_versions.numpy", "must be str, got NoneType"),
]  # fmt: skip


@pytest.mark.parametrize(("part", "raw", "field", "message"), DAMAGE_CASES)
def test_a_damaged_provenance_part_is_one_line_naming_file_and_field(
    tmp_path: Path, part: str, raw: Any, field: str, message: str
) -> None:
    _manifest_with(tmp_path, **{part: raw})
    with pytest.raises(ManifestError, match=re.escape(f"manifest.json:{field}: {message}")) as info:
        read_manifest(tmp_path)
    assert info.value.exit_code == 2 and info.value.field == field and "\n" not in str(info.value)


def test_a_missing_provenance_part_is_a_missing_field(tmp_path: Path) -> None:
    for part in ("inputs_header", "host", "client_versions"):
        obj = _manifest_with(tmp_path)
        del obj[part]
        (tmp_path / "manifest.json").write_text(json.dumps(obj))
        with pytest.raises(ManifestError, match=re.escape(f"manifest.json:{part}: missing field")):
            read_manifest(tmp_path)


def test_the_manifest_copies_the_inputs_header_as_the_inputs_file_holds_it(tmp_path: Path) -> None:
    """What the session copies (the header read from inputs.jsonl) is written as the file's first line holds
    it, less its `record` key, every field kept (the None ones too)."""
    rows = make_rows(1, 1)
    write_inputs_file(tmp_path / "in.jsonl", rows)
    line = json.loads((tmp_path / "in.jsonl").read_text(encoding="utf-8").splitlines()[0])
    del line["record"]
    header, _ = read_inputs(tmp_path / "in.jsonl")
    facts = InputsHeaderFacts.from_dict(header.to_dict())
    assert facts.to_dict() == line and facts.seed == 1 and facts.n is None and facts.git_commit is None


def test_scores_json_writes_the_run_settings_as_the_manifest_holds_them(tmp_path: Path) -> None:
    rows = make_rows(2, 1)
    write_inputs_file(tmp_path / "in.jsonl", rows)
    run_dir = write_run(tmp_path, RunSpec("main", rows, tmp_path / "in.jsonl", settings={"concurrency": 2}))
    scored = score_run(run_dir)
    assert scored.scores.run.settings.concurrency == 2 and scored.scores.run.settings.timing_reps == 2
    written = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))["settings"]
    assert scores_json(scored)["run"]["settings"] == written
