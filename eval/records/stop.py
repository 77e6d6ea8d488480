"""The stop record of an `lbeval ab --stop-when-settled` session that stopped before its last input.

    runs/<variant>/<run_id>/ab_stop.json   (STOP_NAME) the same record in both runs of the session

Written atomically (eval.atomic) into both run folders when the session stops, never appended to. It says why
the session stopped (every enabled rule of the gate's policy settled, or one settled FAIL), after how many of
the planned inputs, which inputs ran, each rule's settled state with its interval (timing), and what the
session cost in server-seconds next to the full run's estimate. The gate does not trust it: eval/gate/settle.py
recomputes every decision from the records and gives no verdict when they do not reproduce.

Damage is detected: `sha256` is the SHA-256 of the record's canonical JSON without it (sorted keys, compact
separators); a file that does not parse, lacks a field, has another schema version or another digest is a
DataError naming the file and the field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eval.atomic import atomic_write, write_failed
from eval.errors import DataError
from eval.records.run_folder import STOP_NAME

STOP_SCHEMA_VERSION = 1
# a rule's state in a settledness check
SETTLED_PASS, SETTLED_FAIL, OPEN, NOT_CHECKED = "pass", "fail", "open", "not checked"
RULE_STATES = (SETTLED_PASS, SETTLED_FAIL, OPEN, NOT_CHECKED)


@dataclass(frozen=True)
class RuleSettlement:
    """One enabled rule after k inputs. `how`: "count" (exact: the records already decide it), "cs" (the
    always-valid confidence sequence), "full run" (settles only when every input has run), "skipped" (the rule
    skips itself on this plan, as the full run's gate would)."""

    rule: str
    state: str  # SETTLED_PASS | SETTLED_FAIL | OPEN | NOT_CHECKED
    how: str
    detail: str  # measured so far, in words
    low_pct: float | None = None  # the CS interval of the timing change (percent), when "cs"
    high_pct: float | None = None


@dataclass(frozen=True)
class Settlement:
    """The answer of one settledness check (eval/gate/settle.py) after k of N inputs."""

    settled: bool
    decision: str  # SETTLED_PASS | SETTLED_FAIL | OPEN
    reason: str  # one line: why it stopped (or what is still open)
    rules: tuple[RuleSettlement, ...]
    inputs_run: int
    inputs_planned: int
    policy: str = ""  # the policy's source


@dataclass(frozen=True)
class StopRecord:
    schema_version: int
    ab_id: str
    runs: tuple[str, str]  # "<variant>/<run_id>" of side a, side b
    seed: int
    policy: str  # the policy's source
    decision: str  # SETTLED_PASS | SETTLED_FAIL
    reason: str
    inputs_run: int
    inputs_planned: int
    inputs: tuple[tuple[str, str], ...]  # (dataset, example_id) of the inputs run, in session order
    expected_records: tuple[int, int]  # planned request slots of the inputs run, side a, side b
    rules: tuple[RuleSettlement, ...]
    server_seconds: float  # both servers' busy seconds in this session's pairs (from the pairing)
    server_seconds_full: float  # the full run's estimate: spent / inputs run x inputs planned
    stopped_at: str  # ISO 8601 UTC

    def headline(self) -> str:
        """The report's one line: "stopped after k of N inputs: <why>; server-seconds s of ~S for the full run"."""
        return (
            f"stopped after {self.inputs_run} of {self.inputs_planned} inputs: {self.reason}; server-seconds "
            f"{self.server_seconds:.1f} of ~{self.server_seconds_full:.1f} for the full run"
        )


def stop_path(run_dir: Path) -> Path:
    return Path(run_dir) / STOP_NAME


def _canonical(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def write_stop(run_dir: Path, record: StopRecord) -> None:
    obj = asdict(record)
    obj["sha256"] = hashlib.sha256(_canonical(obj).encode()).hexdigest()
    atomic_write(stop_path(run_dir), json.dumps(obj, sort_keys=True, indent=1) + "\n")


def remove_stop(run_dir: Path) -> None:
    """A new session supersedes an earlier stop (a resume without --stop-when-settled runs to the end)."""
    path = stop_path(run_dir)
    try:
        path.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise write_failed(path, exc, "cannot remove the earlier stop record") from None


def _rule(obj: dict[str, Any]) -> RuleSettlement:
    state = str(obj["state"])
    if state not in RULE_STATES:
        raise ValueError(f"rules[].state {state!r}")
    low, high = obj.get("low_pct"), obj.get("high_pct")
    return RuleSettlement(
        str(obj["rule"]), state, str(obj["how"]), str(obj["detail"]),
        None if low is None else float(low), None if high is None else float(high),
    )  # fmt: skip


def _int(value: Any, name: str) -> int:
    """A count of the stop record: a JSON integer >= 0 (not "3", 3.0, true or 1e400)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name}: must be an integer >= 0, got {value!r:.40}")
    return value


def _from_dict(obj: dict[str, Any]) -> StopRecord:
    planned = obj["expected_records"]
    if not isinstance(planned, list) or len(planned) != 2:
        raise ValueError("expected_records: must be a list of two counts")
    return StopRecord(
        schema_version=int(obj["schema_version"]),
        ab_id=str(obj["ab_id"]),
        runs=(str(obj["runs"][0]), str(obj["runs"][1])),
        seed=int(obj["seed"]),
        policy=str(obj["policy"]),
        decision=str(obj["decision"]),
        reason=str(obj["reason"]),
        inputs_run=_int(obj["inputs_run"], "inputs_run"),
        inputs_planned=_int(obj["inputs_planned"], "inputs_planned"),
        inputs=tuple((str(d), str(i)) for d, i in obj["inputs"]),
        expected_records=(_int(planned[0], "expected_records"), _int(planned[1], "expected_records")),
        rules=tuple(_rule(r) for r in obj["rules"]),
        server_seconds=float(obj["server_seconds"]),
        server_seconds_full=float(obj["server_seconds_full"]),
        stopped_at=str(obj["stopped_at"]),
    )


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in the file at `path` (`what`: how the one-line DataError names it when the file cannot
    be read, is not JSON, is nested too deeply or is not an object): the stop record's and summary.json's."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(path, None, None, f"{what} cannot be read ({exc})") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(path, exc.lineno, None, f"{what} is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise DataError(path, None, None, f"{what} is nested too deeply to read") from None
    if not isinstance(obj, dict):
        raise DataError(path, None, None, f"{what} must be a JSON object")
    return obj


def read_stop(run_dir: Path) -> StopRecord | None:
    """The run's stop record, None without one; a damaged one is a DataError naming the file and field."""
    path = stop_path(run_dir)
    try:
        obj = read_json_object(path, "the stop record")
    except DataError:
        if not path.exists():  # none written, or removed while being read
            return None
        raise
    digest = obj.pop("sha256", None)
    if digest != hashlib.sha256(_canonical(obj).encode()).hexdigest():
        raise DataError(path, None, "sha256", "the stop record is damaged (its SHA-256 does not match)")
    if obj.get("schema_version") != STOP_SCHEMA_VERSION:
        field = "schema_version"
        raise DataError(path, None, field, f"must be {STOP_SCHEMA_VERSION}, got {obj.get(field)!r}")
    try:
        return _from_dict(obj)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
        if isinstance(exc, ValueError) and ": " in str(exc):  # _int and friends: "<field>: <why>"
            name, why = str(exc).split(": ", 1)
            raise DataError(path, None, name, why) from None
        raise DataError(path, None, str(exc).strip("'\""), "missing or malformed field") from None
