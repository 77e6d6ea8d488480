"""The comparison tables of a report, in their order: accuracy, each benchmark's own (LongBench v2's), agreement,
timing (with the paired and A/A tables beside it), cache and validity, attribution. Each table is built by a module
of its own (accuracy_table.py, agreement_table.py, timing_table.py, cache_table.py, ab_timing_table.py, aa_floor.py,
replica_pairs.py, attribution.py; a benchmark's by its package, benchmark_tables.py) as data (typed cells) with its one-line reading; every number a report shows is such a cell,
and the Markdown, HTML and summary.json writers only render them (eval/report/cells.py).
"""

from __future__ import annotations

from eval.analyze.compare import Comparison
from eval.report.aa_floor import aa_floor_table
from eval.report.ab_timing_table import paired_timing_table
from eval.report.accuracy_table import accuracy_table
from eval.report.agreement_table import agreement_table, cross_table
from eval.report.attribution import attribution_table
from eval.report.benchmark_tables import compare_tables
from eval.report.cache_table import cache_table
from eval.report.cells import Table
from eval.report.replica_pairs import replica_pairs_table
from eval.report.spec_decode_table import spec_decode_table
from eval.report.timing_table import timing_table


def build_tables(c: Comparison) -> list[Table]:
    tables = [accuracy_table(c), agreement_table(c), cross_table(c), timing_table(c), cache_table(c)]
    own = compare_tables(c)  # each benchmark's (LongBench v2: both denominators, by difficulty and length)
    paired = paired_timing_table(c)  # lbeval ab: the interleaved figures beside the sequential-style ones
    if paired is not None:
        tables.insert(tables.index(next(t for t in tables if t.id == "timing")) + 1, paired)
    per_replica = replica_pairs_table(c)  # lbeval ab on replicas: A's replica i vs B's replica i
    if per_replica is not None:
        tables.insert(tables.index(next(t for t in tables if t.id == "timing")) + 1, per_replica)
    drafts = spec_decode_table(c)  # a server with a speculative draft: acceptance per run
    if drafts is not None:
        tables.insert(tables.index(next(t for t in tables if t.id == "timing")) + 1, drafts)
    aa = aa_floor_table(c)  # --aa-floor: the A/A floor beside each timing change
    if aa is not None:
        tables.insert(tables.index(next(t for t in tables if t.id == "timing")) + 1, aa)
    return [*tables[:1], *own, *tables[1:], attribution_table(c)]
