"""A ``/federate`` answer split into one exposition text per engine (pure: no I/O).

Prometheus federates in text format 0.0.4 with every series' labels plus the target's (``instance``,
``job``, a pod's), a millisecond timestamp on each sample, and one ``# TYPE x untyped`` line per
*sample* name (2.42: ``x_bucket``, ``x_sum``, ``x_count`` and ``x_created`` each get their own, and
no ``# HELP``). So the comment lines are dropped (an ``x_bucket`` with ``le`` is then grouped into a
histogram ``x`` as for any payload without TYPE lines, ``console.telemetry.metrics.promtext``), and each
sample goes to the engine its first identity label (``pod``, else ``instance``) names, without the
identity, role and target labels: what is left reads as that engine's own ``/metrics`` through the
same normaliser. ``up`` series say whether Prometheus' last scrape of each target worked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from console.profiles import EngineProfile
from console.sources import ADDED_LABELS, role_of
from console.telemetry.metrics.promtext import parse_labels

# Metric-name prefixes -> profile (as console/telemetry/metrics/recognize.py names them); the escaped
# forms (``vllm_``) are what a server storing UTF-8-escaped names holds.
PROFILE_PREFIXES = (("vllm:", "vllm"), ("sglang:", "sglang"), ("llamacpp:", "llamacpp"), ("tgi_", "tgi"),
                    ("trtllm_", "trtllm"), ("vllm_", "vllm"), ("sglang_", "sglang"), ("llamacpp_", "llamacpp"))


@dataclass
class EngineText:
    """One engine's share of a federate answer."""

    ident: str  # the identity label's value (a pod name, or host:port)
    ident_label: str  # which label it came from (pod, instance)
    lines: list[str] = field(default_factory=list)  # sample lines without the dropped labels
    created: list[str] = field(default_factory=list)  # ``x_created`` lines: after their counters
    families: set[str] = field(default_factory=set)  # sample names seen
    ts_ms: int = 0  # newest sample timestamp (ms): when Prometheus scraped the engine
    role: str = ""  # prefill / decode / both, from a role label
    labels: dict[str, str] = field(default_factory=dict)  # the dropped target labels (job, instance, ...)
    up: float | None = None  # the ``up`` series' value: 1 scraped, 0 failed; None not federated

    @property
    def text(self) -> str:
        # A ``_created`` series is a birth time only after its family (federate sorts it before ``_total``).
        return "\n".join(self.lines + self.created) + "\n"


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def split_federate(body: bytes | str, identity: Iterable[str], role_labels: Iterable[str] = ()
                   ) -> dict[str, EngineText]:
    """Group a federate answer by engine; samples with none of the identity labels are dropped."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray) else body
    ident_labels = tuple(identity)
    roles = tuple(role_labels)
    drop = frozenset((*ident_labels, *roles, *ADDED_LABELS))
    out: dict[str, EngineText] = {}
    for line in text.split("\n"):
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        if brace == -1:
            continue  # no labels: no engine to give it to
        end = line.rfind("}")
        if end < brace:
            continue
        name = line[:brace]
        if name.startswith("scrape_"):
            continue  # Prometheus' own per-target series, not the engine's
        try:
            labels = parse_labels(line[brace + 1:end])
        except ValueError:
            continue
        rest = line[end + 1:].split()
        if not rest:
            continue
        found = dict(labels)
        who = next(((k, found[k]) for k in ident_labels if found.get(k)), None)
        if who is None:
            continue
        eng = out.get(who[1])
        if eng is None:
            eng = out[who[1]] = EngineText(ident=who[1], ident_label=who[0])
            eng.labels = {k: v for k, v in labels if k in drop}
        if not eng.role and roles:
            role = next((found[k] for k in roles if found.get(k)), "")
            eng.role = role_of(role) if role else ""
        if len(rest) > 1 and rest[1].lstrip("-").isdigit():
            eng.ts_ms = max(eng.ts_ms, int(rest[1]))
        if name == "up":
            try:
                eng.up = float(rest[0])
            except ValueError:
                eng.up = None
            continue
        kept = ",".join(f'{k}="{_escape(v)}"' for k, v in labels if k not in drop)
        sample = f"{name}{{{kept}}} {rest[0]}" if kept else f"{name} {rest[0]}"
        (eng.created if name.endswith("_created") else eng.lines).append(sample)
        eng.families.add(name)
    return out


def profile_for(families: Iterable[str], profiles: Mapping[str, EngineProfile], forced: str | None = None
                ) -> EngineProfile | None:
    """The profile of an engine with these sample names: ``forced`` if given, else the one whose
    name prefix most of them carry; None when none is known (not an engine's series)."""
    if forced is not None:
        return profiles.get(forced)
    counts: dict[str, int] = {}
    for name in families:
        for prefix, profile in PROFILE_PREFIXES:
            if name.startswith(prefix):
                counts[profile] = counts.get(profile, 0) + 1
                break
    for profile, _n in sorted(counts.items(), key=lambda kv: -kv[1]):
        if profile in profiles:
            return profiles[profile]
    return None


def present_name(names: Iterable[str], families: set[str], suffix: str = "") -> str | None:
    """The first of a mapping's raw ``names`` (or its escaped form) the engine has, with ``suffix``
    (``_bucket`` for a histogram); None when it has none of them."""
    for n in names:
        for cand in (n, n.replace(":", "_")):
            if cand + suffix in families:
                return cand
    return None
