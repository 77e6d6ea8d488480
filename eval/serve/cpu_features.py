"""What this machine's CPU offers that a launch spec may need.

vLLM's CPU build stores an fp8 KV cache only on x86 with AVX-512 or AMX: elsewhere `cpu-smollm2-fp8kv` refuses
to start ("FP8 KV cache on CPU requires x86 with AVX-512 or AMX", measured 2026-12-07 on a 2-core AVX2 VM).
`make demo` reads this to pick a variant that starts here (eval/demo.py).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["cpu_flags", "fp8_kv_cache"]

CPUINFO = Path("/proc/cpuinfo")
FP8_KV_FLAGS = frozenset({"avx512f", "amx_tile"})


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The first processor's `flags` (x86) or `Features` (arm) of a /proc/cpuinfo text."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def fp8_kv_cache(cpuinfo: str | None = None) -> bool:
    """Whether vLLM's CPU build can keep an fp8 KV cache on this machine (`cpuinfo`: /proc/cpuinfo's text)."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    return bool(cpu_flags(cpuinfo) & FP8_KV_FLAGS)
