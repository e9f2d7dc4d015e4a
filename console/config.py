"""User configuration: ``config.toml`` at the platform config path or ``--config FILE``.

An engine instance names its profile and either a URL to watch (monitor-only) or the settings to
start it (``managed = "docker"`` or ``"process"``). Secrets are given by environment-variable
*name* (``api_key_env = "VLLM_API_KEY"``), never as literals; a literal is a validation error.
Every problem is one line naming the file, the key and the problem.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from console.errors import ConfigError, UserError
from console.hosts import DEFAULT_COMMAND, HostTarget, check_command, host_name_ok, parse_destination
from console.keymap import KeyTableError, parse_key_table
from console.paths import config_file
from console.profiles import EngineProfile, get_profile, load_profiles
from console.schema import Invalid, spec, validate
from console.secrets import looks_secret, mask_config
from console.sources import (
    DEFAULT_SELECTOR,
    IDENTITY_LABELS,
    ROLE_LABELS,
    KubeTarget,
    PromTarget,
    check_label_selector,
    check_url,
    parse_selector,
    source_name_ok,
)
from console.target import EngineTarget, api_key_from_env
from console.timespec import parse_duration, parse_size

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Per-phase timeouts in seconds. A load that still shows progress is never killed for time."""

    creating: float = spec(60.0, gt=0)
    starting: float = spec(120.0, gt=0)
    loading: float = spec(1800.0, gt=0)
    stopping: float = spec(30.0, gt=0)
    gpu_release: float = spec(60.0, gt=0)


def _no_secret_literals(v: dict[str, str], _: object) -> dict[str, str]:
    for key in v:
        if looks_secret(key):
            raise ValueError(
                f"{key} looks like a secret; list it in env_passthrough so its value is taken from "
                "your environment instead of the file"
            )
    return v


def _env_name(v: str | None, _: object) -> str | None:
    if v is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
        raise ValueError("must be the NAME of an environment variable (e.g. VLLM_API_KEY), not a key")
    return v


def _engine_url(v: str | None, _: object) -> str | None:
    if v is None:
        return v
    example = "like http://127.0.0.1:8000"
    try:
        parts = urlsplit(v)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        raise ValueError(f"{v!r} is not an http(s) URL {example}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{v!r} is not an http(s) URL {example}")
    if not parts.hostname:
        raise ValueError(f"{v!r} has no host; give one {example}")
    # Checked here, not on first use: an HTTP client rejects such a URL with an exception.
    port_text = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
    if port_text:
        if not port_text.isdigit():
            raise ValueError(f"{v!r}: port {port_text!r} is not a number")
        if not 1 <= int(port_text) <= 65535:
            raise ValueError(f"{v!r}: port {int(port_text)} is out of range (1-65535)")
    return v.rstrip("/")


@dataclass(frozen=True, kw_only=True)
class InstanceConfig:
    profile: str
    # Monitor an existing endpoint...
    url: str | None = spec(None, check=_engine_url)
    # ...or start and stop it.
    managed: Literal["docker", "process"] | None = None
    model: str | None = None
    served_name: str | None = None
    port: int | None = spec(None, ge=1, le=65535)
    bind: str = "127.0.0.1"
    gpus: Literal["all", "none"] | int | list[int] = "none"
    tp: int = spec(1, ge=1)
    extra_args: list[str] = spec(factory=list)
    image: str | None = None
    command: list[str] | None = None
    env: dict[str, str] = spec(factory=dict, check=_no_secret_literals)
    env_passthrough: list[str] | None = None
    model_cache: str | None = None
    api_key_env: str | None = spec(None, check=_env_name)
    timeouts: Timeouts = Timeouts()
    simulated: bool = False
    # Scrape period for this engine's metrics (seconds); defaults to the console refresh.
    scrape_period: float | None = spec(None, gt=0)

    def __post_init__(self) -> None:
        if self.url is None and self.managed is None:
            raise ValueError('give either url = "http://host:port" (watch) or managed = "docker"|"process" (start)')
        if self.managed is not None and self.model is None and self.command is None:
            raise ValueError("a managed engine needs model (or command for a process)")


def _duration(v: str, _: object) -> str:
    parse_duration(v)
    return v


def _size(v: str, _: object) -> str:
    parse_size(v)
    return v


@dataclass(frozen=True, kw_only=True)
class ConsoleSettings:
    refresh: float = spec(1.0, ge=0.1, le=60)
    layout: str = "auto"
    read_only: bool = False
    mouse: bool = True
    gpu_source: Literal["nvml", "simulated", "none"] = "nvml"
    # Managed engines when the terminal is lost or the console is told to end (SIGHUP/SIGTERM/SIGINT):
    # keep them running (containers; process engines always end with the console) or stop them.
    on_terminal_loss: Literal["keep", "stop"] = "keep"
    # Ring the terminal bell (BEL) when an alert starts firing (the toast comes either way).
    alert_bell: bool = False
    # Recordings (`enginedeck record`, the console's REC): the folder (default: `recordings` in the
    # state dir) and how much is kept, by age and by size.
    recording_dir: str | None = None
    record_retain: str = spec("48h", check=_duration)
    record_max_size: str = spec("1GB", check=_size)
    # Where the bench's results are saved (the console's `s`, `enginedeck bench --save`); default:
    # `bench` in the state dir. $ENGINEDECK_BENCH_DIR wins over it (console/paths.py).
    bench_dir: str | None = None


def _ssh(v: str, _: object) -> str:
    try:
        parse_destination(v, where="destination")
    except UserError as exc:
        raise ValueError(exc.message) from None
    return v


def _command(v: str, _: object) -> str:
    try:
        return check_command(v)
    except UserError as exc:
        raise ValueError(exc.message) from None


@dataclass(frozen=True, kw_only=True)
class HostConfig:
    """``[hosts.NAME]``: a machine watched over SSH (its own enginedeck reports its engines)."""

    ssh: str = spec(check=_ssh)  # [user@]host[:port], or an alias of ~/.ssh/config
    command: str = spec(DEFAULT_COMMAND, check=_command)  # the enginedeck command line there, e.g. "uvx enginedeck"
    ssh_options: list[str] = spec(factory=list)  # extra ssh arguments, e.g. ["-F", "ssh.conf"]
    period: float = spec(1.0, ge=0.2, le=60)  # seconds between the host's reports

    def target(self, name: str) -> HostTarget:
        destination, port = parse_destination(self.ssh)
        return HostTarget(name=name, destination=destination, port=port, command=self.command,
                          ssh_options=tuple(self.ssh_options), period=self.period)


def _source_url(v: str | None, _: object) -> str | None:
    if v is None:
        return None
    try:
        return check_url(v, where="URL")
    except UserError as exc:
        raise ValueError(exc.message) from None


def _selector(v: str | None, before: Mapping[str, Any]) -> str | None:
    if v is None:
        return None
    try:
        if before.get("kubernetes") is not None:
            return check_label_selector(v)
        parse_selector(v)
    except UserError as exc:
        raise ValueError(exc.message) from None
    return v


def _token_env(v: str | None, _: object) -> str | None:
    if v is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
        raise ValueError("give the NAME of an environment variable that holds the token, never the token")
    return v


@dataclass(frozen=True, kw_only=True)
class SourceConfig:
    """``[sources.NAME]``: a Prometheus server that scrapes the engines, or a Kubernetes API server
    whose pods they are (read-only either way)."""

    prometheus: str | None = spec(None, check=_source_url)  # its base URL, e.g. http://prom:9090
    kubernetes: str | None = spec(None, check=_source_url)  # the API server's URL, e.g. https://api:6443
    # Prometheus: which series are engines'; Kubernetes: a label selector
    selector: str | None = spec(None, check=_selector)
    identity: list[str] = spec(factory=lambda: list(IDENTITY_LABELS), min_length=1)
    role_labels: list[str] = spec(factory=lambda: list(ROLE_LABELS))
    profile: str | None = None  # one profile for every engine; default: from the metric names
    period: float = spec(1.0, ge=0.2, le=60)  # seconds between reads
    history: str = spec("15m", check=_duration)  # chart backfill from query_range (Prometheus)
    # Kubernetes only: the environment variable holding the bearer token (never the token itself),
    # the CA bundle of the server's certificate, one namespace (default: all), seconds between lists.
    token_env: str | None = spec(None, check=_token_env)
    ca_file: str | None = None
    namespace: str | None = None
    list_every: float = spec(5.0, ge=1, le=600)

    def __post_init__(self) -> None:
        if (self.prometheus is None) == (self.kubernetes is None):
            raise ValueError("give one of prometheus = URL or kubernetes = URL")
        if self.prometheus is not None and (self.token_env or self.ca_file or self.namespace):
            raise ValueError("token_env, ca_file and namespace are for a kubernetes source")

    def target(self, name: str) -> PromTarget | KubeTarget:
        if self.kubernetes is not None:
            return KubeTarget(name=name, url=self.kubernetes, token_env=self.token_env, ca_file=self.ca_file,
                              namespace=self.namespace, selector=self.selector, profile=self.profile,
                              period=self.period, list_every=self.list_every)
        return PromTarget(name=name, url=self.prometheus or "", selector=self.selector or DEFAULT_SELECTOR,
                          identity=tuple(self.identity), role_labels=tuple(self.role_labels), profile=self.profile,
                          period=self.period, history_s=parse_duration(self.history))


def _names_ok(what: str, ok: Callable[[str], object]) -> Callable[[dict[str, Any], object], dict[str, Any]]:
    def check(v: dict[str, Any], _: object) -> dict[str, Any]:
        for name in v:
            if not ok(name):
                raise ValueError(f"{what} name {name!r} may use letters, digits, '.', '_' and '-' only")
        return v

    return check


@dataclass(frozen=True, kw_only=True)
class ConfigFile:
    schema_version: int = spec(1, alias="schema")
    console: ConsoleSettings = spec(factory=ConsoleSettings)
    engines: dict[str, InstanceConfig] = spec(factory=dict, check=_names_ok("engine", re.compile(_NAME).match))
    hosts: dict[str, HostConfig] = spec(factory=dict, check=_names_ok("host", host_name_ok))
    sources: dict[str, SourceConfig] = spec(factory=dict, check=_names_ok("source", source_name_ok))


@dataclass(frozen=True)
class EngineInstance:
    """A resolved engine instance: its profile, where it answers, and how to reach it."""

    name: str
    profile: EngineProfile
    url: str
    config: InstanceConfig
    adhoc: bool = False  # given on the command line as PROFILE@URL
    pids: tuple[int, ...] = ()  # known process ids (process backend / simulator fleet)
    gpus: tuple[int, ...] = ()

    @property
    def api_key(self) -> str | None:
        """The key's value, read from the environment at the moment it is needed."""
        return api_key_from_env(self.config.api_key_env)

    @property
    def target(self) -> EngineTarget:
        """This instance as its clients (bench, load generator, playground) see it."""
        return EngineTarget(self.name, self.profile, self.url, self.config.api_key_env, self.gpus)

    @property
    def managed(self) -> bool:
        return self.config.managed is not None


@dataclass(frozen=True)
class Config:
    path: Path | None
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
    instances: tuple[EngineInstance, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict)
    # [keys]: action id -> its keys in Textual's names (they replace the action's own; () unbinds it).
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    hosts: tuple[HostTarget, ...] = ()  # [hosts.NAME]: remote machines watched over SSH
    sources: tuple[PromTarget | KubeTarget, ...] = ()  # [sources.NAME]: Prometheus / Kubernetes (read-only)

    def instance(self, name: str) -> EngineInstance:
        for inst in self.instances:
            if inst.name == name:
                return inst
        known = ", ".join(i.name for i in self.instances) or "none configured"
        raise UserError(f"no engine named {name!r} (known: {known}); or give PROFILE@URL")


def parse_config(data: Mapping[str, Any], source: str, profiles: Mapping[str, EngineProfile] | None = None) -> Config:
    try:
        # [keys] is checked by its own module (console.keymap): its errors name the action.
        keys = parse_key_table(data.get("keys", {}))
    except KeyTableError as exc:
        raise ConfigError(source, f"keys.{exc.action}" if exc.action else "keys", exc.problem) from None
    try:
        cf = validate(ConfigFile, {k: v for k, v in data.items() if k != "keys"})
    except Invalid as exc:
        msg = exc.msg
        if exc.kind == "extra" and str(exc.loc[-1]) in ("api_key", "token", "hf_token"):
            msg = "secrets are never written in the file; use api_key_env = \"ENV_VAR_NAME\""
        raise ConfigError(source, exc.where, msg) from None
    table = load_profiles() if profiles is None else profiles
    instances = []
    for name, ic in cf.engines.items():
        if ic.profile not in table:
            known = ", ".join(sorted(table))
            raise ConfigError(source, f"engines.{name}.profile", f"unknown profile {ic.profile!r} (known: {known})")
        profile = table[ic.profile]
        instances.append(
            EngineInstance(name=name, profile=profile, url=_instance_url(ic, profile), config=ic, gpus=_gpu_ids(ic))
        )
    hosts = tuple(hc.target(name) for name, hc in cf.hosts.items())
    for name, sc in cf.sources.items():
        if sc.profile is not None and sc.profile not in table:
            raise ConfigError(source, f"sources.{name}.profile",
                              f"unknown profile {sc.profile!r} (known: {', '.join(sorted(table))})")
        if name in cf.hosts:
            raise ConfigError(source, f"sources.{name}", f"{name!r} is also a [hosts.{name}]; give each its own name")
    sources = tuple(sc.target(name) for name, sc in cf.sources.items())
    return Config(path=Path(source), console=cf.console, instances=tuple(instances), raw=data, keys=keys,
                  hosts=hosts, sources=sources)


def _instance_url(ic: InstanceConfig, profile: EngineProfile) -> str:
    if ic.url:
        return ic.url
    host = "127.0.0.1" if ic.bind in ("0.0.0.0", "::", "") else ic.bind
    return f"http://{host}:{ic.port or profile.container.port}"


def _gpu_ids(ic: InstanceConfig) -> tuple[int, ...]:
    return tuple(ic.gpus) if isinstance(ic.gpus, list) else ()


def load_config(path: str | Path | None = None, *, required: bool = False) -> Config:
    """Load ``path`` or the default config file. A missing default file is an empty config."""
    explicit = path is not None
    p = Path(path).expanduser() if path is not None else config_file()
    if not p.exists():
        if explicit or required:
            raise UserError(f"{p}: configuration file not found")
        return Config(path=None)
    try:
        text = p.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(p), "", f"cannot read: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), "", f"invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per nesting level
        raise ConfigError(str(p), "", "invalid TOML: nested too deeply") from None
    return parse_config(data, str(p))


def parse_engine_ref(ref: str, *, api_key_env: str | None = None) -> EngineInstance:
    """``PROFILE@URL`` (e.g. ``vllm@http://127.0.0.1:8000``) -> an ad-hoc, monitor-only instance."""
    profile_name, sep, url = ref.partition("@")
    if not sep or not profile_name or not url:
        raise UserError(f"{ref!r}: expected PROFILE@URL, e.g. vllm@http://127.0.0.1:8000")
    profile = get_profile(profile_name)
    try:
        ic = validate(InstanceConfig, {"profile": profile_name, "url": url, "api_key_env": api_key_env})
    except Invalid as exc:
        raise UserError(f"{ref!r}: {exc.msg}") from None
    assert ic.url is not None
    return EngineInstance(name=ref, profile=profile, url=ic.url, config=ic, adhoc=True)


def resolve_engines(config: Config, refs: Sequence[str], *, api_key_env: str | None = None) -> list[EngineInstance]:
    """Command-line engine arguments: configured names or PROFILE@URL forms."""
    out = []
    for ref in refs:
        if "@" in ref:
            out.append(parse_engine_ref(ref, api_key_env=api_key_env))
        else:
            out.append(config.instance(ref))
    return out


def selected_instances(config: Config, refs: Sequence[str], *, api_key_env: str | None = None
                       ) -> list[EngineInstance]:
    """The engines a command's ``--engine`` arguments name (configured names first, then the
    PROFILE@URL ones), or every configured engine when there are none."""
    if not refs:
        return list(config.instances)
    named = [config.instance(r) for r in refs if "@" not in r]
    return named + resolve_engines(config, [r for r in refs if "@" in r], api_key_env=api_key_env)


def mask_secrets(data: Any) -> Any:
    """A copy of config data for display, masked by the one secret rule (console.secrets)."""
    return mask_config(data)
