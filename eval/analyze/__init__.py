"""Stage 5, analyze: run folders -> typed numbers (scores, agreement pairs, timing, cache checks, attribution by
cause, the comparison of two runs); it never formats.

Entry points: `score.score_run` -> `ScoredRun`, `compare.compare` -> `Comparison`, `attribution`, `causes`;
`agreement` (pairs of samples compared token by token), `ab_timing` (an `lbeval ab` session's paired timing).
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "aa_floor": (
            "AaFloor",
            "AaMeasure",
            "aa_floor",
            "check_against",
            "position",
        ),
        "ab_timing": (
            "PairedMeasure",
            "paired_values",
            "randomization_blocks",
            "session_pairs",
        ),
        "accuracy": (
            "SCORING",
            "Scoring",
            "accuracy_json_defaults",
        ),
        "accuracy_types": (
            "SECONDARY_ROUGE_METRICS",
            "DatasetAccuracy",
            "ExampleScore",
            "PassScore",
        ),
        "agreement": (
            "NEAR_TIE_MARGIN",
            "PairStats",
        ),
        "attribution": (
            "Attribution",
            "AttributionRow",
            "Confounding",
            "POINT_BATCH",
            "POINT_CAUSE",
            "POINT_HITLEN",
            "POINT_NOISE",
            "POINT_NONE",
            "POINT_PARTIAL",
            "POINT_REPLICA",
            "POINT_SEVERAL",
            "POINT_TRAFFIC",
            "POINT_WARM",
            "Pointer",
            "pointed_cause",
        ),
        "cache": ("CacheCheck",),
        "causes": (
            "CauseRow",
            "RowSide",
            "cause_rows",
        ),
        "compare": (
            "BOOTSTRAP_RESAMPLES",
            "BOOTSTRAP_SEED",
            "Change",
            "Comparison",
            "DivergentPair",
            "compare",
            "divergence_list",
        ),
        "memo": ("ScoreMemo",),
        "replica_pairs": ("ReplicaPair",),
        "score": (
            "RunScores",
            "ScoredRun",
            "load_inputs",
            "score_loaded",
            "score_run",
        ),
        "spec_decode": ("SpecDecode",),
        "verification": ("CacheVerification",),
    },
)
