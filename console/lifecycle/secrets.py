"""Keeping secret values out of anything shown, logged or written."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MASK = "****"
# Flags whose next argument is a secret, and NAME=value forms of secret-looking names.
_SECRET_FLAGS = frozenset({"--api-key", "--api_key", "--hf-token", "--token", "--password", "--admin-api-key"})
_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|API_?KEY)", re.IGNORECASE)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each (non-trivial) secret value replaced by ``****``."""
    for s in sorted({s for s in secrets if s and len(s) >= 3}, key=len, reverse=True):
        text = text.replace(s, MASK)
    return text


def mask_args(args: Sequence[str], secrets: Iterable[str] = ()) -> list[str]:
    """Launch arguments for display: values of ``--api-key``-like flags and known secrets masked."""
    hide = tuple(secrets)
    out: list[str] = []
    mask_next = False
    for arg in args:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        flag, eq, _value = arg.partition("=")
        if arg in _SECRET_FLAGS:
            out.append(arg)
            mask_next = True
        elif eq and flag in _SECRET_FLAGS:
            out.append(f"{flag}={MASK}")
        else:
            out.append(scrub(arg, hide))
    return out


def mask_env(env: dict[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    """Environment for display: secret-looking names and known secret values masked."""
    hide = tuple(secrets)
    return {k: (MASK if _SECRET_NAME.search(k) else scrub(v, hide)) for k, v in env.items()}
