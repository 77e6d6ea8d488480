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

The pairing file is part of the session: as each session ends, both runs' manifests mark the run one side of an
interleaved session (`RunManifest.interleaved`, a `PairingMark`: its side, its partner run, and how many lines its
pairing file held then, with their sha256). A reader checks the file against the mark (`pairing_damage`): missing,
short, or other lines than the session wrote (one removed, duplicated or edited) is damage, so no gate verdict
falls back to reading the two runs as overlapping ones. Lines beyond the mark are a session killed before it
ended; the run is then not complete, and they are damage when its manifest says it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from eval.atomic import write_failed
from eval.records.manifest_parts import PairingMark
from eval.records.run_folder import PAIRS_NAME, RunManifest

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


# ---------------------------------------------------------------- the session's mark in each manifest


def _complete_lines(run_dir: Path) -> list[bytes] | None:
    """The pairing file's complete lines (each with its newline); None without the file."""
    try:
        data = pairs_path(run_dir).read_bytes()
    except FileNotFoundError:
        return None
    lines = data.splitlines(keepends=True)
    return lines if not lines or lines[-1].endswith(b"\n") else lines[:-1]


def _digest(lines: list[bytes]) -> str:
    return hashlib.sha256(b"".join(lines)).hexdigest()


def pairing_mark(run_dir: Path, side: str, partner: str) -> PairingMark:
    """The mark of the run's pairing file as it is now (written as the session ends)."""
    lines = _complete_lines(run_dir) or []
    pairs = read_pairs(run_dir)
    return PairingMark(pairs[0].ab_id if pairs else "", side, partner, len(lines), _digest(lines))


def pairing_damage(manifest: RunManifest, run_dir: Path) -> list[str]:
    """What is wrong with the pairing file of a run its manifest marks as one side of an lbeval ab session
    (empty: nothing, or no mark); module docstring."""
    mark = manifest.interleaved  # a malformed one is refused as the manifest is read
    if mark is None:
        return []
    what = f"{PAIRS_NAME} (the manifest marks this run side {mark.side} of an lbeval ab session with {mark.partner}"
    lines = _complete_lines(run_dir)
    if lines is None:
        return [] if mark.pairs == 0 else [f"{what}, {mark.pairs} pair lines): missing"]
    if len(lines) < mark.pairs:
        return [f"{what}, {mark.pairs} pair lines): holds {len(lines)}, lines were removed"]
    if _digest(lines[: mark.pairs]) != mark.pairs_sha256:
        return [f"{what}): its first {mark.pairs} lines are not the ones the session wrote (removed, duplicated "
                "or edited)"]  # fmt: skip
    if len(lines) > mark.pairs and manifest.complete:
        return [f"{what}, {mark.pairs} pair lines): holds {len(lines)}, lines were added or duplicated"]
    return []
