"""Keeping secret values out of anything shown, logged or written."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MASK = "****"
# Secret-looking names: environment variables (HF_TOKEN, VLLM_API_KEY) and flags (--api-key,
# --hf-token, --password). Anchored at the end so --max-num-batched-tokens is not a secret.
_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY)", re.IGNORECASE)
_SECRET_FLAG = re.compile(r"^--?(?:[a-z0-9]+[-_])*(?:token|secret|password|passwd|api[-_]?key)$", re.IGNORECASE)
_SECRET_ASSIGN = re.compile(r"^[A-Za-z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY)$", re.IGNORECASE)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each (non-trivial) secret value replaced by ``****``."""
    for s in sorted({s for s in secrets if s and len(s) >= 3}, key=len, reverse=True):
        text = text.replace(s, MASK)
    return text


def mask_args(args: Sequence[str], secrets: Iterable[str] = ()) -> list[str]:
    """Launch arguments for display: the values of ``--api-key``-like flags (``--api-key X``,
    ``--hf-token=X``), of ``NAME=value`` forms with a secret-looking name (``HF_TOKEN=X``), and of
    known secrets anywhere, masked."""
    hide = tuple(secrets)
    out: list[str] = []
    mask_next = False
    for arg in args:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        name, eq, _value = arg.partition("=")
        if _SECRET_FLAG.match(arg):
            out.append(arg)
            mask_next = True
        elif eq and (_SECRET_FLAG.match(name) or _SECRET_ASSIGN.match(name)):
            out.append(f"{name}={MASK}")
        else:
            out.append(scrub(arg, hide))
    return out


def mask_env(env: dict[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    """Environment for display: secret-looking names and known secret values masked."""
    hide = tuple(secrets)
    return {k: (MASK if _SECRET_NAME.search(k) else scrub(v, hide)) for k, v in env.items()}
