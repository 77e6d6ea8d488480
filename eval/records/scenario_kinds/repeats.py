"""The repeats scenario: run-to-run variation of the very same request.

Per input: repeats_alone N times (fresh salts, one at a time), repeats_batched N times (fresh salts, in batches
of up to REPEAT_BATCH sent at once). Planner: eval/run/scenarios/repeats.py.
"""

from __future__ import annotations

from eval.records.scenario_kinds.spec import PairDef, ScenarioSpec, register

# `RequestRecord.variation` keys
REPEAT = "repeat"  # r of a repeats request
BATCH = "batch"  # which batch of a repeats_batched request

DEFAULT_REPEATS = 10
REPEAT_BATCH = 8  # repeats_batched: copies sent at once, at most

SPEC = register(
    ScenarioSpec(
        name="repeats",
        order=30,
        default_plan=True,
        isolates="run-to-run variation of the very same request",
        passes=("repeats_alone", "repeats_batched"),
        units="one unit per input: N alone, then N in batches of up to 8",
        cost="2N (default N = 10: 20)",
        pairs=(
            PairDef(
                "repeats_alone",
                "repeats alone",
                "repeats_alone",
                "repeats_alone",
                None,
                "prompt, sampling settings, cache state (cold: fresh salts), alone",
                "nothing: the same request again (repeat r vs repeat 0)",
            ),
            PairDef(
                "repeats_batched",
                "repeats in a batch",
                "repeats_alone",
                "repeats_batched",
                None,
                "prompt, sampling settings, cache state (cold)",
                "copies of the request in flight together (repeat r in a batch vs alone repeat 0)",
                sub_row=True,
            ),
        ),
        rules=("repeats_single_output",),
        settings=("repeats",),
        head="repeats",
        benign=True,
    )
)
