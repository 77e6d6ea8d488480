"""`lbeval serve --variant NAME`: start a variant's server, print its base URL, keep it up until Ctrl-C."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from eval.commands.options import add_specs_option
from eval.redact import redacted_errors
from eval.serve.launch_specs import get_launch_spec
from eval.serve.process import sigterm_as_interrupt, start
from eval.terminal import echo

HELP = "start a variant's server (launch spec) and keep it running until Ctrl-C"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variant", required=True, help="launch spec name, e.g. cpu-smollm2 (eval/serve/variants.toml)"
    )
    add_specs_option(parser)
    parser.add_argument("--port", type=int, default=None, help="listen on this port (default: the spec's)")
    parser.add_argument("--log", type=Path, default=None, help="server log file (default: the spec's)")


def run(args: argparse.Namespace) -> int:
    spec = get_launch_spec(args.variant, args.specs)
    if not spec.managed:
        echo(f"lbeval serve: {spec.name} is a server already running at {spec.url}; nothing to start")
        return 0
    say = lambda m: echo(m, flush=True, secrets=spec.secrets)  # noqa: E731
    with sigterm_as_interrupt(), redacted_errors(spec.secrets):
        try:
            with start(spec, port=args.port, log=args.log, echo=say) as server:
                echo(
                    f"{spec.name}: serving at {server.base_url} (pid {server.pid}); Ctrl-C stops it",
                    flush=True,
                )
                echo(
                    f"  lbeval run --variant {spec.name} --base-url {server.base_url} --inputs FILE",
                    flush=True,
                )
                while server.alive():
                    time.sleep(0.5)
                code = server.process.returncode
                echo(f"lbeval serve: {spec.name} exited by itself with code {code}; log: {server.log_path}")
                return 1
        except KeyboardInterrupt:
            echo(f"lbeval serve: stopped {spec.name}", flush=True)
            return 0
