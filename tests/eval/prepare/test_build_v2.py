"""`lbeval prepare --datasets longbench_v2`: official templates, pred.py's middle truncation, the CoT answer call,
the inputs rows and header, every mode; the v2 row fields validated when the manifest is read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eval.benchmarks.longbench_v2.build import truncate_v2
from eval.benchmarks.longbench_v2.inputs import V2InputFields, v2_fields
from eval.benchmarks.longbench_v2.prompting import insert_cot
from eval.benchmarks.longbench_v2.sources import mini_file
from eval.benchmarks.longbench_v2.spec import V2Options
from eval.cli import main
from eval.errors import ConfigError, DataError
from eval.prepare.benchmark_part import PrepareJob
from eval.prepare.build import PrepareConfig, prepare
from eval.prepare.data_source import DataSource
from eval.prepare.inputs import InputRow, read_inputs, sha256_text, write_inputs
from tests.eval.prepare.test_prompting import WordTokenizer

ROOT = Path(__file__).resolve().parents[3]
V2 = ROOT / "prompts" / "v2"


class LongWordTokenizer(WordTokenizer):
    """WordTokenizer with a window of `window` tokens."""

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = window

    def max_model_len(self) -> int | None:
        return self.window


def sample() -> dict[str, dict[str, str]]:
    return {r["_id"]: r for r in json.loads(mini_file().read_text(encoding="utf-8"))}


def official_prompt(template_file: str, row: dict[str, str]) -> str:
    """pred.py's chain, written out again here (independent of eval.benchmarks.longbench_v2.prompting)."""
    template = (V2 / template_file).read_text(encoding="utf-8")
    return (
        template.replace("$DOC$", row["context"].strip())
        .replace("$Q$", row["question"].strip())
        .replace("$C_A$", row["choice_A"].strip())
        .replace("$C_B$", row["choice_B"].strip())
        .replace("$C_C$", row["choice_C"].strip())
        .replace("$C_D$", row["choice_D"].strip())
    )


def v2_prepare(tmp_path: Path, mode: str, tokenizer: Any = None, **kw: Any) -> tuple[Any, list[InputRow]]:
    kw.setdefault("n", None)
    cfg = PrepareConfig(
        source=DataSource("mini"), datasets=["longbench_v2"], seed=7, out=tmp_path / f"{mode}.jsonl",
        tokenizer=tokenizer, benchmark_options={"longbench_v2": V2Options(mode)}, **kw,
    )  # fmt: skip
    header, rows = prepare(cfg)
    assert read_inputs(cfg.out) == (header, rows)  # what was written reads back, every field validated
    return header, rows


TEMPLATE_OF = {"0shot": "0shot.txt", "cot": "0shot_cot.txt", "nocontext": "0shot_no_context.txt"}


@pytest.mark.parametrize("mode", ["0shot", "cot", "nocontext"])
def test_untruncated_prompts_are_the_official_ones(tmp_path: Path, mode: str) -> None:
    header, rows = v2_prepare(tmp_path, mode)
    data = sample()
    assert sorted(r.id for r in rows) == sorted(data) and header.datasets == ["longbench_v2"]
    for row in rows:
        src = data[row.id]
        assert row.prompt == official_prompt(TEMPLATE_OF[mode], src)
        assert row.prompt_sha256 == sha256_text(row.prompt)
        own = v2_fields(row)
        assert (row.answers, own.difficulty, own.length_class) == (
            [src["answer"]],
            src["difficulty"],
            src["length"],
        )
        assert (row.mode, own.v2_mode, row.all_classes, row.truncated) == ("chat", mode, None, False)
        assert row.length == len(src["context"].split())
        assert (row.prompt_tokens, own.original_tokens) == (None, None)  # --no-truncate
        if mode == "cot":
            assert (row.max_tokens, row.answer_max_tokens) == (1024, 128)
            assert row.answer_template is not None
            reasoning = "  The lamp is lit by Bo.  "
            official_second = official_prompt("0shot_cot_ans.txt", src).replace("$COT$", reasoning.strip())
            assert insert_cot(row.answer_template, reasoning) == official_second
        else:
            assert (row.max_tokens, row.answer_max_tokens, row.answer_template) == (128, None, None)
    assert header.max_tokens == {"longbench_v2": 1024 if mode == "cot" else 128}
    extra = header.extra["longbench_v2"]
    assert extra["mode"] == mode and extra["answer_max_tokens"] == (128 if mode == "cot" else None)
    assert set(extra["template_sha256"]) == (
        {"0shot_cot.txt", "0shot_cot_ans.txt"} if mode == "cot" else {TEMPLATE_OF[mode]}
    )
    assert header.source.kind == "mini" and header.source.note == "not LongBench data"
    assert header.source.files["longbench_v2"].rows == 6


def test_every_mode_selects_the_same_seeded_subset(tmp_path: Path) -> None:
    picks = {m: [r.id for r in v2_prepare(tmp_path, m, n=3)[1]] for m in ("0shot", "cot", "nocontext")}
    assert picks["0shot"] == picks["cot"] == picks["nocontext"] and len(picks["0shot"]) == 3
    other = prepare(
        PrepareConfig(
            source=DataSource("mini"), datasets=["longbench_v2"], n=3, seed=8, out=tmp_path / "s8.jsonl"
        )
    )[1]
    assert [r.id for r in other] != picks["0shot"]


def test_middle_truncation_keeps_the_first_and_last_halves_of_the_whole_prompt(tmp_path: Path) -> None:
    window = 301  # odd budgets: pred.py keeps one more token from the end
    tok = LongWordTokenizer(window)
    header, rows = v2_prepare(tmp_path, "0shot", tok)
    budget = window - 128 - 5  # output limit, chat overhead (WordTokenizer: 5)
    assert budget == 168 and header.max_input_tokens == {"longbench_v2": budget}
    data = sample()
    for row in rows:
        full = official_prompt("0shot.txt", data[row.id])
        words = full.split()
        assert row.truncated and v2_fields(row).original_tokens == len(words) + 1  # + BOS
        # ids = [BOS] + words; keep ids[:84] (BOS + 83 words) and ids[-84:] (the last 84 words); decode drops BOS
        assert row.prompt == " ".join(words[:83] + words[-84:])
        assert row.prompt_tokens == 1 + 83 + 84 <= budget
        assert row.prompt.startswith("Please read the following text")
        assert row.prompt.endswith('"The correct answer is (insert answer here)".')


def test_an_odd_budget_keeps_one_more_token_from_the_end() -> None:
    tok = WordTokenizer()
    cut = truncate_v2("a b c d e f g h", tok, 5)  # ids [BOS a..h]: first 2 (BOS, a), last 3 (f g h)
    assert (cut.text, cut.original_tokens, cut.tokens, cut.truncated) == ("a f g h", 9, 5, True)
    assert truncate_v2("a b", tok, 5) == type(cut)("a b", 3, 3, False)


class MergingTokenizer(WordTokenizer):
    """Decoding the two halves joins "x" and "y" into "xy", which encodes as two extra tokens."""

    def encode(self, text: str) -> list[int]:
        return [t for w in text.split() for t in ([self._id(w)] * (3 if w == "xy" else 1))]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.inverse[i] for i in ids)


def test_a_cut_that_grows_when_re_tokenized_is_made_shorter() -> None:
    cut = truncate_v2("a b x q q q q y c d", MergingTokenizer(), 6)
    assert cut.tokens <= 6 and cut.truncated


def test_the_cot_answer_call_must_fit_the_window(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"CoT answer call needs \d+ prompt tokens plus up to 1024 of reasoning"
    ):
        v2_prepare(tmp_path, "cot", LongWordTokenizer(1200))
    header, rows = v2_prepare(tmp_path, "cot", LongWordTokenizer(1200), max_tokens={"longbench_v2": 256})
    assert {r.max_tokens for r in rows} == {256} and {r.answer_max_tokens for r in rows} == {128}
    assert header.extra["longbench_v2"]["answer_max_input_tokens"] == 1200 - 128 - 5
    assert all(r.prompt_tokens is not None and r.prompt_tokens <= 1200 - 256 - 5 for r in rows)


def test_v1_and_v2_in_one_manifest(fixture_data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "mixed.jsonl"
    code = main(
        ["prepare", "--source", "mini", "--datasets", "qasper,longbench_v2", "--n", "2", "--v2-mode", "cot",
         "--no-truncate", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    header, rows = read_inputs(out)
    assert [r.dataset for r in rows] == ["qasper", "qasper", "longbench_v2", "longbench_v2"]
    assert header.source.kind == "mini" and set(header.source.files) == {"qasper", "longbench_v2"}
    v1_line = out.read_text(encoding="utf-8").splitlines()[1]
    assert "v2_mode" not in v1_line and "answer_template" not in v1_line  # v1 lines as schema 2 wrote them


def test_data_dir_file_or_folder_and_the_cli_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "v2data"
    folder.mkdir()
    (folder / "data.json").write_bytes(mini_file().read_bytes())
    for given in (folder, folder / "data.json"):
        out = tmp_path / "d.jsonl"
        args = [
            "prepare",
            "--data-dir",
            str(given),
            "--datasets",
            "longbench_v2",
            "--n",
            "all",
            "--no-truncate",
        ]
        assert main([*args, "--out", str(out)]) == 0
        header, rows = read_inputs(out)
        assert header.source.kind == "data_dir" and len(rows) == 6
        assert header.source.files["longbench_v2"].sha256 == header.source.sha256
    assert "wrote 6 inputs (longbench_v2: 6; 0 truncated)" in capsys.readouterr().out


def test_an_unknown_mode_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--v2-mode: unknown mode 'rag'"):
        v2_prepare(tmp_path, "rag")


def test_prepare_carries_a_benchmark_s_options_without_naming_them(tmp_path: Path) -> None:
    """prepare's config and job hold no benchmark's own option: v2's mode reaches its part as the V2Options the
    command made, under the benchmark's name; options of the wrong type or for no loaded benchmark are refused."""
    assert [f for f in PrepareConfig.__dataclass_fields__ if "v2" in f] == []
    assert [f for f in PrepareJob.__dataclass_fields__ if "v2" in f] == []
    header, rows = v2_prepare(tmp_path, "nocontext", n=2)
    assert header.extra["longbench_v2"]["mode"] == "nocontext" and {v2_fields(r).v2_mode for r in rows} == {
        "nocontext"
    }
    default, _ = prepare(
        PrepareConfig(DataSource("mini"), ["longbench_v2"], n=1, seed=7, out=tmp_path / "d.jsonl")
    )
    assert default.extra["longbench_v2"]["mode"] == "0shot"  # no options given: the benchmark's default
    with pytest.raises(TypeError, match="longbench_v2's prepare options must be V2Options, got str"):
        prepare(PrepareConfig(DataSource("mini"), ["qasper"], n=1, seed=7, out=tmp_path / "t.jsonl",
                              benchmark_options={"longbench_v2": "cot"}))  # fmt: skip
    with pytest.raises(ValueError, match="prepare options for 'longbench_v3', which is no loaded benchmark"):
        prepare(PrepareConfig(DataSource("mini"), ["qasper"], n=1, seed=7, out=tmp_path / "u.jsonl",
                              benchmark_options={"longbench_v3": V2Options()}))  # fmt: skip
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "u.jsonl").exists()


def test_a_bad_v2_data_file_names_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = json.loads(mini_file().read_text(encoding="utf-8"))
    rows[2]["answer"] = "E"
    bad = tmp_path / "data.json"
    bad.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    line = bad.read_text().splitlines().index("  {", 2 * 1) + 1
    starts = [i + 1 for i, text in enumerate(bad.read_text().splitlines()) if text == "  {"]
    assert line == starts[1]
    code = main(
        [
            "prepare",
            "--data-dir",
            str(bad),
            "--datasets",
            "longbench_v2",
            "--no-truncate",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == DataError.exit_code
    err = capsys.readouterr().err
    assert f"{bad}:{starts[2]}:answer: 'E' is not one of A, B, C, D (row 2)" in err


# ---------------------------------------------------------------- the v2 fields when the manifest is read


def good_rows(tmp_path: Path) -> tuple[Any, list[InputRow]]:
    header, rows = v2_prepare(tmp_path, "cot", n=2)
    return header, rows


BAD: list[tuple[str, dict[str, Any], str, str]] = [
    # (case, changes to a cot row, field, message)
    ("answer not a letter", {"answers": ["E"]}, "answers", "must be one answer letter"),
    ("two answers", {"answers": ["A", "B"]}, "answers", "must be one answer letter"),
    ("classes", {"all_classes": ["A"]}, "all_classes", "must be null on a v2 row"),
    ("raw mode", {"mode": "raw"}, "mode", "must be 'chat' on a v2 row"),
    ("no difficulty", {"difficulty": None}, "difficulty", "missing on a longbench_v2 row"),
    ("bad difficulty", {"difficulty": "medium"}, "difficulty", 'must be one of "easy", "hard"'),
    ("bad length", {"length_class": "huge"}, "length_class", 'must be one of "short", "medium", "long"'),
    ("bad mode", {"v2_mode": "rag"}, "v2_mode", 'must be one of "0shot", "cot", "nocontext"'),
    ("cot without template", {"answer_template": None}, "answer_template", "needed on a cot row"),
    ("cot without limit", {"answer_max_tokens": None}, "answer_max_tokens", "needed on a cot row"),
    ("no placeholder", {"answer_template": "no slot"}, "answer_template", "has no $COT$"),
    (
        "0shot with template",
        {"v2_mode": "0shot", "answer_max_tokens": None},
        "answer_template",
        "only on cot rows",
    ),
    ("zero limit", {"answer_max_tokens": 0}, "answer_max_tokens", "must be at least 1"),
]


def changed(row: InputRow, changes: dict[str, Any]) -> InputRow:
    """The row with `changes`, v2's own fields among them changed in its extras."""
    own = {k: v for k, v in changes.items() if k in V2InputFields.__dataclass_fields__}
    rest = {k: v for k, v in changes.items() if k not in own}
    return replace(row, **rest, extras=replace(v2_fields(row), **own))


@pytest.mark.parametrize(("case", "changes", "field", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_v2_rows_are_refused_when_read(
    tmp_path: Path, case: str, changes: dict[str, Any], field: str, message: str
) -> None:
    header, rows = good_rows(tmp_path)
    path = tmp_path / "bad.jsonl"
    write_inputs(path, header, [rows[0], changed(rows[1], changes)])
    with pytest.raises(DataError) as info:
        read_inputs(path)
    assert (info.value.line, info.value.field) == (3, field)
    assert message in str(info.value)


def test_v2_fields_on_a_v1_row_and_v2_rows_in_an_old_schema_are_refused(tmp_path: Path) -> None:
    header, rows = good_rows(tmp_path)
    path = tmp_path / "bad.jsonl"
    v1 = replace(rows[0], dataset="qasper", answers=["x"])
    write_inputs(path, header, [v1])
    with pytest.raises(DataError, match=":2:v2_mode: a LongBench v2 field on a qasper row"):
        read_inputs(path)
    write_inputs(path, replace(header, schema_version=2), rows)
    with pytest.raises(DataError, match=":2:dataset: longbench_v2 rows need inputs schema 3"):
        read_inputs(path)
    # a v1 row with only an answer call's field: v1 has no answer call
    write_inputs(path, header, [replace(v1, extras=None)])
    with pytest.raises(DataError, match=":2:answer_template: an answer call's field on a qasper row"):
        read_inputs(path)
    # the extras are no field of the line: their fields are
    write_inputs(path, header, rows)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1][:-1] + ',"extras":{}}'
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=":2:extras: unknown field"):
        read_inputs(path)


def test_a_v2_line_holds_the_fields_schema_3_wrote(tmp_path: Path) -> None:
    """The row's own fields are written at the top level of its line, None ones left out, as before they were a
    type of the v2 package: the same keys, the same values."""
    header, rows = good_rows(tmp_path)
    line = json.loads((tmp_path / "cot.jsonl").read_text(encoding="utf-8").splitlines()[1])
    common = {"record", "dataset", "id", "prompt", "mode", "max_tokens", "prompt_sha256", "prompt_tokens"}
    common |= {"truncated", "answers", "all_classes", "length", "stop_token_ids"}
    v2 = {"v2_mode", "difficulty", "length_class", "answer_template", "answer_max_tokens"}  # no tokenizer: no
    assert set(line) == common | v2  # original_tokens
    assert (line["v2_mode"], line["difficulty"], line["length_class"]) == (
        "cot", sample()[line["id"]]["difficulty"], sample()[line["id"]]["length"]
    )  # fmt: skip


def test_v2_before_v1_keeps_the_datasets_order_and_v1_s_source(tmp_path: Path) -> None:
    """Each benchmark builds its own datasets; the manifest keeps --datasets order (rows and every per-dataset
    field), the header's source is LongBench v1's (registry order) with both files, extra only v2's."""
    out = tmp_path / "mixed.jsonl"
    cfg = PrepareConfig(DataSource("mini"), ["longbench_v2", "qasper"], n=2, seed=3, out=out,
                        benchmark_options={"longbench_v2": V2Options("cot")})  # fmt: skip
    header, rows = prepare(cfg)
    assert [r.dataset for r in rows] == ["longbench_v2", "longbench_v2", "qasper", "qasper"]
    for per_dataset in (header.selected_ids, header.max_tokens, header.n_taken, header.n_available):
        assert list(per_dataset) == ["longbench_v2", "qasper"]
    assert header.max_tokens == {"longbench_v2": 1024, "qasper": 128}  # cot's reasoning call; qasper's spec
    assert header.source.name == "longbench-mini" and list(header.source.files) == [
        "longbench_v2",
        "qasper",
    ]
    assert list(header.extra) == ["longbench_v2"] and header.extra["longbench_v2"]["mode"] == "cot"
    alone, _ = prepare(replace(cfg, datasets=["longbench_v2"], out=tmp_path / "v2.jsonl"))
    assert alone.source.name == "longbench-v2-mini" and list(alone.source.files) == ["longbench_v2"]
    # v1's prompt files are recorded in every header, also without a v1 dataset (as before the dispatch)
    assert alone.templates.files.keys() == header.templates.files.keys() == {
        "dataset2prompt.json", "dataset2maxlen.json", "datasets.toml"
    }  # fmt: skip
