"""`lbeval ab` (eval/run/ab.py) against fake servers: pairing order, adjacency, cold/warm intact, resume, faults."""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from eval.cli import main
from eval.commands.ab import interrupted
from eval.errors import EXIT_CONFIG
from eval.records.ab_pairs import last_pairs, read_pairs
from eval.records.final import select_final
from eval.records.run_folder import PAIRS_NAME, RECORDS_NAME, read_manifest, scan_records
from eval.records.types import RequestRecord
from eval.run.ab import AbConfig, execute_ab, pair_orders, session_order
from eval.run.config import endpoints
from eval.run.steps import plan_units
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer, Fault


def _records(run_dir: Path) -> list[RequestRecord]:
    return scan_records(run_dir / RECORDS_NAME).records


def _ab(a: FakeServer, b: FakeServer, tmp_path: Path, n: int = 3, **kw: object) -> AbConfig:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(n)])
    ca = config_for(a, inputs, tmp_path / "runs", variant="base", passes=("cold", "warm", "timing"), **kw)
    cb = replace(ca, variant="var", topology=endpoints(b.base_url))
    return AbConfig(ca, cb, seed=7)


def test_pair_orders_seeded_and_balanced() -> None:
    units = plan_units(6, ("cold", "warm", "timing"), 3)
    first = pair_orders(units, 1)
    assert first == pair_orders(units, 1)
    assert any(pair_orders(units, s) != first for s in range(2, 6))
    for row in range(6):
        orders = [first[(u.row_index, u.kind, u.repetition)] for u in units if u.row_index == row]
        assert len(orders) == 4 and Counter(orders) == {"AB": 2, "BA": 2}
        assert orders[0] != orders[1] and orders[2] != orders[3]  # blocks of two: ABBA or BAAB


def test_session_order_shuffles_inputs_keeps_each_inputs_units_in_plan_order() -> None:
    units = plan_units(8, ("cold", "warm", "timing"), 2)
    order = session_order(units, 5)
    assert order == session_order(units, 5) and sorted(order, key=units.index) == units
    rows = [u.row_index for u in order]
    assert rows != sorted(rows) and all(rows[k] == rows[k - k % 3] for k in range(len(rows)))  # inputs whole
    for row in range(8):
        assert [u for u in order if u.row_index == row] == [u for u in units if u.row_index == row]


def test_interleaved_pairs_adjacent_and_units_intact(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:
        da, db = execute_ab(_ab(a, b, tmp_path))
    ma, mb = read_manifest(da), read_manifest(db)
    assert ma.complete and mb.complete and da.parent.name == "base" and db.parent.name == "var"
    pairs = read_pairs(da)
    assert pairs == read_pairs(db) and len(pairs) == 3 * 3  # main + 2 timing reps per input
    by_seq = {"a": {r.seq: r for r in _records(da)}, "b": {r.seq: r for r in _records(db)}}
    for p in pairs:
        assert p.adjacent and p.order in ("AB", "BA")
        first, second = ("a", "b") if p.order == "AB" else ("b", "a")
        s1, s2 = getattr(p, first), getattr(p, second)
        recs1 = [by_seq[first][s] for s in s1.seqs]
        recs2 = [by_seq[second][s] for s in s2.seqs]
        # each server's unit intact: cold then warm (or timing_cold then timing_warm), nothing between
        assert [r.pass_name for r in recs1] == [r.pass_name for r in recs2]
        assert [r.pass_name for r in recs1] in (["cold", "warm"], ["timing_cold", "timing_warm"])
        end1 = max(r.timings.sent_at + (r.timings.done_s or 0) for r in recs1 if r.timings)
        start2 = min(r.timings.sent_at for r in recs2 if r.timings)
        assert start2 >= end1  # B's unit starts after A's ends
    for prev, nxt in zip(pairs, pairs[1:], strict=False):
        assert nxt.a.start is not None and prev.a.end is not None and prev.b.end is not None
        assert nxt.b.start is not None
        assert min(nxt.a.start, nxt.b.start) >= max(prev.a.end, prev.b.end)  # pairs do not overlap
    # the records are what lbeval run writes: one final ok record per slot
    assert all(r.status == "ok" for r in select_final(_records(da)).final.values())
    assert len(select_final(_records(db)).final) == ma.expected_records


def test_resume_after_interrupt_reruns_missing_side_and_marks_it(tmp_path: Path) -> None:
    calls = []

    def interrupt(side: str, unit: tuple[int, str, int]) -> None:
        calls.append((side, unit))
        if len(calls) == 5:  # the first side of the third pair has run; its other side has not
            raise KeyboardInterrupt

    with FakeServer() as a, FakeServer() as b:
        config = _ab(a, b, tmp_path)
        with pytest.raises(KeyboardInterrupt):
            execute_ab(config, between=interrupt)
        da, db = execute_ab(config)
    assert read_manifest(da).complete and read_manifest(db).complete
    assert [s.outcome for s in read_manifest(da).sessions] == ["interrupted", "complete"]
    pairs = read_pairs(da)
    assert len(pairs) == 9
    rerun = [p for p in pairs if p.rerun is not None]
    assert len(rerun) == 1 and not rerun[0].adjacent
    assert rerun[0].rerun == calls[4][0].translate(str.maketrans("ab", "ba"))
    assert sum(p.adjacent for p in last_pairs(pairs).values()) == 8
    # nothing sent twice: one final record per slot on both sides, no duplicates
    for d in (da, db):
        sel = select_final(_records(d))
        assert not sel.duplicates and len(sel.final) == read_manifest(d).expected_records


def test_resume_after_a_kill_between_the_two_pair_appends_repairs_the_pairing(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:
        config = _ab(a, b, tmp_path)
        da, db = execute_ab(config)
        pairs_b = db / PAIRS_NAME
        pairs_b.write_text("".join(pairs_b.read_text().splitlines(keepends=True)[:-1]))
        assert len(read_pairs(db)) == len(read_pairs(da)) - 1
        execute_ab(config)  # nothing left to send; the missing line is appended to b's file
    assert read_pairs(da) == read_pairs(db) and len(read_pairs(db)) == 9


def test_fault_on_one_side_is_recorded_and_the_pair_incomplete(tmp_path: Path) -> None:
    with FakeServer() as a, FakeServer() as b:
        b.add_fault(Fault("5xx", match="ex1", times=-1))
        da, db = execute_ab(_ab(a, b, tmp_path))
    assert read_manifest(da).complete and not read_manifest(db).complete
    errors = [r for r in select_final(_records(db)).final.values() if r.status == "error"]
    assert errors and all(r.example_id == "ex1" for r in errors)
    pairs = read_pairs(da)
    bad = [p for p in pairs if not p.complete]
    assert len(bad) == 3 and all(p.example_id == "ex1" and p.a.complete and not p.b.complete for p in bad)


def test_aa_one_server_both_sides_via_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(2)])
    with FakeServer() as s:
        code = main(
            ["ab", "x", "x", "--inputs", str(inputs), "--base-url-a", s.base_url, "--base-url-b", s.base_url,
             "--out", str(tmp_path / "runs"), "--timing-reps", "2", "--seed", "3", "--scenarios", "cache"]
        )  # fmt: skip
    assert code == 0
    da, db = (Path(line) for line in capsys.readouterr().out.split())
    assert da.parent == db.parent and da.name.endswith("-a") and db.name.endswith("-b")
    assert all(p.adjacent for p in read_pairs(da)) and len(read_pairs(db)) == 4
    # compare reads the two A/A runs unchanged, with the paired-in-time figures
    assert main(["compare", str(da), str(db), "--out", str(tmp_path / "cmp")]) == 0
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "Interleaved A/B timing" in report and "Interleaved A/B (one lbeval ab session)" in report


def test_interrupt_lines_say_how_to_resume() -> None:
    lines = interrupted(argparse.Namespace(out=Path("runs")))
    assert len(lines) == 1 and "re-run the same lbeval ab command to resume both runs under runs/" in lines[0]


def test_a_run_folder_paired_with_another_partner_is_refused_not_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """base vs var1, then base vs var2 under the same default run ids: base's folder holds var1's pairing. Resumed,
    every base unit would be complete and var2 would run alone (no adjacent pair, two sessions in one file): the
    second session is refused with one line naming the folder and both partners, and nothing is appended."""
    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(2)])
    with FakeServer() as s:
        common = ["--inputs", str(inputs), "--base-url-a", s.base_url, "--base-url-b", s.base_url, "--out",
                  str(tmp_path / "runs"), "--timing-reps", "2", "--scenarios", "cache", "--passes", "timing"]  # fmt: skip
        assert main(["ab", "base", "var1", *common]) == 0
        da = Path(capsys.readouterr().out.split()[0])
        before = (da / PAIRS_NAME).read_bytes()
        assert main(["ab", "base", "var2", *common]) == EXIT_CONFIG
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(da) in err[0] and "var1/" in err[0] and "var2/" in err[0], err
        assert "--run-id" in err[0] and "Traceback" not in err[0]
        assert (da / PAIRS_NAME).read_bytes() == before
        assert not (tmp_path / "runs" / "var2").exists() or not any(
            (tmp_path / "runs" / "var2").rglob(PAIRS_NAME)
        )
        # the same session again resumes (nothing left to send); a new run id is a new session
        assert main(["ab", "base", "var1", *common]) == 0
        assert main(["ab", "base", "var2", *common, "--run-id", "second"]) == 0
    pairs = read_pairs(tmp_path / "runs" / "base" / "second")
    assert len(pairs) == 4 and all(p.adjacent for p in pairs)
