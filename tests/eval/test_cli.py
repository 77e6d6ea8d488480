"""The `lbeval` command: help texts and the datasets listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def test_every_registered_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    actions = [a for a in parser._actions if a.dest == "command"]
    available = set(actions[0].choices) if actions else set()  # type: ignore[arg-type]
    assert {"datasets", "prepare"} <= available <= set(COMMANDS)
    for name in sorted(available):
        with pytest.raises(SystemExit) as info:
            main([name, "--help"])
        assert info.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: lbeval {name}")


def test_no_command_prints_help_and_exits_64(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 64  # a usage error (EX_USAGE), no longer 2 (the gate's "no verdict")
    assert "COMMAND" in capsys.readouterr().out


def test_datasets_json_lists_21_with_official_limits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    v2 = rows.pop()  # LongBench v2 comes last, with its modes
    assert (v2["dataset"], v2["metric"], v2["default_v2_mode"]) == ("longbench_v2", "v2_accuracy", "0shot")
    assert {m: (e["max_tokens"], e["answer_max_tokens"]) for m, e in v2["v2_modes"].items()} == {
        "0shot": (128, None), "cot": (1024, 128), "nocontext": (128, None),
    }  # fmt: skip
    assert v2["v2_modes"]["cot"]["templates"] == ["0shot_cot.txt", "0shot_cot_ans.txt"]
    limits = json.loads((ROOT / "prompts" / "dataset2maxlen.json").read_text())
    assert {r["dataset"]: r["max_tokens"] for r in rows} == limits
    modes = {r["dataset"]: r["mode"] for r in rows}
    assert sorted(d for d, m in modes.items() if m == "raw") == sorted(
        ["trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"]
    )
    assert {r["dataset"]: r["metric"] for r in rows}["multifieldqa_zh"] == "qa_f1_zh"


def test_datasets_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["dataset", "metric", "max_tokens", "mode", "lang"]
    assert lines[1 + 1].split() == ["qasper", "qa_f1", "128", "chat", "en"]
    assert lines[-6].startswith("21 datasets")
    assert lines[-4].split() == ["longbench_v2", "v2_accuracy", "128", "chat", "en", "(LongBench", "v2)"]
    assert [line.split()[1] for line in lines[-3:]] == ["0shot", "cot", "nocontext"]
    assert "max_tokens 1024 then 128" in lines[-2]
