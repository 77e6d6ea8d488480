"""`lbeval ab --scenarios ...` against fake servers: every scenario unit is a pair like the cache units.

Expected values come from the plan's definition (eval/records/scenarios.py: one unit per input and scenario,
after that input's cache units; a batch of B is B requests released together on one server; a hitlen prime is
followed by its primed request) and from the fake's rules, never from the code under test.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.score import score_run
from eval.cli import main
from eval.errors import ConfigError
from eval.records.ab_pairs import PairRecord, PairSide, last_pairs, read_pairs
from eval.records.final import select_final
from eval.records.run_folder import RECORDS_NAME, read_manifest, scan_records
from eval.records.types import RequestRecord
from eval.run.ab import AbConfig, execute_ab
from eval.run.config import endpoints
from eval.run.scenarios.settings import ScenarioSettings
from tests.eval.batch_hook import announced_batches
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import BatchEffect, FakeServer

BLOCK = 16
WORDS = (40, 47, 55)  # chat prompt tokens on the fake: words + 19
HIT_LENGTHS = (15, 17, 32, 33)
REPEATS = 3
ALL = ("cache", "batch", "hitlen", "repeats", "traffic")
SCENARIOS = ScenarioSettings(scenarios=ALL, batch_sizes=(1, 3), repeats=REPEATS, hit_lengths=HIT_LENGTHS)
CACHE_KINDS = ("main", "timing")
TIMING_REPS = 2
# requests per input and scenario unit, from eval/records/scenarios.py's costs
UNIT_REQUESTS = {"batch": 2 + 2 * 3, "hitlen": 1 + 2 * len(HIT_LENGTHS), "repeats": 2 * REPEATS, "traffic": 6}


def _records(run_dir: Path) -> list[RequestRecord]:
    return scan_records(run_dir / RECORDS_NAME).records


def _config(a: FakeServer, b: FakeServer, tmp_path: Path, s: ScenarioSettings = SCENARIOS) -> AbConfig:
    rows = [make_row(i, words=w) for i, w in enumerate(WORDS)]
    inputs = write_rows(tmp_path / "inputs.jsonl", rows)
    ca = config_for(
        a,
        inputs,
        tmp_path / "runs",
        variant="base",
        passes=("cold", "warm", "timing"),
        timing_reps=TIMING_REPS,
    )
    ca = replace(ca, scenarios=s)
    return AbConfig(ca, replace(ca, variant="var", topology=endpoints(b.base_url)), seed=11, quiet=True)


def _sides(p: PairRecord) -> list[tuple[str, PairSide]]:
    first, second = ("a", "b") if p.order == "AB" else ("b", "a")
    return [(first, getattr(p, first)), (second, getattr(p, second))]


def _end(r: RequestRecord) -> float:
    assert r.timings is not None
    return r.timings.sent_at + (r.timings.done_s or 0.0)


def test_scenario_units_are_pairs_adjacent_balanced_and_after_the_cache_units(tmp_path: Path) -> None:
    with FakeServer(block_size=BLOCK) as a, FakeServer(block_size=BLOCK) as b:
        da, db = execute_ab(_config(a, b, tmp_path))
    assert read_manifest(da).complete and read_manifest(db).complete
    pairs = read_pairs(da)
    assert pairs == read_pairs(db)
    n = len(WORDS)
    assert Counter(p.kind for p in pairs) == {
        "main": n,
        "timing": n * TIMING_REPS,
        **dict.fromkeys(UNIT_REQUESTS, n),
    }
    by_seq = {"a": {r.seq: r for r in _records(da)}, "b": {r.seq: r for r in _records(db)}}
    for p in pairs:
        assert p.adjacent
        (s1, first), (s2, second) = _sides(p)
        recs1 = [by_seq[s1][s] for s in first.seqs]
        recs2 = [by_seq[s2][s] for s in second.seqs]
        # the same unit on both servers, whole: the same requests in the same order
        assert [(r.pass_name, r.repetition) for r in recs1] == [(r.pass_name, r.repetition) for r in recs2]
        if p.kind in UNIT_REQUESTS:
            assert len(recs1) == UNIT_REQUESTS[p.kind] and {r.scenario for r in recs1} == {p.kind}
        # the first side's whole unit (every batch included) ends before the second side's starts
        assert first.start is not None and second.start is not None and first.end is not None
        assert all(first.start <= r.timings.sent_at for r in recs1 if r.timings)
        assert max(_end(r) for r in recs1) <= first.end <= second.start
        assert all(second.start <= r.timings.sent_at for r in recs2 if r.timings)
    for prev, nxt in zip(pairs, pairs[1:], strict=False):
        assert min(s.start or 0 for s in (nxt.a, nxt.b)) >= max(s.end or 0 for s in (prev.a, prev.b))
    for ex in {p.example_id for p in pairs}:
        mine = [p for p in pairs if p.example_id == ex]
        kinds = [p.kind for p in mine]
        assert kinds[: 1 + TIMING_REPS] == ["main", "timing", "timing"]  # cache units first, in plan order
        assert kinds[1 + TIMING_REPS :] == list(UNIT_REQUESTS)  # then one unit per scenario, in order
        orders = [p.order for p in mine]  # 7 pairs: blocks of two are AB/BA or BA/AB, the last one alone
        assert all(orders[j] != orders[j + 1] for j in range(0, len(orders) - 1, 2))
        assert abs(orders.count("AB") - orders.count("BA")) == 1
    for side, run_dir in (("a", da), ("b", db)):
        sel = select_final(_records(run_dir))
        assert (
            len(sel.final) == len(by_seq[side]) == read_manifest(run_dir).expected_records
        )  # nothing re-sent
        assert all(r.status == "ok" for r in sel.final.values())
        recs = sorted(by_seq[side].values(), key=lambda r: r.seq)
        for k, r in enumerate(recs):  # each prime is followed by its primed request on the same server
            if r.pass_name == "hitlen_prime":
                nxt = recs[k + 1]
                assert (nxt.pass_name, nxt.repetition, nxt.example_id) == (
                    "hitlen_full",
                    r.repetition,
                    r.example_id,
                )
                assert (
                    nxt.usage is not None
                    and nxt.usage.cached_tokens == r.variation["hit_len"] // BLOCK * BLOCK
                )


class PeerCounting(FakeServer):
    """Notes how many other generation requests each request saw in flight on this server."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.peers: list[int] = []

    def in_batch(self, body: dict[str, Any]) -> int:
        peers = super().in_batch(body)
        with self.lock:
            self.peers.append(peers)
        return peers


def test_a_batch_runs_whole_on_one_server(tmp_path: Path) -> None:
    """Batches of 3, each announced to the server it is sent to, which holds every member until all 3 have
    arrived (a member sent elsewhere, or one sent only after another returned, would never complete it): each
    of a batch's 3 requests is one of 3 on its own server, 2 inputs x 2 batches (cold, warm) x 3 requests = 12
    per server; the alone ones are in none. By arrivals, not a time window, so whatever the machine's load."""
    s = ScenarioSettings(scenarios=("batch",), batch_sizes=(1, 3), inputs=2)
    with PeerCounting(block_size=BLOCK) as a, PeerCounting(block_size=BLOCK) as b:
        for fake in (a, b):
            fake.batch_effect = BatchEffect(window_s=None, jitter=0.0)
        with announced_batches(a, b) as sizes:
            da, db = execute_ab(_config(a, b, tmp_path, s))
        peers = {"a": Counter(a.peers), "b": Counter(b.peers)}
    assert sizes == [3] * 8  # 2 inputs x 2 batches x 2 sides
    assert read_manifest(da).complete and read_manifest(db).complete
    for c in peers.values():  # 0: the alone requests (and the probe's); never 1 (a split batch) nor > 2
        assert set(c) == {0, 2} and c[2] == 2 * 2 * 3 and c[0] >= 2 * 2


class InterruptAt(FakeServer):
    """Sends SIGINT to this process (as Ctrl-C would) when its `at`-th hitlen_prime request arrives."""

    def __init__(self, at: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.at = at
        self.primes = 0

    def in_batch(self, body: dict[str, Any]) -> int:
        with self.lock:
            prompt = body.get("prompt")
            probe = str(body.get("cache_salt") or "").startswith("lbeval-probe-")  # the probe's cache model
            if (
                isinstance(prompt, list) and body.get("max_tokens") == 1 and not probe
            ):  # a prime: IDs, one token
                self.primes += 1
                if self.primes == self.at:
                    os.kill(os.getpid(), signal.SIGINT)
        return super().in_batch(body)


def test_resume_after_a_kill_in_the_middle_of_a_scenario_pair(tmp_path: Path) -> None:
    """Ctrl-C inside side b's hitlen unit (at its 2nd prime): the records so far stay, the next session re-runs
    that unit on b (as group 1) and every unit still to run, and both runs complete with one final record per
    slot; the interrupted pair's line is written then, b's side re-run."""
    s = ScenarioSettings(scenarios=("cache", "hitlen"), hit_lengths=(17, 32))
    with FakeServer(block_size=BLOCK) as a, InterruptAt(2, block_size=BLOCK) as b:
        config = _config(a, b, tmp_path, s)
        with pytest.raises(KeyboardInterrupt):
            execute_ab(config)
        da, db = (config.a.out / v for v in ("base", "var"))
        (rda,), (rdb,) = ([x for x in d.iterdir() if x.is_dir()] for d in (da, db))
        partial = [r for r in _records(rdb) if r.scenario == "hitlen"]
        interrupted_ex = partial[-1].example_id
        assert [r.pass_name for r in partial if r.example_id == interrupted_ex][:2] == [
            "hitlen_cold",
            "hitlen_prime",
        ]
        assert [x.outcome for x in read_manifest(rdb).sessions] == ["interrupted"]
        lines_before = read_pairs(rda)
        assert all(p.unit != ("qasper", interrupted_ex, "hitlen", 0) for p in lines_before)
        out_a, out_b = execute_ab(config)
    assert (out_a, out_b) == (rda, rdb)
    for run_dir in (out_a, out_b):
        m = read_manifest(run_dir)
        assert m.complete and [x.outcome for x in m.sessions] == ["interrupted", "complete"]
        sel = select_final(_records(run_dir))
        assert not sel.duplicates and len(sel.final) == m.expected_records
        assert all(r.status == "ok" for r in sel.final.values())
    redone = {
        r.group
        for r in select_final(_records(out_b)).final.values()
        if r.example_id == interrupted_ex and r.scenario == "hitlen"
    }
    assert redone == {1}  # the whole unit again, from its first request
    final = last_pairs(read_pairs(out_a))
    assert read_pairs(out_a) == read_pairs(out_b) and len(final) == len(WORDS) * (1 + TIMING_REPS + 1)
    pair = final[("qasper", interrupted_ex, "hitlen", 0)]
    if pair.rerun is not None:  # a ran first and was complete: only b re-ran
        assert pair.rerun == "b" and pair.order == "AB" and not pair.adjacent and not pair.a.ran
    else:  # b ran first: nothing of a was sent, the whole pair ran again
        assert pair.order == "BA" and pair.adjacent
    assert all(p.adjacent for k, p in final.items() if k != pair.unit)


def test_both_runs_score_and_compare_with_attribution_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeServer(block_size=BLOCK) as a, FakeServer(block_size=BLOCK) as b:
        da, db = execute_ab(_config(a, b, tmp_path))
    n = len(WORDS)
    expected = {"batch": n, "batch_warm": n, "hitlen": n * len(HIT_LENGTHS), "traffic": n}
    for run_dir in (da, db):
        att = score_run(run_dir).scores.attribution
        assert att is not None
        for key, count in expected.items():
            row = att.row(key)
            assert row is not None and row.pairs is not None and row.pairs.n_total == count, key
    assert main(["compare", str(da), str(db), "--out", str(tmp_path / "cmp")]) == 0
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    text = json.dumps(summary)
    assert "Attribution: what caused each difference" in text
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "Attribution: what caused each difference" in report and "Interleaved A/B timing" in report
    capsys.readouterr()


def test_cli_scenario_options_reach_both_sides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i, words=w) for i, w in enumerate(WORDS)])
    with FakeServer(block_size=BLOCK) as s:
        argv = ["ab", "x", "y", "--inputs", str(inputs), "--base-url-a", s.base_url, "--base-url-b", s.base_url,
                "--out", str(tmp_path / "runs"), "--timing-reps", "1", "--quiet", "--scenarios", "cache,repeats,hitlen",
                "--repeats", "2", "--hit-lengths", "17", "--scenario-inputs", "1", "--scenario-max-tokens", "2"]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
    da, db = (Path(line) for line in capsys.readouterr().out.split())
    for run_dir in (da, db):
        settings = read_manifest(run_dir).settings
        assert set(settings.scenarios or ()) == {"cache", "repeats", "hitlen"}
        assert settings.repeats == 2 and settings.hit_lengths == [17]
        assert settings.scenario_inputs == 1 and settings.scenario_max_tokens == 2
    kinds = Counter(p.kind for p in read_pairs(da))
    assert kinds == {"timing": 3, "repeats": 1, "hitlen": 1}


def test_different_scenario_settings_or_plans_are_refused(tmp_path: Path) -> None:
    with FakeServer(block_size=BLOCK) as a, FakeServer(block_size=32) as b:
        config = _config(a, b, tmp_path, ScenarioSettings(scenarios=("hitlen",)))
        other = replace(config, b=replace(config.b, scenarios=ScenarioSettings(scenarios=("repeats",))))
        with pytest.raises(ConfigError, match="same scenarios"):
            execute_ab(other)
        # the same options, but the servers' block sizes differ: default hit lengths differ, named
        with pytest.raises(ConfigError, match=r"plans differ at qasper/ex0 hitlen 0 \(hitlen: give both"):
            execute_ab(config)
