"""`lbeval run`: send the prepared inputs to a running server in cold/warm/repeat/timing passes, record all.

Argument parsing only; the work is `eval.run.runner.execute_run(run_config(args, ...))`. The last line printed
on stdout is the run directory (for `make eval`).

Exit codes: 0 the run is complete; 3 (EXIT_INCOMPLETE) it is not: requests left errored, or a file could not
be written (a full disk: one line naming it and the space left); 130 interrupted by Ctrl-C or SIGTERM (the
manifest records the session's outcome "interrupted"); 1 another error (a 4xx, another lbeval run writing the
same run folder); 78 a bad option; 2 an unreadable manifest. Re-running the same command resumes; an interrupt
prints the records kept and the command line (`interrupted`, called by eval.cli).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.commands import options
from eval.commands.options import add_specs_option
from eval.errors import ConfigError
from eval.records.run_folder import read_manifest
from eval.records.scenarios import DEFAULT_BATCH_SIZES, DEFAULT_PLAN, DEFAULT_REPEATS, parse_scenarios
from eval.records.vocabulary import PASS_CHOICES, SCENARIO_NAMES
from eval.redact import NO_SECRETS, redacted_errors
from eval.run.request import RequestSettings
from eval.run.resume import resume_lines
from eval.run.retry import RetryPolicy
from eval.run.runner import DEFAULT_PASSES, EXIT_INCOMPLETE, RunConfig, execute_run, resolve_topology
from eval.run.scenarios.settings import ScenarioSettings, batched_tokens_budget, parse_ints
from eval.run.session import run_secrets
from eval.serve.launch_specs import LaunchSpec, spec_for_run
from eval.terminal import echo, echo_err

HELP = "Send the inputs to a server in cold/warm/repeat/timing passes and record every request (resumable)."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", required=True, help="name of the server variant (letters, digits, . _ -)")
    p.add_argument(
        "--base-url",
        action="append",
        help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1; repeated: the variant's replicas, each "
        "input's requests pinned to one (docs/servers/replicas.md)",
    )
    p.add_argument(
        "--dp-ranks",
        type=options.dp_ranks,
        metavar="N",
        help=f"the one --base-url (or spec) routes to N (1-{options.MAX_DP_RANKS}) data-parallel ranks: replica r's requests carry "
        "X-data-parallel-rank: r and are verified on engine r's /metrics (docs/servers/replicas.md)",
    )
    p.add_argument(
        "--spec",
        metavar="NAME",
        help="variant launch spec: start its server for the run and stop it after (or use its url); "
        "default: the spec named like --variant, when there is one and no --base-url",
    )
    add_specs_option(p)
    p.add_argument(
        "--concurrency",
        type=options.concurrency,
        default=1,
        help=f"units in flight, 1-{options.MAX_CONCURRENCY} (timing is valid only at 1)",
    )
    add_side_arguments(p, passes=",".join(DEFAULT_PASSES), seed="--seed")
    add_scenario_arguments(
        p,
        "scenarios (README: Scenarios; a launch spec's `scenarios` table gives defaults)",
        "the others run one unit at a time after it",
    )


def add_side_arguments(
    p: argparse.ArgumentParser,
    *,
    passes: str,
    seed: str,
    run_id: str = "run directory name (default: derived from the inputs file's hash)",
) -> None:
    """The options of one run that `lbeval run` and `lbeval ab` share (ab: for both sides); `passes` the
    default of --passes, `seed` the flag of the sampling seed (ab's --seed is the pair order's), `run_id` the
    help of --run-id."""
    p.add_argument("--inputs", type=Path, required=True, help="inputs manifest written by `lbeval prepare`")
    p.add_argument(
        "--model", help="served model id (default: the launch spec's, else the first /v1/models lists)"
    )
    p.add_argument(
        "--api-key-env", metavar="VAR", help="environment variable holding the API key (never stored)"
    )
    p.add_argument(
        "--passes", default=passes, help=f"comma list of {', '.join(PASS_CHOICES)} (default %(default)s)"
    )
    p.add_argument(
        "--timing-reps",
        type=options.timing_reps,
        default=5,
        help=f"timing repetitions per input, 1-{options.MAX_TIMING_REPS} (default 5)",
    )
    p.add_argument(
        "--cold",
        choices=["auto", "salt", "reset", "evict"],
        default="auto",
        help="how cold requests miss the cache: a fresh cache_salt, the server's cache reset, or an unrelated "
        "prompt before each (llama-cpp-python: one cached sequence, unverified); auto: the server kind's "
        "(vLLM, SGLang: salt; llama-server: reset; llama-cpp-python: evict) (default auto)",
    )
    p.add_argument("--out", type=Path, default=Path("runs"), help="runs folder (default runs/)")
    p.add_argument("--run-id", help=run_id)
    req = p.add_argument_group("request settings")
    req.add_argument(
        seed,
        dest="sampling_seed",
        type=int,
        default=0,
        help="sampling seed sent with every request (default 0)",
    )
    req.add_argument(
        "--top-logprobs", type=int, default=20, help="top-k logprobs per token (0-20, default 20)"
    )
    req.add_argument(
        "--max-tokens", type=options.positive_int, help="replace every example's output limit (smoke runs)"
    )
    req.add_argument(
        "--chat-template-kwargs",
        type=options.template_kwargs,
        default='{"enable_thinking": false}',
        help="JSON object for chat_template_kwargs, or 'none' (default %(default)s)",
    )
    req.add_argument(
        "--stream-all", action="store_true", help="stream cold/warm/repeat too (TTFT on every request)"
    )
    net = p.add_argument_group("retries")
    net.add_argument(
        "--retries",
        type=options.retries_count,
        default=4,
        help="retries of connection errors, timeouts and 5xx (the probe's requests too)",
    )
    net.add_argument(
        "--backoff", type=options.backoff_seconds, default=1.0, help="first retry wait in seconds (doubles)"
    )
    net.add_argument(
        "--timeout",
        type=options.timeout_seconds,
        default=600.0,
        help="seconds one request may take as a whole: connect, send and every read to the last byte, streamed "
        "or not (not per read; connecting alone is also bounded by 10 s); a request past it is a failed "
        "attempt, retried like a connection error (default %(default)s)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars (CI logs)")


# the scenario options' dests, as add_scenario_arguments defines them (lbeval ab uses them for both sides)
SCENARIO_OPTIONS = (
    "scenarios",
    "batch_sizes",
    "repeats",
    "hit_lengths",
    "scenario_inputs",
    "scenario_max_tokens",
)


def add_scenario_arguments(p: argparse.ArgumentParser, title: str, how_they_run: str) -> None:
    """The scenario options of `lbeval run` and `lbeval ab` (one definition: names, help, defaults shown)."""
    scn = p.add_argument_group(title)
    plan = DEFAULT_PLAN
    scn.add_argument(
        "--scenarios",
        help=f"comma list of {', '.join(SCENARIO_NAMES)}; default: the default plan, every scenario on a few "
        f"inputs with the small settings below (docs/scenarios.md); --scenarios cache: the --passes above "
        f"alone; {how_they_run}",
    )
    sizes, small = ",".join(map(str, DEFAULT_BATCH_SIZES)), ",".join(map(str, plan.batch_sizes))
    scn.add_argument(
        "--batch-sizes",
        help=f"batch scenario: requests in flight together (default {sizes}; default plan {small})",
    )
    scn.add_argument(
        "--repeats",
        type=int,
        help=f"repeats scenario: copies of each request (default {DEFAULT_REPEATS}; default plan {plan.repeats})",
    )
    scn.add_argument(
        "--hit-lengths",
        help="hitlen scenario: prompt tokens to prime (default: around 1-3 blocks, the last block, n-1; "
        f"default plan: {', '.join(plan.hit_classes)})",
    )
    scn.add_argument(
        "--scenario-inputs",
        type=int,
        help=f"run the scenarios on this many inputs only (default all; default plan one per {plan.inputs_per} "
        "inputs, at least 1)",
    )
    scn.add_argument(
        "--scenario-max-tokens",
        type=int,
        help=f"output limit of the scenario requests (default the example's; default plan {plan.max_tokens})",
    )


def run_config(
    args: argparse.Namespace,
    variant: str,
    urls: Sequence[str],
    spec: LaunchSpec | None,
    *,
    concurrency: int = 1,
    dp_ranks: int | None = None,
    spec_scenarios: bool = True,
) -> RunConfig:
    """One run's RunConfig from the command-line options (`add_side_arguments`, `add_scenario_arguments`,
    `concurrency`: --concurrency, `lbeval run`'s) and the variant's launch spec, if any. Where the requests go
    is resolved here, once (`resolve_topology`): `urls` (--base-url, repeated: replicas) when there is no spec,
    a running spec's url (or url list), or a managed spec the session starts under the run lock; `dp_ranks`
    (--dp-ranks) else the spec's. The spec's model and api_key_env fill in what the options leave out, and
    (`spec_scenarios`) its `scenarios` table and chunked-prefill budget the scenario options' defaults."""
    if spec is not None and not spec.managed:
        if spec.url is None:
            raise ConfigError(f"{variant}: launch spec {spec.name} has no url")
        urls = spec.urls or (spec.url,)  # a running spec's url list: its replicas
    given_ranks = dp_ranks or (spec.dp_ranks if spec is not None else 1)
    topology = resolve_topology(urls, spec if spec is not None and spec.managed else None, given_ranks)
    if args.retries < 0 or args.backoff < 0 or args.timeout <= 0:
        raise ConfigError("--retries and --backoff must be >= 0, --timeout > 0")
    use = spec if spec_scenarios else None
    return RunConfig(
        variant=variant,
        inputs=args.inputs,
        topology=topology,
        out=args.out,
        model=args.model or (spec.model if spec is not None else None),
        api_key_env=args.api_key_env or (spec.api_key_env if spec is not None else None),
        passes=tuple(p.strip() for p in args.passes.split(",") if p.strip()),
        timing_reps=args.timing_reps,
        concurrency=concurrency,
        cold_mode=args.cold,
        request=RequestSettings(
            seed=args.sampling_seed,
            top_logprobs=args.top_logprobs,
            chat_template_kwargs=args.chat_template_kwargs,
            max_tokens_override=args.max_tokens,
        ),
        stream_all=args.stream_all,
        retry=RetryPolicy(retries=args.retries, backoff_s=args.backoff),
        timeout_s=args.timeout,
        run_id=args.run_id,
        quiet=args.quiet,
        scenarios=scenario_config(
            args,
            use.scenarios if use is not None else {},
            batched_tokens_budget(use.args) if use is not None else None,
        ),
        launch_spec=spec.name if spec is not None else None,
        numerics=spec.numerics if spec is not None else "",
        cache_model=spec.cache_model if spec is not None else "",
        secrets=spec.secrets if spec is not None else NO_SECRETS,
    )


def scenario_config(
    args: argparse.Namespace, table: Mapping[str, Any], hit_budget: int | None = None
) -> ScenarioSettings:
    """The scenario options, each falling back to the launch spec's `scenarios` table, then to the default;
    `hit_budget`: the chunked-prefill budget the spec starts its server with."""

    def ints(option: str, key: str, what: str) -> tuple[int, ...] | None:
        given = getattr(args, option, None)
        if given is not None:
            return parse_ints(given, what)
        return tuple(table[key]) if key in table else None

    def one(option: str, key: str) -> int | None:
        given = getattr(args, option, None)
        value = given if given is not None else table.get(key)
        return int(value) if value is not None else None

    named = getattr(args, "scenarios", None) or ",".join(table.get("names") or [])
    try:
        scenarios = parse_scenarios(named) if named else DEFAULT_PLAN.scenarios
    except ValueError as exc:
        raise ConfigError(f"--scenarios: {exc}") from None
    hit_lengths = ints("hit_lengths", "hit_lengths", "--hit-lengths")
    plan = None if named else DEFAULT_PLAN  # no scenario named: the default plan's small settings
    return ScenarioSettings(
        scenarios=scenarios,
        batch_sizes=ints("batch_sizes", "batch_sizes", "--batch-sizes")
        or (plan.batch_sizes if plan else DEFAULT_BATCH_SIZES),
        repeats=_given(one("repeats", "repeats"), plan.repeats if plan else DEFAULT_REPEATS),
        hit_lengths=hit_lengths,
        hit_budget=hit_budget,
        inputs=one("scenario_inputs", "inputs"),  # the default plan's: from the inputs (sized_default_plan)
        max_tokens=_given_or(
            one("scenario_max_tokens", "max_tokens"), _plan_max_tokens(args) if plan else None
        ),
        hit_classes=plan.hit_classes if plan and hit_lengths is None else None,
        default_plan=plan is not None,
    )


def _given(value: int | None, default: int) -> int:
    """`value` unless it was not given (0 is a value, refused by its check, never read as "the default")."""
    return default if value is None else value


def _given_or(value: int | None, default: int | None) -> int | None:
    """`_given` where the default may be "none" (the example's own limit)."""
    return default if value is None else value


def _plan_max_tokens(args: argparse.Namespace) -> int:
    """The default plan's scenario output limit, never above `--max-tokens` (a smoke run's limit)."""
    cap = getattr(args, "max_tokens", None)
    return min(DEFAULT_PLAN.max_tokens, cap) if isinstance(cap, int) and cap > 0 else DEFAULT_PLAN.max_tokens


def run(args: argparse.Namespace) -> int:
    urls = args.base_url or []  # --base-url repeated: replicas (eval/run/replicas.py)
    spec = spec_for_run(args.variant, args.spec, args.specs, urls[0] if urls else None)
    # a managed spec's server is started by the session, once the run folder's lock is held
    config = run_config(args, args.variant, urls, spec, concurrency=args.concurrency, dp_ranks=args.dp_ranks)
    secrets = run_secrets(config)  # an error line leaving the session is printed by eval.cli, without them
    with redacted_errors(secrets):
        run_dir = execute_run(config)
    manifest = read_manifest(run_dir)
    for warning in manifest.warnings:
        echo_err(f"lbeval run: warning: {warning}", secrets=secrets)
    state = "complete" if manifest.complete else "INCOMPLETE (re-run the same command to resume)"
    echo_err(f"lbeval run: {manifest.stats.records} records, {state}")
    echo(run_dir)
    return 0 if manifest.complete else EXIT_INCOMPLETE


def interrupted(args: argparse.Namespace) -> list[str]:
    """After Ctrl-C or SIGTERM (eval.cli prints these lines): the records kept and the command that resumes."""
    return resume_lines(args.out, args.variant, args.inputs, args.run_id)
