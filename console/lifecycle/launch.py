"""From an instance's configuration and profile to the exact launch: image, argv, env, ports.

Templates (profile ``container.args`` / ``process.command`` or the instance's ``command``) use
the placeholders {model} {served_name} {port} {host} {tp} {python} {api_key} {max_model_len};
an element that is exactly "{extra}" expands to the instance's ``extra_args``. Secret values
(the API key, passed-through tokens) live only in ``LaunchSpec.env``/``argv`` in memory; every
rendering for people (``display``) masks them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from console.config import EngineInstance
from console.errors import UserError
from console.profiles import ContainerSpec, ProcessSpec
from console.secrets import MASK, instance_secrets, looks_secret, mask_args
from console.target import api_key_from_env

LABEL_MANAGED = "enginedeck.managed"
LABEL_INSTANCE = "enginedeck.instance"
LABEL_PROFILE = "enginedeck.profile"
LABEL_HASH = "enginedeck.config-hash"

# "{name}" is a placeholder; "{{name}}" is the literal text "{name}". Other braces (JSON) stay as they are.
_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}|\{([a-z_]+)\}")

GpuSpec = Literal["all", "none"] | int | list[int]


def expand(template: Sequence[str], values: Mapping[str, str], extra: Sequence[str] = ()) -> list[str]:
    """Fill placeholders; "{extra}" (a whole element) becomes ``extra``. Unknown names raise UserError."""
    out: list[str] = []
    for element in template:
        if element == "{extra}":
            out.extend(extra)
            continue

        def sub(m: re.Match[str], element: str = element) -> str:
            if m.group(1) is not None:
                return "{" + m.group(1) + "}"
            key = m.group(2)
            if key not in values:
                known = ", ".join("{" + k + "}" for k in sorted(values))
                raise UserError(
                    f"template element {element!r}: unknown placeholder {{{key}}} "
                    f"(known: {known}; write {{{{{key}}}}} for a literal)"
                )
            return values[key]

        out.append(_PLACEHOLDER.sub(sub, element))
    return out


@dataclass(frozen=True)
class LaunchSpec:
    name: str
    profile: str
    backend: Literal["docker", "process"]
    argv: tuple[str, ...]  # process: full command; docker: the container command (args)
    entrypoint: tuple[str, ...] | None = None  # docker only; None = the image's own
    image: str = ""
    env: Mapping[str, str] = field(default_factory=dict)  # what is passed (process: over process_backend.BASE_ENV)
    secrets: tuple[str, ...] = ()
    bind: str = "127.0.0.1"
    host_port: int = 0
    container_port: int = 0
    gpus: GpuSpec = "none"
    ipc_mode: str = ""
    shm_size: str = ""
    ulimits: Mapping[str, int] = field(default_factory=dict)
    volumes: Mapping[str, str] = field(default_factory=dict)  # host path -> container path
    api_key: str | None = None
    # The engine reads its key only from an argument (no environment variable, e.g. SGLang), so
    # the key is in its command line for anyone on the host to see.
    key_in_argv: bool = False
    config_hash: str = ""

    @property
    def container_name(self) -> str:
        return f"enginedeck-{self.name}"

    @property
    def address(self) -> str:
        return f"{self.bind}:{self.host_port}"

    @property
    def gpus_text(self) -> str:
        g = self.gpus
        if g == "none":
            return ""
        if g == "all":
            return "all"
        if isinstance(g, int):
            return f"{g} GPU(s)"
        return ",".join(str(i) for i in g)

    @property
    def has_gpus(self) -> bool:
        return self.gpus != "none" and self.gpus != 0 and self.gpus != []

    def labels(self) -> dict[str, str]:
        return {
            LABEL_MANAGED: "1",
            LABEL_INSTANCE: self.name,
            LABEL_PROFILE: self.profile,
            LABEL_HASH: self.config_hash,
        }

    def display_argv(self) -> list[str]:
        """The command for people: API keys and passed-through secrets replaced by ****."""
        base = list(self.entrypoint or ()) + list(self.argv)
        return mask_args(base, self.secrets)

    def display(self) -> str:
        """A one-line, secret-free rendering (a `docker run`-like or shell command line)."""
        import shlex

        args = " ".join(shlex.quote(a) for a in self.display_argv())
        env = " ".join(f"-e {k}" for k in sorted(self.env))
        if self.backend == "process":
            return args
        parts = ["docker run --init", f"-p {self.bind}:{self.host_port}:{self.container_port}"]
        if self.gpus_text:
            parts.append(f"--gpus {self.gpus_text}")
        if self.ipc_mode:
            parts.append(f"--ipc={self.ipc_mode}")
        if self.shm_size:
            parts.append(f"--shm-size={self.shm_size}")
        parts.extend(f"--ulimit {k}={v}" for k, v in self.ulimits.items())
        parts.extend(f"-v {h}:{c}" for h, c in self.volumes.items())
        if env:
            parts.append(env)
        if self.entrypoint:
            parts.append(f"--entrypoint {shlex.quote(self.entrypoint[0])}")
        parts.append(self.image)
        # After the image: the rest of the entrypoint (its first word went to --entrypoint), then args.
        rest = self.display_argv()[1:] if self.entrypoint else self.display_argv()
        parts.append(" ".join(shlex.quote(a) for a in rest))
        return " ".join(p for p in parts if p)


def _hash(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _api_key(inst: EngineInstance) -> str | None:
    env_name = inst.config.api_key_env
    value = api_key_from_env(env_name)
    if env_name and value is None:
        raise UserError(f"{inst.name}: api_key_env names {env_name}, which is not set in this environment")
    return value


def _values(inst: EngineInstance, *, port: int, host: str, python: str, key: str | None) -> dict[str, str]:
    """What a command template may name: {model}, {served_name}, {port}, {host}, {tp}, {python}, {api_key}."""
    cfg = inst.config
    model = cfg.model or ""
    values = {
        "model": model,
        "served_name": cfg.served_name or model or inst.name,
        "port": str(port),
        "host": host,
        "tp": str(cfg.tp),
        "python": python,
    }
    if key:
        values["api_key"] = key
    return values


def _pass_key(inst: EngineInstance, how: ContainerSpec | ProcessSpec, key: str | None, values: Mapping[str, str],
              env: dict[str, str], argv: list[str], to: str) -> list[str]:
    """Hand the API key over the way the engine reads it: its environment variable where it has one
    (kept out of `ps` and `docker inspect`), else its command line. Returns the argv."""
    if not key:
        return argv
    if how.api_key_env:
        env[how.api_key_env] = key
        return argv
    if how.api_key_args:
        return argv + expand(how.api_key_args, values)
    raise UserError(f"{inst.name}: profile {inst.profile.name} has no way to pass an API key to the {to}")


def build_launch(inst: EngineInstance, *, environ: Mapping[str, str] | None = None) -> LaunchSpec:
    """Resolve an instance's launch; configuration problems raise one-line UserErrors."""
    env_src = os.environ if environ is None else environ
    cfg = inst.config
    prof = inst.profile
    if cfg.managed is None:
        raise UserError(f'{inst.name} is monitor-only (url = ...); set managed = "docker" or "process" to start it')
    key = _api_key(inst)
    # Everything the engine is given that the one secret rule calls secret (console.secrets).
    secrets: list[str] = ([key] if key else []) + list(instance_secrets(inst, env_src))

    if cfg.managed == "docker":
        cport = prof.container.port
        hport = cfg.port or cport
        values = _values(inst, port=cport, host="0.0.0.0", python="python3", key=key)
        template = cfg.command if cfg.command is not None else list(prof.container.args)
        argv = expand(template, values, cfg.extra_args)
        env: dict[str, str] = dict(prof.container.env)
        env.update(cfg.env)
        argv = _pass_key(inst, prof.container, key, values, env, argv, "container")
        passthrough = cfg.env_passthrough if cfg.env_passthrough is not None else list(prof.container.env_passthrough)
        for name in passthrough:
            if name in env_src:
                env[name] = env_src[name]
                if looks_secret(name):
                    secrets.append(env_src[name])
        volumes: dict[str, str] = {}
        if prof.container.model_cache:
            host = Path(cfg.model_cache or "~/.cache/huggingface").expanduser()
            volumes[str(host)] = prof.container.model_cache
        image = cfg.image or f"{prof.container.image}:{prof.container.tag}"
        entrypoint = tuple(prof.container.entrypoint) or None
        spec = LaunchSpec(
            name=inst.name,
            profile=prof.name,
            backend="docker",
            argv=tuple(argv),
            entrypoint=entrypoint,
            image=image,
            env=env,
            secrets=tuple(dict.fromkeys(secrets)),
            bind=cfg.bind,
            host_port=hport,
            container_port=cport,
            gpus=cfg.gpus,
            ipc_mode=prof.container.ipc_mode,
            shm_size=prof.container.shm_size,
            ulimits=dict(prof.container.ulimits),
            volumes=volumes,
            api_key=key,
            key_in_argv=key is not None and any(key in a for a in argv),
        )
    else:
        port = cfg.port or prof.container.port
        values = _values(inst, port=port, host=cfg.bind, python=sys.executable, key=key)
        template = cfg.command if cfg.command is not None else list(prof.process.command)
        if not template:
            raise UserError(f"{inst.name}: profile {prof.name} has no process command; set command = [...]")
        argv = expand(template, values, cfg.extra_args)
        # Only what the configuration names reaches the process (process_backend adds PATH, HOME,
        # locale and the like): never the console's whole environment with its unrelated secrets.
        env = dict(cfg.env)
        passthrough = cfg.env_passthrough if cfg.env_passthrough is not None else list(prof.container.env_passthrough)
        for name in passthrough:
            if name in env_src:
                env[name] = env_src[name]
        argv = _pass_key(inst, prof.process, key, values, env, argv, "process")
        if isinstance(cfg.gpus, list):
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in cfg.gpus)
        exe = argv[0]
        if os.sep not in exe and shutil.which(exe) is None:
            raise UserError(f'{inst.name}: {exe!r} is not on PATH; install it or set command = ["/path/to/{exe}", ...]')
        if os.sep in exe and not os.access(exe, os.X_OK):
            raise UserError(f"{inst.name}: {exe} is not an executable file")
        spec = LaunchSpec(
            name=inst.name,
            profile=prof.name,
            backend="process",
            argv=tuple(argv),
            env=env,
            secrets=tuple(dict.fromkeys(secrets)),
            bind=cfg.bind,
            host_port=port,
            container_port=port,
            gpus=cfg.gpus,
            api_key=key,
            key_in_argv=key is not None and any(key in a for a in argv),
        )
    # The hash covers what changes the running engine, secrets masked (a rotated key alone
    # does not mark the engine as out of date).
    h = _hash(
        {
            "backend": spec.backend,
            "image": spec.image,
            "entrypoint": spec.entrypoint,
            "argv": mask_args(spec.argv, spec.secrets),
            "env": sorted(spec.env) + [f"{k}={v}" for k, v in sorted(spec.env.items()) if v not in spec.secrets],
            "ports": [spec.bind, spec.host_port, spec.container_port],
            "gpus": spec.gpus,
            "ipc": spec.ipc_mode,
            "shm": spec.shm_size,
            "ulimits": dict(spec.ulimits),
            "volumes": dict(spec.volumes),
        }
    )
    return _with_hash(spec, h)


def _with_hash(spec: LaunchSpec, h: str) -> LaunchSpec:
    from dataclasses import replace

    return replace(spec, config_hash=h)


__all__ = [
    "LABEL_HASH",
    "LABEL_INSTANCE",
    "LABEL_MANAGED",
    "LABEL_PROFILE",
    "MASK",
    "LaunchSpec",
    "build_launch",
    "expand",
]
