"""Loading LongBench rows: data dir, data.zip, the Hub path (pointed at a local zip), validation errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from eval.benchmarks.longbench.sources import DatasetFiles, open_source
from eval.errors import DataError
from eval.prepare.data_source import DataSource

GOOD = {
    "input": "q",
    "context": "c",
    "answers": ["a"],
    "length": 1,
    "dataset": "qasper",
    "language": "en",
    "all_classes": None,
    "_id": "x1",
}


def make_zip(src: Path, dest: Path) -> Path:
    with zipfile.ZipFile(dest, "w") as zf:
        for f in sorted((src / "data").glob("*.jsonl")):
            zf.write(f, f"data/{f.name}")
    return dest


def write_rows(path: Path, rows: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_dir_and_zip_give_the_same_rows(fixture_data_dir: Path, tmp_path: Path) -> None:
    from_dir, sha_dir = DatasetFiles(fixture_data_dir).read("qasper")
    from_zip, sha_zip = DatasetFiles(make_zip(fixture_data_dir, tmp_path / "data.zip")).read("qasper")
    assert from_dir == from_zip
    assert sha_dir == sha_zip  # the member's bytes are the file's bytes
    raw = [json.loads(line) for line in (fixture_data_dir / "data" / "qasper.jsonl").read_text().splitlines()]
    assert [r.id for r in from_dir] == [r["_id"] for r in raw]
    assert from_dir[1].answers == raw[1]["answers"]


def test_hub_path_uses_downloader_and_records_sha(fixture_data_dir: Path, tmp_path: Path) -> None:
    zip_path = make_zip(fixture_data_dir, tmp_path / "data.zip")
    calls: list[tuple[str, str]] = []

    def fake_download(repo: str, revision: str) -> Path:
        calls.append((repo, revision))
        return zip_path

    files, prov = open_source(DataSource("hub", revision="abc123"), fake_download)
    assert calls == [("zai-org/LongBench", "abc123")]
    assert prov["sha256"] == __import__("hashlib").sha256(zip_path.read_bytes()).hexdigest()
    assert len(files.read("gov_report")[0]) == 5


def test_offline_with_empty_cache_says_how_to_supply_data(tmp_path: Path) -> None:
    code = (
        "from eval.benchmarks.longbench.sources import hub_download\n"
        "from eval.errors import DataError\n"
        "try:\n    hub_download('zai-org/LongBench', 'main')\n"
        "except DataError as e:\n    print('ERR', e)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("ERR "), out.stderr
    assert "--data-dir" in out.stdout and "data.zip" in out.stdout


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda r: r.pop("answers"), "answers", "missing field"),
        (lambda r: r.update(answers="a"), "answers", "must be a list of strings"),
        (lambda r: r.update(answers=["a", 3]), "answers[1]", "must be a string"),
        (lambda r: r.update(answers=[]), "answers", "at least one"),
        (lambda r: r.update(length="12"), "length", "must be an integer"),
        (lambda r: r.update(length=True), "length", "must be an integer"),
        (lambda r: r.update(all_classes="x"), "all_classes", "list of strings or null"),
        (lambda r: r.update(_id=""), "_id", "must not be empty"),
        (lambda r: r.pop("context"), "context", "missing field"),
    ],
)
def test_bad_row_names_file_line_field(tmp_path: Path, mutate: object, field: str, message: str) -> None:
    bad = dict(GOOD, _id="x2")
    mutate(bad)  # type: ignore[operator]
    path = write_rows(tmp_path / "data" / "qasper.jsonl", [GOOD, bad])
    with pytest.raises(DataError) as info:
        DatasetFiles(tmp_path).read("qasper")
    assert str(info.value).startswith(f"{path}:2:{field}: ")
    assert message in str(info.value)


def test_invalid_json_and_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "data" / "qasper.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(DataError, match=rf"^{path}:2: not valid JSON"):
        DatasetFiles(tmp_path).read("qasper")
    write_rows(path, [GOOD, GOOD])
    with pytest.raises(DataError, match=rf"^{path}:2:_id: duplicate _id 'x1' \(first on line 1\)"):
        DatasetFiles(tmp_path).read("qasper")


def test_missing_file_and_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        DatasetFiles(tmp_path / "nope")
    with pytest.raises(DataError, match="dataset file not found"):
        DatasetFiles(tmp_path).read("qasper")
