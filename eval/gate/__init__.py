"""Stage 6, gate: a `Comparison` and a policy (TOML) -> a `Verdict` (exit 0 / 1 / 2) and JUnit; it reads analysis
results, never tables.

Entry points: `policy.load_policy`, `rules.evaluate` -> `verdict.Verdict`, `junit`, `settle` (is a verdict settled
early, for `lbeval ab --stop-when-settled`).
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "junit": ("write_junit",),
        "policy": (
            "Policy",
            "RULE_PARAMS",
            "load_policy",
            "parse_policy",
        ),
        "settle": (
            "compare_and_gate",
            "scratch_check",
            "stop_check",
        ),
        "verdict": (
            "EXIT_FAIL",
            "EXIT_NO_VERDICT",
            "EXIT_PASS",
            "FAIL",
            "NO_DATA",
            "PASS",
            "RowRef",
            "RuleResult",
            "SKIPPED",
            "Verdict",
            "named",
            "no_verdict",
        ),
    },
)
