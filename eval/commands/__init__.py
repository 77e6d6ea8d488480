"""The command layer: one thin module per `lbeval` subcommand (eval/cli.py only dispatches to them); each parses
its options, calls the stages and turns their results into output and an exit code.

Entry points: each module's `configure(parser)` (its options) and `run(args)` (its exit code), found by
eval/cli.py through the module's name (prepare, run, ab, score, compare, gate, serve, ...).
"""
