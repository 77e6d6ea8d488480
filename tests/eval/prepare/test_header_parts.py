"""The inputs header's nested parts (source, templates, tokenizer: eval/prepare/inputs.py) are typed: a header as
`lbeval prepare` writes it reads back and is written again byte for byte, an older sparse one too, and a damaged
field of a part is one line naming file, line and field (exit 65)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.errors import EXIT_DATA, DataError
from eval.prepare.inputs import (
    InputsSource,
    InputsTemplates,
    InputsTokenizer,
    SourceFile,
    read_inputs,
    write_inputs,
)

# a header line as `lbeval prepare` writes it (LongBench v1 and v2 from the hub, a server tokenizer), written by
# hand: canonical JSON (sorted keys, no spaces), the bytes the writer must reproduce
FULL = (
    '{"datasets":["qasper","longbench_v2"],"extra":{},"git_commit":"abc","git_dirty":false,"lbeval_version":"0.9.0",'
    '"max_input_tokens":{"longbench_v2":3000,"qasper":3000},"max_tokens":{"longbench_v2":128,"qasper":128},'
    '"n":1,"n_available":{"longbench_v2":503,"qasper":200},"n_taken":{"longbench_v2":1,"qasper":1},'
    '"record":"inputs_header","schema_version":3,"seed":1,"selected_ids":{"longbench_v2":["v"],"qasper":["q"]},'
    '"source":{"file":"data.zip","files":{"longbench_v2":{"file":"hf://datasets/THUDM/LongBench-v2@r/data.json",'
    '"pinned_sha256":null,"rows":503,"sha256":"22"},"qasper":{"file":"data.zip!data/qasper.jsonl","rows":200,'
    '"sha256":"11"}},"kind":"hub","repo":"THUDM/LongBench","revision":"r","sha256":"00"},'
    '"templates":{"files":{"dataset2prompt.json":"aa"},"origin":"THUDM/LongBench config","template_sha256":'
    '{"qasper":"bb"}},"tokenizer":{"base_url":"http://127.0.0.1:8000/v1","kind":"server","max_model_len":null,'
    '"model":"m"}}\n'
)
# a schema 1 header of the mini samples with no tokenizer: no n_taken / n_available, no files, no templates
SPARSE = (
    '{"datasets":["qasper"],"git_commit":null,"git_dirty":null,"lbeval_version":"0.1.0","max_input_tokens":null,'
    '"max_tokens":{"qasper":128},"n":null,"record":"inputs_header","schema_version":1,"seed":7,'
    '"selected_ids":{"qasper":["q"]},"source":{"kind":"mini","name":"longbench-mini","note":"not LongBench data"},'
    '"templates":{},"tokenizer":{"kind":"none"}}\n'
)


def _file(tmp_path: Path, header_line: str) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text(header_line, encoding="utf-8")
    return path


def test_a_header_reads_and_writes_back_byte_for_byte(tmp_path: Path) -> None:
    header, rows = read_inputs(_file(tmp_path, FULL))
    write_inputs(tmp_path / "again.jsonl", header, rows)
    assert (tmp_path / "again.jsonl").read_text(encoding="utf-8") == FULL


def test_an_older_sparse_header_writes_its_parts_back_as_they_were(tmp_path: Path) -> None:
    """A schema 1 header's parts are written as read (the header itself gains its newer fields' defaults)."""
    header, rows = read_inputs(_file(tmp_path, SPARSE))
    write_inputs(tmp_path / "again.jsonl", header, rows)
    again, old = json.loads((tmp_path / "again.jsonl").read_text(encoding="utf-8")), json.loads(SPARSE)
    assert {k: again.pop(k) for k in ("extra", "n_taken", "n_available")} == {
        "extra": {}, "n_taken": {}, "n_available": {},
    }  # fmt: skip
    assert again == old and json.dumps(again, sort_keys=True) == json.dumps(old, sort_keys=True)


def test_the_parts_read_typed(tmp_path: Path) -> None:
    full, _ = read_inputs(_file(tmp_path, FULL))
    assert full.source == InputsSource(
        kind="hub", repo="THUDM/LongBench", revision="r", file="data.zip", sha256="00",
        files={
            "longbench_v2": SourceFile("hf://datasets/THUDM/LongBench-v2@r/data.json", "22", 503, None),
            "qasper": SourceFile("data.zip!data/qasper.jsonl", "11", 200),
        },
    )  # fmt: skip
    assert list(full.source.files) == ["longbench_v2", "qasper"]
    assert full.templates == InputsTemplates(
        "THUDM/LongBench config", {"dataset2prompt.json": "aa"}, {"qasper": "bb"}
    )
    assert full.tokenizer == InputsTokenizer("server", base_url="http://127.0.0.1:8000/v1", model="m")
    sparse, _ = read_inputs(_file(tmp_path, SPARSE))
    assert sparse.source == InputsSource(kind="mini", name="longbench-mini", note="not LongBench data")
    assert (sparse.templates, sparse.tokenizer) == (InputsTemplates(), InputsTokenizer(kind="none"))


def test_a_part_made_in_code_writes_what_is_set() -> None:
    """Not read from a file: every field that is set, none that is not (the fixtures' {"kind": "test"})."""
    assert InputsSource(kind="test").to_dict() == {"kind": "test"}
    assert InputsTemplates().to_dict() == {}
    assert InputsTokenizer("local", path="/t", max_model_len=4096).to_dict() == {
        "kind": "local", "path": "/t", "max_model_len": 4096,
    }  # fmt: skip
    files = {"q": SourceFile("f", "11", 2)}
    assert InputsSource(kind="mini", files=files).to_dict() == {
        "kind": "mini", "files": {"q": {"file": "f", "sha256": "11", "rows": 2}},
    }  # fmt: skip


def _damaged(part: str, change: dict[str, Any]) -> str:
    """The FULL header line with `change` merged into its `part` (a value of None: the key removed)."""
    obj = json.loads(FULL)
    target = obj[part]
    *parents, last = list(change)[0].split(".")
    for key in parents:
        target = target[key]
    target[last] = list(change.values())[0]
    return json.dumps(obj) + "\n"


SF = "source.files.qasper"
DAMAGED = [
    ("source", {"kind": 1}, "source.kind", "must be a string, got 1"),
    ("source", {"kind": None}, "source.kind", "must be a string, got null"),
    ("source", {"repo": ["r"]}, "source.repo", 'must be a string, got ["r"]'),
    ("source", {"revision": None}, "source.revision", "must be a string, got null"),
    ("source", {"file": 3}, "source.file", "must be a string, got 3"),
    ("source", {"path": False}, "source.path", "must be a string, got false"),
    ("source", {"name": 1}, "source.name", "must be a string, got 1"),
    ("source", {"note": {}}, "source.note", "must be a string, got {}"),
    ("source", {"sha256": 0}, "source.sha256", "must be a string, got 0"),
    ("source", {"pinned_sha256": 0}, "source.pinned_sha256", "must be a string or null, got 0"),
    ("source", {"url": "x"}, "source.url", "unknown field"),
    ("source", {"present": []}, "source.present", "unknown field"),
    ("source", {"files": ["qasper"]}, "source.files", 'must be an object, got ["qasper"]'),
    ("source", {"files.qasper": "11"}, SF, 'must be an object, got "11"'),
    ("source", {"files.qasper.file": 1}, f"{SF}.file", "must be a string, got 1"),
    ("source", {"files.qasper.sha256": None}, f"{SF}.sha256", "must be a string, got null"),
    ("source", {"files.qasper.rows": "200"}, f"{SF}.rows", 'must be an integer, got "200"'),
    ("source", {"files.qasper.rows": -1}, f"{SF}.rows", "must be at least 0, got -1"),
    ("source", {"files.qasper.pinned_sha256": 1}, f"{SF}.pinned_sha256", "must be a string or null, got 1"),
    ("source", {"files.qasper.size": 1}, f"{SF}.size", "unknown field"),
    ("templates", {"origin": 1}, "templates.origin", "must be a string, got 1"),
    ("templates", {"files": ["a"]}, "templates.files", 'must be an object of strings, got ["a"]'),
    ("templates", {"files.x": 1}, "templates.files", 'must be an object of strings, got {"dataset2prompt.json": "aa", "x": 1}'),
    ("templates", {"template_sha256": "bb"}, "templates.template_sha256", 'must be an object of strings, got "bb"'),
    ("templates", {"qasper": "bb"}, "templates.qasper", "unknown field"),
    ("tokenizer", {"kind": 0}, "tokenizer.kind", "must be a string, got 0"),
    ("tokenizer", {"base_url": None}, "tokenizer.base_url", "must be a string, got null"),
    ("tokenizer", {"model": 1}, "tokenizer.model", "must be a string, got 1"),
    ("tokenizer", {"path": []}, "tokenizer.path", "must be a string, got []"),
    ("tokenizer", {"max_model_len": "4096"}, "tokenizer.max_model_len", 'must be an integer or null, got "4096"'),
    ("tokenizer", {"max_model_len": 0}, "tokenizer.max_model_len", "must be at least 1, got 0"),
    ("tokenizer", {"endpoints": 1}, "tokenizer.endpoints", "must be a string, got 1"),
    ("tokenizer", {"secret": "k"}, "tokenizer.secret", "unknown field"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("part", "change", "field", "message"), DAMAGED, ids=[d[2] + "-" + str(i) for i, d in enumerate(DAMAGED)]
)
def test_a_damaged_part_field_is_one_line_naming_file_line_and_field(
    tmp_path: Path, part: str, change: dict[str, Any], field: str, message: str
) -> None:
    path = _file(tmp_path, _damaged(part, change))
    with pytest.raises(DataError) as info:
        read_inputs(path)
    assert str(info.value) == f"{path}:1:{field}: {message}"
    assert info.value.exit_code == EXIT_DATA and info.value.field == field


@pytest.mark.parametrize("part", ["source", "templates", "tokenizer"])
def test_a_part_that_is_no_object_is_named(tmp_path: Path, part: str) -> None:
    obj = json.loads(FULL)
    obj[part] = "x"
    path = _file(tmp_path, json.dumps(obj) + "\n")
    with pytest.raises(DataError, match=f'^{path}:1:{part}: must be an object, got "x"$'):
        read_inputs(path)
