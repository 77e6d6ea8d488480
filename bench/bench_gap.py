"""The harness's own gap between requests at concurrency 1 (`python -m bench gap`).

One-token timing requests (`lbeval run --passes timing`) through the real runner, on the 12 shipped
longbench-mini inputs; the figures come from the records only: for consecutive requests (in send order) the gap
is `sent_at[i+1] - (sent_at[i] + done_s[i])` (ClientTimings, eval/records/types.py), busy is the sum of done_s,
span is the first send to the last answer. Two servers:

- the fake server (tests/support/fake_server.py, always available; it answers in well under a millisecond, so its gap
  is almost all harness): 12 inputs x 5 repetitions x 2 = 120 requests;
- the real CPU server (`cpu-smollm2`, SmolLM2-135M) when LBEVAL_CACHE has its venv and model (otherwise one
  line says it is skipped): 12 inputs x 3 repetitions x 2 = 72 requests. It is started here and stopped after.

Each line also gives the /metrics scrapes per request the run made (counted in this process by wrapping
Client.metrics_text; the probe's few included) and the machine's 1-minute load average at the end: the one
scrape left between two requests is the server's own /metrics time (5-7 ms idle on the CPU server, 8-14 ms
right after an answer on a loaded 2-core machine), so the gap follows the load.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import SMOKE_ENV, smoke
from eval.cli import main as lbeval
from eval.errors import ConfigError
from eval.records.run_folder import RECORDS_NAME, scan_records
from eval.records.types import RequestRecord
from eval.run.client import Client
from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import check_requirements, start
from tests.support.fake_server import FakeServer

REAL_SPEC = "cpu-smollm2"
FAKE_REPS = 5
REAL_REPS = 3
GOAL_MEDIAN_MS = 10.0  # the harness gap goal (bench/README.md)


@dataclass(frozen=True)
class GapStats:
    requests: int
    median_ms: float
    p90_ms: float
    max_ms: float
    busy_s: float
    span_s: float


def gap_stats(records: list[RequestRecord]) -> GapStats:
    """Gaps between consecutive requests (by send time) from the records' client timings."""
    timed = sorted(
        (r.timings.sent_at, r.timings.sent_at + r.timings.done_s)
        for r in records
        if r.timings is not None and r.timings.done_s is not None
    )
    if len(timed) < 2:
        raise ValueError("fewer than two timed records")
    gaps = [(nxt[0] - cur[1]) * 1000 for cur, nxt in zip(timed, timed[1:], strict=False)]
    busy = sum(end - start for start, end in timed)
    return GapStats(
        requests=len(timed),
        median_ms=statistics.median(gaps),
        p90_ms=float(np.quantile(gaps, 0.9)),  # linear interpolation between the closest ranks
        max_ms=max(gaps),
        busy_s=busy,
        span_s=timed[-1][1] - timed[0][0],
    )


@contextmanager
def counting_scrapes() -> Iterator[list[int]]:
    """Count Client.metrics_text calls (GET /metrics) made in this process while the block runs, from any
    thread (bench_replicas scrapes from one thread per replica)."""
    count = [0]
    lock = threading.Lock()
    original = Client.metrics_text

    def counted(self: Client, names: Iterable[str] | None = None) -> str:
        with lock:
            count[0] += 1
        return original(self, names)

    Client.metrics_text = counted  # type: ignore[method-assign]
    try:
        yield count
    finally:
        Client.metrics_text = original  # type: ignore[method-assign]


def _timing_run(base_url: str, work: Path, reps: int) -> tuple[GapStats, float]:
    """Prepare the mini inputs with the server's tokenizer, run the timing pass; (gaps, scrapes per request)."""
    inputs = work / "inputs.jsonl"
    prep = ["prepare", "--source", "mini", "--n", "all", "--base-url", base_url, "--out", str(inputs)]
    if lbeval(prep) != 0:
        raise RuntimeError("lbeval prepare failed")
    run = [
        "run", "--variant", "bench-gap", "--inputs", str(inputs), "--base-url", base_url, "--out", str(work),
        "--passes", "timing", "--timing-reps", str(reps), "--quiet",
    ]  # fmt: skip
    with counting_scrapes() as scrapes:
        if lbeval(run) != 0:
            raise RuntimeError("lbeval run failed")
    files = list((work / "bench-gap").glob(f"*/{RECORDS_NAME}"))
    records = scan_records(files[0], with_topk=False).records
    return gap_stats(records), scrapes[0] / len(records)


def _line(where: str, s: GapStats, scrapes: float) -> str:
    goal = "met" if s.median_ms <= GOAL_MEDIAN_MS else "NOT met"
    load = os.getloadavg()[0]
    return (
        f"gap {where}: {s.requests} one-token timing requests at concurrency 1: gap median {s.median_ms:.1f} ms "
        f"(goal <= {GOAL_MEDIAN_MS:g} ms: {goal}), p90 {s.p90_ms:.1f} ms, max {s.max_ms:.1f} ms; busy "
        f"{s.busy_s:.2f} s of a {s.span_s:.2f} s span ({100 * (s.span_s - s.busy_s) / s.span_s:.1f}% between "
        f"requests); {scrapes:.2f} /metrics scrapes per request; load average {load:.1f}"
    )


def _fake() -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeServer() as fake:
        stats, scrapes = _timing_run(fake.base_url, Path(tmp), 1 if smoke() else FAKE_REPS)
    print(_line("fake server", stats, scrapes), flush=True)


def _real() -> None:
    if smoke():
        print(f"gap real server: skipped ({SMOKE_ENV} set)", flush=True)
        return
    spec = get_launch_spec(REAL_SPEC)
    try:
        check_requirements(spec)
    except ConfigError as exc:
        print(f"gap real server: skipped ({exc}; `make server-venv server-model` builds it)", flush=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        server = start(spec, log=Path(tmp) / "server.log")
        try:
            stats, scrapes = _timing_run(server.base_url, Path(tmp), REAL_REPS)
        finally:
            server.stop()
    print(_line(f"real server {REAL_SPEC}", stats, scrapes), flush=True)


def main() -> None:
    _fake()
    _real()


if __name__ == "__main__":
    main()
