"""Every fact the gate uses is recomputed or checked, never trusted: each case below is damaged, foreign or
contradictory data that must give NO VERDICT (exit 2) naming the file, line and field, or a bad policy that
must be a configuration error (78), in one line and without a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main
from tests.eval.gate.test_gate_attacks import VARIANT_ID, _gate, _runs, unwrap

Edit = Callable[[dict[str, Any]], None]


def edit_record(records: Path, pass_name: str, edit: Edit, nth: int = 0) -> int:
    """Apply `edit` to the parsed `nth` record of `pass_name` and write it back; returns its 1-based line."""
    lines = records.read_text().splitlines(keepends=True)
    seen = 0
    for i, line in enumerate(lines):
        obj = json.loads(line)
        if obj["pass_name"] != pass_name:
            continue
        if seen == nth:
            edit(obj)
            lines[i] = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
            records.write_text("".join(lines))
            return i + 1
        seen += 1
    raise AssertionError(pass_name)


def _score(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["score", str(run_dir)])
    captured = capsys.readouterr()
    return code, unwrap(captured.out + captured.err)


# ---------------------------------------------------------------- a record's own fields


def test_topk_and_tokens_of_other_lengths_are_a_damaged_line_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, _, variant_dir = _runs(tmp_path)

    def drop_token(obj: dict[str, Any]) -> None:
        obj["output_token_ids"] = obj["output_token_ids"][:-1]

    line = edit_record(variant_dir / "records.jsonl", "warm", drop_token)
    code, out = _score(variant_dir, capsys)
    assert code == 0 and "Traceback" not in out, out
    assert f"line {line}: field topk: " in out and "but output_token_ids holds" in out, out
    code, out = _gate(runs, capsys)
    assert code == 2, out
    assert "unexpected error" not in out and "Traceback" not in out
    assert f"variant run {VARIANT_ID} is damaged: records.jsonl: 1 unreadable record line(s)" in out
    assert f"line {line}: field topk: " in out


# ---------------------------------------------------------------- the policy


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("x = " + "[" * 100_000 + "]" * 100_000, "not a policy (a value nested too deeply to read)"),
        ("[rules.cause_rows]\nallowed_drop = " + "9" * 5000, "not valid TOML (a number too long: "),
    ],
)
def test_a_policy_nested_too_deep_or_with_a_huge_integer_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, why: str
) -> None:
    runs, _, _ = _runs(tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text("schema_version = 1\n" + text + "\n")
    code, out = _gate(runs, capsys, "--policy", str(policy))
    assert code == 78, out
    assert f"lbeval gate: error: {policy}: {why}" in out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
