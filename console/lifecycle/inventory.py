"""Host inventory: what `enginedeck ps` lists. The configured instances with their state, and every
engine the backends find on this host (``EngineBackend.listing``): containers and processes an
enginedeck started, and engines it recognises but did not start (monitor-only), each with a quick
readiness probe of its own.

Pure assembly over the backends' listings: nothing here asks which kind of backend it holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from console.config import EngineInstance
from console.errors import UserError
from console.lifecycle import adoption
from console.lifecycle.backend import EngineBackend, Listed, Listing
from console.lifecycle.launch import build_launch
from console.lifecycle.probe import probe_ready, ready_key
from console.lifecycle.state import RUNNING_PHASES, Backend, InstanceState
from console.model import Phase
from console.profiles import EngineProfile
from console.secrets import Scrubber

QUICK_PROBE_TIMEOUT = 1.0


@dataclass(frozen=True, slots=True)
class PsRow:
    """One line of `enginedeck ps`: a configured instance, or a container/process found running."""

    name: str  # instance name; for unconfigured finds the container name or "pid N"
    backend: str  # docker | process | url
    phase: str
    managed: bool  # started by enginedeck (or adopted)
    monitor_only: bool  # found running, not ours: watch only until adopted
    ident: str = ""  # container short id or "pid N"
    address: str = ""  # published host:port(s)
    gpus: str = ""
    image: str = ""  # image, or the (masked) command for processes
    profile: str = ""
    detail: str = ""
    config_changed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": self.backend,
            "phase": self.phase,
            "managed": self.managed,
            "monitor_only": self.monitor_only,
            "id": self.ident,
            "address": self.address,
            "gpus": self.gpus,
            "image": self.image,
            "profile": self.profile,
            "detail": self.detail,
            "config_changed": self.config_changed,
        }


@dataclass(frozen=True, slots=True)
class PsReport:
    rows: tuple[PsRow, ...]
    # Backend kind -> why it could not be asked (its rows then lack runtime data).
    errors: Mapping[str, str] = field(default_factory=dict)

    @property
    def docker_error(self) -> str | None:
        return self.errors.get(Backend.DOCKER.value)


def take_inventory(
    configured: Sequence[tuple[EngineInstance, InstanceState]],
    backends: Mapping[Backend, EngineBackend],
    secrets: Iterable[str] = (),
) -> PsReport:
    """``ps``: one row per configured instance (in configuration order), then what each backend
    found that is not configured here. ``secrets`` are hidden from commands found on the host (a
    process of another user may carry a configured engine's key)."""
    from console.profiles import load_profiles

    instances = [inst for inst, _ in configured]
    profiles: dict[str, EngineProfile] = {inst.profile.name: inst.profile for inst in instances}
    with contextlib.suppress(UserError):
        for prof in load_profiles().values():
            profiles.setdefault(prof.name, prof)
    # Every backend is asked, also one no instance uses: `ps` lists the engines it recognises.
    listings: dict[Backend, Listing] = {kind: b.listing(instances, profiles) for kind, b in backends.items()}
    probe = _Prober(instances, profiles)
    adopted = adoption.adopted()
    rows: list[PsRow] = []
    seen: set[tuple[Backend, str]] = set()
    for inst, st in configured:
        kind = Backend(inst.config.managed) if inst.config.managed else Backend.NONE
        backend = backends.get(kind)
        if backend is None:
            rows.append(PsRow(inst.name, "url", st.phase.value, False, True, address=inst.url,
                              profile=inst.profile.name))  # fmt: skip
            continue
        listing = listings[kind]
        found = next((e for e in listing.engines if e.managed and e.instance == inst.name), None)
        if found is None and backend.can_adopt and (aid := adopted.get(inst.name)):
            found = next((e for e in listing.engines if e.ident == aid[:12]), None)
        if found is None:
            rows.append(_idle_row(inst, st, backend, listing.error))
            continue
        seen.add((kind, found.ident))
        rows.append(_listed_row(inst.name, kind, found, st, inst.profile.name, probe, managed=True, inst=inst))
    for kind, listing in listings.items():
        for e in listing.engines:
            if (kind, e.ident) in seen:
                continue
            if e.managed:
                rows.append(_listed_row(e.instance or e.name, kind, e, None, e.profile, probe, managed=True,
                                        note="not in this configuration"))  # fmt: skip
            else:
                note = "monitor-only: not started by enginedeck" + (
                    " (adopt to control)" if backends[kind].can_adopt else "")
                rows.append(_listed_row(e.name, kind, e, None, e.profile, probe, managed=False, note=note))
    hide = Scrubber(secrets)
    rows = [replace(r, image=hide(r.image), detail=hide(r.detail)) for r in rows]
    errors = {kind.value: listing.error for kind, listing in listings.items() if listing.error}
    return PsReport(tuple(rows), errors)


def _idle_row(inst: EngineInstance, st: InstanceState, backend: EngineBackend, error: str | None) -> PsRow:
    """A configured instance with no engine found (or the backend could not be asked: ``error``)."""
    phase = st.phase.value if st.phase is not Phase.UNKNOWN else ("unknown" if error else "not running")
    port = inst.config.port
    return PsRow(inst.name, backend.kind.value, phase, True, False, profile=inst.profile.name,
                 address=f"{inst.config.bind}:{port}" if port else "", image=backend.image(inst) or "",
                 detail=error or st.detail)  # fmt: skip


def _listed_row(
    name: str,
    kind: Backend,
    e: Listed,
    st: InstanceState | None,
    profile: str,
    probe: _Prober,
    *,
    managed: bool,
    note: str = "",
    inst: EngineInstance | None = None,
) -> PsRow:
    if e.status == "running":
        if st is not None and st.phase in RUNNING_PHASES | {Phase.STOPPING}:
            phase = st.phase.value
        else:
            url = url_from_address(e.address)
            phase = probe.phase(name, url, profile) if url else "running"
    elif e.status == "exited":
        phase = f"exited ({e.exit_code}{', OOMKilled' if e.oom_killed else ''})"
    else:
        phase = e.status
    changed = False
    if inst is not None and st is not None and e.config_hash:
        with contextlib.suppress(UserError):
            changed = build_launch(inst).config_hash != e.config_hash
    return PsRow(name, kind.value, phase, managed, not managed, ident=e.ident, address=e.address, gpus=e.gpus,
                 image=e.image, profile=profile, detail=note or (st.detail if st else ""),
                 config_changed=changed)  # fmt: skip


class _Prober:
    """Quick probes of the engines `ps` lists, each with its profile's ready path and, where the
    engine is a configured one (by name, or by the address it answers at), its API key: a keyed
    engine found on the host is probed with its key, not reported as 401."""

    def __init__(self, instances: Sequence[EngineInstance], profiles: Mapping[str, EngineProfile]) -> None:
        self.instances = instances
        self.profiles = profiles

    def key_for(self, name: str | None, url: str | None) -> str | None:
        for inst in self.instances:
            if inst.name == name or (url and same_address(inst.url, url)):
                return inst.api_key
        return None

    def phase(self, name: str, url: str, profile: str) -> str:
        prof = self.profiles.get(profile)
        return quick_phase(url, prof, self.key_for(name, url)) if prof is not None else "running"


def url_from_address(address: str) -> str | None:
    """The base URL of the first "host:port" (or docker's "host:port->port/tcp") in ``address``."""
    for part in address.split(", "):
        host, _, port = part.split("->", 1)[0].rpartition(":")
        if port:
            if host in ("", "0.0.0.0", "::"):
                host = "127.0.0.1"
            return f"http://{host}:{port}"
    return None


def same_address(a: str, b: str) -> bool:
    """Whether two base URLs reach the same listener (localhost, 127.0.0.1 and 0.0.0.0 are one)."""
    from urllib.parse import urlsplit

    def key(url: str) -> tuple[str, int | None]:
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port
        except ValueError:
            port = None
        return ("127.0.0.1" if host in ("localhost", "0.0.0.0", "::", "::1") else host), port

    return key(a) == key(b)


def quick_phase(url: str, prof: EngineProfile, key: str | None = None) -> str:
    """One readiness probe of an engine found on the host, as a phase word for `ps`."""
    r = probe_ready(url, prof.health.ready_path, ready_key(prof, key), timeout=QUICK_PROBE_TIMEOUT)
    if r.ready:
        return Phase.READY.value
    if r.not_engine:
        return f"not an engine ({r.detail})"
    if r.kind == "http" and r.status in (401, 403):
        return f"answering ({r.status}: API key needed)"
    if r.kind == "refused" and "refused" not in prof.health.loading:
        return Phase.STARTING.value
    if r.kind == "refused" or (r.kind == "http" and r.status in (200, 503)):
        return Phase.LOADING.value
    return Phase.UNHEALTHY.value
