"""The inputs manifest: the single source of truth for what is asked.

File format (JSON Lines, UTF-8):
    line 1   {"record": "inputs_header", "schema_version": 2, ...InputsHeader fields}
    line 2+  {"record": "input", ...InputRow fields}, one per selected example,
             ordered by (dataset order given on the command line, then selection order).
A run's `inputs_sha256` is `inputs_digest(path)`: the SHA-256 of the input lines (every line after the
header), i.e. of what is asked. The header is provenance (data source, tokenizer URL, lbeval's git commit)
and may differ between two preparations of the same inputs, e.g. two variants' servers on other ports.

Reading validates the whole file against the two dataclasses below (one schema, one mechanism): every field's
type from its annotation (bool is not int, lists of strings hold strings, `X | None` allows null) and the
constraints in its metadata (`min`, `choices`, `nonempty`, `check`); then each row's prompt must match its
`prompt_sha256` and no (dataset, id) may repeat. Any problem is one DataError naming file:line:field.
The header's nested `source`, `templates` and `tokenizer` are typed parts (InputsSource with each dataset's
SourceFile, InputsTemplates, InputsTokenizer; one base, _HeaderPart): `from_dict` checks every key and type
(PartError naming the field, `source.files.qasper.rows`), `to_dict` writes the keys a part was read with (a part
made in code: those set), so a header reads and is written back byte for byte; the run manifest's
`inputs_header` holds the same parts.
Schema 2 added `n_taken` and `n_available` to the header; schema 1 files are still read (both empty).
Schema 3 added the LongBench v2 rows: a benchmark's own fields (v2's `v2_mode`, `difficulty`, `length_class`,
`original_tokens`) and a two-call input's answer call (`answer_template`, `answer_max_tokens`). Each is written
only where it is set (a v1 row's line is byte for byte what schema 2 wrote). A benchmark's own fields are a typed
extras value of its package on the row (`InputRow.extras`), written at the top level of the row's line and read
back by the benchmark's entry in INPUT_EXTRAS; a field of a benchmark on another's row is refused, and the row's
benchmark checks the whole row (its entry in ROW_CHECK; v2's: eval/benchmarks/longbench_v2/inputs.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar, Union, get_args, get_origin, get_type_hints

from eval.atomic import atomic_write_lines
from eval.benchmark_registry import Slot, benchmark_of, benchmarks, entries
from eval.errors import ConfigError, DataError

INPUTS_SCHEMA_VERSION = 3
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
V2_FIELDS_SINCE = 3  # the schema that added the LongBench v2 row fields
MODES = ("chat", "raw")  # how a row is sent: chat messages (the server's chat template) or a raw completion


def _known_dataset(name: str) -> str | None:
    try:
        benchmark_of(name)
    except ConfigError as exc:
        return str(exc)
    return None


def _readable_version(version: int) -> str | None:
    if version in READABLE_SCHEMA_VERSIONS:
        return None
    readable = ", ".join(map(str, READABLE_SCHEMA_VERSIONS))
    return f"this lbeval reads inputs schema versions {readable}, got {version}"


DATASET = {"nonempty": True, "check": _known_dataset}  # field metadata: the constraints on a field's values
AT_LEAST_0 = {"min": 0}
AT_LEAST_1 = {"min": 1}
OMIT_NONE = "omit_none"  # metadata key: a field left out of the line when None (a one-call row's answer call)


class InputExtras(Protocol):
    """A benchmark's own fields of an input row: a frozen dataclass of its package (LongBench v2's
    `V2InputFields`), which only the package reads."""

    def line_fields(self) -> dict[str, Any]:
        """The fields as written at the top level of the row's line (those that are None left out)."""
        ...


@dataclass(frozen=True)
class InputRow:
    dataset: str = field(metadata=DATASET)  # as selected, e.g. "qasper" or "qasper_e"
    id: str = field(metadata={"nonempty": True})  # the LongBench `_id`
    prompt: str  # final user text after truncation (the chat template is applied by the server)
    mode: str = field(metadata={"choices": MODES})  # "chat" | "raw"
    max_tokens: int = field(metadata=AT_LEAST_1)
    prompt_sha256: str  # sha256_text(prompt), checked when read
    prompt_tokens: int | None = field(metadata=AT_LEAST_0)  # tokens of `prompt`, None without a tokenizer
    truncated: bool
    answers: list[str]
    all_classes: list[str] | None
    length: int = field(metadata=AT_LEAST_0)
    # samsum: stop at the first newline token (ids from the tokenizer), None elsewhere
    stop_token_ids: list[int] | None = field(default=None, metadata=AT_LEAST_0)
    # a two-call input (LongBench v2 cot; schema 3): the answer call's prompt with a place for the first call's
    # output (its benchmark's insert_answer fills it) and its output limit; None and absent from the line elsewhere
    answer_template: str | None = field(default=None, metadata={OMIT_NONE: True})
    answer_max_tokens: int | None = field(default=None, metadata={"min": 1, OMIT_NONE: True})
    # the benchmark's own fields (None: it has none); not a field of the line: its fields are (INPUT_EXTRAS)
    extras: InputExtras | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.dataset, self.id)


# --- the header's nested parts: where the data came from, the templates, the tokenizer ----------------------


class PartError(ValueError):
    """A field of a header part that is unknown, missing, or of the wrong type: its dotted name and why (the
    inputs manifest's reader makes it a DataError, exit 65; the run manifest's a ManifestError, exit 2)."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field, self.why = field, why


NULLABLE = "nullable"  # metadata key: a part's field whose value may be written as null (else absent or set)
_PART_KEYS = "present"  # a part's field that is no key: the keys it was read with (None: built, not read)


def _part_fields(cls: type, obj: Any, where: str, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object `obj` (the header's field `where`) as `cls`'s keyword arguments: every key a field of
    `cls`, each of its type (null only where NULLABLE; the `skip` ones are read by their own types)."""
    if not isinstance(obj, Mapping):
        raise PartError(where, f"must be an object, got {_show(obj)}")
    unknown = sorted(set(obj) - ({f.name for f in fields(cls)} - {_PART_KEYS}))
    if unknown:
        raise PartError(f"{where}.{unknown[0]}", "unknown field")
    hints = _hints(cls)
    for f in fields(cls):
        if f.name not in obj or f.name in skip or f.name == _PART_KEYS:
            continue
        tp = hints[f.name] if f.metadata.get(NULLABLE) else _not_null(hints[f.name])
        problem = field_problem(obj[f.name], tp, f.metadata)
        if problem is not None:
            raise PartError(f"{where}.{f.name}", problem)
    return dict(obj)


def _not_null(tp: Any) -> Any:
    """`X | None` -> X: a field that is absent when unset, never written as null."""
    arms = [a for a in get_args(tp) if a is not type(None)]
    return arms[0] if get_origin(tp) in (Union, types.UnionType) and len(arms) == 1 else tp


def _part_dict(part: _HeaderPart, nested: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A part as written: the keys it was read with (`present`), else every field that is set (not None, not
    empty); `nested`: the JSON of the fields that are parts of their own."""
    out: dict[str, Any] = {}
    for f in fields(part):
        if f.name == _PART_KEYS:
            continue
        value = (nested or {}).get(f.name, getattr(part, f.name))
        keep = f.name in part.present if part.present is not None else value not in (None, {}, "")
        if keep:
            out[f.name] = value
    return out


_Part = TypeVar("_Part", bound="_HeaderPart")


@dataclass(frozen=True)
class _HeaderPart:
    """What every header part shares: `present`, the keys it was read with (keyword only, so a part's own
    fields keep their positions), `from_dict` (every key a field, each of its type; PartError naming the field)
    and `to_dict` (the keys it was read with, else those set). `where` defaults to the part's own key."""

    KEY: ClassVar[str]  # the part's field name: where its PartErrors point when `from_dict` is given none
    present: frozenset[str] | None = field(default=None, compare=False, repr=False, kw_only=True)

    @classmethod
    def from_dict(cls: type[_Part], obj: Any, where: str | None = None) -> _Part:
        raw = _part_fields(cls, obj, cls.KEY if where is None else where)
        return cls(**raw, present=frozenset(raw))

    def to_dict(self) -> dict[str, Any]:
        return _part_dict(self)


@dataclass(frozen=True)
class SourceFile(_HeaderPart):
    """One dataset's file in the header's `source.files`: which file, its SHA-256 and rows (v2: its pin)."""

    KEY = "source.files"

    file: str | None = None
    sha256: str | None = None
    rows: int | None = field(default=None, metadata=AT_LEAST_0)
    pinned_sha256: str | None = field(default=None, metadata={NULLABLE: True})  # v2's pin (null: none pinned)


@dataclass(frozen=True)
class InputsSource(_HeaderPart):
    """The header's `source`: where the data came from ("hub": repo, revision, file, sha256 (v2: pinned_sha256);
    "data_dir": path, sha256; "mini": name, note) and every dataset's file (its own `from_dict`/`to_dict`: the
    nested `files`)."""

    KEY = "source"

    kind: str = ""
    repo: str | None = None
    revision: str | None = None
    file: str | None = None
    path: str | None = None
    name: str | None = None
    note: str | None = None
    sha256: str | None = None
    pinned_sha256: str | None = field(default=None, metadata={NULLABLE: True})  # v2's pin (null: none pinned)
    files: dict[str, SourceFile] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, obj: Any, where: str | None = None) -> InputsSource:
        where = cls.KEY if where is None else where
        raw = _part_fields(cls, obj, where, skip=("files",))
        files = raw.get("files", {})
        if not isinstance(files, Mapping):
            raise PartError(f"{where}.files", f"must be an object, got {_show(files)}")
        raw["files"] = {str(k): SourceFile.from_dict(v, f"{where}.files.{k}") for k, v in files.items()}
        return cls(**raw, present=frozenset(obj))

    def to_dict(self) -> dict[str, Any]:
        return _part_dict(self, {"files": {k: v.to_dict() for k, v in self.files.items()}})


@dataclass(frozen=True)
class InputsTemplates(_HeaderPart):
    """The header's `templates`: where the prompt templates came from, the SHA-256 of each prompt file and of
    each dataset's template (LongBench v1's; empty without its prompt files)."""

    KEY = "templates"

    origin: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    template_sha256: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InputsTokenizer(_HeaderPart):
    """The header's `tokenizer`: what counted the prompt tokens ("server": base_url, model, max_model_len and,
    for llama-cpp-python, its endpoints; "local": path, max_model_len; "none")."""

    KEY = "tokenizer"

    kind: str = ""
    base_url: str | None = None
    model: str | None = None
    path: str | None = None
    max_model_len: int | None = field(default=None, metadata={"min": 1, NULLABLE: True})
    endpoints: str | None = None


HEADER_PARTS: dict[str, type[_HeaderPart]] = {
    "source": InputsSource,
    "templates": InputsTemplates,
    "tokenizer": InputsTokenizer,
}


@dataclass(frozen=True)
class InputsHeader:
    source: InputsSource  # where the data came from, every dataset's file
    seed: int
    n: int | None = field(metadata=AT_LEAST_1)  # rows asked per dataset (--n), None = all
    datasets: list[str] = field(metadata=DATASET)
    selected_ids: dict[str, list[str]]
    templates: InputsTemplates  # provenance of prompts/ (file -> sha256) and per-dataset template sha256
    tokenizer: InputsTokenizer  # what counted the prompt tokens
    # per dataset input budget, None with --no-truncate
    max_input_tokens: dict[str, int] | None = field(metadata=AT_LEAST_1)
    max_tokens: dict[str, int] = field(metadata=AT_LEAST_1)  # per dataset output limit used
    lbeval_version: str
    git_commit: str | None
    git_dirty: bool | None
    schema_version: int = field(default=INPUTS_SCHEMA_VERSION, metadata={"check": _readable_version})
    extra: dict[str, Any] = field(default_factory=dict)
    # rows taken per dataset: min(n, rows available), all of them with n None (empty in schema 1 files)
    n_taken: dict[str, int] = field(default_factory=dict, metadata=AT_LEAST_0)
    # rows the data source had per dataset (empty in schema 1 files)
    n_available: dict[str, int] = field(default_factory=dict, metadata=AT_LEAST_0)

    def to_dict(self) -> dict[str, Any]:
        """The header as written (after its "record" key): its parts as their `to_dict`."""
        return {f.name: _json_of(getattr(self, f.name)) for f in fields(self)}


def _json_of(value: Any) -> Any:
    return value.to_dict() if isinstance(value, _HeaderPart) else value


def unicode_problem(value: Any) -> str | None:
    """Why the strings of a JSON value cannot be written as UTF-8 (a lone surrogate such as a `\\ud800` escape,
    which json.loads accepts); None if they can. The one check of every reader of text that is hashed or sent."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not valid Unicode (a lone surrogate \\u{ord(exc.object[exc.start]):04x})"
    return None


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


def row_dict(row: InputRow) -> dict[str, Any]:
    """A row as written: the answer call's fields left out when None, the benchmark's own fields at the top
    level (so a v1 row reads as schema 2 wrote it)."""
    data = {f.name: getattr(row, f.name) for f in fields(InputRow) if f.name != EXTRAS}
    for f in fields(InputRow):
        if f.metadata.get(OMIT_NONE) and data[f.name] is None:
            del data[f.name]
    return {**data, **(row.extras.line_fields() if row.extras is not None else {})}


def write_inputs(path: Path, header: InputsHeader, rows: list[InputRow]) -> None:
    lines = [dumps_line({"record": "inputs_header", **header.to_dict()})]
    lines += [dumps_line({"record": "input", **row_dict(row)}) for row in rows]
    atomic_write_lines(path, lines)


def read_inputs(path: Path) -> tuple[InputsHeader, list[InputRow]]:
    """Read and validate an inputs manifest; any problem raises one DataError naming file:line:field."""
    header: InputsHeader | None = None
    rows: list[InputRow] = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, obj in _json_objects(path):
        kind = obj.pop("record", None)
        if lineno == 1:
            if kind != "inputs_header":
                raise DataError(path, 1, "record", "first line must be the inputs_header")
            header = _build(InputsHeader, obj, path, lineno)
        elif kind == "input":
            row = _read_row(obj, path, lineno)
            _check_row(row, path, lineno, seen)
            check = benchmark_of(row.dataset).entry(ROW_CHECK)
            if check is not None:
                check(row, path, lineno, header.schema_version if header is not None else 0)
            rows.append(row)
        else:
            raise DataError(path, lineno, "record", f"expected 'input', got {_show(kind)}")
    if header is None:
        raise DataError(path, None, None, "empty inputs manifest")
    return header, rows


def _check_row(row: InputRow, path: Path, lineno: int, seen: dict[tuple[str, str], int]) -> None:
    actual = sha256_text(row.prompt)
    if actual != row.prompt_sha256:
        raise DataError(
            path,
            lineno,
            "prompt_sha256",
            f"does not match the prompt (its sha256 is {actual[:12]}…, the manifest says "
            f"{row.prompt_sha256[:12]}…): the prompt was changed after `lbeval prepare`",
        )
    first = seen.setdefault(row.key, lineno)
    if first != lineno:
        raise DataError(
            path, lineno, "id", f"{row.dataset}/{row.id} appears twice (lines {first} and {lineno})"
        )


def _read_row(obj: dict[str, Any], path: Path, lineno: int) -> InputRow:
    """A row from its line: the benchmarks' own fields split off and read by the row's benchmark."""
    codecs = entries(INPUT_EXTRAS)
    owner = {name for codec in codecs.values() for name in codec.names}
    own = {k: v for k, v in obj.items() if k in owner}
    if EXTRAS in obj:
        raise DataError(path, lineno, EXTRAS, "unknown field")
    row: InputRow = _build(InputRow, {k: v for k, v in obj.items() if k not in owner}, path, lineno)
    benchmark = benchmark_of(row.dataset)
    foreign = [(b, k) for b, codec in codecs.items() if b != benchmark.name for k in codec.names if k in own]
    if foreign:
        title = next(b.title for b in benchmarks() if b.name == foreign[0][0])
        raise DataError(path, lineno, foreign[0][1], f"a {title} field on a {row.dataset} row")
    if benchmark.insert_answer is None:
        given = [
            f.name for f in fields(InputRow) if f.metadata.get(OMIT_NONE) and getattr(row, f.name) is not None
        ]
        if given:
            raise DataError(path, lineno, given[0], f"an answer call's field on a {row.dataset} row")
    codec = codecs.get(benchmark.name)
    return row if codec is None else replace(row, extras=codec.read(own, path, lineno))


@dataclass(frozen=True)
class ExtrasCodec:
    """How a benchmark's own fields are read from a row's line (written: InputExtras.line_fields)."""

    names: tuple[str, ...]  # the line's fields that are the benchmark's
    # (its fields given on the line, file, line number) -> the row's extras; a DataError naming the field if bad
    read: Callable[[dict[str, Any], Path, int], InputExtras]


INPUT_EXTRAS: Slot[ExtrasCodec] = Slot("eval/prepare/inputs.INPUT_EXTRAS")
# a benchmark's check of its whole row: (row, file, line, the file's schema version); a DataError if bad
ROW_CHECK: Slot[Callable[[InputRow, Path, int, int], None]] = Slot("eval/prepare/inputs.ROW_CHECK")
EXTRAS = "extras"


class _DuplicateKey(Exception):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def _json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) of every line; a line that is not UTF-8 JSON of one object stops here."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(path, None, None, f"cannot read the inputs manifest ({exc.strerror})") from None
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            where = _field_of_bad_bytes(raw)
            raise DataError(
                path, lineno, where, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
            ) from None
        try:
            obj = json.loads(text, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as exc:
            raise DataError(path, lineno, None, f"not valid JSON ({exc.msg})") from None
        except _DuplicateKey as exc:
            raise DataError(path, lineno, str(exc), "given twice on this line") from None
        except RecursionError:
            raise DataError(path, lineno, None, "not valid JSON (nested too deeply)") from None
        if not isinstance(obj, dict):
            raise DataError(path, lineno, None, f"expected a JSON object, got {_show(obj)}")
        yield lineno, obj


def _field_of_bad_bytes(raw: bytes) -> str | None:
    """The top-level field holding a line's undecodable bytes, when the rest of the line parses."""
    try:
        obj = json.loads(raw.decode("utf-8", errors="replace"))
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    return next((str(k) for k, v in obj.items() if "\ufffd" in json.dumps([k, v], ensure_ascii=False)), None)


def _build(cls: Any, obj: dict[str, Any], path: Path, lineno: int) -> Any:
    """An instance of the dataclass `cls` from a JSON object, every field checked against its schema."""
    unknown = sorted(set(obj) - set(cls.__dataclass_fields__))
    if unknown:
        raise DataError(path, lineno, unknown[0], "unknown field")
    hints = _hints(cls)
    for f in fields(cls):
        if f.name not in obj:
            if f.default is MISSING and f.default_factory is MISSING:
                raise DataError(path, lineno, f.name, "missing field")
            continue
        part = HEADER_PARTS.get(f.name) if cls is InputsHeader else None
        if part is not None:
            try:
                obj[f.name] = part.from_dict(obj[f.name], f.name)
            except PartError as exc:
                raise DataError(path, lineno, exc.field, exc.why) from None
            continue
        problem = field_problem(obj[f.name], hints[f.name], f.metadata)
        if problem is not None:
            raise DataError(path, lineno, f.name, problem)
    return cls(**obj)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def field_problem(value: Any, tp: Any, rules: Mapping[str, Any]) -> str | None:
    """Why `value` is not a valid `tp` under `rules` (applied to each item of a list or dict); None if it is."""
    if not _fits(value, tp):
        return f"must be {_describe(tp)}, got {_show(value)}"
    problem = unicode_problem(value)
    if problem is not None:
        return problem
    for leaf in _leaves(value):
        problem = _leaf_problem(leaf, rules)
        if problem is not None:
            return problem
    return None


def _fits(value: Any, tp: Any) -> bool:
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_fits(value, arm) for arm in args)
    if tp is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            _fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items()
        )
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if tp in (str, bool):
        return isinstance(value, tp)
    raise TypeError(f"the inputs schema has an unsupported annotation {tp!r}")


def _describe(tp: Any) -> str:
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(arm) for arm in args)
    if origin is list:
        return f"a list of {_plural(args[0])}"
    if origin is dict:
        return "an object" if args[1] is Any else f"an object of {_plural(args[1])}"
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false", type(None): "null"}
    return names.get(tp, "anything")


def _plural(tp: Any) -> str:
    return _describe(tp).removeprefix("an ").removeprefix("a ") + "s"


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    else:
        yield value


def _leaf_problem(value: Any, rules: Mapping[str, Any]) -> str | None:
    if value is None:
        return None
    if "min" in rules and isinstance(value, (int, float)) and value < rules["min"]:
        return f"must be at least {rules['min']}, got {_show(value)}"
    if "choices" in rules and value not in rules["choices"]:
        return f"must be one of {', '.join(map(_show, rules['choices']))}, got {_show(value)}"
    if rules.get("nonempty") and value == "":
        return "must not be empty"
    check = rules.get("check")
    return check(value) if check is not None else None


def _show(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
