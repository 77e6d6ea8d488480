"""Secrets out of everything lbeval writes or prints: one module, one marker (`REDACTED`).

What is redacted:
- values lbeval read from the environment: `${VAR}` in a launch spec (eval.serve.launch_specs, except the
  cache path `${LBEVAL_CACHE}`) and the API key of `--api-key-env` (eval.run.session). Each is `remember()`ed
  and replaced by value wherever it appears (values shorter than MIN_REMEMBERED are not credentials);
- the value(s) of a secret flag in an argv: a long option whose last word is key/token/secret/password/
  credential(s) (`--api-key K`, `--api-key=K`, `--hf-token K`, `--token K`), also inside free text;
- env values whose names look secret (KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL);
- URL userinfo (`http://user:pw@host` -> `http://<redacted>@host`) and URL query values (`?key=<redacted>`);
- `Authorization` header values and `Bearer` tokens, and `NAME=value` where NAME's last word names a secret
  (`api_key='...'`, `HF_TOKEN=...`).

`redact_text` is for free text (error lines, log headers), `redact_argv` / `redact_env` for a process's
command line and environment, `redact_data` for JSON-like data. Terminal output also goes through
eval.terminal (control characters). `safe_url` is the URL without userinfo and query (the run manifest's).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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

_remembered: set[str] = set()
_lock = threading.Lock()


def remember(value: str) -> None:
    """Redact this value (read from the environment) wherever lbeval writes or prints it, from now on."""
    if len(value) >= MIN_REMEMBERED:
        with _lock:
            _remembered.add(value)


def forget_all() -> None:
    """Drop every remembered value (tests)."""
    with _lock:
        _remembered.clear()


def _redact_url(match: re.Match[str]) -> str:
    url = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", match.group(0))
    head, sep, rest = url.partition("?")
    if not sep:
        return url
    query, hsep, fragment = rest.partition("#")
    return head + _QUERY_VALUE.sub(lambda m: m.group(1) + REDACTED, "?" + query) + hsep + fragment


def redact_text(text: str) -> str:
    """Free text with every secret this module knows of replaced by REDACTED."""
    text = _URL.sub(_redact_url, text)
    with _lock:
        values = sorted(_remembered, key=len, reverse=True)
    for value in values:
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


def redact_argv(argv: Iterable[str]) -> list[str]:
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
            out.append(redact_text(arg))
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment variables: a value whose name looks secret is redacted whole, any other as free text."""
    return {k: (REDACTED if SECRET_NAME.search(k) else redact_text(v)) for k, v in env.items()}


def redact_data(data: Any) -> Any:
    """JSON-like data: dict values under secret-looking names, lists of strings as argv, strings as text."""
    if isinstance(data, str):
        return redact_text(data)
    if isinstance(data, Mapping):
        return {
            k: (REDACTED if isinstance(v, str) and SECRET_NAME.search(str(k)) else redact_data(v))
            for k, v in data.items()
        }
    if isinstance(data, Sequence) and not isinstance(data, bytes | bytearray):
        if all(isinstance(x, str) for x in data):
            return redact_argv(data)
        return [redact_data(x) for x in data]
    return data


def safe_url(url: str) -> str:
    """The URL without user:password@, query and fragment (what the run manifest stores)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
