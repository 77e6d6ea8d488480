"""Server-seconds of a run's plan, per scenario and per unit: `python -m bench.plan_cost RUN_DIR [RUN_DIR ...]`.

Not part of `make bench` (it reads run folders of a real server; docs/scenarios.md gives the figures and the
commands that made them). A server-second is a second in which the server had at least one of the run's
requests in flight: the union of the records' [sent_at, sent_at + done_s] intervals (a batch of B requests
sent at once counts its wall time once, not B times). Per unit: a cache main unit, a timing unit, or one
scenario unit (one input's requests of that scenario), so the cost of a plan on other inputs can be computed as
(units) x (seconds per unit).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from eval.records.run_folder import load_run
from eval.records.types import RequestRecord


@dataclass(frozen=True)
class Cost:
    seconds: float  # server-seconds: union of the requests' intervals
    units: int  # (input, unit kind) pairs
    requests: int


def busy_seconds(records: Iterable[RequestRecord]) -> float:
    """Length of the union of the records' [sent_at, sent_at + done_s] intervals."""
    spans = sorted(
        (r.timings.sent_at, r.timings.sent_at + r.timings.done_s)
        for r in records
        if r.timings is not None and r.timings.done_s is not None
    )
    total, end = 0.0, float("-inf")
    for lo, hi in spans:
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def unit_of(r: RequestRecord) -> str:
    """The unit kind a record belongs to: the scenario's name, or cache's main / timing unit."""
    if r.scenario != "cache":
        return r.scenario
    return "cache timing" if r.pass_name.startswith("timing_") else "cache main"


def costs(records: Sequence[RequestRecord]) -> dict[str, Cost]:
    by: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        by[unit_of(r)].append(r)
    out = {}
    for name, recs in sorted(by.items()):
        units = {(r.dataset, r.example_id, r.repetition if name == "cache timing" else 0) for r in recs}
        out[name] = Cost(busy_seconds(recs), len(units), len(recs))
    return out


def main(argv: list[str]) -> int:
    for arg in argv:
        loaded = load_run(Path(arg))
        table = costs(loaded.records)
        total = busy_seconds(loaded.records)
        inputs = len({(r.dataset, r.example_id) for r in loaded.records if r.scenario == "cache"})
        print(f"{arg}: {len(loaded.records)} records, {total:.1f} server-seconds ({inputs} cache inputs)")
        for name, c in table.items():
            per = c.seconds / c.units if c.units else 0.0
            print(
                f"  {name:13} {c.seconds:8.1f} s  {c.units:3} units  {per:7.2f} s/unit  {c.requests:4} requests"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
