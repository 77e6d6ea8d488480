"""The batch scenario: batch composition, with the cache out of the picture.

Per input: batch_alone (fresh salt), batch_warm_alone (same salt), then for each B in `--batch-sizes` above 1:
batch_member sent at once with B-1 batch_filler (other inputs' prompts, fresh salts: every copy cold), and
batch_warm_member (batch_alone's salt: warm) with B-1 cold fillers. Planner: eval/run/scenarios/batch.py.
"""

from __future__ import annotations

from eval.records.scenario_kinds.spec import BATCH_SIZE, PairDef, ScenarioSpec, register

DEFAULT_BATCH_SIZES = (1, 4, 8)

SPEC = register(
    ScenarioSpec(
        name="batch",
        order=10,
        default_plan=True,
        isolates="batch composition: the other requests in flight, with the cache out of the picture",
        passes=("batch_alone", "batch_warm_alone", "batch_member", "batch_warm_member", "batch_filler"),
        units="one unit per input: alone, warm alone, then per batch size B a cold batch and a warm batch",
        cost="2 + 2*sum(B) over the batch sizes B > 1 (default 1,4,8: 26), fillers included",
        pairs=(
            PairDef(
                "batch",
                "batch composition",
                "batch_alone",
                "batch_member",
                BATCH_SIZE,
                "prompt, sampling settings, cache state (every copy cold: fresh salts)",
                "batch of B: B-1 other inputs' prompts (mixed lengths) sent at the same moment",
            ),
            PairDef(
                "batch_warm",
                "warm path in a batch",
                "batch_warm_alone",
                "batch_warm_member",
                BATCH_SIZE,
                "prompt, salt (warm: the full blocks cached)",
                "batch of B with B-1 cold fillers",
            ),
        ),
        rules=("batch_invariant",),
        settings=("batch_sizes",),
        benign=True,
    )
)
