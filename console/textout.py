"""Outside text on its way to a headless command's text output: scrubbed of secrets, then inert.

``status``, ``logs``, ``inspect-metrics``, ``ps``, ``up``/``down``/``restart`` progress, ``alerts
list`` and the one-line error path print what engines, remote hosts, Prometheus servers and
configuration files said. Each goes through :func:`shown` (one string), :func:`shown_data` (a
report's strings, before they are formatted) or :func:`say` (a line printed): secrets first, on
the raw text (``console.secrets``), then every control, escape, bidi and invisible character made
a visible placeholder (``console.textsafe``). JSON output does not: it keeps json's own escaping
and passes through :func:`scrubbed_data` (credentials only).

Imports only ``console.secrets`` and ``console.textsafe``: the command modules' logic stays UI-free.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TextIO

from console.secrets import Scrubber
from console.textsafe import inert

_PLAIN_TYPES = frozenset({int, float, bool, type(None)})
_PATTERNS_ONLY = Scrubber()  # recognised shapes: URL userinfo and query credentials, bearer, hf_/sk- keys


def shown(text: str, scrubber: Scrubber | None = None, *, multiline: bool = False) -> str:
    """``text`` as a text output may show it: secrets masked (``scrubber``'s known ones and every
    recognised shape), then controls and escapes made visible placeholders. Single-line unless
    ``multiline`` (which keeps ``\\n`` and ``\\t``)."""
    return inert((scrubber or _PATTERNS_ONLY)(text), multiline=multiline)


def shown_data(value: Any, scrubber: Scrubber | None = None) -> Any:
    """A copy of JSON-like data with every string (keys too) passed through :func:`shown`
    (single-line: a label, a name or an error is one line), for a report about to be formatted."""
    if isinstance(value, str):
        return shown(value, scrubber)
    if isinstance(value, Mapping):
        return {(shown(k, scrubber) if isinstance(k, str) else k): shown_data(v, scrubber) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shown_data(v, scrubber) for v in value]
    return value


def scrubbed_data(value: Any, scrubber: Scrubber | None = None) -> Any:
    """A copy of JSON-like data with every string value scrubbed of credentials and nothing else
    changed (JSON output: json escapes controls itself, and the document keeps the text as it was
    sent). Keys are the document's own schema: left as they are (``status --json --watch`` is each
    remote host's stream, written every period)."""
    scrub = scrubber or _PATTERNS_ONLY
    done: dict[str, str] = {}  # a document repeats its strings ("5s", "ok", units): each is scrubbed once

    def walk(v: Any) -> Any:
        t = type(v)
        if t is str:
            out = done.get(v)
            if out is None:
                out = done[v] = scrub(v)
            return out
        if t is dict:  # numbers are most of a status document: no call for them
            return {k: x if type(x) in _PLAIN_TYPES else walk(x) for k, x in v.items()}
        if t is list or t is tuple:
            return [x if type(x) in _PLAIN_TYPES else walk(x) for x in v]
        if isinstance(v, str):  # a str subclass (an enum's value)
            return walk(str(v))
        if isinstance(v, Mapping):
            return walk(dict(v))
        if isinstance(v, list | tuple):
            return walk(list(v))
        return v

    return walk(value)


def say(text: str, *, file: TextIO | None = None, flush: bool = False, scrubber: Scrubber | None = None) -> None:
    """Print ``text`` (a line or several the command wrote, holding outside text) as :func:`shown`
    with ``multiline``: the command's own line breaks stay, nothing else can act on the terminal."""
    print(shown(text, scrubber, multiline=True), file=file if file is not None else sys.stdout, flush=flush)


__all__ = ["say", "scrubbed_data", "shown", "shown_data"]
