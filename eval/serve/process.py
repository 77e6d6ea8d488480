"""The servers lbeval starts and stops itself (from a launch spec, eval.serve.launch_specs).

`start(spec)` launches a managed server in its own process group (session), waits for `GET /health`,
fails fast with the log's tail when the process dies, and returns a `ManagedServer`, a context manager whose
`stop()` ends exactly that process group (SIGTERM, then SIGKILL). A fixed port something already listens on
is refused (that other server would answer the health check). The server also receives SIGTERM if
lbeval itself dies (Linux parent-death signal). A server that exits while lbeval talks to it (vLLM's engine dying
on the first request) is reported as such by `ManagedServer.reported_if_dead`: "server NAME exited with code N;
its log: PATH; last error: ...", not as the connection failures it left behind.
"""

from __future__ import annotations

import atexit
import contextlib
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
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from eval.errors import ConfigError, LbevalError
from eval.redact import NO_SECRETS, Secrets, redact_argv, redact_env, redact_text
from eval.serve.launch_specs import Echo, LaunchSpec

RUNS = Path("runs")  # the runs folder by default (`--out`): a relative server log goes under it


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(host: str, port: int) -> bool:
    """Something accepts connections at host:port (a server there would answer our health check)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        return sock.connect_ex((host, port)) == 0


def _fill(value: str, name: str, host: str, port: int) -> str:
    return value.replace("{name}", name).replace("{host}", host).replace("{port}", str(port))


def tail(path: Path, lines: int = 25, max_bytes: int = 64 * 1024) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - max_bytes))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


_ERROR_LINE = re.compile(r"Error\b|Exception\b|\bERROR\b|\berror:|Traceback|Killed")
DEATH_GRACE_S = 10.0  # how long a server whose connections fail may take to exit before it counts as alive


def last_error(log_text: str, secrets: Secrets = NO_SECRETS) -> str | None:
    """The last line of a server log that names an error (an exception's last line, an ERROR record)."""
    for line in reversed(log_text.splitlines()):
        if _ERROR_LINE.search(line):
            return redact_text(line.strip(), secrets)[:400]
    return None


# vLLM's engine dying: the worker's or the engine core's fatal error, or the API server's EngineDeadError after it
_ENGINE_DEATH = re.compile(
    r"WorkerProc hit an exception|EngineCore encountered a fatal error|EngineDeadError"
)
_EXCEPTION = re.compile(r"\b([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")
DEATH_LOG_BYTES = (
    512 * 1024
)  # how much of a log's end is searched for the engine's death (tracebacks pile up)


def engine_death(log_text: str, secrets: Secrets = NO_SECRETS) -> str | None:
    """When the log shows vLLM's engine dying, its root cause: the first exception line (`TypeError: ...`) from
    the first line that names the death on; "cause not in the log" when none follows. None when the log shows no
    engine death (a server that exited for another reason)."""
    lines = log_text.splitlines()
    start = next((i for i, line in enumerate(lines) if _ENGINE_DEATH.search(line)), None)
    if start is None:
        return None
    for line in lines[start:]:
        found = _EXCEPTION.search(line)
        if found:
            return redact_text(f"{found.group(1)}: {found.group(2)}".strip(), secrets)[:400]
    return "cause not in the log"


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
        """What was started, for run provenance, with secrets redacted (eval.redact)."""
        argv = [str(a) for a in self.process.args] if isinstance(self.process.args, list) else []
        return {
            "spec": self.spec.name,
            "source": self.spec.source,
            "argv": redact_argv(argv, self.spec.secrets),
            "env": redact_env(self.spec.env, self.spec.secrets),
            "port": self.port,
            "log": str(self.log_path),
            "healthy_after_s": self.healthy_after_s,
        }

    def _tail(self) -> str:
        """The log's last lines, the spec's secrets redacted (the server may print what it was started with)."""
        return redact_text(tail(self.log_path), self.spec.secrets)

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
                    f"last lines of {self.log_path}:\n{self._tail()}"
                )
            if _http_ok(url):
                self.healthy_after_s = time.monotonic() - self.started_at
                return
            if time.monotonic() > deadline:
                raise LbevalError(
                    f"server {self.spec.name} did not answer {url} within {limit:g} s "
                    f"(health_timeout); last lines of {self.log_path}:\n{self._tail()}"
                )
            time.sleep(poll_s)

    def exit_report(self, grace_s: float = 0.0, answered: Callable[[], int] | None = None) -> str | None:
        """None while the process runs (after waiting up to `grace_s` for it to exit); else one line: its exit
        code, its engine's death when the log shows one (its root cause, and with `answered`, the number of
        completions this server answered before, the request it died on: the next), its log and the log's
        last error line."""
        try:
            code = self.process.wait(grace_s) if grace_s > 0 else self.process.poll()
        except subprocess.TimeoutExpired:
            return None
        if code is None:
            return None
        error = last_error(tail(self.log_path, 200), self.spec.secrets)
        death = engine_death(tail(self.log_path, 100_000, DEATH_LOG_BYTES), self.spec.secrets)
        died = ""
        if death is not None:
            done = None if answered is None else answered()
            on = "" if done is None else f" on request {done + 1} ({done} answered before it)"
            died = f": its engine died{on}: {death}"
        return (
            f"server {self.spec.name} exited with code {code}{died}; its log: {self.log_path}; "
            f"last error: {error or '(none in the log)'}"
        )

    @contextlib.contextmanager
    def reported_if_dead(self, answered: Callable[[], int] | None = None) -> Iterator[None]:
        """Within the block, a failure (LbevalError) while this server has exited (or exits within
        DEATH_GRACE_S while its health check fails) is re-raised as the server's exit report, the failure it
        caused after it. `answered`: the completions the session's Clients had this server answer (the send
        ledger's count), so that a dying engine is reported with the request it died on."""
        try:
            yield
        except LbevalError as exc:
            report = self.exit_report(answered=answered)
            if report is None and not _http_ok(self.root_url + self.spec.health_path):
                report = self.exit_report(DEATH_GRACE_S, answered)  # unhealthy: exiting, or about to
            if report is None:
                raise
            raise LbevalError(f"{report} (then: {exc})") from None

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


def launch(
    spec: LaunchSpec, *, port: int | None = None, log: Path | None = None, runs: Path = RUNS
) -> ManagedServer:
    """Start the process (no health wait). `port`/`log` override the spec's; a relative spec `log` is under
    `runs`, the runs folder (`--out`; default runs/)."""
    if not spec.managed:
        raise ConfigError(f"variant {spec.name} is a running server at {spec.url}; lbeval does not start it")
    check_requirements(spec)
    fixed = port or spec.port
    if fixed is not None and port_in_use(spec.host, fixed):
        raise ConfigError(
            f"variant {spec.name}: port {fixed} on {spec.host} is already in use (another server, or the other "
            f'side of lbeval ab with the same spec?): its health check would be answered there; set port = "auto" '
            f"in {spec.source} or stop what listens on {fixed}"
        )
    chosen = fixed or free_port(spec.host)
    log_path = log or runs / _fill(spec.log, spec.name, spec.host, chosen)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [*spec.command, *(_fill(a, spec.name, spec.host, chosen) for a in spec.args)]
    env = {**os.environ, **{k: _fill(v, spec.name, spec.host, chosen) for k, v in spec.env.items()}}
    header = f"\n=== lbeval: {time.strftime('%FT%T%z')} starting {spec.name}: {shlex.join(redact_argv(argv, spec.secrets))}\n"
    with log_path.open("ab") as fh:
        fh.write(header.encode())
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
    runs: Path = RUNS,
) -> ManagedServer:
    """Launch the variant's server and wait until it is healthy; on any failure the process is stopped. The
    log: `log`, else the spec's under `runs` (the runs folder)."""
    say = echo or (lambda _msg: None)
    server = launch(spec, port=port, log=log, runs=runs)
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
