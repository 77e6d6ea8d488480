"""The inputs manifest: the single source of truth for what is asked.

File format (JSON Lines, UTF-8):
    line 1   {"record": "inputs_header", "schema_version": 1, ...InputsHeader fields}
    line 2+  {"record": "input", ...InputRow fields}, one per selected example,
             ordered by (dataset order given on the command line, then selection order).
A run's `inputs_sha256` is `inputs_digest(path)`: the SHA-256 of the input lines (every line after the
header), i.e. of what is asked. The header is provenance (data source, tokenizer URL, lbeval's git commit)
and may differ between two preparations of the same inputs, e.g. two variants' servers on other ports.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval.atomic import atomic_write_lines
from eval.errors import DataError

INPUTS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class InputRow:
    dataset: str  # as selected, e.g. "qasper" or "qasper_e"
    id: str  # the LongBench `_id`
    prompt: str  # final user text after truncation (the chat template is applied by the server)
    mode: str  # "chat" | "raw"
    max_tokens: int
    prompt_sha256: str
    prompt_tokens: int | None  # tokens of `prompt` by the tokenizer used, None without one
    truncated: bool
    answers: list[str]
    all_classes: list[str] | None
    length: int
    # samsum: stop at the first newline token (ids from the tokenizer), None elsewhere
    stop_token_ids: list[int] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.dataset, self.id)


@dataclass(frozen=True)
class InputsHeader:
    source: dict[
        str, Any
    ]  # {"kind": "hub"|"data_dir"|"mini", "repo", "revision", "files": {name: sha256}, "path"}
    seed: int
    n: int | None  # None = all
    datasets: list[str]
    selected_ids: dict[str, list[str]]
    templates: dict[str, Any]  # provenance of prompts/ (file -> sha256) and per-dataset template sha256
    tokenizer: dict[
        str, Any
    ]  # {"kind": "server"|"local"|"none", "base_url"|"path", "model", "max_model_len"}
    max_input_tokens: dict[str, int] | None  # per dataset input budget, None with --no-truncate
    max_tokens: dict[str, int]  # per dataset output limit used
    lbeval_version: str
    git_commit: str | None
    git_dirty: bool | None
    schema_version: int = INPUTS_SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def inputs_digest(path: Path) -> str:
    """SHA-256 of an inputs manifest's rows (the bytes of every line after the header line)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        fh.readline()
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dumps_line(obj: dict[str, Any]) -> str:
    """Canonical JSON line: stable key order, no ASCII escaping, so identical inputs give identical bytes."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def write_inputs(path: Path, header: InputsHeader, rows: list[InputRow]) -> None:
    lines = [dumps_line({"record": "inputs_header", **asdict(header)})]
    lines += [dumps_line({"record": "input", **asdict(row)}) for row in rows]
    atomic_write_lines(path, lines)


def read_inputs(path: Path) -> tuple[InputsHeader, list[InputRow]]:
    """Read an inputs manifest; a bad line raises DataError naming file:line:field."""
    header: InputsHeader | None = None
    rows: list[InputRow] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(path, lineno, None, f"not valid JSON ({exc.msg})") from None
            kind = obj.pop("record", None) if isinstance(obj, dict) else None
            if lineno == 1:
                if kind != "inputs_header":
                    raise DataError(path, 1, "record", "first line must be the inputs_header")
                header = _build(InputsHeader, obj, path, lineno)
            elif kind == "input":
                rows.append(_build(InputRow, obj, path, lineno))
            else:
                raise DataError(path, lineno, "record", f"expected 'input', got {kind!r}")
    if header is None:
        raise DataError(path, None, None, "empty inputs manifest")
    return header, rows


def _build(cls: Any, obj: dict[str, Any], path: Path, lineno: int) -> Any:
    names = set(cls.__dataclass_fields__)
    unknown = sorted(set(obj) - names)
    if unknown:
        raise DataError(path, lineno, unknown[0], "unknown field")
    try:
        return cls(**obj)
    except TypeError as exc:
        missing = [
            n
            for n, f in cls.__dataclass_fields__.items()
            if n not in obj and f.default is MISSING and f.default_factory is MISSING
        ]
        raise DataError(path, lineno, missing[0] if missing else None, f"missing field ({exc})") from None
