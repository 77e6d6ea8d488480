"""`lbeval prepare`: select LongBench rows and write the inputs manifest (what will be asked)."""

from __future__ import annotations

import argparse
from pathlib import Path

from eval.benchmarks.longbench.sources import HUB_REPO, HUB_REVISION
from eval.benchmarks.longbench_v2.build import NAME as V2_NAME
from eval.benchmarks.longbench_v2.spec import DEFAULT_V2_MODE, V2_DATASET, V2_MODES, V2Options
from eval.commands.options import add_specs_option
from eval.errors import ConfigError
from eval.prepare.build import PrepareConfig, parse_max_tokens, prepare
from eval.prepare.data_source import DataSource
from eval.prepare.select import parse_n
from eval.prepare.tokenizers import LocalTokenizer, ServerTokenizer, Tokenizer
from eval.redact import NO_SECRETS, Secrets, api_key_from_env, redacted_errors
from eval.serve.launch_specs import get_launch_spec, spec_context_length
from eval.serve.process import serving, sigterm_as_interrupt
from eval.terminal import echo, echo_err

HELP = (
    "Select a seeded subset of LongBench rows, apply the official prompts and truncation, write inputs.jsonl."
)


def configure(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("data source (default: the Hugging Face Hub at a pinned revision)")
    src.add_argument(
        "--source",
        choices=["hub", "mini"],
        default="hub",
        help="hub, or the shipped longbench-mini sample (not LongBench data)",
    )
    src.add_argument(
        "--data-dir", type=Path, help="a local LongBench data/ folder or data.zip (air-gapped use)"
    )
    src.add_argument("--repo", default=HUB_REPO, help=f"Hub dataset repository (default {HUB_REPO})")
    src.add_argument("--revision", default=HUB_REVISION, help="pinned Hub revision (default: %(default)s)")
    sel = p.add_argument_group("selection")
    sel.add_argument(
        "--datasets",
        default="qasper,gov_report",
        help=f"comma-separated LongBench v1 names (`<name>_e` for LongBench-E) and/or {V2_DATASET} (LongBench v2)",
    )
    sel.add_argument(
        "--v2-mode",
        choices=list(V2_MODES),
        default=DEFAULT_V2_MODE,
        help=f"how {V2_DATASET} is asked: 0shot, cot (reasoning call, then answer call) or nocontext "
        "(default %(default)s)",
    )
    sel.add_argument("--n", default="16", help="rows per dataset, or 'all' (default 16)")
    sel.add_argument("--seed", type=int, default=20260909, help="selection seed (default 20260909)")
    tok = p.add_argument_group("truncation (one of)")
    tok.add_argument("--base-url", help="a running vLLM server (.../v1): its /tokenize is the tokenizer")
    tok.add_argument(
        "--spec",
        metavar="NAME",
        help="a variant launch spec: its server (started for the call if lbeval manages it) tokenizes",
    )
    add_specs_option(tok)
    tok.add_argument("--model", help="model id at --base-url (default: the first one listed)")
    tok.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the server's API key (never stored or printed; default: the launch "
        "spec's api_key_env)",
    )
    tok.add_argument("--tokenizer", help="a local Hugging Face tokenizer folder (needs transformers)")
    tok.add_argument(
        "--no-truncate", action="store_true", help="no tokenizer, no truncation (for inspection)"
    )
    p.add_argument("--max-model-len", type=int, help="override the model's context length")
    p.add_argument("--max-input-tokens", type=int, help="override the input budget (tokens)")
    p.add_argument("--max-tokens", help="per-dataset output limits, e.g. qasper=512,gov_report=2048")
    p.add_argument("--out", type=Path, required=True, help="inputs manifest to write (JSON Lines)")


def make_tokenizer(args: argparse.Namespace) -> Tokenizer | None:
    chosen = [bool(args.base_url), bool(args.spec), bool(args.tokenizer), bool(args.no_truncate)]
    if sum(chosen) != 1:
        raise ConfigError("choose exactly one of --base-url, --spec, --tokenizer, --no-truncate")
    if args.no_truncate:
        return None
    if args.tokenizer:
        return LocalTokenizer(args.tokenizer, args.max_model_len)
    return ServerTokenizer(args.base_url, args.model, api_key=api_key_from_env(args.api_key_env))


def run(args: argparse.Namespace) -> int:
    if args.spec and not (args.base_url or args.tokenizer or args.no_truncate):
        spec = get_launch_spec(args.spec, args.specs)
        args.model = args.model or spec.model
        args.api_key_env = args.api_key_env or spec.api_key_env
        if args.max_model_len is None and args.max_input_tokens is None:
            args.max_model_len = spec_context_length(spec)  # llama-cpp-python reports none (its --n_ctx)
        with (
            sigterm_as_interrupt(),
            redacted_errors(spec.secrets),
            serving(spec, echo=lambda m: echo_err(m, secrets=spec.secrets)) as url,
        ):
            args.base_url, args.spec = url, None
            return _prepare(args)
    return _prepare(args)


def _secrets(args: argparse.Namespace) -> Secrets:
    """The API key of --api-key-env, redacted from any error line (an unset variable is refused)."""
    return NO_SECRETS.with_(api_key_from_env(args.api_key_env) if args.base_url else None)


def _prepare(args: argparse.Namespace) -> int:
    if args.data_dir is not None:
        source = DataSource("data_dir", path=args.data_dir)
    else:
        source = DataSource(args.source, repo=args.repo, revision=args.revision)
    with redacted_errors(_secrets(args)):  # the key never reaches an error line
        cfg = PrepareConfig(
            source=source,
            datasets=[d.strip() for d in args.datasets.split(",") if d.strip()],
            n=parse_n(args.n),
            seed=args.seed,
            out=args.out,
            tokenizer=make_tokenizer(args),
            max_tokens=parse_max_tokens(args.max_tokens),
            max_input_tokens=args.max_input_tokens,
            max_model_len=args.max_model_len,
            benchmark_options={V2_NAME: V2Options(mode=args.v2_mode)},
        )
        header, rows = prepare(cfg)
    truncated = sum(r.truncated for r in rows)
    echo(
        f"wrote {len(rows)} inputs ({', '.join(f'{d}: {len(v)}' for d, v in header.selected_ids.items())}; "
        f"{truncated} truncated) to {args.out}"
    )
    return 0
