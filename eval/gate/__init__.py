"""Stage 6, gate: a `Comparison` and a policy (TOML) -> a `Verdict` (exit 0 / 1 / 2) and JUnit; it reads analysis
results, never tables.

Entry points: `policy.load_policy`, `rules.evaluate` -> `verdict.Verdict`, `junit`, `settle` (is a verdict settled
early, for `lbeval ab --stop-when-settled`).
"""
