"""Variant launch specs: which server a variant is, and how lbeval starts it.

A *variant* is either a server that is already running (`url = "http://host:8000/v1"`, or a list of URLs: N
running replicas) or one that lbeval starts (`python = ...` or `command = [...]`, plus `args`, `env`, `port`,
`health_timeout`, `log`; `replicas = N` with `devices` for a GPU host). `dp_ranks = N`: the one endpoint routes
to N data-parallel ranks, each pinned by a header (docs/servers/replicas.md). Specs live
in TOML files (`[variants.NAME]` tables); the shipped `eval/serve/variants.toml` holds the embedded CPU server
(`cpu-smollm2`) and variants of it (`cpu-smollm2-1core`, `-fp8kv`, `-chunked`). The README section
"Variant launch specs and the embedded CPU server" documents every field.

Strings in a spec may use `${VAR}` (an environment variable; `LBEVAL_CACHE` defaults to
`$XDG_CACHE_HOME/lbeval` or `~/.cache/lbeval`) and, in `args`, `env` and `log`, the placeholders `{host}`,
`{port}` and `{name}`. A relative `log` is under the runs folder (`--out`, default runs/; `servers/{name}-{port}.log`
by default). Values read from the environment (but the cache path) are the spec's `secrets` (eval.redact.Secrets),
so that what lbeval writes or prints about it shows `<redacted>` instead. Nothing is read at import. Starting and stopping servers is `eval.serve.process`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from eval.errors import ConfigError
from eval.redact import NO_SECRETS, Secrets
from eval.serve.endpoints import MAX_REPLICAS, refuse_repeated_endpoints
from eval.serve.numerics import declared_reason

SHIPPED_SPECS = "variants.toml"
VLLM_MODULE = "vllm.entrypoints.openai.api_server"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_LOG = "servers/{name}-{port}.log"  # relative: under the runs folder (--out)
KNOWN_KEYS = frozenset(
    {
        "description",
        "extends",
        "url",
        "python",
        "module",
        "command",
        "args",
        "extra_args",
        "env",
        "host",
        "port",
        "health_path",
        "health_timeout",
        "stop_timeout",
        "log",
        "model",
        "api_key_env",
        "requires",
        "hint",
        "replicas",
        "devices",
        "dp_ranks",
        "scenarios",
        "numerics",
        "cache_model",
    }
)
# `scenarios = { names = ["cache", "batch"], batch_sizes = [1, 4], repeats = 10, hit_lengths = [...],
# inputs = 4, max_tokens = 8 }`: what `lbeval run --spec NAME` measures unless its options say otherwise
# what only a server lbeval starts has (a running one's spec with any of them is refused)
LAUNCH_ONLY = frozenset(
    [
        "python",
        "module",
        "command",
        "args",
        "extra_args",
        "env",
        "port",
        "log",
        "requires",
        "replicas",
        "devices",
    ]
)
SCENARIO_KEYS = {
    "names": str,
    "batch_sizes": int,
    "repeats": int,
    "hit_lengths": int,
    "inputs": int,
    "max_tokens": int,
}

Echo = Callable[[str], None]


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$LBEVAL_CACHE`, else `$XDG_CACHE_HOME/lbeval`, else `~/.cache/lbeval` (the Makefile agrees)."""
    env = os.environ if environ is None else environ
    if env.get("LBEVAL_CACHE"):
        return Path(env["LBEVAL_CACHE"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "lbeval"


@dataclass(frozen=True)
class LaunchSpec:
    """One variant, validated. `url` set: already running. Otherwise `command` + `args` start it."""

    name: str
    source: str  # the file that defined it
    description: str = ""
    url: str | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int | None = None  # None: a free port chosen at start ("auto")
    health_path: str = "/health"
    health_timeout: float = 600.0
    stop_timeout: float = 30.0
    log: str = DEFAULT_LOG
    model: str | None = None  # the served model name, when the spec knows it
    api_key_env: str | None = None
    requires: tuple[str, ...] = ()  # paths that must exist before starting
    hint: str = ""  # what to do when one of them is missing
    scenarios: dict[str, Any] = field(default_factory=dict)  # SCENARIO_KEYS; names checked by `lbeval run`
    replicas: int = 1  # `lbeval run` starts this many servers, each on a free port (eval/run/replicas.py)
    # running replicas: every endpoint's URL (`url` given as a list; `url` is the first), else empty
    urls: tuple[str, ...] = ()
    # a GPU spec's devices, split evenly between its replicas as CUDA_VISIBLE_DEVICES; "auto": the host's
    # (eval/run/replicas.host_devices); None: not a GPU spec (CPU replicas get thread binding instead)
    devices: tuple[int, ...] | str | None = None
    dp_ranks: int = 1  # a routing endpoint's data-parallel ranks, each pinned by X-data-parallel-rank
    # `numerics = "changed: REASON"`: the variant changes numerics on purpose (eval/serve/numerics.py); "" none.
    # The run writes it into each session of its manifest, the gate's cross_variant_cold rule names it
    numerics: str = ""
    # `cache_model = "checkpoints"`: what the server's prefix cache can hit, as the spec states it (the probe
    # still measures it, and the run stops when the two disagree: eval/run/config.py); "" not stated
    cache_model: str = ""
    # the values its `${VAR}`s read from the environment: redacted wherever lbeval writes or prints them
    secrets: Secrets = field(default=NO_SECRETS, repr=False, compare=False)

    @property
    def managed(self) -> bool:
        return self.url is None


# ---------------------------------------------------------------------------------------------- loading


def _expand(value: str, where: str, environ: Mapping[str, str]) -> str:
    def repl(match: re.Match[str]) -> str:
        var = match.group(1)
        if var == "LBEVAL_CACHE":
            return str(default_cache_dir(environ))
        if var not in environ:
            raise ConfigError(f"{where}: environment variable {var} is not set")
        return environ[var]

    return os.path.expanduser(ENV_RE.sub(repl, value))


def _strings(value: Any, where: str, environ: Mapping[str, str]) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise ConfigError(f"{where}: expected a list of strings")
    return tuple(_expand(str(v), where, environ) for v in value)


def env_secrets(raw: Any, environ: Mapping[str, str]) -> Secrets:
    """What the `${VAR}`s in a spec's strings (lists and tables walked) read from the environment, but the cache
    path: the spec's secrets."""
    if isinstance(raw, str):
        return NO_SECRETS.with_(*(environ.get(v) for v in ENV_RE.findall(raw) if v != "LBEVAL_CACHE"))
    items = raw.values() if isinstance(raw, Mapping) else raw if isinstance(raw, list) else []
    found = NO_SECRETS
    for item in items:
        found = found | env_secrets(item, environ)
    return found


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}: expected a positive number of seconds, got {value!r}")
    return float(value)


def _port(value: Any, where: str) -> int | None:
    if value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ConfigError(f'{where}: expected "auto" or a port number 1-65535, got {value!r}')
    return value


def _text(raw: Mapping[str, Any], key: str, where: str, environ: Mapping[str, str]) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key}: expected a string, got {value!r}")
    return _expand(value, f"{where}.{key}", environ)


def _launch_command(raw: Mapping[str, Any], where: str, environ: Mapping[str, str]) -> tuple[str, ...]:
    if "python" in raw and "command" in raw:
        raise ConfigError(f"{where}: give either python or command, not both")
    if "command" in raw:
        if "module" in raw:
            raise ConfigError(f"{where}.module: only with python")
        command = _strings(raw["command"], f"{where}.command", environ)
        if not command:
            raise ConfigError(f"{where}.command: empty")
        return command
    python = _text(raw, "python", where, environ)
    module = _text(raw, "module", where, environ) or VLLM_MODULE
    if python is None:
        raise ConfigError(f"{where}: give url (a running server), or python or command (a server to start)")
    return (python, "-m", module)


def _env(value: Any, where: str, environ: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table of NAME = value")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            item = "1" if item else "0"
        if not isinstance(item, str | int | float):
            raise ConfigError(f"{where}.{key}: expected a string or number, got {item!r}")
        out[str(key)] = _expand(str(item), f"{where}.{key}", environ)
    return out


def _scenarios(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f'{where}: expected a table, e.g. {{ names = ["cache", "batch"] }}')
    out: dict[str, Any] = {}
    for key, item in value.items():
        kind = SCENARIO_KEYS.get(key)
        if kind is None:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(SCENARIO_KEYS)})")
        listed = key in ("names", "batch_sizes", "hit_lengths")
        items = item if listed and isinstance(item, list) else [item]
        if (listed and not isinstance(item, list)) or not all(
            isinstance(v, kind) and not isinstance(v, bool) for v in items
        ):
            shape = f"a list of {kind.__name__}" if listed else kind.__name__
            raise ConfigError(f"{where}.{key}: expected {shape}, got {item!r}")
        out[key] = list(item) if listed else item
    return out


def _external(
    name: str, source: str, raw: Mapping[str, Any], where: str, env: Mapping[str, str]
) -> LaunchSpec:
    launch_only = sorted(LAUNCH_ONLY & raw.keys())
    if launch_only:
        raise ConfigError(f"{where}: url (a running server) cannot be combined with {', '.join(launch_only)}")
    urls = _urls(raw["url"], f"{where}.url", env)
    return LaunchSpec(
        name=name,
        source=source,
        description=_text(raw, "description", where, env) or "",
        url=urls[0],
        urls=urls if len(urls) > 1 else (),
        dp_ranks=_dp_ranks(raw.get("dp_ranks", 1), f"{where}.dp_ranks", len(urls)),
        model=_text(raw, "model", where, env),
        api_key_env=_text(raw, "api_key_env", where, env),
        scenarios=_scenarios(raw.get("scenarios", {}), f"{where}.scenarios"),
        numerics=_numerics(raw, where),
        cache_model=_stated_model(raw, where),
    )


def _stated_model(raw: Mapping[str, Any], where: str) -> str:
    """`cache_model`, a kind name ("" when the spec states none; the run checks it against the known kinds)."""
    value = raw.get("cache_model", "")
    if not isinstance(value, str):
        raise ConfigError(f"{where}.cache_model: expected a cache model kind (a string), got {value!r}")
    return value


def _numerics(raw: Mapping[str, Any], where: str) -> str:
    """`numerics`, validated ("" when the spec declares no numerics change)."""
    value = raw.get("numerics", "")
    declared_reason(value, f"{where}.numerics")
    return str(value)


def _urls(value: Any, where: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """`url`: one running server's URL, or a list of them (N running replicas, like --base-url repeated)."""
    listed = value if isinstance(value, list) else [value]
    if not listed or len(listed) > MAX_REPLICAS or not all(isinstance(u, str) for u in listed):
        raise ConfigError(f"{where}: expected a URL or a list of 1-{MAX_REPLICAS} URLs, got {value!r}")
    out = tuple(_expand(u, where, env).rstrip("/") for u in listed)
    for url in out:
        if not re.match(r"^https?://[^/\s]+", url):
            raise ConfigError(f"{where}: expected http(s)://host:port/v1, got {url!r}")
    refuse_repeated_endpoints(out, where)  # one replica each, however each URL is spelled
    return out


def _dp_ranks(value: Any, where: str, endpoints: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPLICAS:
        raise ConfigError(
            f"{where}: expected a whole number of data-parallel ranks 1-{MAX_REPLICAS}, got {value!r}"
        )
    if value > 1 and endpoints > 1:
        raise ConfigError(f"{where}: dp_ranks routes through one endpoint, not {endpoints} (url or replicas)")
    return value


def _devices(value: Any, where: str) -> tuple[int, ...] | str:
    if value == "auto":
        return "auto"
    ok = (
        isinstance(value, list)
        and value
        and all(isinstance(d, int) and not isinstance(d, bool) for d in value)
    )
    if not ok or min(value) < 0 or len(set(value)) != len(value):
        raise ConfigError(f'{where}: expected "auto" or a list of distinct device numbers, got {value!r}')
    return tuple(value)


def _replicas(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPLICAS:
        raise ConfigError(f"{where}: expected a whole number of servers 1-{MAX_REPLICAS}, got {value!r}")
    return value


def parse_spec(name: str, raw: Mapping[str, Any], source: str, environ: Mapping[str, str]) -> LaunchSpec:
    """Validate one variant table (already merged with what it extends)."""
    where = f"{source}: variants.{name}"
    if not NAME_RE.match(name):
        raise ConfigError(f"{where}: a variant name uses letters, digits, '.', '_' and '-' only")
    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    if "url" in raw:
        return replace(_external(name, source, raw, where, environ), secrets=env_secrets(raw, environ))
    args = _strings(raw.get("args", []), f"{where}.args", environ)
    args += _strings(raw.get("extra_args", []), f"{where}.extra_args", environ)
    return LaunchSpec(
        name=name,
        source=source,
        description=_text(raw, "description", where, environ) or "",
        command=_launch_command(raw, where, environ),
        args=args,
        env=_env(raw.get("env", {}), f"{where}.env", environ),
        host=_text(raw, "host", where, environ) or "127.0.0.1",
        port=_port(raw.get("port", "auto"), f"{where}.port"),
        health_path=_text(raw, "health_path", where, environ) or "/health",
        health_timeout=_number(raw.get("health_timeout", 600), f"{where}.health_timeout"),
        stop_timeout=_number(raw.get("stop_timeout", 30), f"{where}.stop_timeout"),
        log=_text(raw, "log", where, environ) or DEFAULT_LOG,
        model=_text(raw, "model", where, environ),
        api_key_env=_text(raw, "api_key_env", where, environ),
        requires=_strings(raw.get("requires", []), f"{where}.requires", environ),
        hint=_text(raw, "hint", where, environ) or "",
        scenarios=_scenarios(raw.get("scenarios", {}), f"{where}.scenarios"),
        numerics=_numerics(raw, where),
        cache_model=_stated_model(raw, where),
        replicas=_replicas(raw.get("replicas", 1), f"{where}.replicas"),
        devices=None if raw.get("devices") is None else _devices(raw["devices"], f"{where}.devices"),
        dp_ranks=_dp_ranks(
            raw.get("dp_ranks", 1), f"{where}.dp_ranks", _replicas(raw.get("replicas", 1), where)
        ),
        secrets=env_secrets(raw, environ),
    )


def _merge(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """`extends`: the child's fields win; env tables merge; extra_args append to the parent's.

    A child that names its own launcher (python or command) or a url drops the parent's launcher.
    """
    merged = {k: v for k, v in parent.items() if k != "extends"}
    if "url" in child:  # a running server inherits nothing about launching
        merged = {
            k: v
            for k, v in merged.items()
            if k
            in ("description", "model", "api_key_env", "scenarios", "dp_ranks", "numerics", "cache_model")
        }
    if child.keys() & {"python", "command", "url"}:
        for key in ("python", "module", "command", "url"):
            merged.pop(key, None)
    for key, value in child.items():
        if key == "env" and isinstance(value, dict) and isinstance(merged.get("env"), dict):
            merged["env"] = {**merged["env"], **value}
        elif key == "extra_args" and isinstance(value, list) and isinstance(merged.get("extra_args"), list):
            merged["extra_args"] = [*merged["extra_args"], *value]
        else:
            merged[key] = value
    return merged


def _resolve(
    name: str, tables: Mapping[str, tuple[str, dict[str, Any]]], seen: tuple[str, ...] = ()
) -> dict[str, Any]:
    source, raw = tables[name]
    parent = raw.get("extends")
    if parent is None:
        return dict(raw)
    where = f"{source}: variants.{name}.extends"
    if not isinstance(parent, str) or parent not in tables:
        raise ConfigError(f"{where}: no variant named {parent!r}")
    if parent in (*seen, name):
        raise ConfigError(f"{where}: circular ({' -> '.join((*seen, name, parent))})")
    return _merge(_resolve(parent, tables, (*seen, name)), raw)


def _read_tables(text: str, source: str) -> dict[str, tuple[str, dict[str, Any]]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    extra = sorted(set(data) - {"variants"})
    if extra:
        raise ConfigError(
            f"{source}: unknown top-level key(s) {', '.join(extra)} (expected [variants.NAME] tables)"
        )
    variants = data.get("variants", {})
    tables: dict[str, tuple[str, dict[str, Any]]] = {}
    for name, raw in variants.items():
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: variants.{name}: expected a table")
        tables[name] = (source, raw)
    return tables


def load_launch_specs(
    files: Sequence[Path] = (), *, environ: Mapping[str, str] | None = None, shipped: bool = True
) -> dict[str, LaunchSpec]:
    """The shipped specs, then each file's on top (a later file's variant replaces one of the same name)."""
    env = os.environ if environ is None else environ
    tables: dict[str, tuple[str, dict[str, Any]]] = {}
    if shipped:
        text = resources.files("eval.serve").joinpath(SHIPPED_SPECS).read_text(encoding="utf-8")
        tables.update(_read_tables(text, f"eval/serve/{SHIPPED_SPECS}"))
    for path in files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read launch specs: {exc.strerror}") from exc
        tables.update(_read_tables(text, str(path)))
    return {name: parse_spec(name, _resolve(name, tables), tables[name][0], env) for name in tables}


def get_launch_spec(
    name: str, files: Sequence[Path] = (), *, environ: Mapping[str, str] | None = None
) -> LaunchSpec:
    specs = load_launch_specs(files, environ=environ)
    if name not in specs:
        known = ", ".join(sorted(specs)) or "none"
        raise ConfigError(f"no variant launch spec named {name!r} (known: {known})")
    return specs[name]


def flag_int(server_args: Sequence[str], flag: str) -> int | None:
    """The integer after `flag` (or in `flag=N`) in a launch spec's server arguments, else None."""
    for i, arg in enumerate(server_args):
        value = server_args[i + 1] if arg == flag and i + 1 < len(server_args) else None
        if arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
        if value is not None and value.isdigit():
            return int(value)
    return None


def spec_context_length(spec: LaunchSpec) -> int | None:
    """The context length a spec starts a server that does not report one with: llama-cpp-python's --n_ctx
    (vLLM reports its own max_model_len in /v1/models, so its flag is not read here)."""
    return flag_int(spec.args, "--n_ctx")


def spec_for_run(
    variant: str, spec_name: str | None, files: Sequence[Path], base_url: str | None
) -> LaunchSpec | None:
    """Which launch spec `lbeval run` uses: `--spec NAME`; else none with `--base-url`; else the spec named
    like the variant, if there is one (None: the caller needs a base URL)."""
    if spec_name is not None:
        if base_url is not None:
            raise ConfigError("give --spec (a server lbeval starts or knows) or --base-url, not both")
        return get_launch_spec(spec_name, files)
    if base_url is not None:
        return None
    return load_launch_specs(files).get(variant)
