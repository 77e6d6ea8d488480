"""Stage 4, run: the only stage that talks to a server under test; sends each input's units and writes records.

Entry points: `runner.execute_run` (`lbeval run`), `ab.execute_ab` (`lbeval ab`), `session.RunSession` (a run's
lifecycle), `probe.probe_server`, `client.Client` (over `request`, `wire`, `reply`, `transport`, `ledger`),
`steps.plan_units` and `passes.run_unit` (one unit of work), `scenarios/` (the scenarios other than cache).
"""

from eval.public import public_face

# the names other packages import from this one, by the module that defines them (docs/architecture.md)
__all__, __getattr__ = public_face(
    __name__,
    {
        "ab": (
            "AbConfig",
            "StopCheck",
            "StopQuery",
            "execute_ab",
            "pair_orders",
            "session_order",
        ),
        "adaptive": (
            "AdaptiveRecord",
            "Hooks",
            "Look",
            "PairRatios",
            "TimingTarget",
            "added_order",
            "added_units",
            "extend_timing",
            "half_width_pct",
            "read_adaptive",
            "round_reps",
        ),
        "client": ("Client",),
        "config": ("endpoints",),
        "request": (
            "RequestSettings",
            "build_request",
            "request_settings",
        ),
        "resume": (
            "records_kept",
            "resume_lines",
            "run_dir_for",
        ),
        "retry": ("RetryPolicy",),
        "runner": (
            "DEFAULT_PASSES",
            "EXIT_INCOMPLETE",
            "RunConfig",
            "execute_run",
            "resolve_topology",
        ),
        "session": ("run_secrets",),
        "steps": (
            "Unit",
            "plan_units",
        ),
    },
)
