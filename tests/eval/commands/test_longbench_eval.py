"""`lbeval longbench-eval PRED_DIR [--e]` writes the official result.json, prints a table, reports bad data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eval.cli import main

DATA = Path(__file__).resolve().parents[2] / "data" / "scorers"


@pytest.mark.parametrize(("folder", "flags"), [("parity_plain", []), ("parity_e", ["--e"])])
def test_writes_exactly_the_expected_result_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: str, flags: list[str]
) -> None:
    pred_dir = tmp_path / "pred"
    shutil.copytree(DATA / folder, pred_dir)
    expected = (pred_dir / "expected_result.json").read_text(encoding="utf-8")
    assert main(["longbench-eval", str(pred_dir), *flags]) == 0
    written = (pred_dir / "result.json").read_text(encoding="utf-8")
    assert written == expected  # same keys, same order, same digits, NaN where the official writes NaN
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[0] == "dataset"
    assert f"wrote {pred_dir / 'result.json'}" in out
    for key in json.loads(expected):
        assert key in out


def test_bad_line_is_one_error_line_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "qasper.jsonl"
    bad.write_text('{"pred": "a", "answers": ["a"], "all_classes": null}\n{"pred": "a"}\n', encoding="utf-8")
    assert main(["longbench-eval", str(tmp_path)]) == 65  # a data error (EX_DATAERR), no longer 1
    err = capsys.readouterr().err.strip()
    assert err == f"lbeval longbench-eval: error: {bad}:2:answers: missing"
    assert not (tmp_path / "result.json").exists()


def test_unknown_dataset_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "squad.jsonl").write_text(
        '{"pred": "a", "answers": ["a"], "all_classes": null}\n', encoding="utf-8"
    )
    assert main(["longbench-eval", str(tmp_path), "--workers", "1"]) == 65  # a data error (EX_DATAERR)
    assert "squad.jsonl: unknown dataset 'squad'" in capsys.readouterr().err
