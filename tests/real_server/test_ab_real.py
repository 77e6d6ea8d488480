"""`lbeval ab` on two real vLLM CPU servers at once: `lbeval ab cpu-smollm2 cpu-smollm2 --spec-a cpu-smollm2
--spec-b cpu-smollm2` (two servers of about 3.6 GB each, one active at a time), 4 longbench-mini inputs
(2 Qasper, 2 GovReport), one-token timing only with 2 repetitions: 8 pairs, 32 requests.

Expected values come from the command line and vLLM's rules (whole blocks of 128 tokens, never the last prompt
token), never from a run: both run folders complete with every planned record ok; every pair ran both sides one
right after the other, the pairs never overlap in time, and each input's two pairs are one AB and one BA (ABBA
in blocks of two); the two sides were two servers (two ports, two logs, two process start times); every timing
request had its cache state (cold 0 cached, warm the full blocks); `lbeval compare` on the two runs shows the
paired timing section with numbers and the drift reading.

The test does not use the session's `real_server` fixture: `lbeval ab` starts and stops its own two servers
(in a temporary working folder, where the specs' server logs land under --out: `runs/servers/{name}-{port}.log`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval.cli import main
from eval.records.ab_pairs import PairRecord, read_pairs
from eval.records.final import select_final
from eval.records.run_folder import LoadedRun, load_run
from eval.records.types import RequestRecord
from tests.real_server.conftest import build_server

pytestmark = pytest.mark.real_server

BLOCK = 128
PER_DATASET = 2
REPS = 2
SPEC = "cpu-smollm2"


def full_blocks(prompt_tokens: int) -> int:
    return (prompt_tokens - 1) // BLOCK * BLOCK


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """Run the A/A session once: (work folder, run folder a, run folder b)."""
    build_server()
    work = tmp_path_factory.mktemp("ab_real")
    inputs = work / "inputs.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)  # the working folder: nothing lands in the clone
        code = main(
            ["prepare", "--source", "mini", "--datasets", "qasper,gov_report", "--n", str(PER_DATASET),
             "--no-truncate", "--out", str(inputs)]
        )  # fmt: skip
        assert code == 0
        code = main(
            ["ab", SPEC, SPEC, "--spec-a", SPEC, "--spec-b", SPEC, "--inputs", str(inputs),
             "--out", str(work / "runs"), "--passes", "timing", "--timing-reps", str(REPS), "--run-id", "aa",
             "--quiet", "--scenarios", "cache"]
        )  # fmt: skip
        assert code == 0
    yield work, work / "runs" / SPEC / "aa-a", work / "runs" / SPEC / "aa-b"


def finals(run: LoadedRun) -> list[RequestRecord]:
    return list(select_final(run.records).final.values())


def test_both_runs_complete_every_record_ok(session: tuple[Path, Path, Path]) -> None:
    _, dir_a, dir_b = session
    n_inputs = 2 * PER_DATASET
    for run_dir in (dir_a, dir_b):
        run = load_run(run_dir)
        assert run.manifest.complete, run.manifest.stats
        recs = finals(run)
        assert len(recs) == run.manifest.expected_records == n_inputs * REPS * 2
        assert all(r.status == "ok" for r in recs), [(r.pass_name, r.error) for r in recs if r.status != "ok"]
        assert Counter(r.pass_name for r in recs) == {
            "timing_cold": n_inputs * REPS,
            "timing_warm": n_inputs * REPS,
        }
        assert all(len(r.output_token_ids or []) == 1 for r in recs)


def test_every_pair_adjacent_balanced_and_in_order(session: tuple[Path, Path, Path]) -> None:
    _, dir_a, dir_b = session
    pairs = read_pairs(dir_a)
    assert pairs == read_pairs(dir_b)  # the same pairing in both run folders
    assert len(pairs) == 2 * PER_DATASET * REPS
    assert all(p.adjacent and p.kind == "timing" for p in pairs)

    def span(p: PairRecord) -> tuple[float, float, float, float]:
        first, second = (p.a, p.b) if p.order == "AB" else (p.b, p.a)
        assert None not in (first.start, first.end, second.start, second.end)
        return first.start or 0.0, first.end or 0.0, second.start or 0.0, second.end or 0.0

    spans = sorted(span(p) for p in pairs)
    for s1, e1, s2, e2 in spans:
        assert s1 <= e1 <= s2 <= e2  # the side sent first finished before the other started
    for prev, nxt in zip(spans, spans[1:], strict=False):
        assert prev[3] <= nxt[0]  # pairs do not overlap
    per_input: dict[str, Counter[str]] = {}
    for p in pairs:
        per_input.setdefault(p.example_id, Counter())[p.order] += 1
        assert len(p.a.seqs) == len(p.b.seqs) == 2  # one unit per side: timing_cold then timing_warm
    assert len(per_input) == 2 * PER_DATASET
    assert all(c == {"AB": 1, "BA": 1} for c in per_input.values()), per_input


def test_the_two_sides_were_two_servers(session: tuple[Path, Path, Path]) -> None:
    work, dir_a, dir_b = session
    servers = [json.loads((d / "servers.jsonl").read_text()) for d in (dir_a, dir_b)]
    assert all(s["spec"] == SPEC for s in servers)
    assert servers[0]["port"] != servers[1]["port"]
    assert servers[0]["log"] != servers[1]["log"]
    for s in servers:
        assert (work / s["log"]).read_text().count(f"starting {SPEC}") == 1  # one start per log file
    runs = [load_run(d).manifest for d in (dir_a, dir_b)]
    urls = [m.sessions[-1].base_url for m in runs]
    assert urls == [f"http://127.0.0.1:{s['port']}/v1" for s in servers]  # each side sent to its own server
    starts = [m.sessions[-1].server_process_start_time for m in runs]
    assert starts[0] != starts[1]


def test_every_timing_request_had_its_cache_state(session: tuple[Path, Path, Path]) -> None:
    _, dir_a, dir_b = session
    checked = 0
    for run_dir in (dir_a, dir_b):
        for r in finals(load_run(run_dir)):
            n, cached = r.usage.prompt_tokens, r.usage.cached_tokens
            assert n is not None and cached is not None and r.cache_check == "verified"
            want = 0 if r.pass_name == "timing_cold" else full_blocks(n)
            assert cached == want == r.expected_cached_tokens, (r.pass_name, n, cached)
            checked += 1
    assert checked == 2 * 2 * PER_DATASET * REPS * 2


def test_compare_shows_the_paired_timing_section(session: tuple[Path, Path, Path]) -> None:
    work, dir_a, dir_b = session
    out = work / "compare"
    assert main(["compare", str(dir_a), str(dir_b), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    table = summary["tables"]["paired_timing"]
    n_pairs = 2 * PER_DATASET * REPS
    assert f"({n_pairs} of {n_pairs} pairs adjacent in time)" in table["reading"]
    rows = {r["key"]: r["cells"] for r in table["rows"]}
    assert {"warm_prefill_ms", "cold_prefill_ms", "warm_ttft_ms", "cold_ttft_ms"} <= rows.keys()
    for key in ("warm_prefill_ms", "cold_prefill_ms"):
        cells = rows[key]
        assert [cells["pairs"], cells["left out"]] == [n_pairs, 0], cells
        paired, seq = cells["paired change [95% CI]"], cells["sequential-style [95% CI]"]
        assert paired is not None and paired["low"] <= paired["estimate"] <= paired["high"], paired
        assert seq is not None and seq["low"] <= seq["estimate"] <= seq["high"], seq
        trend = cells["paired trend over the session"]
        assert trend is not None and cells["drift"] in ("none", "DRIFT"), cells
    assert "paired ratio" in table["note"] and "warm prefill, server:" in table["note"]  # the drift reading
