"""The one secret rule: what counts as a secret, and how it is kept out of everything people see.

Every place that shows, logs or writes something an engine, a user or the configuration gave us
goes through this module: config display (`config show`, the engine screen), launch command
display (`ps`, the identity tab, process records, the audit log), engine output (the screen,
`logs`, `up` progress, the copy on disk) and exports (bench JSON/CSV/Markdown).

A secret is either *known* (the value of ``api_key_env``, of a passed-through variable whose name
looks secret, of a secret-looking launch argument) or *recognised* by its shape wherever it turns
up: Hugging Face tokens (``hf_...``), OpenAI-style keys (``sk-...``), ``Bearer ...`` credentials,
``api_key=...``-like assignments and passwords in URLs. Names look secret when they end in
TOKEN, SECRET, PASSWORD, PASSWD, API_KEY, SECRET_KEY, ACCESS_KEY or PRIVATE_KEY (``HF_TOKEN``,
``--api-key``, ``AWS_SECRET_ACCESS_KEY``); the end anchor keeps ``--max-num-batched-tokens``,
``--return-tokens-as-token-ids`` and ``TOKENIZERS_PARALLELISM`` out.

This module imports from the rest of the package only ``console.target`` (the reader of API keys,
which imports nothing): config, lifecycle and the UI all use it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from console.target import api_key_from_env

if TYPE_CHECKING:
    from console.config import EngineInstance

MASK = "****"
MIN_SECRET_LEN = 3  # shorter values would mask ordinary text everywhere

_SECRET_WORD = r"(?:token|secret|password|passwd|(?:api|secret|access|private)[-_.]?key)"
_SECRET_NAME = re.compile(rf"{_SECRET_WORD}$", re.IGNORECASE)
# Query parameters that carry a credential: token, access_token, key, api_key, apikey, password,
# secret, sig, signature (and the same words after a prefix: X-Amz-Signature, refresh_token).
_QUERY_WORD = r"(?:token|key|apikey|password|passwd|secret|sig|signature|credential)"

# Shapes recognised in free text, each replaced by what keeps the text readable. Engines log
# thousands of lines a second, so each pattern starts with a literal (the regex engine then skips
# ahead by substring search), runs only when the lower-cased text holds what it cannot match
# without, and none crosses a line end (a whole chunk of lines is scrubbed in one pass).
_PATTERNS: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
    # Authorization headers and the like: the scheme stays, the credential goes.
    (("bearer",), re.compile(r"(?<![A-Za-z0-9_])(Bearer|bearer|BEARER)([ \t]+)[A-Za-z0-9._~+/=-]{8,}"),
     rf"\1\2{MASK}"),
    # Hugging Face user access tokens: hf_ and 34 letters/digits (at least 30 to spare "hf_transfer").
    (("hf_",), re.compile(r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}"), MASK),
    # OpenAI-style keys: sk-..., sk-proj-..., sk-ant-...
    (("sk-",), re.compile(r"sk-(?<![A-Za-z0-9_]sk-)[A-Za-z0-9_-]{16,}"), MASK),
    # user:password@ in any URL, and user@ in a web URL (a bare user there is a token, as in
    # https://TOKEN@host; ssh://gpu@node1 keeps its login). The whole userinfo goes. A quote ends a
    # URL: in JSON text the search then stops at the string's end.
    (("://",), re.compile(r"://[^/\s:@\"'<>]+:[^/\s@\"'<>]+@"), f"://{MASK}@"),
    # The "://" first and the scheme checked behind it: started with the scheme, the pattern had no
    # literal to skip ahead by and cost 0.4 ms per KB of a status document (13 ms vs 0.04 ms on 32 KB).
    (("://",), re.compile(r"(?i)://(?:" + "|".join(rf"(?<=(?<![a-z0-9+.-]){scheme}://)"
                                                   for scheme in ("http", "https", "ws", "wss"))
                          + r")[^/\s:@\"'<>?#]+@"), f"://{MASK}@"),
    # ?token=..., &api_key=..., &sig=... in a URL's query: the name stays, the value goes.
    (("?", "&"), re.compile(rf"(?i)([?&][a-z0-9_.-]*?{_QUERY_WORD}=)[^&#\s\"'<>]+"), rf"\1{MASK}"),
)  # fmt: skip
# api_key='...', "password": "...", --hf-token=..., hf_token=... in an engine's own dump of its
# arguments or environment (a bare "token" is left alone: eos_token='</s>' is no secret). It has no
# literal start, so it runs only on the lines that name one of these.
_ASSIGN_NEEDS = ("api_key", "api-key", "apikey", "secret", "password", "passwd", "hf_token", "hf-token",
                 "access_token", "access-token", "auth_token", "auth-token", "api_token", "api-token")  # fmt: skip
_ASSIGN_HINTS = ("key", "secret", "passw", "token")  # one of them is in each of _ASSIGN_NEEDS
_ASSIGN = re.compile(
    r"""((?:api[-_]?key|secret|password|passwd|hf[-_]?token|access[-_]?token|auth[-_]?token|api[-_]?token)"""
    r"""['"]?[ \t]*[:=][ \t]*\[?[ \t]*['"]?)([^\s'",\]}]{3,})""",
    re.IGNORECASE,
)

# NAME=value where NAME is an environment variable's (upper case) that looks secret: GITHUB_TOKEN=...,
# AWS_SECRET_ACCESS_KEY=..., DB_PASSWORD=... printed by an engine or a shell. Upper case keeps
# eos_token=/pad_token= (tokenizer settings) out. Runs only on lines that hold one of _ENV_NEEDS.
_ENV_NEEDS = ("TOKEN=", "SECRET", "PASSWORD=", "PASSWD=", "KEY=")
_ENV_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9_])([A-Z][A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|SECRET_KEY|ACCESS_KEY"
    r"|PRIVATE_KEY)=['\"]?)([^\s'\",\\]{3,})"
)

# Every literal some rule needs before it runs (the assignment and environment rules run only after
# one of _ASSIGN_HINTS): a lower-cased text holding none of them holds no recognised secret, and most
# text a screen or a report shows (names, units, reasons) is such text. Plain substring tests: a
# case-blind regex alternation of the same words measured 3-5x slower on short strings.
_ANY_NEEDLE = tuple(sorted({*(n for needs, _, _ in _PATTERNS for n in needs), *_ASSIGN_HINTS}))

# What each of _PATTERNS masks, for reports that count what was masked (never the values).
_PATTERN_KINDS = ("bearer credential", "hugging face token", "openai-style key", "password in a url",
                  "credential in a url", "credential in a url query")
KNOWN_KIND = "known secret value"
ASSIGN_KIND = "secret assignment"


def looks_secret(name: str) -> bool:
    """Whether a name (environment variable, config key, command-line flag) holds a secret."""
    return bool(_SECRET_NAME.search(name.lstrip("-")))


class Scrubber:
    """Replaces known secret values and recognised secret shapes with ``****``."""

    __slots__ = ("_known",)

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is masked whole.
        self._known = tuple(sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LEN}, key=len, reverse=True))

    @property
    def known(self) -> tuple[str, ...]:
        return self._known

    def with_secrets(self, secrets: Iterable[str]) -> Scrubber:
        return Scrubber((*self._known, *secrets))

    def __call__(self, text: str) -> str:
        return self._scrub(text, None)

    def counted(self, text: str) -> tuple[str, dict[str, int]]:
        """``self(text)`` and how many of each kind it masked (a text masked before counts nothing
        again: a value that is already ``****`` is no new find)."""
        counts: dict[str, int] = {}
        return self._scrub(text, counts), counts

    def _scrub(self, text: str, counts: dict[str, int] | None) -> str:
        def sub(rx: re.Pattern[str], repl: str, text: str, kind: str) -> str:
            if counts is None:
                return rx.sub(repl, text)
            text, n = rx.subn(lambda m: _fresh_mask(m, repl), text)
            n -= text.count(_ALREADY)
            if n:
                counts[kind] = counts.get(kind, 0) + n
            return text.replace(_ALREADY, "")

        for s in self._known:
            if s in text:
                if counts is not None:
                    counts[KNOWN_KIND] = counts.get(KNOWN_KIND, 0) + text.count(s)
                text = text.replace(s, MASK)
        low = text.lower()
        if not any(n in low for n in _ANY_NEEDLE):
            return text
        for (needs, rx, repl), kind in zip(_PATTERNS, _PATTERN_KINDS, strict=True):
            if any(n in low for n in needs):
                text = sub(rx, repl, text, kind)
        if any(n in low for n in _ASSIGN_HINTS):  # fewer, shorter probes of a long chunk first
            # Lines are looked at one by one only for the needles the whole text holds: a metrics
            # payload says "token" on every other line and names no secret on any.
            assign = any(n in low for n in _ASSIGN_NEEDS)
            env = any(n in text for n in _ENV_NEEDS)
            if assign or env:
                lines = text.split("\n")
                for i, line in enumerate(lines):
                    if assign and any(n in line.lower() for n in _ASSIGN_NEEDS):
                        line = lines[i] = sub(_ASSIGN, rf"\1{MASK}", line, ASSIGN_KIND)
                    if env and "=" in line and any(n in line for n in _ENV_NEEDS):
                        lines[i] = sub(_ENV_ASSIGN, rf"\1{MASK}", line, ASSIGN_KIND)
                text = "\n".join(lines)
        return text

    def data(self, value: Any) -> Any:
        """A copy of JSON-like data with every string scrubbed (exports)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, Mapping):
            return {(self(k) if isinstance(k, str) else k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value


_ALREADY = "\x00already-masked\x00"  # marks a match whose value was ****: not counted again


def _fresh_mask(m: re.Match[str], repl: str) -> str:
    out = m.expand(repl)
    return out + _ALREADY if m.group(0).rstrip("@").endswith(MASK) else out


class LineScrubber:
    """Scrubs a stream whose chunks may end mid-line: text is released only in whole lines, so a
    secret split across two chunks is still recognised (``flush`` releases the rest at the end)."""

    def __init__(self, scrubber: Scrubber, *, max_partial: int = 65536) -> None:
        self.scrubber = scrubber
        self.max_partial = max_partial
        self._partial = ""

    def feed(self, chunk: str) -> str:
        data = self._partial + chunk
        # A carriage return ends a line too (progress bars redraw with \r and no newline).
        cut = max(data.rfind("\n"), data.rfind("\r")) + 1
        if len(data) - cut > self.max_partial:  # a runaway line without an end: release it
            cut = len(data)
        self._partial = data[cut:]
        return self.scrubber(data[:cut]) if cut else ""

    def flush(self) -> str:
        rest, self._partial = self._partial, ""
        return self.scrubber(rest) if rest else ""


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret and every recognised secret shape replaced by ``****``."""
    return Scrubber(secrets)(text)


def mask_url(url: str, secrets: Iterable[str] = ()) -> str:
    """A URL for display, logs and files: userinfo and credential-carrying query parameters masked
    (``http://admin:pw@h/m?token=t`` becomes ``http://****@h/m?token=****``)."""
    return Scrubber(secrets)(url)


def secret_values_in_args(args: Sequence[str]) -> list[str]:
    """The values of secret-looking arguments: ``--api-key X``, ``--hf-token=X``, ``HF_TOKEN=X``."""
    out: list[str] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if eq and looks_secret(name):
            out.append(value)
        elif not eq and arg.startswith("-") and looks_secret(arg) and i + 1 < len(args):
            nxt = args[i + 1]
            if not nxt.startswith("--"):
                out.append(nxt)
    return [v for v in out if v]


def mask_args(args: Sequence[str], secrets: Iterable[str] = ()) -> list[str]:
    """Launch arguments for display: the values of secret-looking arguments (``--api-key X``,
    ``--hf-token=X``, ``HF_TOKEN=X``) masked, and every known or recognised secret elsewhere."""
    scrubber = Scrubber(secrets)
    out: list[str] = []
    mask_next = False
    for arg in args:
        if mask_next and not arg.startswith("--"):
            out.append(MASK)
            mask_next = False
            continue
        mask_next = False
        name, eq, _value = arg.partition("=")
        if eq and looks_secret(name):
            out.append(f"{name}={MASK}")
        else:
            out.append(scrubber(arg))
            mask_next = not eq and arg.startswith("-") and looks_secret(arg)
    return out


def mask_env(env: Mapping[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    """Environment for display: values of secret-looking names masked, known secrets scrubbed."""
    scrubber = Scrubber(secrets)
    return {k: (MASK if looks_secret(k) else scrubber(v)) for k, v in env.items()}


_ARG_LISTS = ("extra_args", "command")


def mask_config(data: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of configuration data for display: secret-looking keys masked (``*_env`` keys hold
    variable names, not values), argument lists masked as launch commands are, strings scrubbed."""
    scrubber = Scrubber(secrets)

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, Mapping):
            return {k: walk(v, str(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            if key in _ARG_LISTS and all(isinstance(v, str) for v in value):
                return mask_args(list(value), scrubber.known)
            return [walk(v) for v in value]
        if isinstance(value, str):
            if key and looks_secret(key):
                return MASK
            return scrubber(value)
        return value

    return walk(data)


def instance_secrets(inst: EngineInstance, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every secret value an engine instance is given: its API key, the values of passed-through
    variables with secret-looking names, and secret-looking values in its launch arguments."""
    env = os.environ if environ is None else environ
    cfg = inst.config
    out: list[str] = []
    key = api_key_from_env(cfg.api_key_env, env)
    if key:
        out.append(key)
    passthrough = cfg.env_passthrough if cfg.env_passthrough is not None else inst.profile.container.env_passthrough
    out.extend(env[n] for n in passthrough if looks_secret(n) and env.get(n))
    out.extend(secret_values_in_args(cfg.extra_args))
    out.extend(secret_values_in_args(cfg.command or ()))
    return tuple(dict.fromkeys(s for s in out if len(s) >= MIN_SECRET_LEN))


def instance_scrubber(inst: EngineInstance, environ: Mapping[str, str] | None = None) -> Scrubber:
    return Scrubber(instance_secrets(inst, environ))


__all__ = [
    "ASSIGN_KIND",
    "KNOWN_KIND",
    "MASK",
    "LineScrubber",
    "Scrubber",
    "instance_scrubber",
    "instance_secrets",
    "looks_secret",
    "mask_args",
    "mask_config",
    "mask_env",
    "mask_url",
    "scrub",
    "secret_values_in_args",
]
