"""Every fact the gate uses is recomputed or checked, never trusted: each case below is damaged, foreign or
contradictory data that must give NO VERDICT (exit 2) naming the file, line and field, or a bad policy that
must be a configuration error (78), in one line and without a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.cli import main
from eval.run.config import endpoints
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


# ---------------------------------------------------------------- each record against its own run


def _gate_damage(runs: Path, capsys: pytest.CaptureFixture[str], named: str) -> str:
    code, out = _gate(runs, capsys)
    assert code == 2, out
    assert f"variant run {VARIANT_ID} is damaged: " in out and "Traceback" not in out, out
    assert named in out, out
    return out


def test_records_copied_in_from_another_run_are_foreign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # every record of the variant says it belongs to the base run (a copy of the base's records file)
    runs, base_dir, variant_dir = _runs(tmp_path)
    (variant_dir / "records.jsonl").write_bytes((base_dir / "records.jsonl").read_bytes())
    out = _gate_damage(runs, capsys, "records.jsonl:1:run_id: ")
    assert f"is not this run's ({VARIANT_ID}): a record of another run" in out


@pytest.mark.parametrize(("field", "value"), [("run_id", "20260101T000000Z-other"), ("variant", "main")])
def test_an_edited_run_id_or_variant_is_foreign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: str
) -> None:
    runs, _, variant_dir = _runs(tmp_path)
    line = edit_record(variant_dir / "records.jsonl", "warm", lambda o: o.update({field: value}), nth=2)
    _gate_damage(runs, capsys, f"1 record(s) contradict their run: records.jsonl:{line}:{field}: '{value}'")


def test_an_edited_replica_is_damage_not_a_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs, _, variant_dir = _runs(tmp_path)
    line = edit_record(variant_dir / "records.jsonl", "repeat", lambda o: o.update(replica=1))
    _gate_damage(runs, capsys, f"records.jsonl:{line}:replica: 1, but the run's sessions served 1 replica(s)")


def test_a_replica_other_than_its_units_is_damage() -> None:
    from eval.records.consistency import record_damage
    from eval.records.manifest_parts import ReplicaEntry, SessionEntry
    from tests.eval.records.test_run_folder import make_record

    sessions = [SessionEntry(replicas=[ReplicaEntry(0, "http://a/v1"), ReplicaEntry(1, "http://b/v1")])]
    recs = [make_record(seq=0), make_record(pass_name="warm", seq=1, replica=1, expected_cached_tokens=None)]
    (line,) = record_damage(recs, [], "r1", "v", sessions, "records.jsonl")
    assert "records.jsonl:2:replica: 1, but its unit's group ran on replica 0" in line
    same = [recs[0], replace(recs[1], replica=0)]
    assert record_damage(same, [], "r1", "v", sessions, "records.jsonl") == []
    # the replicas scenario's unit visits every replica in turn: not damage
    spanning = [
        make_record(
            pass_name=p,
            repetition=r,
            seq=2 * r + k,
            replica=r,
            scenario="replicas",
            expected_cached_tokens=None,
        )
        for r in (0, 1)
        for k, p in enumerate(("replicas_cold", "replicas_warm"))
    ]
    assert record_damage(spanning, [], "r1", "v", sessions, "records.jsonl") == []


def test_a_warm_record_whose_usage_contradicts_status_ok_is_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, _, variant_dir = _runs(tmp_path)

    def no_hit(obj: dict[str, Any]) -> None:
        obj["usage"]["cached_tokens"] = 0

    line = edit_record(variant_dir / "records.jsonl", "warm", no_hit, nth=1)
    _gate_damage(runs, capsys, f"records.jsonl:{line}:usage.cached_tokens: 0, but status ok says it met its ")


def test_a_cold_record_with_cached_tokens_and_status_ok_is_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, _, variant_dir = _runs(tmp_path)

    def hit(obj: dict[str, Any]) -> None:
        obj["usage"]["cached_tokens"] = 32

    line = edit_record(variant_dir / "records.jsonl", "cold", hit)
    _gate_damage(runs, capsys, f"records.jsonl:{line}:usage.cached_tokens: 32, but status ok says this cold ")


def test_a_duplicated_seq_is_damage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs, _, variant_dir = _runs(tmp_path)
    line = edit_record(variant_dir / "records.jsonl", "repeat", lambda o: o.update(seq=0))
    _gate_damage(runs, capsys, f"records.jsonl:{line}:seq: 0 is also the seq of line 1")


def test_an_attempt_that_jumps_is_damage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs, _, variant_dir = _runs(tmp_path)
    line = edit_record(variant_dir / "records.jsonl", "warm", lambda o: o.update(attempt=5))
    _gate_damage(
        runs, capsys, f"records.jsonl:{line}:attempt: 5, but the slot's attempts before it end at -1"
    )


def test_warm_and_repeat_pass_names_swapped_are_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, _, variant_dir = _runs(tmp_path)
    warm = edit_record(variant_dir / "records.jsonl", "warm", lambda o: o.update(pass_name="repeat"))
    edit_record(variant_dir / "records.jsonl", "repeat", lambda o: o.update(pass_name="warm"), nth=1)
    _gate_damage(
        runs, capsys, f"records.jsonl:{warm}:pass_name: its unit sent cold, repeat, warm in that order"
    )


# ---------------------------------------------------------------- the plan, recomputed


def _edit_manifest(run_dir: Path, edit: Edit) -> None:
    path = run_dir / "manifest.json"
    obj = json.loads(path.read_text())
    edit(obj)
    path.write_text(json.dumps(obj))


@pytest.mark.parametrize("also_expected", [False, True])
def test_timing_reps_raised_in_the_manifest_is_an_unfilled_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], also_expected: bool
) -> None:
    # 6 inputs, timing_reps 2 -> 3: 12 more planned slots (timing_cold and timing_warm rep 2) with no record;
    # with expected_records raised to match (54 -> 66) the manifest still says complete: damage either way
    runs, _, variant_dir = _runs(tmp_path)

    def raise_reps(obj: dict[str, Any]) -> None:
        obj["settings"]["timing_reps"] = 3
        if also_expected:
            obj["expected_records"] += 12

    _edit_manifest(variant_dir, raise_reps)
    if also_expected:
        named = "the manifest says complete, but only 54/66 planned requests have a record"
    else:
        named = (
            "the manifest's expected_records 54 is fewer than the 66 requests its settings plan (settings or "
            "expected_records edited); the manifest says complete, but 12 request(s) its settings plan have no "
            "record: gov_report/gov00 timing_cold rep 2, gov_report/gov00 timing_warm rep 2"
        )
    code, out = _score(variant_dir, capsys)
    assert code == 0, out
    assert "INCOMPLETE" in out and "54/66 planned requests recorded" in out, out
    assert named.replace("; ", "; damaged: ") in out, out
    _gate_damage(runs, capsys, named.replace("; the", f"; variant run {VARIANT_ID} is damaged: the"))


# ---------------------------------------------------------------- an interleaved session's pairing file


@pytest.fixture(name="session", scope="module")
def session_fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One clean lbeval ab session on two fake servers (3 inputs, cold, warm and 2 timing repetitions)."""
    from eval.run.ab import AbConfig, execute_ab
    from tests.eval.fake_fixtures import config_for, make_row, write_rows
    from tests.support.fake_server import FakeServer

    tmp = tmp_path_factory.mktemp("ab")
    inputs = write_rows(tmp / "inputs.jsonl", [make_row(i) for i in range(3)])
    with FakeServer() as a, FakeServer() as b:
        ca = config_for(a, inputs, tmp / "runs", variant="base", passes=("cold", "warm", "timing"))
        return execute_ab(
            AbConfig(ca, replace(ca, variant="var", topology=endpoints(b.base_url)), seed=7, quiet=True)
        )


def _cut(lines: list[str]) -> list[str]:
    return lines[:3] + lines[4:]


def _swapped(lines: list[str]) -> list[str]:
    return [lines[1], lines[0], *lines[2:]]


def _doubled(lines: list[str]) -> list[str]:
    return [*lines, lines[-1]]


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (None, "9 pair lines): missing"),
        (_cut, "9 pair lines): holds 8, lines were removed"),
        (_swapped, "its first 9 lines are not the ones the session wrote (removed, duplicated or edited)"),
        (_doubled, "9 pair lines): holds 10, lines were added or duplicated"),
    ],
)
def test_an_interleaved_sessions_pairing_file_is_part_of_it(
    session: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: Callable[[list[str]], list[str]] | None,
    named: str,
) -> None:
    import shutil

    from eval.records.ab_pairs import pairing_damage
    from eval.records.run_folder import read_manifest

    da, db = (Path(shutil.copytree(d, tmp_path / d.parent.name / d.name)) for d in session)
    for side, d, partner in (("a", da, db), ("b", db, da)):  # both manifests say so
        mark = read_manifest(d).interleaved
        assert mark is not None and mark.side == side and mark.pairs == 9
        assert mark.partner == f"{partner.parent.name}/{partner.name}"
        assert pairing_damage(read_manifest(d), d) == []  # as the session left it
    pairs = db / "ab_pairs.jsonl"
    if damage is None:
        pairs.unlink()
    else:
        pairs.write_text("".join(damage(pairs.read_text().splitlines(keepends=True))))
    code = main(["gate", str(da), str(db)])
    out = unwrap(capsys.readouterr().out)
    assert code == 2, out
    marked = (
        f"variant run {db.name} is damaged: ab_pairs.jsonl (the manifest marks this run side b of an lbeval "
    )
    assert marked + f"ab session with base/{da.name}" in out and named in out, out


def test_a_scenario_records_status_is_not_its_cache_check() -> None:
    # a hitlen request that found no hit is status ok: hitlen_cache_honoured judges it, not the reader
    from eval.records.consistency import record_damage, usage_contradiction
    from eval.records.types import Usage
    from tests.eval.records.test_run_folder import make_record

    miss = make_record(
        pass_name="hitlen_full", scenario="hitlen", expected_cached_tokens=32, usage=Usage(84, 4, 0)
    )
    assert usage_contradiction(miss) is None
    assert record_damage([miss], [], "r1", "v", [], "records.jsonl") == []
    warm = make_record(pass_name="warm", seq=1, expected_cached_tokens=32, usage=Usage(84, 4, 0))
    assert usage_contradiction(warm) == "0, but status ok says it met its 32 expected cached tokens"
