"""`lbeval prepare --tokenizer PATH` without `transformers`: one line naming the `tokenizer` extra (exit 78), and
the extra declared in pyproject.toml with what the code imports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eval.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[3]


def test_tokenizer_without_transformers_names_the_extra(
    fixture_data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
    argv = ["prepare", "--data-dir", str(fixture_data_dir), "--datasets", "gov_report", "--n", "1",
            "--tokenizer", str(tmp_path / "tok"), "--max-model-len", "80", "--out", str(tmp_path / "in.jsonl")]  # fmt: skip
    assert main(argv) == 78
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lbeval[tokenizer]" in err[0] and "transformers" in err[0], err
    assert not (tmp_path / "in.jsonl").exists()


def test_dependencies_are_declared_as_imported() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {d.split(">")[0].split("=")[0].split(";")[0].strip() for d in project["dependencies"]}
    assert {
        "httpx2",
        "httpcore2",
        "openai",
    } <= names  # eval/run/client.py and eval/run/transport.py import them
    assert "httpx" not in names  # nothing in eval/ imports it
    extra = {d.split(">")[0].strip() for d in project["optional-dependencies"]["tokenizer"]}
    assert "transformers" in extra
