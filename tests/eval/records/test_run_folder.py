"""Record codec, append-only writer, torn-line handling, manifest and load_run."""

from __future__ import annotations

import json
import math
import os
import re
import socket
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from eval.errors import DataError
from eval.records.codec import decode_topk, dumps_record, encode_topk, record_from_dict
from eval.records.final import describe_duplicates, select_final
from eval.records.manifest_parts import (
    ClientVersions,
    HostFacts,
    InputsHeaderFacts,
    PairingMark,
    ProbeFacts,
    RunSettings,
    RunStats,
)
from eval.records.run_folder import (
    LOCK_NAME,
    RECORDS_NAME,
    ManifestError,
    RecordWriter,
    RunBusy,
    RunManifest,
    damage,
    load_run,
    read_manifest,
    repair_records,
    run_lock,
    scan_records,
    write_manifest,
)
from eval.records.scenario_kinds.registry import ScenarioSpec, register, unregister
from eval.records.types import ClientTimings, RequestRecord, TopK, Usage

ROOT = Path(__file__).resolve().parents[3]


def f32(x: float) -> float:
    """The float32 nearest to x, widened to a Python float (what vLLM sends)."""
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def make_topk() -> TopK:
    ids = [[5, 9, 100000], [7, 3], [], [2**31 - 1, 0, 42]]
    lps = [
        [f32(-0.01), f32(-4.5), f32(-9999.0)],
        [f32(-0.3), f32(-1.7)],
        [],
        [f32(-2.0), f32(-2.5), f32(-30.0)],
    ]
    # position 1: the chosen token is not in the row (its logprob differs from every entry)
    chosen = [lps[0][0], f32(-5.25), float("nan"), lps[3][2]]
    return TopK(ids=ids, logprobs=lps, chosen_logprobs=chosen)


def same_floats(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        struct.pack("<d", x) == struct.pack("<d", y) for x, y in zip(a, b, strict=True)
    )


def test_topk_round_trip_is_bit_exact_float32() -> None:
    tk = make_topk()
    enc = encode_topk(tk)
    assert enc["f"] == "f4"
    back = decode_topk(json.loads(json.dumps(enc)))
    assert back.ids == tk.ids
    for a, b in zip(back.logprobs, tk.logprobs, strict=True):
        assert same_floats(a, b)
    assert same_floats(back.chosen_logprobs, tk.chosen_logprobs)
    assert math.isnan(back.chosen_logprobs[2])


def test_topk_keeps_float64_values_that_float32_cannot_hold() -> None:
    tk = make_topk()
    lps = [list(r) for r in tk.logprobs]
    lps[1][1] = -1.7  # a double that is not a float32
    wide = TopK(ids=tk.ids, logprobs=lps, chosen_logprobs=[0.1, *tk.chosen_logprobs[1:]])
    enc = encode_topk(wide)
    assert enc["f"] == "f8"
    back = decode_topk(enc)
    assert back.logprobs[1][1] == -1.7
    assert back.chosen_logprobs[0] == 0.1


def test_topk_rejects_mismatched_rows() -> None:
    with pytest.raises(ValueError):
        encode_topk(TopK(ids=[[1, 2]], logprobs=[[-1.0]], chosen_logprobs=[-1.0]))


def test_topk_is_compact_for_512_positions_of_top20() -> None:
    import random

    rng = random.Random(7)
    ids = [[rng.randrange(50_000) for _ in range(20)] for _ in range(512)]
    lps = [sorted((f32(-rng.expovariate(0.3)) for _ in range(20)), reverse=True) for _ in range(512)]
    enc = encode_topk(TopK(ids=ids, logprobs=lps, chosen_logprobs=[r[0] for r in lps]))
    # raw float32 + int32 alone would be 160 bytes per position; the target for the whole record is < 200
    assert len(json.dumps(enc)) / 512 < 160


def make_record(**kw: object) -> RequestRecord:
    base = RequestRecord(
        run_id="r1",
        variant="v",
        dataset="qasper",
        example_id="e1",
        pass_name="cold",
        repetition=0,
        attempt=0,
        seq=0,
        group=0,
        endpoint="chat",
        settings={"temperature": 0.0, "cache_salt": "s"},
        cache_salt="s",
        prompt_sha256="ab" * 32,
        status="ok",
        output_text='an "answer"\n\u00e9',
        finish_reason="length",
        output_token_ids=[5, 7, 2, 9],  # one per top-k position
        topk=make_topk(),
        usage=Usage(prompt_tokens=300, completion_tokens=4, cached_tokens=0),
        expected_cached_tokens=0,
        timings=ClientTimings(sent_at=1.5, first_token_s=None, done_s=0.25),
        server_metrics={"prefill_time_s": 0.5},
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_record_round_trip() -> None:
    rec = make_record()
    back = record_from_dict(json.loads(dumps_record(rec)))
    assert back.topk is not None and rec.topk is not None
    assert back.topk.ids == rec.topk.ids
    assert replace(back, topk=None) == replace(rec, topk=None)


def test_record_rejects_other_schema_version_and_unknown_fields() -> None:
    obj = json.loads(dumps_record(make_record()))
    with pytest.raises(ValueError, match="schema_version"):
        record_from_dict(
            {**obj, "schema_version": 4}
        )  # 1, 2 and 3 are read (tests/eval/records/test_scenarios.py)
    with pytest.raises(ValueError, match="unknown field"):
        record_from_dict({**obj, "api_key": "x"})


def test_writer_appends_and_torn_tail_is_detected_then_dropped(tmp_path: Path) -> None:
    path = tmp_path / RECORDS_NAME
    with RecordWriter(path) as w:
        w.write(make_record(seq=0))
        w.write(make_record(seq=1, pass_name="warm"))
    whole = path.read_bytes()
    path.write_bytes(whole + dumps_record(make_record(seq=2, pass_name="repeat"))[:40])  # killed mid-write
    scan = scan_records(path)
    assert [r.seq for r in scan.records] == [0, 1]
    assert scan.torn_lines == [3] and scan.tail_torn
    repaired = repair_records(path)
    assert repaired.torn_lines == [3]
    assert path.read_bytes() == whole
    with RecordWriter(path) as w:
        w.write(make_record(seq=2, pass_name="repeat"))
    assert [r.seq for r in scan_records(path).records] == [0, 1, 2]
    assert scan_records(path).torn_lines == []


def test_damaged_line_in_the_middle_refuses_repair(tmp_path: Path) -> None:
    path = tmp_path / RECORDS_NAME
    path.write_bytes(dumps_record(make_record(seq=0)) + b"{not json\n" + dumps_record(make_record(seq=1)))
    assert scan_records(path).torn_lines == [2]
    with pytest.raises(DataError, match=":2: unreadable"):
        repair_records(path)


def make_manifest(**kw: object) -> RunManifest:
    m = RunManifest(
        schema_version=1,
        run_id="r1",
        variant="v",
        inputs_path="runs/v/inputs.jsonl",
        inputs_sha256="00" * 32,
        inputs_header=InputsHeaderFacts.from_dict({"seed": 1}),
        model="m",
        probe=ProbeFacts(block_size=16),
        settings=RunSettings(temperature=0.0),
        lbeval_version="0.1.0",
        git_commit=None,
        git_dirty=None,
        client_versions=ClientVersions.from_dict({"openai": "x"}),
        host=HostFacts.from_dict({"hostname": "h"}),
        started_at="2026-01-01T00:00:00Z",
        ended_at=None,
        complete=False,
        warnings=[],
        expected_records=3,
    )
    return replace(m, **kw)  # type: ignore[arg-type]


def test_manifest_written_atomically_and_read_back(tmp_path: Path) -> None:
    write_manifest(tmp_path, make_manifest())
    write_manifest(tmp_path, make_manifest(complete=True, ended_at="2026-01-01T01:00:00Z"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
    m = read_manifest(tmp_path)
    assert m.complete and m.ended_at == "2026-01-01T01:00:00Z" and m.expected_records == 3


def test_manifest_errors_name_the_field(tmp_path: Path) -> None:
    write_manifest(tmp_path, make_manifest())
    obj = json.loads((tmp_path / "manifest.json").read_text())
    del obj["model"]
    (tmp_path / "manifest.json").write_text(json.dumps(obj))
    with pytest.raises(DataError, match="manifest.json:model: missing field"):
        read_manifest(tmp_path)
    with pytest.raises(DataError, match="no run manifest"):
        read_manifest(tmp_path / "nope")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("expected_records", "lots", "manifest.json:expected_records: must be int, got str 'lots'"),
        ("expected_records", True, "manifest.json:expected_records: must be int, got bool True"),
        ("expected_records", -1, "manifest.json:expected_records: must not be negative"),
        ("complete", "yes", "manifest.json:complete: must be bool, got str"),
        ("sessions", {"a": 1}, "manifest.json:sessions: must be a list, got dict"),
        ("warnings", [1], "manifest.json:warnings: must be list[str], got list"),
        ("ended_at", 5, "manifest.json:ended_at: must be str | None, got int"),
        ("stats", None, "manifest.json:stats: must be an object, got NoneType"),
        ("settings", [], "manifest.json:settings: must be an object, got list"),
        ("probe", "vllm", "manifest.json:probe: must be an object, got str"),
    ],
)
def test_manifest_field_types_are_checked_when_read(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    write_manifest(tmp_path, make_manifest())
    obj = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**obj, field: value}))
    with pytest.raises(ManifestError, match=re.escape(message)) as info:
        read_manifest(tmp_path)
    assert info.value.exit_code == 2 and info.value.field == field


@pytest.mark.parametrize(
    ("part", "key", "value", "field", "message"),
    [
        ("settings", "timing_reps", "2", "settings.timing_reps", "must be int, got str '2'"),
        ("settings", "concurrency", 0, "settings.concurrency", "must not be 0"),
        ("settings", "scenarios", ["cache", 3], "settings.scenarios", "must be list[str] | None, got list"),
        ("settings", "temprature", 0.0, "settings.temprature", "unknown field"),
        ("settings", "part_version", 2, "settings.part_version", "this lbeval reads version 1"),
        ("probe", "block_size", "16", "probe.block_size", "must be int | None, got str '16'"),
        (
            "probe",
            "capabilities",
            {"t": {"ok": 1, "required": True, "detail": ""}},
            "probe.capabilities.t.ok",
            "must be bool",
        ),
        (
            "probe",
            "capabilities",
            {"tokenize": {"ok": True}},
            "probe.capabilities.tokenize.required",
            "missing",
        ),
        ("probe", "cache_model", {"kind": "lru", "block_size": 16}, "probe.cache_model", "cache_model.kind"),
        ("stats", "reprimes", "1", "stats.reprimes", "must be int, got str"),
        ("stats", "by_pass", {"cold": {"ok": "1"}}, "stats.by_pass", "must be dict[str, dict[str, int]]"),
    ],
)
def test_manifest_parts_are_typed_and_damage_names_the_field(
    tmp_path: Path, part: str, key: str, value: object, field: str, message: str
) -> None:
    write_manifest(tmp_path, make_manifest())
    obj = json.loads((tmp_path / "manifest.json").read_text())
    obj[part] = {**obj[part], key: value}
    (tmp_path / "manifest.json").write_text(json.dumps(obj))
    with pytest.raises(ManifestError, match=re.escape(f"manifest.json:{field}: {message}")) as info:
        read_manifest(tmp_path)
    assert info.value.exit_code == 2 and info.value.field == field


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        (1, "sessions.0", "must be an object, got int"),
        ({"outcome": 3}, "sessions.0.outcome", "must be str | None, got int 3"),
        ({"numerics": None}, "sessions.0.numerics", "must be str, got NoneType"),
        ({"replicas": {}}, "sessions.0.replicas", "must be a list, got dict"),
        ({"replicas": [{"replica": "0", "base_url": "u"}]}, "sessions.0.replicas.0.replica", "must be int"),
        ({"ab": {"side": "a", "partner": "r2"}}, "sessions.0.ab.seed", "missing field"),
        (
            {"dp_ranks": 2, "ab": {"side": "a", "seed": 1, "partner": "p", "order": 1}},
            "sessions.0.ab.order",
            "unknown",
        ),
    ],
)
def test_session_lines_are_typed_and_damage_names_the_line_and_field(
    tmp_path: Path, line: object, field: str, message: str
) -> None:
    write_manifest(tmp_path, make_manifest())
    obj = json.loads((tmp_path / "manifest.json").read_text())
    obj["sessions"] = [line]
    (tmp_path / "manifest.json").write_text(json.dumps(obj))
    with pytest.raises(ManifestError, match=re.escape(f"manifest.json:{field}: {message}")) as info:
        read_manifest(tmp_path)
    assert info.value.exit_code == 2 and info.value.field == field


def test_manifest_parts_read_sparse_and_older_manifests_and_write_the_same_keys(tmp_path: Path) -> None:
    """A manifest of an earlier lbeval (no part_version, sparse settings and probe, counters flat in stats)
    reads with the defaults written once in manifest_parts, and is written back with the keys it had."""
    write_manifest(tmp_path, make_manifest())
    obj = json.loads((tmp_path / "manifest.json").read_text())
    obj["settings"] = {"temperature": 0.0, "passes": ["cold"], "timing_reps": 0, "cold_mode": "salt",
                       "concurrency": 1, "stream_all": False, "scenarios": ["cache", "batch"], "batch_sizes": [4],
                       "seed": None, "hit_lengths": None}  # fmt: skip
    obj["probe"] = {"block_size": 16, "warnings": ["w"], "capabilities": {"tokenize": {"ok": None, "required": False,
                    "detail": "d", "fix": "", "fault": False}}}  # fmt: skip
    obj["stats"] = {"records": 3, "slots_final": 3, "by_pass": {"cold": {"ok": 3, "invalid": 0, "error": 0}},
                    "invalid_attempts": {}, "transport_retries": 0, "duplicate_records": 0, "reprimes": 2}  # fmt: skip
    started = {"started_at": "t0", "base_url": "http://h/v1", "server_version": None, "server_process_start_time": 1.5,
               "records_on_disk": 0, "units_to_run": 3, "torn_lines_dropped": 0, "retry": {"attempts": 3},
               "timeout_s": 600.0, "quiet": True, "launch_spec": None, "numerics": ""}  # fmt: skip
    ended = {**started, "ended_at": "t1", "outcome": "complete", "records_written": 3, "dp_ranks": 2,
             "replicas": [{"replica": 0, "base_url": "http://h/v1", "server_version": "v",
                           "server_process_start_time": 1.5, "pin": {"X-data-parallel-rank": "0"}}],
             "ab": {"side": "a", "seed": 7, "partner": "r2"}}  # fmt: skip
    obj["sessions"] = [started, ended]
    (tmp_path / "manifest.json").write_text(json.dumps(obj))
    m = read_manifest(tmp_path)
    assert m.sessions[0].outcome is None and m.sessions[1].ab is not None and m.sessions[1].ab.seed == 7
    assert [r.pin for r in m.sessions[1].replicas or []] == [{"X-data-parallel-rank": "0"}]
    assert (
        m.settings.scenarios == ["cache", "batch"] and m.settings.repeats is None and m.settings.seed is None
    )
    assert m.probe.block_size == 16 and m.probe.server_kind == "vllm" and m.probe.cache_model is None
    assert m.probe.capabilities["tokenize"].detail == "d" and m.probe.warnings == ["w"]
    assert m.stats.counter("reprimes") == 2 and m.stats.counter("evictions") == 0 and m.stats.errors == 0
    write_manifest(tmp_path, m)
    again = json.loads((tmp_path / "manifest.json").read_text())
    assert again["settings"] == obj["settings"] and again["stats"] == obj["stats"]
    assert again["sessions"] == obj["sessions"]
    assert set(obj["probe"]) < set(again["probe"]) and read_manifest(tmp_path) == m


def test_load_run_counts_torn_lines(tmp_path: Path) -> None:
    write_manifest(tmp_path, make_manifest())
    (tmp_path / RECORDS_NAME).write_bytes(dumps_record(make_record()) + b'{"run_id": "r1"')
    run = load_run(tmp_path)
    assert run.torn_lines == 1 and len(run.records) == 1 and run.manifest.run_id == "r1"


def test_select_final_prefers_the_latest_group_then_the_last_attempt() -> None:
    # one rule for the runner and every reader (eval.records.final): a unit re-run from cold as group 1
    # supersedes all of group 0 (before the house issue the runner's own copy of the rule kept group 0's warm
    # while the scorer dropped it); within a group the last attempt counts
    recs = [
        make_record(pass_name="cold", group=0, seq=0),
        make_record(pass_name="warm", group=0, attempt=0, status="invalid", seq=1),
        make_record(pass_name="warm", group=0, attempt=1, seq=3),
        make_record(pass_name="cold", group=1, seq=7),
        make_record(pass_name="warm", group=1, attempt=0, status="invalid", seq=8),
        make_record(pass_name="warm", group=1, attempt=1, seq=9),
        make_record(pass_name="timing_cold", repetition=0, group=0, seq=10),
    ]
    sel = select_final(recs)
    final = sel.final
    assert final[("qasper", "e1", "warm", 0)].attempt == 1
    assert final[("qasper", "e1", "warm", 0)].seq == 9
    assert final[("qasper", "e1", "cold", 0)].seq == 7
    # the timing repetition is a unit of its own: group 0 is its latest
    assert final[("qasper", "e1", "timing_cold", 0)].seq == 10
    assert len(final) == 3
    assert sel.superseded == 3 and sel.invalid_attempts == {"warm": 1} and sel.recovered == {"warm": 1}


def test_select_final_keeps_a_warm_of_an_older_group_out_when_the_new_group_stopped_after_cold() -> None:
    recs = [
        make_record(pass_name="cold", group=0, seq=0),
        make_record(pass_name="warm", group=0, seq=1),
        make_record(pass_name="cold", group=1, seq=2),
    ]
    final = select_final(recs).final
    assert ("qasper", "e1", "warm", 0) not in final
    assert final[("qasper", "e1", "cold", 0)].group == 1


def test_select_final_reports_duplicates_but_not_retries_or_reruns() -> None:
    # a retry (attempt + 1) and a re-run group (group + 1) are legitimate; the same slot, group and attempt
    # twice is damage (two writers): reported with what was duplicated
    recs = [
        make_record(pass_name="cold", seq=0),
        make_record(pass_name="warm", attempt=0, status="invalid", seq=1),
        make_record(pass_name="warm", attempt=1, seq=2),
        make_record(pass_name="cold", group=1, seq=3),
        make_record(pass_name="warm", group=1, seq=4),
    ]
    clean = select_final(recs)
    assert clean.duplicates == {} and describe_duplicates(clean) is None
    doubled = select_final([*recs, replace(recs[0], seq=5), replace(recs[0], seq=6), replace(recs[4], seq=7)])
    assert doubled.duplicates == {("qasper", "e1", "cold", 0, 0, 0): 2, ("qasper", "e1", "warm", 0, 0, 1): 1}
    assert describe_duplicates(doubled) == (
        "3 duplicate record(s) of 2 request slot(s), the same slot, group and attempt recorded twice "
        "(two writers?): qasper/e1 cold rep 0 attempt 0 group 0, qasper/e1 warm rep 0 attempt 0 group 1"
    )


def test_run_lock_is_exclusive_and_names_the_holder(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "v" / "r1"
    with run_lock(run_dir):
        note = json.loads((run_dir / LOCK_NAME).read_text())
        assert note["pid"] == os.getpid() and note["host"] == socket.gethostname()
        expected = (
            f"{run_dir}: another lbeval run (pid {os.getpid()} on {socket.gethostname()}, since "
            f"{note['started_at']}) is writing this run; wait for it or stop it"
        )
        with pytest.raises(RunBusy) as info, run_lock(run_dir):
            pass
        assert str(info.value) == expected
        # another process is refused the same way (flock, not a pid file: the kernel drops it on exit)
        code = f"from eval.records.run_folder import run_lock\nwith run_lock(__import__('pathlib').Path({str(run_dir)!r})): pass"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 1 and "RunBusy: " + expected in proc.stderr
    assert (run_dir / LOCK_NAME).read_text() == ""  # released: the holder's note is cleared
    with run_lock(run_dir):
        pass


def test_damage_names_unreadable_lines_duplicates_and_lost_records(tmp_path: Path) -> None:
    write_manifest(tmp_path, make_manifest(complete=True, expected_records=2))
    cold, warm = make_record(pass_name="cold", seq=0), make_record(pass_name="warm", seq=1)
    (tmp_path / RECORDS_NAME).write_bytes(dumps_record(cold) + dumps_record(warm))
    run = load_run(tmp_path)
    assert damage(run, select_final(run.records)) == []
    (tmp_path / RECORDS_NAME).write_bytes(
        dumps_record(cold) + b"{garbage\n" + dumps_record(warm) + dumps_record(warm)[:40]
    )
    run = load_run(tmp_path)
    assert run.torn_line_numbers == [2, 4]
    assert damage(run, select_final(run.records)) == [
        "records.jsonl: 2 unreadable record line(s) (torn or damaged): line 2, 4; line 2: Expecting property "
        "name enclosed in double quotes: line 1 column 2 (char 1); line 4: no newline (a torn last line)"
    ]
    (tmp_path / RECORDS_NAME).write_bytes(dumps_record(cold) + dumps_record(cold))
    run = load_run(tmp_path)
    assert damage(run, select_final(run.records)) == [
        "1 duplicate record(s) of 1 request slot(s), the same slot, group and attempt recorded twice "
        "(two writers?): qasper/e1 cold rep 0 attempt 0 group 0",
        "the manifest says complete, but only 1/2 planned requests have a record (records were lost)",
    ]
    write_manifest(tmp_path, make_manifest(stats=RunStats(records=3)))
    (tmp_path / RECORDS_NAME).write_bytes(dumps_record(cold))
    run = load_run(tmp_path)
    assert damage(run, select_final(run.records)) == [
        "records.jsonl holds 1 record line(s), 2 fewer than the 3 the manifest counted (records were lost)"
    ]


def test_a_registered_scenario_s_own_setting_reads_and_writes_without_a_field(tmp_path: Path) -> None:
    """A scenario module declares its settings (ScenarioSpec.settings); a manifest holding one reads it into
    RunSettings.scenario_settings and writes it back flat. A key no scenario declares stays an unknown field."""
    write_manifest(tmp_path, make_manifest())
    obj = json.loads((tmp_path / "manifest.json").read_text())
    obj["settings"] = {**obj["settings"], "scenarios": ["cache", "toy"], "toy_copies": 3}
    (tmp_path / "manifest.json").write_text(json.dumps(obj))
    with pytest.raises(ManifestError, match=re.escape("manifest.json:settings.toy_copies: unknown field")):
        read_manifest(tmp_path)
    register(ScenarioSpec("toy", "nothing", ("toy_a",), "one unit", "1", (), settings=("toy_copies",)))
    try:
        m = read_manifest(tmp_path)
        assert m.settings.scenario_settings == {"toy_copies": 3} and m.settings.scenarios == ["cache", "toy"]
        write_manifest(tmp_path, m)
        assert json.loads((tmp_path / "manifest.json").read_text())["settings"] == obj["settings"]
    finally:
        unregister("toy")


@pytest.mark.parametrize(
    ("mark", "field", "message"),
    [
        (
            {"ab_id": "x", "side": "c", "partner": "v/r", "pairs": 1, "pairs_sha256": "s"},
            "interleaved",
            "not a",
        ),
        (
            {"ab_id": "x", "side": "a", "partner": "v/r", "pairs": -1, "pairs_sha256": "s"},
            "interleaved",
            "not a",
        ),
        (
            {"ab_id": 1, "side": "a", "partner": "v/r", "pairs": 1, "pairs_sha256": "s"},
            "interleaved.ab_id",
            "must",
        ),
        (
            {"side": "a", "partner": "v/r", "pairs": 1, "pairs_sha256": "s"},
            "interleaved.ab_id",
            "missing field",
        ),
    ],
)
def test_an_interleaved_mark_is_typed_and_damage_names_its_field(
    tmp_path: Path, mark: dict[str, object], field: str, message: str
) -> None:
    good = PairingMark("x", "a", "v/r", 2, "00")
    write_manifest(tmp_path, make_manifest(interleaved=good))
    assert read_manifest(tmp_path).interleaved == good
    obj = json.loads((tmp_path / "manifest.json").read_text())
    assert obj["interleaved"] == {
        "ab_id": "x",
        "side": "a",
        "partner": "v/r",
        "pairs": 2,
        "pairs_sha256": "00",
    }
    (tmp_path / "manifest.json").write_text(json.dumps({**obj, "interleaved": mark}))
    with pytest.raises(ManifestError, match=re.escape(f"manifest.json:{field}: {message}")) as info:
        read_manifest(tmp_path)
    assert info.value.exit_code == 2 and info.value.field == field


def test_a_probe_s_facts_are_every_probe_field_as_the_manifest_held_them() -> None:
    """ProbeFacts names every ProbeResult field (a new probe fact is typed in the manifest too), and a probe's
    facts write the dict the probe itself writes (the manifest's `probe` keeps its keys)."""
    from dataclasses import fields

    from eval.records.cache_model import CacheModel
    from eval.run.probe import Capability, ProbeResult

    assert {f.name for f in fields(ProbeResult)} == {f.name for f in fields(ProbeFacts)} - {"part_version"}
    probe = ProbeResult(model="m", model_ids=["m"], block_size=16, warnings=["w"], version="0.1")
    probe.capabilities["tokenize"] = Capability(True, False, "POST /tokenize", fix="")
    probe.cache_model = CacheModel(kind="blocks", block_size=16, evidence="saw 16")
    facts = probe.facts()
    assert (
        facts.capabilities["tokenize"].detail == "POST /tokenize" and facts.cache_model == probe.cache_model
    )
    assert facts.to_dict() == json.loads(json.dumps(probe.to_dict()))
