"""Stage 5, analyze: run folders -> typed numbers (scores, agreement pairs, timing, cache checks, attribution by
cause, the comparison of two runs); it never formats.

Entry points: `score.score_run` -> `ScoredRun`, `compare.compare` -> `Comparison`, `attribution`, `causes`;
`agreement` (pairs of samples compared token by token), `ab_timing` (an `lbeval ab` session's paired timing).
"""
