"""Metrics sources: ``[sources.NAME] prometheus = "http://prom:9090"`` with a series selector.

A source is a Prometheus server that already scrapes the engines: the console reads their current
values from its ``/federate`` endpoint, chart history from ``query_range`` and the targets from
``/api/v1/targets``, and changes nothing (its engines are read-only). This module only says what
to ask (the target, its selector's matchers); ``console.prometheus`` asks. ``PolledSource`` is the
read loop every source's thread runs (Prometheus and Kubernetes alike).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from console.errors import UserError

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

# Engine families by name prefix (console/telemetry/metrics/recognize.py): the default selector. A server
# that scraped OpenMetrics from prometheus_client 0.22+ holds ``sglang_x`` for ``sglang:x``.
DEFAULT_SELECTOR = '{__name__=~"(vllm|sglang|llamacpp)[:_].+|(tgi|trtllm)_.+"}'
# Labels that name one engine, tried in order: a Kubernetes pod, else the scrape target.
IDENTITY_LABELS = ("pod", "instance")
# Labels that give a prefill/decode role: llm-d's ``llm-d.ai/role`` pod label as Kubernetes service
# discovery spells it (and relabelled), production-stack's, and a plain ``role``.
ROLE_LABELS = ("llm_d_ai_role", "llmd_role", "role", "model_role")
# Labels Prometheus adds to every series (with the identity labels): dropped before normalising.
ADDED_LABELS = ("job", "namespace", "service", "endpoint", "container", "node")

_OPS = ("=~", "!~", "!=", "=")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

Matcher = tuple[str, str, str]  # (label, op, value as written between the quotes)


def parse_selector(text: str, *, where: str = "selector") -> tuple[Matcher, ...]:
    """``name{label="v", other=~"re"}`` (either part may be absent) -> its matchers; a metric name
    becomes ``__name__="name"``. One-line UserError on anything else."""
    s = text.strip()
    brace = s.find("{")
    name, body = (s, "") if brace == -1 else (s[:brace].strip(), s[brace:])
    out: list[Matcher] = []
    if name:
        if not _METRIC.fullmatch(name):
            raise UserError(f"{where} {text!r}: {name!r} is not a metric name")
        out.append(("__name__", "=", name))
    if body:
        if not body.endswith("}"):
            raise UserError(f"{where} {text!r}: no closing '}}'")
        inner = body[1:-1].strip()
        pos = 0
        while pos < len(inner):
            m = _MATCHER.match(inner, pos)
            if not m or m.end() == pos:
                raise UserError(f"{where} {text!r}: expected label=\"value\" (or !=, =~, !~) at {inner[pos:][:20]!r}")
            out.append((m.group(1), m.group(2), m.group(3)))
            pos = m.end()
    if not out:
        raise UserError(f"{where} {text!r}: empty; give e.g. {{job=\"vllm\"}}")
    return tuple(out)


def matchers_text(matchers: tuple[Matcher, ...]) -> str:
    """The matchers inside braces, comma-joined (no braces)."""
    return ",".join(f'{k}{op}"{v}"' for k, op, v in matchers)


@dataclass(frozen=True)
class PromTarget:
    """One ``[sources.NAME]``: a Prometheus server and which of its series are engines."""

    name: str
    url: str  # base URL, without a trailing slash (may hold user:password, never shown)
    selector: str = DEFAULT_SELECTOR
    identity: tuple[str, ...] = IDENTITY_LABELS
    role_labels: tuple[str, ...] = ROLE_LABELS
    profile: str | None = None  # force one profile; None: from each engine's metric names
    period: float = 1.0  # seconds between /federate reads
    history_s: float = 900.0  # chart backfill from query_range (15 min)
    timeout: float = 5.0

    @property
    def matchers(self) -> tuple[Matcher, ...]:
        return parse_selector(self.selector)

    @property
    def label_matchers(self) -> tuple[Matcher, ...]:
        """The selector's matchers without ``__name__`` (what each query adds to its metric name)."""
        return tuple(m for m in self.matchers if m[0] != "__name__")

    @property
    def display(self) -> str:
        """The URL without user:password (what screens, logs and documents show)."""
        return display_url(self.url)


def display_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def check_url(url: str, *, where: str = "prometheus") -> str:
    """An http(s) base URL with a host and no query: the server's root (``/federate`` is added)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UserError(f"{where} {display_url_safe(url)!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"{where} {display_url_safe(url)!r}: expected an http(s) URL like http://prom:9090")
    if parts.query or parts.fragment:
        raise UserError(f"{where} {display_url_safe(url)!r}: give the server's base URL, without ?query")
    if port is not None and not 1 <= port <= 65535:
        raise UserError(f"{where} {display_url_safe(url)!r}: port out of range")
    return url.rstrip("/")


def display_url_safe(url: str) -> str:
    """``display_url`` that never raises (for error messages about a malformed URL)."""
    try:
        return display_url(url)
    except ValueError:
        return re.sub(r"//[^/@]*@", "//", url)


def source_name_ok(name: str) -> bool:
    return bool(_NAME.match(name))


def role_of(value: str) -> str:
    """A role label's value as the console shows it: prefill, decode, both, or the value itself."""
    v = value.strip().lower()
    for role in ("prefill", "decode", "both"):
        if role in v:
            return role
    return v[:16]


# Kubernetes label selectors: ``key``, ``!key``, ``key=v``, ``key==v``, ``key!=v``, ``key in (a,b)``,
# ``key notin (a,b)``, comma-joined (what the API server's ``labelSelector`` takes).
_LABEL_KEY = r"(?:[A-Za-z0-9.-]+/)?[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?"
_LABEL_REQ = re.compile(
    rf"\s*(!?{_LABEL_KEY}|{_LABEL_KEY}\s*(?:==|=|!=)\s*[A-Za-z0-9_.-]*|{_LABEL_KEY}\s+(?:in|notin)\s*\([^()]*\))\s*")


def check_label_selector(text: str, *, where: str = "selector") -> str:
    """A Kubernetes label selector as the API server's ``labelSelector`` takes it; one-line
    UserError on anything else (a Prometheus ``{...}`` selector here is a common slip)."""
    s = text.strip()
    if not s:
        raise UserError(f"{where}: empty; give e.g. app.kubernetes.io/name=vllm")
    depth, start, parts = 0, 0, []
    for i, c in enumerate(s):  # split on the commas outside ( )
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    for p in parts:
        if not _LABEL_REQ.fullmatch(p):
            raise UserError(f"{where} {text!r}: {p.strip()!r} is not a label requirement "
                            "(key, !key, key=value, key!=value, key in (a,b))")
    return s


@dataclass(frozen=True)
class KubeTarget:
    """One ``[sources.NAME] kubernetes = URL``: an API server, where to look and how to log in.

    The bearer token is named by ``token_env`` (an environment variable) and read when a request
    is made; it is never held in the configuration, shown, logged or exported."""

    name: str
    url: str  # the API server's base URL (https://api:6443); no user:password
    token_env: str | None = None
    ca_file: str | None = None  # PEM bundle that signs the server's certificate; None: the system's
    namespace: str | None = None  # None: every namespace (/api/v1/pods)
    selector: str | None = None  # None: the engines' known labels (console.kube.labels)
    profile: str | None = None  # one profile for every pod; None: image, label, then metric names
    period: float = 1.0  # seconds between metrics reads
    list_every: float = 5.0  # seconds between pod lists
    timeout: float = 5.0
    kubectl: str = "kubectl"  # for logs

    @property
    def display(self) -> str:
        return display_url(self.url)


class PolledSource:
    """The read loop a source runs in its own thread (``console.prometheus``, ``console.kube``): a read
    every ``period``, a failing read (a bug) the source's stale reason, never the loop's end, and the
    fleet told after each read. Subclasses set the attributes below and define ``read_once``."""

    KIND = "source"  # for the log
    target: PromTarget | KubeTarget
    _lock: threading.Lock
    _stop: threading.Event
    _on_change: Callable[[], None] | None
    _reason: str
    _stale_since: float | None

    def read_once(self) -> None:
        raise NotImplementedError

    def _changed(self) -> None:
        if self._on_change is not None:
            with contextlib.suppress(Exception):
                self._on_change()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.read_once()
            except Exception as exc:  # a bug in one read must not end the source
                log.exception("%s source %s", self.KIND, self.target.name)
                self._fail(f"read failed: {type(exc).__name__}: {exc}"[:200])
            self._changed()
            self._stop.wait(max(0.05, self.target.period - (time.monotonic() - started)))

    def _fail(self, reason: str) -> None:
        with self._lock:
            self._reason = reason
            if self._stale_since is None:
                self._stale_since = time.time()
