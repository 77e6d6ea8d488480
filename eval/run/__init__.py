"""Stage 4, run: the only stage that talks to a server under test; sends each input's units and writes records.

Entry points: `runner.execute_run` (`lbeval run`), `ab.execute_ab` (`lbeval ab`), `session.RunSession` (a run's
lifecycle), `probe.probe_server`, `client.Client` (over `request`, `wire`, `reply`, `transport`, `ledger`),
`steps.plan_units` and `passes.run_unit` (one unit of work), `scenarios/` (the scenarios other than cache).
"""
