"""`lbeval prepare` end to end on the LongBench-format fixture (no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.benchmark_registry import NoStageEntry, entries, entry_problems
from eval.cli import main
from eval.errors import ConfigError, DataError
from eval.prepare.benchmark_part import PREPARE_PART
from eval.prepare.build import PrepareConfig, parse_max_tokens, prepare
from eval.prepare.data_source import DataSource
from eval.prepare.inputs import read_inputs
from tests.eval.benchmarks.swap import without_entry
from tests.eval.prepare.test_prompting import WordTokenizer

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = json.loads((ROOT / "prompts" / "dataset2prompt.json").read_text(encoding="utf-8"))


def run_prepare(data_dir: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "prepare",
            "--data-dir",
            str(data_dir),
            "--datasets",
            "qasper,gov_report",
            "--n",
            "4",
            "--seed",
            "1",
            "--no-truncate",
            "--out",
            str(out),
            *extra,
        ]
    )


def raw_rows(data_dir: Path, ds: str) -> dict[str, dict[str, object]]:
    lines = (data_dir / "data" / f"{ds}.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["_id"]: r for r in map(json.loads, lines)}


def test_prompts_equal_official_format_byte_for_byte(fixture_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    assert run_prepare(fixture_data_dir, out) == 0
    header, rows = read_inputs(out)
    assert [len(header.selected_ids[d]) for d in ("qasper", "gov_report")] == [4, 4]
    for row in rows:
        src = raw_rows(fixture_data_dir, row.dataset)[row.id]
        assert row.prompt == TEMPLATES[row.dataset].format(context=src["context"], input=src["input"])
        assert row.answers == src["answers"] and row.length == src["length"]
        assert (row.mode, row.truncated, row.prompt_tokens) == ("chat", False, None)
    assert {r.max_tokens for r in rows if r.dataset == "qasper"} == {128}
    assert {r.max_tokens for r in rows if r.dataset == "gov_report"} == {512}
    assert header.source.files["qasper"].rows == 7
    assert header.tokenizer.to_dict() == {"kind": "none"}


def test_same_call_twice_is_byte_identical_other_seed_other_ids(
    fixture_data_dir: Path, tmp_path: Path
) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    run_prepare(fixture_data_dir, a)
    run_prepare(fixture_data_dir, b)
    assert a.read_bytes() == b.read_bytes()
    main(
        [
            "prepare",
            "--data-dir",
            str(fixture_data_dir),
            "--datasets",
            "qasper",
            "--n",
            "4",
            "--seed",
            "2",
            "--no-truncate",
            "--out",
            str(c),
        ]
    )
    assert read_inputs(a)[0].selected_ids["qasper"] != read_inputs(c)[0].selected_ids["qasper"]


def test_malformed_row_gives_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    good = {
        "input": "q",
        "context": "c",
        "answers": ["a"],
        "length": 1,
        "dataset": "qasper",
        "language": "en",
        "all_classes": None,
        "_id": "a",
    }
    bad = dict(good, _id="b", length="long")
    (data / "qasper.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    code = main(
        [
            "prepare",
            "--data-dir",
            str(tmp_path),
            "--datasets",
            "qasper",
            "--n",
            "1",
            "--seed",
            "1",
            "--no-truncate",
            "--out",
            str(tmp_path / "x.jsonl"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == DataError.exit_code
    assert err == f"lbeval prepare: error: {data / 'qasper.jsonl'}:2:length: must be an integer, got str"
    assert not (tmp_path / "x.jsonl").exists()


def test_mini_source_and_max_tokens_override(tmp_path: Path) -> None:
    out = tmp_path / "m.jsonl"
    code = main(
        [
            "prepare",
            "--source",
            "mini",
            "--datasets",
            "qasper,gov_report",
            "--n",
            "all",
            "--seed",
            "3",
            "--no-truncate",
            "--max-tokens",
            "qasper=32,gov_report=64",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    header, rows = read_inputs(out)
    assert header.source.kind == "mini"
    assert {(r.dataset, r.max_tokens) for r in rows} == {("qasper", 32), ("gov_report", 64)}


def test_truncation_with_tokenizer_and_samsum_stop(fixture_data_dir: Path, tmp_path: Path) -> None:
    tok = WordTokenizer()  # max_model_len 64, chat overhead 5, one token per word plus BOS
    cfg = PrepareConfig(
        source=DataSource("data_dir", path=fixture_data_dir),
        datasets=["qasper", "samsum"],
        n=None,
        seed=1,
        out=tmp_path / "t.jsonl",
        tokenizer=tok,
        max_tokens={"qasper": 20, "samsum": 10},
    )
    header, rows = prepare(cfg)
    assert header.max_input_tokens == {"qasper": 64 - 20 - 5, "samsum": 64 - 10}
    for row in rows:
        src = raw_rows(fixture_data_dir, row.dataset)[row.id]
        words = TEMPLATES[row.dataset].format(context=src["context"], input=src["input"]).split()
        budget = 39 if row.dataset == "qasper" else 54
        if len(words) + 1 <= budget:
            assert not row.truncated and row.prompt_tokens == len(words) + 1
            continue
        half = budget // 2  # BOS takes one slot of the first half
        expected = " ".join(words[: half - 1]) + " ".join(words[-half:])
        assert row.truncated and row.prompt == expected
        assert row.prompt_tokens == len(expected.split()) + 1
    assert any(r.truncated for r in rows)
    assert {tuple(r.stop_token_ids or ()) for r in rows if r.dataset == "samsum"} == {(tok.encode("\n")[-1],)}
    assert {r.stop_token_ids for r in rows if r.dataset == "qasper"} == {None}


def test_parse_max_tokens_errors() -> None:
    assert parse_max_tokens("qasper=512, gov_report=2048") == {"qasper": 512, "gov_report": 2048}
    for bad in ("qasper", "qasper=0", "qasper=x", "nope=3"):
        with pytest.raises(Exception, match="--max-tokens|unknown dataset"):
            parse_max_tokens(bad)


@pytest.mark.parametrize(
    ("n", "header_n", "taken", "warned"),
    [
        ("4", 4, {"qasper": 4, "gov_report": 4}, []),
        ("6", 6, {"qasper": 6, "gov_report": 5}, ["gov_report: --n 6 asked but the data has only 5 rows"]),
        ("100", 100, {"qasper": 7, "gov_report": 5}, [
            "qasper: --n 100 asked but the data has only 7 rows; taking all 7",
            "gov_report: --n 100 asked but the data has only 5 rows; taking all 5",
        ]),
        ("all", None, {"qasper": 7, "gov_report": 5}, []),
    ],
)  # fmt: skip
def test_n_beyond_the_data_warns_and_the_header_says_what_was_taken(
    fixture_data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    n: str,
    header_n: int | None,
    taken: dict[str, int],
    warned: list[str],
) -> None:
    out = tmp_path / "x.jsonl"
    assert run_prepare(fixture_data_dir, out, "--n", n) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == len(warned)
    for line, expected in zip(err, warned, strict=True):
        assert line.startswith("lbeval prepare: warning: " + expected)
    header, rows = read_inputs(out)
    assert (header.n, header.n_taken, header.n_available) == (header_n, taken, {"qasper": 7, "gov_report": 5})
    assert header.schema_version == 3  # schema 3: the LongBench v2 row fields
    assert {ds: len(ids) for ds, ids in header.selected_ids.items()} == taken
    assert len(rows) == sum(taken.values())


def test_a_dataset_listed_twice_is_refused(
    fixture_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        run_prepare(fixture_data_dir, tmp_path / "x.jsonl", "--datasets", "qasper,trec,qasper")
        == ConfigError.exit_code
    )
    assert capsys.readouterr().err == "lbeval prepare: error: --datasets: qasper is listed twice\n"


def test_every_loaded_benchmark_has_a_prepare_part() -> None:
    assert entry_problems({"PREPARE_PART": PREPARE_PART}) == []
    assert list(entries(PREPARE_PART)) == ["longbench", "longbench_v2"]  # the registry's two, in load order


def test_a_benchmark_without_a_prepare_part_is_one_clear_error_before_any_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_entry(monkeypatch, "longbench_v2", PREPARE_PART)
    out = tmp_path / "x.jsonl"
    cfg = PrepareConfig(DataSource("mini"), ["qasper", "longbench_v2"], n=1, seed=1, out=out)
    with pytest.raises(
        NoStageEntry, match=r"'longbench_v2' is LongBench v2's .* no entry in eval/prepare/benchmark_part"
    ):
        prepare(cfg)
    assert not out.exists()
    header, rows = prepare(PrepareConfig(DataSource("mini"), ["qasper"], n=1, seed=1, out=out))  # v1 alone
    assert [r.dataset for r in rows] == ["qasper"] and header.extra == {}
