"""Alert rules as data: the shipped ``alerts/rules.toml`` plus ``<config dir>/alerts/*.toml``.

A user file adds rules or replaces a shipped rule with the same id (``enabled = false`` switches
one off). Every problem is a one-line ``ConfigError`` naming the file, the key and the problem, as
for engine profiles. Signals are checked against ``signals.SIGNALS`` when the file is read, so a
rule on a signal that does not exist cannot load.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from console.alerts.signals import SIGNALS
from console.errors import ConfigError
from console.resources import data_dir
from console.schema import Invalid, spec, validate

Op = Literal[">", ">=", "<", "<="]


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


SEVERITY_ORDER = (Severity.CRITICAL, Severity.WARNING, Severity.INFO)


def _known_signal(v: str, _: object) -> str:
    if v not in SIGNALS:
        raise ValueError(f"unknown signal {v!r} (known: {', '.join(sorted(SIGNALS))})")
    return v


@dataclass(frozen=True, kw_only=True)
class Condition:
    """``signal op value``; while the alert is active it must hold at ``clear`` instead."""

    signal: str = spec(check=_known_signal)
    op: Op
    value: float
    clear: float | None = None
    # Needed to enter (pending) only: the alert stays active without it.
    enter_only: bool = False
    # The threshold for an engine whose token counter moves only when a request finishes.
    at_finish_value: float | None = None

    def __post_init__(self) -> None:
        # Hysteresis: the clear threshold must be on the resolved side of the firing one (or equal).
        c = self.clear
        above = self.op in (">", ">=")
        if c is not None and ((above and c > self.value) or (not above and c < self.value)):
            raise ValueError(f"clear {c:g} is past value {self.value:g}: it must be on the resolved side")

    def threshold(self, active: bool, at_finish: bool) -> float:
        base = self.at_finish_value if at_finish and self.at_finish_value is not None else self.value
        if active and self.clear is not None:
            # at_finish engines shift the clear threshold by the same amount.
            return self.clear + (base - self.value)
        return base

    def holds(self, v: float, active: bool, at_finish: bool = False) -> bool:
        t = self.threshold(active, at_finish)
        op = self.op
        if op == ">":
            return v > t
        if op == ">=":
            return v >= t
        if op == "<":
            return v < t
        return v <= t

    def text(self, at_finish: bool = False) -> str:
        t = self.threshold(False, at_finish)
        clear = "" if self.clear is None else f" (clears at {self.threshold(True, at_finish):g})"
        return f"{self.signal} {self.op} {t:g}{clear}"


@dataclass(frozen=True, kw_only=True)
class Slo:
    """A TTFT objective: ``objective`` of first tokens within ``ttft_s`` seconds."""

    ttft_s: float = spec(gt=0)
    objective: float = spec(gt=0, lt=1)


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: str = spec(pattern=r"^[a-z][a-z0-9_]*$")
    summary: str = spec(min_length=1)
    severity: Severity
    for_s: float = spec(0.0, ge=0, alias="for")
    clear_for: float = spec(0.0, ge=0)
    runbook: str = ""
    when: tuple[Condition, ...] = spec(min_length=1)
    slo: Slo | None = None
    enabled: bool = True
    source: str = ""

    def __post_init__(self) -> None:
        if any(SIGNALS[c.signal].needs_slo for c in self.when) and self.slo is None:
            raise ValueError("a ttft_slo_burn_* condition needs slo = { ttft_s = ..., objective = ... }")
        if all(c.enter_only for c in self.when):
            raise ValueError("every condition is enter_only: the alert could never resolve")

    @property
    def inputs(self) -> tuple[str, ...]:
        """Every canonical metric or GPU field any condition may read."""
        seen: dict[str, None] = {}
        for c in self.when:
            for alt in SIGNALS[c.signal].inputs:
                for name in alt:
                    seen[name] = None
        return tuple(seen)


@dataclass(frozen=True, kw_only=True)
class RulesFile:
    schema_version: int = spec(1, alias="schema")
    rules: dict[str, dict[str, Any]] = spec(factory=dict)


def _validate_rule(rid: str, body: Mapping[str, Any], source: str) -> Rule:
    try:
        return validate(Rule, {**body, "id": rid, "source": source})
    except Invalid as exc:
        key = f"rules.{rid}" + ("" if exc.loc in ((), ("id",)) else f".{exc.where}")
        raise ConfigError(source, key, exc.msg) from None


def raw_rules(data: Mapping[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """The rule tables of one file, checked for shape (schema, tables) but not yet validated."""
    try:
        doc = validate(RulesFile, data)
    except Invalid as exc:
        raise ConfigError(source, exc.where, exc.msg) from None
    if doc.schema_version != 1:
        raise ConfigError(source, "schema", f"is {doc.schema_version}; this enginedeck reads schema 1")
    return doc.rules


def parse_rules(data: Mapping[str, Any], source: str) -> dict[str, Rule]:
    """Validate one rules file's data; ConfigError(file, key, problem) on the first problem."""
    return {rid: _validate_rule(rid, body, source) for rid, body in raw_rules(data, source).items()}


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(str(path), "", "not UTF-8 text") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"invalid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(str(path), "", "invalid TOML: nested too deeply") from None


def load_rules_file(path: Path) -> dict[str, Rule]:
    return parse_rules(_read_toml(path), str(path))


def shipped_rules_file() -> Path:
    return data_dir("alerts") / "rules.toml"


def user_rules_dir() -> Path:
    from console.paths import config_dir

    return config_dir() / "alerts"


def load_rules(extra_dirs: Iterable[Path] = (), *, user: bool = True) -> tuple[Rule, ...]:
    """The shipped rules, then user files in name order: a rule id already known takes the keys the
    user file gives over the shipped ones (``[rules.queue_buildup] for = 600`` changes only that);
    a new id is a new rule. The enabled ones, in file order."""
    shipped = shipped_rules_file()
    bodies = dict(raw_rules(_read_toml(shipped), str(shipped)))
    sources = dict.fromkeys(bodies, str(shipped))
    dirs = [user_rules_dir()] if user else []
    for d in [*dirs, *extra_dirs]:
        if d.is_dir():
            for path in sorted(d.glob("*.toml")):
                for rid, body in raw_rules(_read_toml(path), str(path)).items():
                    if not isinstance(body, dict):
                        raise ConfigError(str(path), f"rules.{rid}", "must be a table")
                    bodies[rid] = {**bodies.get(rid, {}), **body}
                    sources[rid] = str(path)
    rules = [_validate_rule(rid, body, sources[rid]) for rid, body in bodies.items()]
    return tuple(r for r in rules if r.enabled)
