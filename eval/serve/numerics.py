"""A declared numerics change: `numerics = "changed: REASON"`, in a variant's launch spec (eval/serve/variants.toml)
or in the gate policy's `[rules.cross_variant_cold]` table.

A variant that changes its numerics on purpose (an fp8 KV cache, another attention kernel, another dtype) says so
with this one string; the run carries its launch spec's declaration into its manifest (each session's
`numerics`), and the gate's `cross_variant_cold` rule (eval/gate/cross_numerics.py) then names the declaration
instead of judging the variant's cold outputs against the base's noise. The reason is free text, one line of
printable characters (no control or bidi characters: it is shown in the verdict).
"""

from __future__ import annotations

from typing import Any

from eval.errors import ConfigError

PREFIX = "changed: "
MAX_REASON = 120
EXAMPLE = 'numerics = "changed: fp8 KV cache"'


def numerics_problem(value: Any) -> str | None:
    """Why `value` is not a declaration (None: it is one, or it is "", none)."""
    if not isinstance(value, str):
        return f'must be a string "{PREFIX}REASON" (e.g. {EXAMPLE}), got {value!r}'
    if value == "":
        return None
    if not value.startswith(PREFIX):
        return f'must read "{PREFIX}REASON" (e.g. {EXAMPLE}), got {value[:40]!r}'
    reason = value[len(PREFIX) :].strip()
    if not reason:
        return f'names no reason after "{PREFIX.strip()}" (e.g. {EXAMPLE})'
    if len(reason) > MAX_REASON:
        return f"its reason is {len(reason)} characters long, at most {MAX_REASON}"
    if not reason.isprintable():
        return "its reason holds a control or formatting character (one line of printable text)"
    return None


def declared_reason(value: Any, where: str) -> str:
    """The reason of a declaration ("" when none is declared); ConfigError naming `where` when malformed."""
    problem = numerics_problem(value)
    if problem is not None:
        raise ConfigError(f"{where}: {problem}")
    return str(value)[len(PREFIX) :].strip() if value else ""
