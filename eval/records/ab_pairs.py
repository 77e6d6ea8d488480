"""The pairing of an interleaved A/B session (`lbeval ab`): which records of two runs were adjacent in time.

    runs/<variant>/<run_id>/ab_pairs.jsonl   (PAIRS_NAME) the same lines in both runs of the session

One JSON line per pair, appended and fsync'd after the pair ran (a torn last line is dropped on read):
    {"ab_id": "...",                    the session pairing's id (the same in both runs' files)
     "dataset": ..., "example_id": ..., "kind": "main" | "timing" | a scenario
                                        ("batch", "hitlen", "repeats", "traffic"), "repetition": r,
     "order": "AB" | "BA",               which side was sent first
     "a": Side, "b": Side,               per side: {"ran": bool, "complete": bool, "seqs": [record seqs],
                                         "start": unix s, "end": unix s} (ran false: the side was complete
                                         from an earlier session and was not sent again)
     "rerun": null | "a" | "b",          a resume re-ran only this side (the other's records are older):
                                         the pair is not adjacent in time
     "complete": bool,                  both sides complete in this pair
     "runs": ["<variant>/<run_id>" of side a, of side b]}

A unit can have several lines (a pair re-run after a fault or an interrupt); the last one counts (`last_pairs`).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from eval.atomic import write_failed
from eval.records.run_folder import PAIRS_NAME

ORDERS = ("AB", "BA")


@dataclass(frozen=True)
class PairSide:
    ran: bool
    complete: bool
    seqs: list[int] = field(default_factory=list)
    start: float | None = None
    end: float | None = None


@dataclass(frozen=True)
class PairRecord:
    ab_id: str
    dataset: str
    example_id: str
    kind: str
    repetition: int
    order: str
    a: PairSide
    b: PairSide
    rerun: str | None
    complete: bool
    runs: tuple[str, str] = ("", "")  # "<variant>/<run_id>" of side a and of side b

    @property
    def unit(self) -> tuple[str, str, str, int]:
        return (self.dataset, self.example_id, self.kind, self.repetition)

    def swapped(self) -> PairRecord:
        """The same pair seen from the other side (b as a): for a comparison given the runs the other way round."""
        order = "BA" if self.order == "AB" else "AB"
        runs = (self.runs[1], self.runs[0])
        return replace(
            self, a=self.b, b=self.a, order=order, runs=runs, rerun={"a": "b", "b": "a"}.get(self.rerun or "")
        )

    @property
    def adjacent(self) -> bool:
        """Both sides ran complete in this pair, one right after the other."""
        return self.complete and self.rerun is None and self.a.ran and self.b.ran


def pairs_path(run_dir: Path) -> Path:
    return run_dir / PAIRS_NAME


def append_pair(run_dir: Path, pair: PairRecord) -> None:
    path = pairs_path(run_dir)
    line = (json.dumps(asdict(pair), sort_keys=True) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise write_failed(path, exc, "cannot open the pairing file") from None
    try:
        start = os.fstat(fd).st_size
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise write_failed(path, exc, "cannot append to the pairing file") from None
    finally:
        os.close(fd)


def _side(obj: dict[str, Any]) -> PairSide:
    return PairSide(
        ran=bool(obj["ran"]),
        complete=bool(obj["complete"]),
        seqs=[int(s) for s in obj.get("seqs", [])],
        start=obj.get("start"),
        end=obj.get("end"),
    )


def pair_from_dict(obj: dict[str, Any]) -> PairRecord:
    return PairRecord(
        ab_id=str(obj["ab_id"]),
        dataset=str(obj["dataset"]),
        example_id=str(obj["example_id"]),
        kind=str(obj["kind"]),
        repetition=int(obj["repetition"]),
        order=str(obj["order"]),
        a=_side(obj["a"]),
        b=_side(obj["b"]),
        rerun=obj.get("rerun"),
        complete=bool(obj["complete"]),
        runs=(str(obj.get("runs", ["", ""])[0]), str(obj.get("runs", ["", ""])[1])),
    )


def read_pairs(run_dir: Path) -> list[PairRecord]:
    """Every pair line in file order ([] without a pairing file); an unreadable line is skipped."""
    path = pairs_path(run_dir)
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(pair_from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line from an interrupted append
    return out


def last_pairs(pairs: list[PairRecord]) -> dict[tuple[str, str, str, int], PairRecord]:
    """The pair line that counts per unit: the last one written."""
    out: dict[tuple[str, str, str, int], PairRecord] = {}
    for p in pairs:
        out[p.unit] = p
    return out
