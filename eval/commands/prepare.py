"""`lbeval prepare`: select LongBench rows and write the inputs manifest (what will be asked)."""

from __future__ import annotations

import argparse
from collections.abc import Collection
from pathlib import Path

from eval.benchmark_registry import REGISTRY, BenchmarkRegistry
from eval.benchmarks.longbench.sources import HUB_REPO, HUB_REVISION
from eval.commands.options import add_specs_option
from eval.errors import ConfigError
from eval.prepare.benchmark_part import PREPARE_ARGS
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


def configure(p: argparse.ArgumentParser, registry: BenchmarkRegistry = REGISTRY) -> None:
    """prepare's options, with each benchmark's own (`registry`: the loaded benchmarks) after --datasets."""
    _add_options(p, registry, prepare_dests())


HELP_DEST = "help"  # argparse's -h/--help, which every parser has


def prepare_dests() -> set[str]:
    """The dests of prepare's own options, which no benchmark may take: -h/--help's and each option's prepare
    declares (the Action its add_argument returns, on a scratch parser without any benchmark's)."""
    scratch = argparse.ArgumentParser(add_help=False)
    return {HELP_DEST, *(action.dest for action in _add_options(scratch, None, set()))}


def _add_options(
    p: argparse.ArgumentParser, registry: BenchmarkRegistry | None, own: set[str]
) -> list[argparse.Action]:
    """prepare's options, each benchmark's of `registry` after --datasets (None: prepare's own only); returns
    prepare's own, as declared."""
    declared = _source_options(p)
    sel = p.add_argument_group("selection")
    declared.append(
        sel.add_argument(
            "--datasets",
            default="qasper,gov_report",
            help=f"comma-separated {datasets_help(registry) if registry is not None else ''}",
        )
    )
    if registry is not None:
        add_benchmark_options(sel, registry, own)
    declared += [
        sel.add_argument("--n", default="16", help="rows per dataset, or 'all' (default 16)"),
        sel.add_argument("--seed", type=int, default=20260909, help="selection seed (default 20260909)"),
    ]
    return [
        *declared,
        *_truncation_options(p),
        p.add_argument("--max-model-len", type=int, help="override the model's context length"),
        p.add_argument("--max-input-tokens", type=int, help="override the input budget (tokens)"),
        p.add_argument("--max-tokens", help="per-dataset output limits, e.g. qasper=512,gov_report=2048"),
        p.add_argument("--out", type=Path, required=True, help="inputs manifest to write (JSON Lines)"),
    ]


def _source_options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    src = p.add_argument_group("data source (default: the Hugging Face Hub at a pinned revision)")
    return [
        src.add_argument(
            "--source",
            choices=["hub", "mini"],
            default="hub",
            help="hub, or the shipped longbench-mini sample (not LongBench data)",
        ),
        src.add_argument(
            "--data-dir", type=Path, help="a local LongBench data/ folder or data.zip (air-gapped use)"
        ),
        src.add_argument("--repo", default=HUB_REPO, help=f"Hub dataset repository (default {HUB_REPO})"),
        src.add_argument(
            "--revision", default=HUB_REVISION, help="pinned Hub revision (default: %(default)s)"
        ),
    ]


def _truncation_options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    tok = p.add_argument_group("truncation (one of)")
    return [
        tok.add_argument("--base-url", help="a running vLLM server (.../v1): its /tokenize is the tokenizer"),
        tok.add_argument(
            "--spec",
            metavar="NAME",
            help="a variant launch spec: its server (started for the call if lbeval manages it) tokenizes",
        ),
        add_specs_option(tok),
        tok.add_argument("--model", help="model id at --base-url (default: the first one listed)"),
        tok.add_argument(
            "--api-key-env",
            metavar="VAR",
            help="environment variable holding the server's API key (never stored or printed; default: the "
            "launch spec's api_key_env)",
        ),
        tok.add_argument("--tokenizer", help="a local Hugging Face tokenizer folder (needs transformers)"),
        tok.add_argument(
            "--no-truncate", action="store_true", help="no tokenizer, no truncation (for inspection)"
        ),
    ]


def datasets_help(registry: BenchmarkRegistry = REGISTRY) -> str:
    """How --datasets names each loaded benchmark's datasets, in load order."""
    return " and/or ".join(entry.datasets for entry in registry.entries(PREPARE_ARGS).values())


def add_benchmark_options(
    group: argparse._ArgumentGroup, registry: BenchmarkRegistry, own: Collection[str]
) -> None:
    """Every loaded benchmark's own options (its entry in PREPARE_ARGS), in load order. Two benchmarks declaring
    one option, a benchmark declaring one of prepare's own (`own`, by dest), or options without the `make` that
    reads them is refused (ValueError, one line): an lbeval bug."""
    taken = dict.fromkeys(own, "lbeval prepare")
    for name, args in registry.entries(PREPARE_ARGS).items():
        if args.options and args.make is None:
            raise ValueError(f"benchmark {name!r} declares prepare options but no `make` to read them")
        for option in args.options:
            if option.dest in taken:
                raise ValueError(
                    f"benchmark {name!r}: the prepare option {option.flag} is {taken[option.dest]}'s"
                )
            taken[option.dest] = f"benchmark {name!r}"
            choices = list(option.choices) if option.choices is not None else None
            group.add_argument(option.flag, choices=choices, default=option.default, help=option.help)


def benchmark_options(args: argparse.Namespace, registry: BenchmarkRegistry = REGISTRY) -> dict[str, object]:
    """Each loaded benchmark's options object, made by the benchmark from its parsed options (by dest)."""
    return {
        name: entry.make({option.dest: getattr(args, option.dest) for option in entry.options})
        for name, entry in registry.entries(PREPARE_ARGS).items()
        if entry.make is not None
    }


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
            benchmark_options=benchmark_options(args),
        )
        header, rows = prepare(cfg)
    truncated = sum(r.truncated for r in rows)
    echo(
        f"wrote {len(rows)} inputs ({', '.join(f'{d}: {len(v)}' for d, v in header.selected_ids.items())}; "
        f"{truncated} truncated) to {args.out}"
    )
    return 0
