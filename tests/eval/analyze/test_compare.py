"""lbeval compare: mismatch refusal, the four tables, bootstrap changes, summary.json == report.md numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from eval.analyze.compare import Comparison, MismatchError, compare, divergence_list
from eval.analyze.score import score_run
from eval.cli import main
from eval.report.cells import Blank
from eval.report.tables import build_tables
from eval.report.write import write_reports
from tests.eval.runfactory import RunSpec, base_and_variant, make_rows, write_inputs_file, write_run
from tests.eval.shipped_policy import RUNFACTORY, checked_rules


def _compare(tmp_path: Path, base: RunSpec, variant: RunSpec, **kw: Any) -> Comparison:
    runs = tmp_path / "runs"
    return compare(score_run(write_run(runs, base)), score_run(write_run(runs, variant)), **kw)


def _row(c: Comparison, table: str, key: str) -> list[Any]:
    t = next(t for t in build_tables(c) if t.id == table)
    return next(r.cells for r in t.rows if r.key == key)


def test_refuses_mismatched_runs_naming_each_difference(tmp_path: Path) -> None:
    base, variant = base_and_variant(tmp_path, model="other-model", settings={"seed": 99})
    with pytest.raises(MismatchError) as err:
        _compare(tmp_path, base, variant)
    msg = str(err.value)
    assert "model (base test-model, variant other-model)" in msg
    assert "settings.seed (base 1234, variant 99)" in msg
    assert "pass --allow-mismatch to compare anyway" in msg


def test_refuses_different_inputs(tmp_path: Path) -> None:
    base, variant = base_and_variant(tmp_path)
    other = tmp_path / "other.jsonl"
    write_inputs_file(other, make_rows(n_qasper=3))
    variant.inputs_path, variant.rows = other, make_rows(n_qasper=3)
    with pytest.raises(MismatchError, match=r"inputs_sha256 \(base [0-9a-f]{12}…, variant [0-9a-f]{12}…\)"):
        _compare(tmp_path, base, variant)
    # allowed: compared on the inputs both have; the variant's missing qas03 counts as not identical
    c = _compare(tmp_path / "allowed", base, variant, allow_mismatch=True)
    assert [m.field for m in c.mismatches] == ["inputs_sha256"]
    cross = {x.dataset: x for x in c.cross}
    assert (cross["qasper"].text_equal, cross["qasper"].n_pairs, cross["qasper"].n_total) == (3, 3, 4)
    write_reports(c, tmp_path / "out")


def test_allow_mismatch_compares_with_a_warning(tmp_path: Path) -> None:
    base, variant = base_and_variant(tmp_path, settings={"temperature": 0.7})
    c = _compare(tmp_path, base, variant, allow_mismatch=True)
    assert [m.field for m in c.mismatches] == ["settings.temperature"]
    assert any("compared despite a mismatch in settings.temperature" in w for w in c.warnings)
    out = write_reports(c, tmp_path / "out")
    assert "compared despite a mismatch in settings.temperature" in out[0].read_text()


def test_four_tables_in_order_with_readings(tmp_path: Path) -> None:
    c = _compare(tmp_path, *base_and_variant(tmp_path))
    ids = [t.id for t in build_tables(c)]
    assert ids == ["accuracy", "agreement", "cross", "timing", "cache", "attribution"]
    assert all(t.reading for t in build_tables(c))
    timing = next(t for t in build_tables(c) if t.id == "timing")
    assert (
        "not machine drift" in timing.note and "sequentially" in timing.note and "interleaved" in timing.note
    )
    assert c.execution == "sequential"


def test_timing_change_matches_hand_computation(tmp_path: Path) -> None:
    c = _compare(tmp_path, *base_and_variant(tmp_path))
    ch = c.timing_changes["warm_prefill_ms"]
    # base warm mean 75.5 ms (see test_score); variant 40 + 8 * 2.5 + 0.5 = 60.5 ms -> (60.5 - 75.5) / 75.5
    assert ch is not None and ch.estimate == pytest.approx(100 * (60.5 - 75.5) / 75.5)
    assert ch.low <= ch.estimate <= ch.high < 0 and ch.n_inputs == 6
    assert c.timing_changes["cold_prefill_ms"] is not None
    cells = _row(c, "timing", "warm_prefill_ms")
    assert (cells[0].value, cells[1].value) == (pytest.approx(75.5), pytest.approx(60.5))
    # sequential runs: the headline reports the change and that it may be drift (test_timing_headline.py)
    assert (
        "warm prefill (server) change below (-19.9%"
        in next(t for t in build_tables(c) if t.id == "timing").reading
    )


def test_cross_variant_cold_and_warm_score_change(tmp_path: Path) -> None:
    base, variant = base_and_variant(
        tmp_path,
        texts={("qas02", "cold", 0): "12 languages in total", ("qas01", "warm", 0): "the BLEU metric"},
    )
    c = _compare(tmp_path, base, variant)
    cross = {x.dataset: x for x in c.cross}
    assert (cross["qasper"].text_equal, cross["qasper"].n_total) == (3, 4)
    assert (cross["gov_report"].text_equal, cross["gov_report"].n_total) == (2, 2)
    # variant warm qas01 scores 0.5 instead of 1.0: mean change (0.5 - 1) / 4 = -0.125 -> -12.5 points
    ch = c.warm_changes["qasper"]
    assert ch is not None and ch.estimate == pytest.approx(-12.5) and ch.low <= -12.5 <= ch.high
    assert c.warm_changes["gov_report"] is not None and c.warm_changes["gov_report"].estimate == 0.0
    # qas02 cold: "12 languages in total" vs "12 languages": F1 = 2 * (2/4 * 1) / (2/4 + 1) = 2/3
    # -> variant cold qasper = round(100 * (1 + 1 + 2/3 + 1) / 4, 2) = 91.67
    acc = _row(c, "accuracy", "qasper")
    assert acc[2].value == 100.0 and acc[3].value == 91.67
    kinds = sorted({(d.kind, d.example_id) for d in divergence_list(c)})
    assert kinds == [
        ("cold base/variant", "qas02"),
        ("variant cold/warm", "qas01"),
        ("variant cold/warm", "qas02"),
        ("variant warm/repeat", "qas01"),
    ]


# ---------------------------------------------------------------- summary.json == report.md

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _flatten(value: Any) -> list[float]:
    if value is None or isinstance(value, str | bool):
        return []
    if isinstance(value, dict):
        order = ["k", "n"] if "k" in value else ["estimate", "low", "high"]
        return [float(value[k]) for k in order]
    if isinstance(value, list):
        return [float(v) for v in value]
    return [float(value)]


def _unescape(cell: str) -> str:
    return re.sub(r"\\(.)", r"\1", cell).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _md_tables(md: str) -> dict[str, list[list[str]]]:
    """### N. Title -> rows (cells unescaped enough to read numbers) of the table under it."""
    tables: dict[str, list[list[str]]] = {}
    current = None
    for line in md.splitlines():
        if line.startswith("### "):
            current = line
            tables[current] = []
        elif current and line.startswith("|") and not line.startswith("|---"):
            cells = [_unescape(c.strip()) for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            tables[current].append(cells)
    return tables


def test_summary_json_numbers_equal_the_markdown_tables(tmp_path: Path) -> None:
    base, variant = base_and_variant(
        tmp_path,
        texts={("qas01", "warm", 0): "the BLEU metric", ("gov00", "cold", 0): "The agency reviewed it."},
        shifts={("qas00", "warm", 0): -0.0123456},
        errors={("gov01", "repeat", 0)},
    )
    c = _compare(tmp_path, base, variant)
    md_path, json_path, _ = write_reports(c, tmp_path / "out")
    summary = json.loads(json_path.read_text())
    assert summary["schema_version"] == 1
    md = _md_tables(md_path.read_text())
    checked = 0
    for i, (tid, table) in enumerate(summary["tables"].items(), start=1):
        rows = md[f"### {i}. {table['title']}"]
        header, body = rows[0], rows[1:]
        assert header == table["columns"]
        assert len(body) == len(table["rows"])
        for md_row, js_row in zip(body, table["rows"], strict=True):
            assert len(md_row) == len(header), f"{tid}: a row with a broken cell count: {md_row}"
            for column, text in zip(header[1:], md_row[1:], strict=True):
                value = js_row["cells"][column]
                if isinstance(value, str):
                    assert text == value
                    continue
                expected = _flatten(value)
                shown = [float(x) for x in _NUMBER.findall(text)]
                assert shown == expected, f"{tid}/{js_row['key']}/{column}: md {text!r} json {expected}"
                checked += len(expected)
    assert checked > 60
    # variant cold/warm text: qas01 (warm changed) and gov00 (cold changed) differ -> 4/6
    assert summary["tables"]["agreement"]["rows"][0]["cells"]["variant (patched)"] == {"k": 4, "n": 6}


def test_compare_command_writes_the_three_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, variant = base_and_variant(tmp_path)
    runs = tmp_path / "runs"
    write_run(runs, base), write_run(runs, variant)
    assert main(["compare", "main", "patched", "--runs", str(runs)]) == 0
    out = runs / "compare" / "main__patched"
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.md", "summary.json"]
    # the compact summary ends with the reports' path (tests/eval/report/test_console.py checks the rest)
    assert f"{(out / 'report.html').resolve()} (and report.md, summary.json)" in capsys.readouterr().out


def test_compare_command_mismatch_exits_2_with_the_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, variant = base_and_variant(tmp_path, model="other")
    runs = tmp_path / "runs"
    write_run(runs, base), write_run(runs, variant)
    assert main(["compare", "main", "patched", "--runs", str(runs)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lbeval compare: error: the runs differ in model (base test-model, variant other)")
    assert main(["compare", "main", "patched", "--runs", str(runs), "--allow-mismatch"]) == 0


# ---------------------------------------------------------------- end to end: the runner against the fake server


def test_end_to_end_on_fake_server_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two variants run by `lbeval run`'s runner against the fake server; the variant's server diverges on
    ex1's warm request from token 2 and evicts ex2's blocks before its warm request (a miss, then a retry)."""
    from eval.run.runner import execute_run
    from tests.eval.fake_fixtures import config_for, make_row, write_rows
    from tests.support.fake_server import FakeServer, Fault

    inputs = write_rows(tmp_path / "inputs.jsonl", [make_row(i) for i in range(4)])
    runs = tmp_path / "runs"
    with FakeServer() as server:
        execute_run(config_for(server, inputs, runs, variant="main"))
    with FakeServer() as server:
        server.add_fault(Fault("divergence", match="ex1:", salt_seen=1, max_tokens=6, position=2))
        server.add_fault(Fault("warm_miss", match="ex2:", salt_seen=1, max_tokens=6))
        execute_run(config_for(server, inputs, runs, variant="patched"))
    assert main(["compare", "main", "patched", "--runs", str(runs)]) == 0
    out = runs / "compare" / "main__patched"
    summary = json.loads((out / "summary.json").read_text())
    tables = summary["tables"]
    assert list(tables) == ["accuracy", "agreement", "cross", "timing", "cache", "attribution"]
    variant = "variant (patched)"
    agreement = {r["key"]: r["cells"] for r in tables["agreement"]["rows"]}
    assert agreement["cold_warm_text"] == {"base (main)": {"k": 4, "n": 4}, variant: {"k": 3, "n": 4}}
    # across the variants: the fault hit the variant's warm request only, so cold outputs agree
    cross = {r["key"]: r["cells"] for r in tables["cross"]["rows"]}
    assert cross["cross_cold_text"] == {"base vs variant": {"k": 4, "n": 4}}
    assert cross["cross_warm_text"]["base vs variant"] == {"k": 3, "n": 4}
    assert cross["cross_first_token"]["base vs variant"] == {"k": 16, "n": 16}  # 4 x 2 reps x 2 passes
    assert summary["cross_variant"]["warm"]["divergences"][0]["position"] == 2
    assert agreement["cold_warm_positions"][variant] == [2]
    assert agreement["warm_repeat_text"][variant] == {"k": 3, "n": 4}  # the fault hit warm only
    assert agreement["first_token"][variant] == {"k": 8, "n": 8}  # 4 inputs x 2 timing repetitions
    cache = {r["key"]: r["cells"] for r in tables["cache"]["rows"]}
    assert cache["invalid_warm_attempts"][variant] == 1 and cache["invalid_warm_recovered"][variant] == 1
    assert cache["recorded"][variant] == {"k": 36, "n": 36}  # 4 x (5 + 2 x 2)
    accuracy = {r["key"]: r["cells"] for r in tables["accuracy"]["rows"]}
    assert accuracy["qasper"]["cold outputs identical"] == {"k": 4, "n": 4}
    html = (out / "report.html").read_text()
    assert (
        html.count("<details") == 1
        and "qasper / ex1: variant cold/warm @ token 2, variant warm/repeat" in html
    )
    capsys.readouterr()
    assert main(["gate", "main", "patched", "--runs", str(runs)]) == 1
    text = capsys.readouterr().out
    assert (
        f"gate: FAIL (exit 1): 4 of {checked_rules(*RUNFACTORY)} rules failed: cold_warm_equality, "
        "warm_repeat_equality, no_invalid_warm, "
        "cause_rows [cache_cold_warm, cache_warm_repeat]" in " ".join(text.split())
    )


def test_missing_logprobs_stay_standard_json(tmp_path: Path) -> None:
    # the records codec stores a logprob the server sent as null as NaN; no NaN may reach the reports
    base, variant = base_and_variant(tmp_path, shifts={("qas00", "warm", 0): float("nan")})
    c = _compare(tmp_path, base, variant)
    md_path, json_path, _ = write_reports(c, tmp_path / "out")

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-standard JSON constant {constant}")

    json.loads(json_path.read_text(), parse_constant=refuse)
    assert "nan" not in md_path.read_text().lower().replace("nats", "")


# ---------------------------------------------------------------- base vs variant agreement


def _cross(c: Comparison, key: str) -> Any:
    return _row(c, "cross", key)


def test_cross_variant_identical_runs(tmp_path: Path) -> None:
    c = _compare(tmp_path, *base_and_variant(tmp_path))
    cold = c.cross_agreement["cold"]
    assert cold is not None
    assert (cold.n_total, cold.n_pairs, cold.text_equal, cold.tokens_equal, cold.first_token_equal) == (
        6,
        6,
        6,
        6,
        6,
    )
    assert cold.max_delta == 0.0 and cold.min_overlap == 3 and cold.divergences == []
    # the cross table's one column, "base vs variant" (split from the within-variant table)
    cells = _cross(c, "cross_cold_text")
    assert len(cells) == 1 and (cells[0].k, cells[0].n) == (6, 6)
    assert _cross(c, "cross_cold_max_delta")[0].value == 0.0
    assert _cross(c, "cross_cold_positions")[0].values == ()
    assert (_cross(c, "cross_warm_text")[0].k, _cross(c, "cross_warm_text")[0].n) == (6, 6)
    ft = _cross(c, "cross_first_token")[0]
    assert (ft.k, ft.n) == (24, 24)  # 6 inputs x 2 timing repetitions x (timing_cold, timing_warm)
    # the within-variant table has no cross column and no blank cells
    within = next(t for t in build_tables(c) if t.id == "agreement")
    assert within.columns == ["measure", "base (main)", "variant (patched)"]
    assert not [cell for r in within.rows for cell in r.cells if cell == Blank()]
    reading = next(t for t in build_tables(c) if t.id == "agreement").reading
    assert "base vs variant cold outputs equal 6/6 (token IDs 6/6), max top-k logprob |delta| 0" in reading


def test_cross_variant_logprob_drift_with_same_tokens(tmp_path: Path) -> None:
    # the variant's cold qas01 ("the BLEU score") has its chosen logprob at position 1 moved by 1e-5
    base, variant = base_and_variant(tmp_path, position_shifts={("qas01", "cold", 0): {1: 1e-5}})
    c = _compare(tmp_path, base, variant)
    expected = abs((-0.05 + 1e-5) - (-0.05))  # the factory's chosen logprob, perturbed vs not
    cold = c.cross_agreement["cold"]
    assert cold is not None and (cold.text_equal, cold.tokens_equal, cold.n_total) == (6, 6, 6)
    assert cold.max_delta == expected and cold.min_overlap == 3
    assert _cross(c, "cross_cold_max_delta")[0].value == expected
    warm = c.cross_agreement["warm"]
    assert warm is not None and warm.max_delta == 0.0  # only the variant's cold sample drifted
    md_path, json_path, _ = write_reports(c, tmp_path / "out")
    summary = json.loads(json_path.read_text())
    assert summary["cross_variant"]["cold"]["max_delta"] == expected  # unrounded
    rows = {r["key"]: r["cells"] for r in summary["tables"]["cross"]["rows"]}
    assert rows["cross_cold_max_delta"]["base vs variant"] == 1e-05  # as shown: 3 significant digits
    assert rows["cross_cold_text"]["base vs variant"] == {"k": 6, "n": 6}
    assert "| base cold vs variant cold: max \\|top-k logprob delta\\| | 1e-05 |" in md_path.read_text()


def test_cross_variant_token_divergence_positions(tmp_path: Path) -> None:
    base, variant = base_and_variant(
        tmp_path,
        texts={
            ("qas01", "cold", 0): "the BLEU metric",  # "the BLEU score": token 2 differs
            ("gov01", "cold", 0): "GAO found that the agency lacks a plan. Officials agreed to develop one.",
        },  # "GAO found that the department ...": token 4 differs
    )
    c = _compare(tmp_path, base, variant)
    cold = c.cross_agreement["cold"]
    assert cold is not None
    assert (cold.text_equal, cold.tokens_equal, cold.first_token_equal, cold.n_total) == (4, 4, 6, 6)
    assert [(d.example_id, d.position) for d in cold.divergences] == [("qas01", 2), ("gov01", 4)]
    assert _cross(c, "cross_cold_positions")[0].values == (2, 4)
    near = _cross(c, "cross_cold_near_ties")[0]
    assert (near.k, near.n) == (0, 2)  # the factory's margin is 3.0 nats on both sides
    # logprobs before the divergence are identical; at it the two top-k sets share no token ID
    assert cold.max_delta == 0.0
    # the accuracy table's cold-identical column counts the same pairs
    assert sum(x.text_equal for x in c.cross) == 4
    summary = json.loads(write_reports(c, tmp_path / "out")[1].read_text())
    assert [d["position"] for d in summary["cross_variant"]["cold"]["divergences"]] == [2, 4]


def test_cross_variant_errored_and_missing_records_count_in_n(tmp_path: Path) -> None:
    base, variant = base_and_variant(
        tmp_path, errors={("qas00", "cold", 0)}, missing={("gov00", "cold", 0), ("gov00", "timing_warm", 1)}
    )
    c = _compare(tmp_path, base, variant)
    cold = c.cross_agreement["cold"]
    assert cold is not None
    assert (cold.n_total, cold.n_pairs, cold.errors, cold.missing) == (6, 4, 1, 1)
    assert (cold.text_equal, cold.tokens_equal, cold.first_token_equal) == (4, 4, 4)
    text = _cross(c, "cross_cold_text")[0]
    assert (text.k, text.n) == (4, 6)
    ft = c.cross_agreement["timing_first_token"]
    assert ft is not None and (ft.n_total, ft.first_token_equal, ft.missing) == (24, 23, 1)
    acc = {x.dataset: x for x in c.cross}
    assert (acc["qasper"].text_equal, acc["qasper"].n_total) == (3, 4)
    assert (acc["gov_report"].text_equal, acc["gov_report"].n_total) == (1, 2)
