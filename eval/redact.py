"""Secrets out of everything lbeval writes or prints: one module, one marker (`REDACTED`).

What is redacted:
- values lbeval read from the environment: `${VAR}` in a launch spec (eval.serve.launch_specs, except the
  cache path `${LBEVAL_CACHE}`) and the API key of `--api-key-env` (`api_key_from_env`: lbeval run, ab, prepare). They are a `Secrets`,
  owned by whoever read them (the LaunchSpec, the run session's `run_secrets`) and passed to what redacts;
  each is replaced by value wherever it appears (values shorter than MIN_REMEMBERED are not credentials).
  There is no process-wide memory: two sessions in one process redact each its own;
- the value(s) of a secret flag in an argv: a long option whose last word is key/token/secret/password/
  credential(s) (`--api-key K`, `--api-key=K`, `--hf-token K`, `--token K`), also inside free text;
- env values whose names look secret (KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL);
- URL userinfo (`http://user:pw@host` -> `http://<redacted>@host`) and URL query values (`?key=<redacted>`);
- `Authorization` header values and `Bearer` tokens, and `NAME=value` where NAME's last word names a secret
  (`api_key='...'`, `HF_TOKEN=...`).

`redact_text` is for free text (error lines, log headers), `redact_argv` / `redact_env` for a process's
command line and environment, `redact_data` for JSON-like data; each takes the `Secrets` to redact by value.
`redacted_errors(secrets)` redacts the message of an error leaving a block (the command's error line is printed
where the secrets are no longer known). Terminal output also goes through
eval.terminal (control characters). `safe_url` is the URL without userinfo and query (the run manifest's).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from eval.errors import ConfigError

REDACTED = "<redacted>"
MIN_REMEMBERED = 4  # "1", "on", "fp8": redacting such values everywhere would blank ordinary text
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_WORDS = r"(?:key|token|secret|password|passwd|credentials?)"
_FLAG_WORD = re.compile(rf"^{_WORDS}$", re.IGNORECASE)

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
_QUERY_VALUE = re.compile(r"([?&][^=&#]*=)[^&#]*")
_AUTHORIZATION = re.compile(
    r"(\bauthorization['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic|token)\s+)?[^\s'\",;]+", re.IGNORECASE
)
_BEARER = re.compile(r"(\bbearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_FLAG_IN_TEXT = re.compile(rf"(--(?:[A-Za-z0-9]+[-_])*{_WORDS})(=|\s+)(['\"]?)(?!-)[^\s'\"]+", re.IGNORECASE)
_ASSIGNMENT = re.compile(
    rf"(?<![A-Za-z0-9_-])((?:[A-Za-z0-9]+_)*{_WORDS}\s*=\s*\[?\s*)(['\"]?)[^\s'\",\])&]+", re.IGNORECASE
)


@dataclass(frozen=True)
class Secrets:
    """Values read from the environment, redacted wherever their owner writes or prints them. Immutable: `with_`
    returns a new one, so what one session (or launch spec) read never reaches another's redaction."""

    values: frozenset[str] = frozenset()

    def with_(self, *values: str | None) -> Secrets:
        """These secrets and `values` (None and values shorter than MIN_REMEMBERED are no credentials)."""
        new = {v for v in values if v is not None and len(v) >= MIN_REMEMBERED}
        return self if new <= self.values else Secrets(self.values | new)

    def __or__(self, other: Secrets) -> Secrets:
        return Secrets(self.values | other.values)

    def __repr__(self) -> str:
        return f"Secrets({len(self.values)} values)"  # never the values


NO_SECRETS = Secrets()


def api_key_from_env(var: str | None) -> str | None:
    """The API key held by environment variable `var` (`--api-key-env VAR`; None: no key asked for); ConfigError
    when it is unset or empty. The caller redacts it (`Secrets.with_`)."""
    if var is None:
        return None
    key = os.environ.get(var)
    if not key:
        raise ConfigError(f"--api-key-env {var}: that environment variable is not set")
    return key


@contextmanager
def redacted_errors(secrets: Secrets) -> Iterator[None]:
    """Within the block, an exception leaves with `secrets` redacted from its message (its string arguments)."""
    try:
        yield
    except Exception as exc:
        exc.args = tuple(redact_text(a, secrets) if isinstance(a, str) else a for a in exc.args)
        raise


def _redact_url(match: re.Match[str]) -> str:
    url = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", match.group(0))
    head, sep, rest = url.partition("?")
    if not sep:
        return url
    query, hsep, fragment = rest.partition("#")
    return head + _QUERY_VALUE.sub(lambda m: m.group(1) + REDACTED, "?" + query) + hsep + fragment


def redact_text(text: str, secrets: Secrets = NO_SECRETS) -> str:
    """Free text with every secret this module recognises, and every value of `secrets`, replaced by REDACTED."""
    text = _URL.sub(_redact_url, text)
    for value in sorted(secrets.values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    text = _AUTHORIZATION.sub(lambda m: m.group(1) + REDACTED, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _FLAG_IN_TEXT.sub(lambda m: m.group(1) + m.group(2) + m.group(3) + REDACTED, text)
    return _ASSIGNMENT.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)


def secret_flag(arg: str) -> bool:
    """`--api-key`, `--hf-token`, `--token`, `--password=...`: a long option whose last word names a secret."""
    if not arg.startswith("--"):
        return False
    name = arg[2:].split("=", 1)[0]
    return bool(_FLAG_WORD.match(re.split(r"[-_]", name)[-1]))


def redact_argv(argv: Iterable[str], secrets: Secrets = NO_SECRETS) -> list[str]:
    """A command line with the values of secret flags (up to the next option) and known secrets redacted."""
    out: list[str] = []
    hiding = False
    for arg in argv:
        if hiding and not arg.startswith("-"):
            out.append(REDACTED)
            continue
        hiding = False
        if secret_flag(arg) and "=" in arg:
            out.append(arg.split("=", 1)[0] + "=" + REDACTED)
        elif secret_flag(arg):
            out.append(arg)
            hiding = True
        else:
            out.append(redact_text(arg, secrets))
    return out


def redact_env(env: Mapping[str, str], secrets: Secrets = NO_SECRETS) -> dict[str, str]:
    """Environment variables: a value whose name looks secret is redacted whole, any other as free text."""
    return {k: (REDACTED if SECRET_NAME.search(k) else redact_text(v, secrets)) for k, v in env.items()}


def redact_data(data: Any, secrets: Secrets = NO_SECRETS) -> Any:
    """JSON-like data: dict values under secret-looking names, lists of strings as argv, strings as text."""
    if isinstance(data, str):
        return redact_text(data, secrets)
    if isinstance(data, Mapping):
        return {
            k: (REDACTED if isinstance(v, str) and SECRET_NAME.search(str(k)) else redact_data(v, secrets))
            for k, v in data.items()
        }
    if isinstance(data, Sequence) and not isinstance(data, bytes | bytearray):
        if all(isinstance(x, str) for x in data):
            return redact_argv(data, secrets)
        return [redact_data(x, secrets) for x in data]
    return data


def safe_url(url: str) -> str:
    """The URL without user:password@, query and fragment (what the run manifest stores)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
