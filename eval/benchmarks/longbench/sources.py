"""LongBench v1 rows: from the Hugging Face Hub (pinned revision), a local data dir or zip, or the shipped mini sample.

Every row is validated; a bad row raises DataError naming file, line and field.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from eval.errors import DataError
from eval.prepare.data_source import DataSource, Downloader, hub_file
from eval.prepare.inputs import file_sha256, unicode_problem

HUB_REPO = "zai-org/LongBench"
HUB_REVISION = "5e628be450b7e67fb7ae6e201bd6d8f7056f7672"
HUB_FILENAME = "data.zip"

# field -> (accepted types, description for errors)
ROW_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "input": ((str,), "a string"),
    "context": ((str,), "a string"),
    "answers": ((list,), "a list of strings"),
    "length": ((int,), "an integer"),
    "dataset": ((str,), "a string"),
    "language": ((str,), "a string"),
    "all_classes": ((list, type(None)), "a list of strings or null"),
    "_id": ((str,), "a string"),
}


@dataclass(frozen=True)
class Row:
    input: str
    context: str
    answers: list[str]
    length: int
    dataset: str
    language: str
    all_classes: list[str] | None
    id: str


def mini_dir() -> Path:
    """The shipped longbench-mini sample (NOT LongBench data; see its README)."""
    return Path(str(resources.files("eval.prepare").joinpath("samples", "longbench_mini", "data")))


def hub_download(repo: str, revision: str) -> Path:
    """Download (or find in the Hub cache) `data.zip` at a pinned revision. Honours HF_HUB_OFFLINE."""
    return hub_file(repo, revision, HUB_FILENAME, "LongBench's data.zip (or its unpacked data/ folder)")


def parse_row(obj: Any, where: Path | str, lineno: int) -> Row:
    if not isinstance(obj, dict):
        raise DataError(where, lineno, None, "row is not a JSON object")
    for name, (types, desc) in ROW_FIELDS.items():
        if name not in obj:
            raise DataError(where, lineno, name, "missing field")
        value = obj[name]
        if not isinstance(value, types) or (name == "length" and isinstance(value, bool)):
            raise DataError(where, lineno, name, f"must be {desc}, got {type(value).__name__}")
    for name in ("answers", "all_classes"):
        items = obj[name] or []
        bad = [i for i, v in enumerate(items) if not isinstance(v, str)]
        if bad:
            raise DataError(where, lineno, f"{name}[{bad[0]}]", "must be a string")
    for name in ROW_FIELDS:  # text that is hashed and sent must be UTF-8: no lone surrogate escapes
        problem = unicode_problem(obj[name])
        if problem is not None:
            raise DataError(where, lineno, name, problem)
    if not obj["answers"]:
        raise DataError(where, lineno, "answers", "must hold at least one reference answer")
    if not obj["_id"]:
        raise DataError(where, lineno, "_id", "must not be empty")
    return Row(
        input=obj["input"],
        context=obj["context"],
        answers=list(obj["answers"]),
        length=obj["length"],
        dataset=obj["dataset"],
        language=obj["language"],
        all_classes=None if obj["all_classes"] is None else list(obj["all_classes"]),
        id=obj["_id"],
    )


def parse_lines(lines: Iterable[str], where: Path | str) -> list[Row]:
    rows: list[Row] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                where, lineno, None, f"not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        except RecursionError:
            raise DataError(where, lineno, None, "not valid JSON (nested too deeply)") from None
        row = parse_row(obj, where, lineno)
        if row.id in seen:
            raise DataError(where, lineno, "_id", f"duplicate _id {row.id!r} (first on line {seen[row.id]})")
        seen[row.id] = lineno
        rows.append(row)
    return rows


class DatasetFiles:
    """Resolves `<name>.jsonl` in a folder (optionally with a data/ subfolder) or inside data.zip."""

    def __init__(self, root: Path) -> None:
        if not root.exists():
            raise DataError(root, None, None, "data path does not exist")
        self.root = root
        self.is_zip = root.is_file()
        if self.is_zip and not zipfile.is_zipfile(root):
            raise DataError(root, None, None, "not a directory and not a zip file")

    def _dir(self) -> Path:
        return self.root / "data" if (self.root / "data").is_dir() else self.root

    def describe(self, name: str) -> str:
        if self.is_zip:
            return f"{self.root}!{self._member(name)}"
        return str(self._dir() / f"{name}.jsonl")

    def _member(self, name: str) -> str:
        with zipfile.ZipFile(self.root) as zf:
            names = set(zf.namelist())
        for cand in (f"data/{name}.jsonl", f"{name}.jsonl"):
            if cand in names:
                return cand
        raise DataError(self.root, None, None, f"no data/{name}.jsonl inside the zip")

    def read(self, name: str) -> tuple[list[Row], str]:
        """Rows of dataset `name` and the SHA-256 of the file they came from."""
        if self.is_zip:
            member = self._member(name)
            with zipfile.ZipFile(self.root) as zf:
                raw = zf.read(member)
            text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")
            return parse_lines(text, f"{self.root}!{member}"), hashlib.sha256(raw).hexdigest()
        path = self._dir() / f"{name}.jsonl"
        if not path.is_file():
            raise DataError(
                path, None, None, f"dataset file not found (is {self.root} a LongBench data folder?)"
            )
        with path.open(encoding="utf-8") as fh:
            rows = parse_lines(fh, path)
        return rows, file_sha256(path)


def open_source(
    source: DataSource, download: Downloader = hub_download
) -> tuple[DatasetFiles, dict[str, Any]]:
    """Resolve a source to readable files plus its provenance for the inputs header."""
    if source.kind == "hub":
        repo, revision = source.repo or HUB_REPO, source.revision or HUB_REVISION
        zip_path = download(repo, revision)
        prov = {"kind": "hub", "repo": repo, "revision": revision, "file": HUB_FILENAME}
        prov["sha256"] = file_sha256(zip_path)
        return DatasetFiles(zip_path), prov
    if source.kind == "mini":
        return DatasetFiles(mini_dir()), {
            "kind": "mini",
            "name": "longbench-mini",
            "note": "not LongBench data",
        }
    if source.kind == "data_dir" and source.path is not None:
        prov = {"kind": "data_dir", "path": str(source.path.resolve())}
        if source.path.is_file():
            prov["sha256"] = file_sha256(source.path)
        return DatasetFiles(source.path), prov
    raise DataError(str(source.kind), None, None, "unknown data source (hub, data_dir or mini)")
