"""`--tokenizer PATH`: a real Hugging Face tokenizer folder, built here with a known word-level vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.cli import main
from eval.prepare.inputs import read_inputs
from eval.prepare.tokenizers import LocalTokenizer, chat_overhead

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

CHAT_TEMPLATE = "{% for m in messages %}<|user|> {{ m['content'] }} <|end|>{% endfor %}<|assistant|>"


def build_tokenizer(folder: Path, words: list[str]) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, "<bos>": 1, "<|user|>": 2, "<|end|>": 3, "<|assistant|>": 4}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<bos>")
    fast.add_special_tokens({"additional_special_tokens": ["<|user|>", "<|end|>", "<|assistant|>"]})
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    return folder


def test_local_tokenizer_round_trip_and_overhead(tmp_path: Path) -> None:
    path = build_tokenizer(tmp_path / "tok", ["a", "b", "c"])
    tok = LocalTokenizer(str(path), max_model_len=32)
    assert tok.encode("a b c") == [5, 6, 7]
    assert tok.decode([5, 6]) == "a b"
    # the template adds <|user|>, <|end|>, <|assistant|> around the words: 3 tokens
    assert chat_overhead(tok) == 3
    assert tok.describe() == {"kind": "local", "path": str(path), "max_model_len": 32}


def test_prepare_with_local_tokenizer_truncates_to_budget(fixture_data_dir: Path, tmp_path: Path) -> None:
    rows = [
        json.loads(line) for line in (fixture_data_dir / "data" / "gov_report.jsonl").read_text().splitlines()
    ]
    template = json.loads(Path("prompts/dataset2prompt.json").read_text())["gov_report"]
    all_words = sorted({w for r in rows for w in template.format(context=r["context"], input="").split()})
    path = build_tokenizer(tmp_path / "tok", all_words)
    out = tmp_path / "in.jsonl"
    code = main(
        [
            "prepare",
            "--data-dir",
            str(fixture_data_dir),
            "--datasets",
            "gov_report",
            "--n",
            "2",
            "--seed",
            "9",
            "--tokenizer",
            str(path),
            "--max-model-len",
            "80",
            "--max-tokens",
            "gov_report=20",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    header, inputs = read_inputs(out)
    budget = 80 - 20 - 3
    assert header.max_input_tokens == {"gov_report": budget}
    by_id = {r["_id"]: r for r in rows}
    for row in inputs:
        words = template.format(context=by_id[row.id]["context"], input="").split()
        assert len(words) > budget and row.truncated
        half = budget // 2
        assert row.prompt == " ".join(words[:half]) + " ".join(words[-half:])
