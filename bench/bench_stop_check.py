"""The stop check's cost per look (`lbeval ab --stop-when-settled`, eval/gate/settle.stop_check) after 12, 48 and
192 inputs of one session, from scratch (each look re-reads and re-scores both partial runs) and incremental
(eval/gate/settle.IncrementalCheck: the records read incrementally, each record's and pair's scoring results
kept in an eval/analyze/memo.ScoreMemo, only the new records scored).

One `lbeval ab` session of 192 inputs (cold, warm, 2 one-token timing repetitions) on two fake servers, run
once without a stop check; then its looks are replayed in session order on copies of its run folders holding
the records written by then (a prefix of records.jsonl). The incremental check sees every look (as in a
session); both are timed (wall clock, and this process's CPU time, which a shared machine's
other load does not inflate) on the looks after 12, 48 and 192 inputs, and the incremental check's looks are summed
over the whole session (the stop check's total cost in a session that runs to its end).

    python -m bench stop_check
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench import smoke
from eval.gate.policy import load_policy
from eval.gate.settle import scratch_check, stop_check
from eval.records.ab_pairs import read_pairs
from eval.records.codec import record_from_dict
from eval.records.run_folder import RECORDS_NAME
from eval.run.ab import AbConfig, StopQuery, execute_ab
from eval.run.config import endpoints
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.support.fake_server import FakeServer

N = 192
LOOKS = (12, 48, 192)


def _session(tmp: Path, n: int) -> tuple[tuple[Path, Path], list[tuple[str, str]]]:
    rows = [make_row(i, words=40 + i % 17) for i in range(n)]
    inputs = write_rows(tmp / "inputs.jsonl", rows)
    with FakeServer() as a, FakeServer() as b:
        ca = config_for(a, inputs, tmp / "runs", variant="base", passes=("cold", "warm", "timing"))
        dirs = execute_ab(
            AbConfig(ca, replace(ca, variant="var", topology=endpoints(b.base_url)), seed=3, quiet=True)
        )
    order = list(dict.fromkeys((p.dataset, p.example_id) for p in read_pairs(dirs[0])))
    return dirs, order


def _prefix_ends(run_dir: Path, order: list[tuple[str, str]]) -> list[int]:
    """Bytes of records.jsonl written when the k-th input of `order` ended (k = 1..N): the records of the first
    k inputs are a prefix of the file (an input's units run back to back)."""
    data = (run_dir / RECORDS_NAME).read_bytes()
    rank = {key: k for k, key in enumerate(order)}
    ends = [0] * len(order)
    pos = 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        rec = record_from_dict(json.loads(line), with_topk=False)
        k = rank[(rec.dataset, rec.example_id)]
        assert all(e == 0 for e in ends[k + 1 :]), "records of a later input before this one's last"
        ends[k] = pos
    for k in range(1, len(ends)):
        ends[k] = max(ends[k], ends[k - 1])
    return ends


def _live_copy(run_dir: Path, live: Path) -> Path:
    out = live / run_dir.parent.name / run_dir.name
    shutil.copytree(run_dir, out)
    (out / RECORDS_NAME).write_bytes(b"")
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        n, looks = (4, (4,)) if smoke() else (N, LOOKS)
        dirs, order = _session(Path(d), n)
        live = tuple(_live_copy(run_dir, Path(d) / "live") for run_dir in dirs)
        ends = [_prefix_ends(run_dir, order) for run_dir in dirs]
        data = [(run_dir / RECORDS_NAME).read_bytes() for run_dir in dirs]
        policy = load_policy(None)
        scratch, inc = scratch_check(policy), stop_check(policy)
        total = total_cpu = 0.0
        for k in range(1, n + 1):  # the session's looks, replayed: the folders as they were after input k
            for side in (0, 1):
                (live[side] / RECORDS_NAME).write_bytes(data[side][: ends[side][k - 1]])
            query = StopQuery((live[0], live[1]), tuple(order[:k]), n)
            t0, c0 = time.perf_counter(), time.process_time()
            inc(query)
            t_inc, c_inc = time.perf_counter() - t0, time.process_time() - c0
            total, total_cpu = total + t_inc, total_cpu + c_inc
            if k not in looks:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            scratch(query)
            t_scratch, c_scratch = time.perf_counter() - t0, time.process_time() - c0
            print(
                f"stop check after {k:3d} of {n} inputs: from scratch {1000 * t_scratch:7.1f} ms "
                f"(CPU {1000 * c_scratch:7.1f} ms), incremental {1000 * t_inc:7.1f} ms (CPU {1000 * c_inc:7.1f} ms) "
                f"per look (load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
        print(
            f"stop check over the whole session: {n} incremental looks {total:.1f} s in all "
            f"(CPU {total_cpu:.1f} s; load {os.getloadavg()[0]:.1f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
