"""The stop check's cost per look (`lbeval ab --stop-when-settled`, eval/gate/settle.stop_check) after 12, 48 and
192 inputs of one session, from scratch (each look re-reads and re-scores both partial runs) and incremental
(eval/gate/settle.IncrementalCheck: per-input results kept, only the new inputs' added).

One `lbeval ab` session of 192 inputs (cold, warm, 2 one-token timing repetitions) on two fake servers, run
once without a stop check; then the looks are replayed on its run folders in session order. The incremental
check is fed every look up to k (as a session does) and timed on its k-th look alone.

    python -m bench stop_check
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from eval.gate.policy import load_policy
from eval.gate.settle import scratch_check, stop_check
from eval.records.pairing import read_pairs
from eval.run.ab import AbConfig, StopQuery, execute_ab
from tests.eval.fake_fixtures import config_for, make_row, write_rows
from tests.fake_server import FakeServer

N = 192
LOOKS = (12, 48, 192)


def _session(tmp: Path) -> tuple[tuple[Path, Path], list[tuple[str, str]]]:
    rows = [make_row(i, words=40 + i % 17) for i in range(N)]
    inputs = write_rows(tmp / "inputs.jsonl", rows)
    with FakeServer() as a, FakeServer() as b:
        ca = config_for(a, inputs, tmp / "runs", variant="base", passes=("cold", "warm", "timing"))
        dirs = execute_ab(AbConfig(ca, replace(ca, variant="var", base_url=b.base_url), seed=3, quiet=True))
    order = list(dict.fromkeys((p.dataset, p.example_id) for p in read_pairs(dirs[0])))
    return dirs, order


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        dirs, order = _session(Path(d))
        policy = load_policy(None)
        scratch = scratch_check(policy)
        inc = stop_check(policy)
        done = 0
        for k in LOOKS:
            t0 = time.perf_counter()
            scratch(StopQuery(dirs, tuple(order[:k]), N))
            t_scratch = time.perf_counter() - t0
            for j in range(done + 1, k):  # the looks a session makes before the k-th
                inc(StopQuery(dirs, tuple(order[:j]), N))
            t0 = time.perf_counter()
            inc(StopQuery(dirs, tuple(order[:k]), N))
            t_inc = time.perf_counter() - t0
            done = k
            print(
                f"stop check after {k:3d} of {N} inputs: from scratch {1000 * t_scratch:7.1f} ms, "
                f"incremental {1000 * t_inc:7.1f} ms per look (load {os.getloadavg()[0]:.1f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
