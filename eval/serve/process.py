"""Variant launch specs, and the servers lbeval starts and stops itself.

A *variant* is either a server that is already running (`url = "http://host:8000/v1"`) or one that lbeval
starts (`python = ...` or `command = [...]`, plus `args`, `env`, `port`, `health_timeout`, `log`). Specs live
in TOML files (`[variants.NAME]` tables); the shipped `eval/serve/variants.toml` holds the embedded CPU server
(`cpu-smollm2`) and variants of it (`cpu-smollm2-1core`, `-fp8kv`, `-chunked`). The README section
"Variant launch specs and the embedded CPU server" documents every field.

Strings in a spec may use `${VAR}` (an environment variable; `LBEVAL_CACHE` defaults to
`$XDG_CACHE_HOME/lbeval` or `~/.cache/lbeval`) and, in `args`, `env` and `log`, the placeholders `{host}`,
`{port}` and `{name}`. Nothing is read at import.

`start(spec)` launches a managed server in its own process group (session), waits for `GET /health`,
fails fast with the log's tail when the process dies, and returns a `ManagedServer`, a context manager whose
`stop()` ends exactly that process group (SIGTERM, then SIGKILL). The server also receives SIGTERM if
lbeval itself dies (Linux parent-death signal).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from eval.errors import ConfigError, LbevalError

SHIPPED_SPECS = "variants.toml"
VLLM_MODULE = "vllm.entrypoints.openai.api_server"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_LOG = "runs/servers/{name}-{port}.log"
SERVERS_LOG = "servers.jsonl"  # in a run directory: one line per session whose server lbeval started
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
    }
)

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


def _external(
    name: str, source: str, raw: Mapping[str, Any], where: str, env: Mapping[str, str]
) -> LaunchSpec:
    launch_only = sorted(
        {"python", "module", "command", "args", "extra_args", "env", "port", "log", "requires"} & raw.keys()
    )
    if launch_only:
        raise ConfigError(f"{where}: url (a running server) cannot be combined with {', '.join(launch_only)}")
    url = _text(raw, "url", where, env) or ""
    if not re.match(r"^https?://[^/\s]+", url):
        raise ConfigError(f"{where}.url: expected http(s)://host:port/v1, got {url!r}")
    return LaunchSpec(
        name=name,
        source=source,
        description=_text(raw, "description", where, env) or "",
        url=url.rstrip("/"),
        model=_text(raw, "model", where, env),
        api_key_env=_text(raw, "api_key_env", where, env),
    )


def parse_spec(name: str, raw: Mapping[str, Any], source: str, environ: Mapping[str, str]) -> LaunchSpec:
    """Validate one variant table (already merged with what it extends)."""
    where = f"{source}: variants.{name}"
    if not NAME_RE.match(name):
        raise ConfigError(f"{where}: a variant name uses letters, digits, '.', '_' and '-' only")
    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    if "url" in raw:
        return _external(name, source, raw, where, environ)
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
    )


def _merge(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """`extends`: the child's fields win; env tables merge; extra_args append to the parent's.

    A child that names its own launcher (python or command) or a url drops the parent's launcher.
    """
    merged = {k: v for k, v in parent.items() if k != "extends"}
    if "url" in child:  # a running server inherits nothing about launching
        merged = {k: v for k, v in merged.items() if k in ("description", "model", "api_key_env")}
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
        tables.update(_read_tables(text, f"eval/{SHIPPED_SPECS}"))
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


def append_server_record(run_dir: Path, info: Mapping[str, Any]) -> None:
    """Note in `run_dir/servers.jsonl` which server lbeval started for a session of that run."""
    with (run_dir / SERVERS_LOG).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(info, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------------------------- running


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _fill(value: str, name: str, host: str, port: int) -> str:
    return value.replace("{name}", name).replace("{host}", host).replace("{port}", str(port))


def tail(path: Path, lines: int = 25) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - a URL we built
            return 200 <= int(resp.status) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _parent_death_signal() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGTERM if the lbeval process that started it dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ManagedServer:
    """A server process lbeval started; `stop()` (or leaving the `with` block) ends its process group."""

    def __init__(self, spec: LaunchSpec, process: subprocess.Popen[bytes], host: str, port: int, log: Path):
        self.spec, self.process, self.host, self.port, self.log_path = spec, process, host, port, log
        self.started_at = time.monotonic()
        self.healthy_after_s: float | None = None
        atexit.register(self.stop)

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (what `lbeval run --base-url` takes)."""
        return f"{self.root_url}/v1"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def describe(self) -> dict[str, Any]:
        """What was started, for run provenance (env values whose names suggest secrets are withheld)."""
        secret = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
        env = {k: ("<withheld>" if secret.search(k) else v) for k, v in self.spec.env.items()}
        return {
            "spec": self.spec.name,
            "source": self.spec.source,
            "argv": list(self.process.args) if isinstance(self.process.args, list) else [],
            "env": env,
            "port": self.port,
            "log": str(self.log_path),
            "healthy_after_s": self.healthy_after_s,
        }

    def wait_healthy(self, timeout: float | None = None, poll_s: float = 0.5) -> None:
        """Poll the health URL until it answers 2xx; raise with the log's tail if the process dies first."""
        limit = self.spec.health_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        url = self.root_url + self.spec.health_path
        while True:
            code = self.process.poll()
            if code is not None:
                raise LbevalError(
                    f"server {self.spec.name} exited with code {code} before {url} answered; "
                    f"last lines of {self.log_path}:\n{tail(self.log_path)}"
                )
            if _http_ok(url):
                self.healthy_after_s = time.monotonic() - self.started_at
                return
            if time.monotonic() > deadline:
                raise LbevalError(
                    f"server {self.spec.name} did not answer {url} within {limit:g} s "
                    f"(health_timeout); last lines of {self.log_path}:\n{tail(self.log_path)}"
                )
            time.sleep(poll_s)

    def _signal_group(self, sig: int) -> bool:
        try:
            os.killpg(self.process.pid, sig)  # the group we created: this server and its workers only
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def stop(self) -> None:
        """SIGTERM the server's process group, wait `stop_timeout`, then SIGKILL what is left. Idempotent."""
        atexit.unregister(self.stop)
        if self.process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(self.spec.stop_timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.process.wait()
        # workers of the group may outlive the leader for a moment: give them a few seconds, then kill
        deadline = time.monotonic() + 5.0
        while self._signal_group(0) and time.monotonic() < deadline:
            time.sleep(0.1)
        self._signal_group(signal.SIGKILL)

    def __enter__(self) -> ManagedServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def check_requirements(spec: LaunchSpec) -> None:
    missing = [p for p in spec.requires if not Path(p).exists()]
    if missing:
        hint = f"; {spec.hint}" if spec.hint else ""
        raise ConfigError(f"variant {spec.name} ({spec.source}): missing {', '.join(missing)}{hint}")


def launch(spec: LaunchSpec, *, port: int | None = None, log: Path | None = None) -> ManagedServer:
    """Start the process (no health wait). `port`/`log` override the spec's."""
    if not spec.managed:
        raise ConfigError(f"variant {spec.name} is a running server at {spec.url}; lbeval does not start it")
    check_requirements(spec)
    chosen = port or spec.port or free_port(spec.host)
    log_path = log or Path(_fill(spec.log, spec.name, spec.host, chosen))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [*spec.command, *(_fill(a, spec.name, spec.host, chosen) for a in spec.args)]
    env = {**os.environ, **{k: _fill(v, spec.name, spec.host, chosen) for k, v in spec.env.items()}}
    with log_path.open("ab") as fh:
        fh.write(
            f"\n=== lbeval: {time.strftime('%FT%T%z')} starting {spec.name}: {shlex.join(argv)}\n".encode()
        )
        fh.flush()
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_parent_death_signal if sys.platform.startswith("linux") else None,  # noqa: PLW1509
            )
        except OSError as exc:
            hint = f"; {spec.hint}" if spec.hint else ""
            raise ConfigError(f"variant {spec.name}: cannot start {argv[0]}: {exc.strerror}{hint}") from exc
    return ManagedServer(spec, process, spec.host, chosen, log_path)


def start(
    spec: LaunchSpec,
    *,
    port: int | None = None,
    log: Path | None = None,
    health_timeout: float | None = None,
    echo: Echo | None = None,
) -> ManagedServer:
    """Launch the variant's server and wait until it is healthy; on any failure the process is stopped."""
    say = echo or (lambda _msg: None)
    server = launch(spec, port=port, log=log)
    say(f"lbeval: starting {spec.name} (pid {server.pid}) on {server.root_url}; log: {server.log_path}")
    try:
        server.wait_healthy(health_timeout)
    except BaseException:
        server.stop()
        raise
    say(f"lbeval: {spec.name} healthy after {server.healthy_after_s:.1f} s at {server.base_url}")
    return server


@contextlib.contextmanager
def serving(spec: LaunchSpec, *, echo: Echo | None = None, port: int | None = None) -> Iterator[str]:
    """Yield the variant's base URL: the running server's URL, or a managed server's, stopped on exit."""
    if not spec.managed:
        yield str(spec.url)
        return
    with start(spec, port=port, echo=echo) as server:
        yield server.base_url


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise KeyboardInterrupt, so `with` blocks stop their servers.

    SIGINT is set too because a shell starts background jobs (`lbeval serve &`) with SIGINT ignored.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = (signal.signal(signal.SIGTERM, handler), signal.signal(signal.SIGINT, handler))
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
