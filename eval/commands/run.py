"""`lbeval run`: send the prepared inputs to a running server in cold/warm/repeat/timing passes, record all.

Argument parsing only; the work is `eval.runner.execute_run(config_from_args(args))`. The last line printed
on stdout is the run directory (for `make eval`).

Exit codes: 0 the run is complete; 3 (EXIT_INCOMPLETE) it is not: requests left errored, or a file could not
be written (a full disk: one line naming it and the space left); 130 interrupted by Ctrl-C or SIGTERM (the
manifest records the session's outcome "interrupted"); 1 another error (a 4xx, another lbeval run writing the
same run folder); 78 a bad option; 2 an unreadable manifest. Re-running the same command resumes; an interrupt
prints the records kept and the command line (`interrupted`, called by eval.cli).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from eval.errors import ConfigError
from eval.records.run_folder import read_manifest
from eval.records.scenarios import DEFAULT_BATCH_SIZES, DEFAULT_PLAN, DEFAULT_REPEATS, parse_scenarios
from eval.records.vocabulary import PASS_CHOICES, SCENARIO_NAMES
from eval.run.client import RequestSettings
from eval.run.passes import RetryPolicy
from eval.run.resume import resume_lines
from eval.run.runner import DEFAULT_PASSES, EXIT_INCOMPLETE, RunConfig, execute_run
from eval.run.scenarios.settings import ScenarioSettings, batched_tokens_budget, parse_ints
from eval.serve.launch_specs import spec_for_run
from eval.serve.process import sigterm_as_interrupt, start
from eval.terminal import echo, echo_err

HELP = "Send the inputs to a server in cold/warm/repeat/timing passes and record every request (resumable)."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", required=True, help="name of the server variant (letters, digits, . _ -)")
    p.add_argument("--inputs", type=Path, required=True, help="inputs manifest written by `lbeval prepare`")
    p.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument(
        "--spec",
        metavar="NAME",
        help="variant launch spec: start its server for the run and stop it after (or use its url); "
        "default: the spec named like --variant, when there is one and no --base-url",
    )
    p.add_argument(
        "--specs",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="launch specs file (repeatable)",
    )
    p.add_argument("--model", help="served model id (default: the first one /v1/models lists)")
    p.add_argument(
        "--api-key-env", metavar="VAR", help="environment variable holding the API key (never stored)"
    )
    p.add_argument(
        "--passes", default=",".join(DEFAULT_PASSES), help=f"comma list of {', '.join(PASS_CHOICES)}"
    )
    p.add_argument("--timing-reps", type=int, default=5, help="timing repetitions per input (default 5)")
    p.add_argument("--concurrency", type=int, default=1, help="units in flight (timing is valid only at 1)")
    p.add_argument(
        "--cold",
        choices=["auto", "salt", "reset", "evict"],
        default="auto",
        help="how cold requests miss the cache: a fresh cache_salt, the server's cache reset, or an unrelated "
        "prompt before each (llama-cpp-python: one cached sequence, unverified); auto: the server kind's "
        "(vLLM, SGLang: salt; llama-server: reset; llama-cpp-python: evict) (default auto)",
    )
    p.add_argument("--out", type=Path, default=Path("runs"), help="runs folder (default runs/)")
    p.add_argument("--run-id", help="run directory name (default: derived from the inputs file's hash)")
    req = p.add_argument_group("request settings")
    req.add_argument("--seed", type=int, default=0, help="sampling seed sent with every request (default 0)")
    req.add_argument(
        "--top-logprobs", type=int, default=20, help="top-k logprobs per token (0-20, default 20)"
    )
    req.add_argument("--max-tokens", type=int, help="replace every example's output limit (smoke runs)")
    req.add_argument(
        "--chat-template-kwargs",
        default='{"enable_thinking": false}',
        help="JSON object for chat_template_kwargs, or 'none' (default %(default)s)",
    )
    req.add_argument(
        "--stream-all", action="store_true", help="stream cold/warm/repeat too (TTFT on every request)"
    )
    net = p.add_argument_group("retries")
    net.add_argument(
        "--retries",
        type=int,
        default=4,
        help="retries of connection errors, timeouts and 5xx (the probe's requests too)",
    )
    net.add_argument("--backoff", type=float, default=1.0, help="first retry wait in seconds (doubles)")
    net.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds one request may take as a whole: connect, send and every read to the last byte, streamed "
        "or not (not per read; connecting alone is also bounded by 10 s); a request past it is a failed "
        "attempt, retried like a connection error (default %(default)s)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars (CI logs)")
    add_scenario_arguments(
        p,
        "scenarios (README: Scenarios; a launch spec's `scenarios` table gives defaults)",
        "the others run one unit at a time after it",
    )


# the scenario options' dests, as add_scenario_arguments defines them (lbeval ab copies them to both sides)
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


def _template_kwargs(text: str) -> dict[str, object] | None:
    if text.strip().lower() == "none":
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--chat-template-kwargs: not JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ConfigError("--chat-template-kwargs: must be a JSON object or 'none'")
    return value


def config_from_args(args: argparse.Namespace, base_url: str | None = None) -> RunConfig:
    url = base_url or args.base_url
    if not url:
        raise ConfigError("give --base-url (the server's .../v1 URL)")
    if args.retries < 0 or args.backoff < 0 or args.timeout <= 0:
        raise ConfigError("--retries and --backoff must be >= 0, --timeout > 0")
    return RunConfig(
        variant=args.variant,
        inputs=args.inputs,
        base_url=url,
        out=args.out,
        model=args.model,
        api_key_env=args.api_key_env,
        passes=tuple(p.strip() for p in args.passes.split(",") if p.strip()),
        timing_reps=args.timing_reps,
        concurrency=args.concurrency,
        cold_mode=args.cold,
        request=RequestSettings(
            seed=args.seed,
            top_logprobs=args.top_logprobs,
            chat_template_kwargs=_template_kwargs(args.chat_template_kwargs),
            max_tokens_override=args.max_tokens,
        ),
        stream_all=args.stream_all,
        retry=RetryPolicy(retries=args.retries, backoff_s=args.backoff),
        timeout_s=args.timeout,
        run_id=args.run_id,
        quiet=args.quiet,
        scenarios=scenario_config(args),
    )


def scenario_config(args: argparse.Namespace) -> ScenarioSettings:
    """The scenario options, each falling back to the launch spec's `scenarios` table (`args.spec_scenarios`,
    set by `run`), then to the default."""
    table: dict[str, Any] = getattr(args, "spec_scenarios", None) or {}

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
    budget = getattr(args, "hit_budget", None)
    hit_lengths = ints("hit_lengths", "hit_lengths", "--hit-lengths")
    plan = None if named else DEFAULT_PLAN  # no scenario named: the default plan's small settings
    return ScenarioSettings(
        scenarios=scenarios,
        batch_sizes=ints("batch_sizes", "batch_sizes", "--batch-sizes")
        or (plan.batch_sizes if plan else DEFAULT_BATCH_SIZES),
        repeats=one("repeats", "repeats") or (plan.repeats if plan else DEFAULT_REPEATS),
        hit_lengths=hit_lengths,
        hit_budget=budget if isinstance(budget, int) else None,
        inputs=one("scenario_inputs", "inputs"),  # the default plan's: from the inputs (sized_default_plan)
        max_tokens=one("scenario_max_tokens", "max_tokens") or (_plan_max_tokens(args) if plan else None),
        hit_classes=plan.hit_classes if plan and hit_lengths is None else None,
        default_plan=plan is not None,
    )


def _plan_max_tokens(args: argparse.Namespace) -> int:
    """The default plan's scenario output limit, never above `--max-tokens` (a smoke run's limit)."""
    cap = getattr(args, "max_tokens", None)
    return min(DEFAULT_PLAN.max_tokens, cap) if isinstance(cap, int) and cap > 0 else DEFAULT_PLAN.max_tokens


def run(args: argparse.Namespace) -> int:
    spec = spec_for_run(args.variant, args.spec, args.specs, args.base_url)
    if spec is None:
        return _run(args, None)
    args.model = args.model or spec.model
    args.api_key_env = args.api_key_env or spec.api_key_env
    args.spec_scenarios = spec.scenarios  # defaults for the scenario options
    args.hit_budget = batched_tokens_budget(spec.args)  # the chunked-prefill budget the spec starts it with
    if not spec.managed:
        return _run(args, spec.url)
    with sigterm_as_interrupt(), start(spec, echo=echo_err) as server:
        return _run(args, server.base_url, server.describe())


def _run(args: argparse.Namespace, base_url: str | None, server: dict[str, object] | None = None) -> int:
    # `server`: which server lbeval started for this session, noted under the run folder's lock
    run_dir = execute_run(config_from_args(args, base_url), server=server)
    manifest = read_manifest(run_dir)
    for warning in manifest.warnings:
        echo_err(f"lbeval run: warning: {warning}")
    state = "complete" if manifest.complete else "INCOMPLETE (re-run the same command to resume)"
    echo_err(f"lbeval run: {manifest.stats.get('records', 0)} records, {state}")
    echo(run_dir)
    return 0 if manifest.complete else EXIT_INCOMPLETE


def interrupted(args: argparse.Namespace) -> list[str]:
    """After Ctrl-C or SIGTERM (eval.cli prints these lines): the records kept and the command that resumes."""
    return resume_lines(args.out, args.variant, args.inputs, args.run_id)
