"""An attacker's cases against `lbeval gate`: each must give NO VERDICT (exit 2) naming what is
wrong, in one line and without a traceback, where the gate passed or crashed (exit 1) before.

- a record outside the plan (a timing_cold repetition edited to 7, -1, 0.5, 1e400, "0", null) is damage;
- a line of 100,000 "[" is an unreadable line, not a RecursionError;
- a forged stop record (a session killed after 3 of 6 inputs, inputs_planned 3, matching expected_records, a
  recomputed sha256) is checked against the manifest's plan and the records, not trusted;
- a stop record whose expected_records is 1e400 is a damaged stop record, not an OverflowError;
- any unexpected exception in the gate is NO VERDICT (2), one line.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.compare import compare
from eval.analyze.score import score_run
from eval.cli import main
from eval.gate import settle as settle_module
from eval.gate.policy import load_policy
from eval.gate.settle import restrict, settle
from eval.records.stop import STOP_SCHEMA_VERSION, StopRecord, stop_path, write_stop
from tests.eval.runfactory import base_and_variant, write_run

VARIANT_ID = "20260909T103000Z-test"


def unwrap(text: str) -> str:
    return re.sub(r"\n {11}(?=\S)", " ", text)


def _runs(tmp_path: Path, **variant_kw: Any) -> tuple[Path, Path, Path]:
    base, variant = base_and_variant(tmp_path, **variant_kw)
    runs = tmp_path / "runs"
    return runs, write_run(runs, base), write_run(runs, variant)


def _gate(runs: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["gate", "main", "patched", "--runs", str(runs), *extra])
    captured = capsys.readouterr()
    return code, unwrap(captured.out + captured.err)


def _edit_first(records: Path, pass_name: str, edit: Any) -> int:
    """Apply `edit` to the JSON text of the first record of `pass_name` (as raw text, so 1e400 stays 1e400);
    returns its 1-based line number."""
    lines = records.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if json.loads(line)["pass_name"] == pass_name:
            lines[i] = edit(line)
            records.write_text("".join(lines))
            return i + 1
    raise AssertionError(pass_name)


def _repetition(value: str) -> Any:
    return lambda line: line.replace('"repetition":0', f'"repetition":{value}', 1)


def test_the_clean_pair_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs, _, _ = _runs(tmp_path)
    code, out = _gate(runs, capsys)
    assert code == 0, out


def test_a_repetition_moved_outside_the_plan_is_damage_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # timing_reps is 2: repetition 7 is no slot of the plan, and the slot it came from (rep 0) is empty now
    runs, _, variant_dir = _runs(tmp_path)
    _edit_first(variant_dir / "records.jsonl", "timing_cold", _repetition("7"))
    code, out = _gate(runs, capsys)
    assert code == 2, out
    assert (
        f"variant run {VARIANT_ID} is damaged: 1 record(s) in a slot the run's plan does not name (edited or "
        "foreign): qasper/qas00 timing_cold rep 7" in out
    )
    assert main(["score", str(variant_dir)]) == 0
    assert "53/54 planned requests recorded" in unwrap(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("-1", "field repetition: must be >= 0, got -1"),
        ("0.5", "field repetition: must be int, got float 0.5"),
        ("1e400", "field repetition: must be int, got float inf"),
        ('"0"', "field repetition: must be int, got str '0'"),
        ("null", "field repetition: must be int, got NoneType None"),
    ],
)
def test_a_malformed_repetition_is_named_with_its_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, why: str
) -> None:
    runs, _, variant_dir = _runs(tmp_path)
    line = _edit_first(variant_dir / "records.jsonl", "timing_cold", _repetition(value))
    code, out = _gate(runs, capsys)
    assert code == 2, out
    assert "Traceback" not in out
    assert (
        f"records.jsonl: 1 unreadable record line(s) (torn or damaged): line {line}; line {line}: {why}"
        in out
    )


def test_a_line_of_100000_brackets_is_an_unreadable_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, _, variant_dir = _runs(tmp_path)
    records = variant_dir / "records.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    records.write_text("".join([*lines[:5], "[" * 100_000 + "\n", *lines[5:]]))
    code, out = _gate(runs, capsys)
    assert code == 2, out
    assert "Traceback" not in out and "line 6; line 6: nested too deeply to read" in out


def _forge_stop(base_dir: Path, variant_dir: Path, k: int, **change: Any) -> StopRecord:
    """What an attacker writes into both runs of a session killed after k inputs: a stop record claiming the
    session planned k inputs, with the slots of those inputs as expected_records, decisions recomputed by the
    gate's own settle (so they reproduce) and a valid sha256."""
    policy = load_policy(None)
    base, variant = score_run(base_dir), score_run(variant_dir)
    keys = base.keys[:k]
    c = compare(restrict(base, keys, None), restrict(variant, keys, None), allow_mismatch=True)
    s = settle(c, policy, k, k)
    slots = [c.base.scores.run.n_slots, c.variant.scores.run.n_slots]
    fields: dict[str, Any] = dict(
        schema_version=STOP_SCHEMA_VERSION, ab_id="forged", runs=("main/" + base.scores.run.run_id,
        "patched/" + variant.scores.run.run_id), seed=1, policy=policy.source, decision=s.decision,
        reason=s.reason, inputs_run=k, inputs_planned=k, inputs=tuple(keys),
        expected_records=(slots[0], slots[1]), rules=s.rules, server_seconds=1.0, server_seconds_full=1.0,
        stopped_at="2026-09-09T10:05:00Z",
    )  # fmt: skip
    fields.update(change)
    stop = StopRecord(**fields)
    for d in (base_dir, variant_dir):
        write_stop(d, stop)
    return stop


def test_a_forged_stop_record_of_a_killed_session_is_checked_against_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the session was killed after 3 of 6 inputs: the other inputs have no record, the manifests are incomplete
    base, variant = base_and_variant(tmp_path)
    late = {(row.id, p, r) for row in base.rows[3:] for p in ("cold", "warm", "repeat", "control_salt",
            "control_sibling", "timing_cold", "timing_warm") for r in (0, 1)}  # fmt: skip
    for spec in (base, variant):
        spec.missing, spec.complete = set(late), False
    runs = tmp_path / "runs"
    base_dir, variant_dir = write_run(runs, base), write_run(runs, variant)
    stop = _forge_stop(base_dir, variant_dir, 3)
    assert stop.decision == "pass"  # the forged decisions reproduce from the records
    code, out = _gate(runs, capsys)
    assert code == 2, out
    assert (
        f"the stop record plans 3 inputs, but run {VARIANT_ID}'s plan (its manifest and inputs manifest) has 6"
        in out
    )
    assert f"run {VARIANT_ID}'s manifest does not say its session stopped early" in out
    # inputs_planned told right, expected_records wrong: recomputed from the plan of the inputs run (3 x 9)
    _forge_stop(base_dir, variant_dir, 3, inputs_planned=6, expected_records=(1, 1))
    code, out = _gate(runs, capsys)
    assert code == 2, out
    assert f"the stop record counts 1 planned requests for run {VARIANT_ID}'s inputs run, its plan 27" in out


def test_a_stop_record_with_1e400_counts_is_damaged_not_an_overflow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, base_dir, variant_dir = _runs(tmp_path)
    _forge_stop(base_dir, variant_dir, 6)
    for d in (base_dir, variant_dir):
        obj = json.loads(stop_path(d).read_text())
        del obj["sha256"]
        obj["expected_records"] = [float("inf"), 54]  # json.loads("1e400") is inf
        canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
        obj["sha256"] = hashlib.sha256(canonical.encode()).hexdigest()
        stop_path(d).write_text(json.dumps(obj).replace("Infinity", "1e400"))
    code, out = _gate(runs, capsys)
    assert code == 2, out
    assert "Traceback" not in out
    assert "ab_stop.json:expected_records: must be an integer >= 0, got inf" in out


def test_an_unexpected_exception_is_no_verdict_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, _, _ = _runs(tmp_path)

    def broken(*args: Any, **kw: Any) -> Any:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(settle_module, "compare_and_gate", broken)
    junit = tmp_path / "gate.xml"
    code, out = _gate(runs, capsys, "--junit", str(junit))
    assert code == 2, out
    assert "Traceback" not in out
    assert re.search(
        r"gate: NO VERDICT \(exit 2\): unexpected error ZeroDivisionError \(at test_gate_attacks\.py:\d+\): "
        r"division by zero; no verdict on this data",
        out,
    ), out
    assert 'type="no verdict"' in junit.read_text()
