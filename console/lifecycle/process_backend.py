"""Process backend: engines as local processes (llama-server, `vllm serve`, the simulator).

Each engine runs in its own session and process group (``start_new_session``) with stdout and
stderr captured into the log buffer. Stop signals the whole group, so workers an engine forks
(vLLM's EngineCore, tensor-parallel ranks) go too.

No orphans: started groups are kept in a registry; an ``atexit`` hook (and, once
``install_signal_cleanup`` ran in the main thread, SIGTERM/SIGHUP handlers) terminates them when
enginedeck exits. Limits: nothing runs when enginedeck itself is SIGKILLed or the machine loses
power; a child that leaves the process group (``setsid``) escapes the group signal. For those
cases each start is also written to ``state_dir()/processes/NAME.json`` (``process_records``); the
next enginedeck run lists such survivors in `ps` and `down NAME` stops them (the PID is trusted only
while its process start time matches). ``ProcessEngines`` is the ``EngineBackend`` over all this.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, BinaryIO

import psutil

from console.lifecycle.backend import NOT_ADOPTABLE, ExitInfo, Found, Handle, Listed, Listing, PullProgress
from console.lifecycle.errors import LifecycleError
from console.lifecycle.launch import LaunchSpec
from console.lifecycle.logs import LogBuffer
from console.lifecycle.process_records import (
    ProcessRecord,
    all_records,
    drop_record,
    open_private,
    read_record,
    write_record,
)
from console.lifecycle.state import Backend
from console.secrets import LineScrubber

if TYPE_CHECKING:
    from console.config import EngineInstance
    from console.profiles import EngineProfile

__all__ = ["ProcessRecord", "all_records", "drop_record", "read_record"]  # (records live in process_records)

CLEANUP_GRACE = 5.0
LOG_FILE_MAX = 16 * 1024 * 1024  # the output copy on disk rotates to NAME.log.1 at this size

_registry_lock = threading.Lock()
_registry: dict[int, str] = {}  # pgid -> instance name, groups this process started
_atexit_installed = False


def log_path(name: str) -> Path:
    """Where a process engine's output is copied, so `enginedeck logs NAME` works from anywhere."""
    from console.paths import state_dir

    return state_dir() / "logs" / f"{name}.log"


class _LogFile:
    """An append-only copy of the output with one rotation (NAME.log -> NAME.log.1), readable by
    its owner only (engines print tokens the scrubber may not recognise)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.f: BinaryIO | None = None
        with contextlib.suppress(OSError):
            self.f = open_private(path)

    def write(self, data: bytes) -> None:
        if self.f is None:
            return
        try:
            if self.f.tell() + len(data) > LOG_FILE_MAX:
                self.f.close()
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                self.f = open_private(self.path)
            self.f.write(data)
            self.f.flush()
        except OSError:
            self.f = None

    def close(self) -> None:
        if self.f is not None:
            with contextlib.suppress(OSError):
                self.f.close()


def _group_pids(pgid: int) -> set[int]:
    """The group's running processes. A zombie has ended (our own children stay zombies until
    reaped, and nobody may be waiting on them while the console quits): not counted."""
    out: set[int] = set()
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                out.add(p.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError as exc:
        raise LifecycleError(f"not allowed to signal process group {pgid}: {exc.strerror}") from None


def cleanup_all(grace: float = CLEANUP_GRACE) -> list[int]:
    """Terminate every group this process started (SIGTERM, then SIGKILL after ``grace``)."""
    with _registry_lock:
        groups = dict(_registry)
        _registry.clear()
    for pgid in groups:
        with contextlib.suppress(LifecycleError):
            _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_group_pids(g) for g in groups):
        time.sleep(0.05)
    for pgid, name in groups.items():
        with contextlib.suppress(LifecycleError):
            _signal_group(pgid, signal.SIGKILL)
        drop_record(name, pgid)
    return list(groups)


def _ensure_atexit() -> None:
    global _atexit_installed
    with _registry_lock:
        if not _atexit_installed:
            atexit.register(cleanup_all)
            _atexit_installed = True


def install_signal_cleanup() -> None:
    """In the main thread: turn SIGTERM/SIGHUP into a normal exit so the atexit cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, handler)


def registered_groups() -> dict[int, str]:
    with _registry_lock:
        return dict(_registry)


def check_port_free(host: str, port: int) -> None:
    """A clear error before launch when something already listens on the engine's port."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise LifecycleError(
                f"port {host}:{port} is already in use ({exc.strerror}); stop what holds it or set a different port",
                1,
            ) from None


class ProcessHandle:
    """A process group this enginedeck started (its child)."""

    def __init__(self, proc: subprocess.Popen[bytes], name: str, secrets: tuple[str, ...] = ()) -> None:
        self.proc = proc
        self.name = name
        self.pgid = proc.pid  # start_new_session: the child leads its own group
        self.log_file = _LogFile(log_path(name))
        self.secrets = secrets

    @property
    def ident(self) -> str:
        return f"pid {self.proc.pid}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    @property
    def container_id(self) -> str | None:
        return None

    def poll(self) -> ExitInfo | None:
        rc = self.proc.poll()
        if rc is None:
            return None
        # A signal death is reported like a shell does: 128 + signal number.
        return ExitInfo(128 - rc if rc < 0 else rc)

    def terminate(self) -> None:
        _signal_group(self.pgid, signal.SIGTERM)

    def kill(self) -> None:
        _signal_group(self.pgid, signal.SIGKILL)

    def host_pids(self) -> set[int]:
        pids = _group_pids(self.pgid)
        with contextlib.suppress(psutil.Error):
            pids |= {c.pid for c in psutil.Process(self.proc.pid).children(recursive=True)}
        return pids

    def follow_logs(self, buffer: LogBuffer, on_chunk: Callable[[], None], stop: threading.Event) -> None:
        import codecs

        stream = self.proc.stdout
        if stream is None:
            return
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        # Output is scrubbed once, in whole lines (a secret is never split by a chunk), for the
        # disk copy and the buffer alike; the buffer's rule may know more (set_secrets), so it is used.
        lines = LineScrubber(buffer.scrubber.with_secrets(self.secrets))
        fd = stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out = lines.feed(decoder.decode(chunk))
            if out:
                self.log_file.write(out.encode())
                if buffer.feed(out, scrubbed=True):
                    on_chunk()
        rest = lines.feed(decoder.decode(b"", final=True)) + lines.flush()
        if rest:
            self.log_file.write(rest.encode())
        buffer.feed(rest, scrubbed=True)
        buffer.flush_partial()
        self.log_file.close()
        on_chunk()

    def tail(self, n: int) -> tuple[str, ...]:
        return tail_file(log_path(self.name), n)

    def remove(self) -> None:
        # Whatever is left of the group after the leader exited (a worker that ignored SIGTERM).
        if _group_pids(self.pgid):
            with contextlib.suppress(LifecycleError):
                _signal_group(self.pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()
        with _registry_lock:
            _registry.pop(self.pgid, None)
        drop_record(self.name, self.proc.pid)


class ForeignProcessHandle:
    """A process group started by another (possibly gone) enginedeck, known from its record."""

    def __init__(self, rec: ProcessRecord) -> None:
        self.rec = rec

    @property
    def ident(self) -> str:
        return f"pid {self.rec.pid}"

    @property
    def pid(self) -> int | None:
        return self.rec.pid

    @property
    def container_id(self) -> str | None:
        return None

    def poll(self) -> ExitInfo | None:
        return None if self.rec.alive() else ExitInfo(None)

    def terminate(self) -> None:
        if self.rec.alive():
            _signal_group(self.rec.pgid, signal.SIGTERM)

    def kill(self) -> None:
        if self.rec.alive() or _group_pids(self.rec.pgid):
            _signal_group(self.rec.pgid, signal.SIGKILL)

    def host_pids(self) -> set[int]:
        return _group_pids(self.rec.pgid) if self.rec.alive() else set()

    def follow_logs(self, buffer: LogBuffer, on_chunk: Callable[[], None], stop: threading.Event) -> None:
        path = log_path(self.rec.name)
        buffer.extend(tail_file(path, buffer.capacity))
        on_chunk()
        for chunk in follow_file(path, stop, alive=self.rec.alive):
            if buffer.feed(chunk):
                on_chunk()
        buffer.flush_partial()
        on_chunk()

    def tail(self, n: int) -> tuple[str, ...]:
        return tail_file(log_path(self.rec.name), n)

    def remove(self) -> None:
        drop_record(self.rec.name, self.rec.pid)


# What any program needs from the console's environment, whatever the configuration says: where
# programs, libraries and Python packages are, the user, locale and terminal, temporary and cache
# directories, the CA bundle for HTTPS downloads, and the GPUs the shell chose. Everything else
# (HF_TOKEN, proxies, cloud credentials) reaches an engine only by `env_passthrough` or `env`.
BASE_ENV = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
    "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
    "HF_HOME", "HF_HUB_CACHE", "CUDA_HOME", "CUDA_VISIBLE_DEVICES",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
})  # fmt: skip


def base_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The part of ``environ`` (default: ours) every process engine gets (``BASE_ENV``, ``LC_*``)."""
    src = os.environ if environ is None else environ
    return {k: v for k, v in src.items() if k in BASE_ENV or k.startswith("LC_")}


def launch(spec: LaunchSpec) -> ProcessHandle:
    """Start the engine process in its own group; a clear error when it cannot start."""
    check_port_free(spec.bind, spec.host_port)
    env = base_environment()
    env.update(spec.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    _ensure_atexit()
    try:
        proc = subprocess.Popen(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except FileNotFoundError:
        raise LifecycleError(f"{spec.name}: cannot run {spec.argv[0]!r}: no such file", 1) from None
    except PermissionError:
        raise LifecycleError(f"{spec.name}: cannot run {spec.argv[0]!r}: permission denied", 1) from None
    except OSError as exc:
        raise LifecycleError(f"{spec.name}: cannot run {spec.argv[0]!r}: {exc.strerror or exc}", 1) from None
    with _registry_lock:
        _registry[proc.pid] = spec.name
    try:
        created = psutil.Process(proc.pid).create_time()
    except psutil.Error:
        created = time.time()
    write_record(
        ProcessRecord(
            name=spec.name,
            profile=spec.profile,
            pid=proc.pid,
            pgid=proc.pid,
            create_time=created,
            owner_pid=os.getpid(),
            address=spec.address,
            command=spec.display_argv(),
            config_hash=spec.config_hash,
            gpus=spec.gpus_text,
        )
    )
    return ProcessHandle(proc, spec.name, spec.secrets)


def attach(name: str) -> ForeignProcessHandle | None:
    """A live process recorded for ``name`` by another enginedeck run; stale records are dropped."""
    rec = read_record(name)
    if rec is None:
        return None
    if not rec.alive():
        drop_record(name, rec.pid)
        return None
    return ForeignProcessHandle(rec)


def tail_file(path: Path, n: int) -> tuple[str, ...]:
    """The last ``n`` lines of a log copy (reads at most the last 4 MiB)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4 * 1024 * 1024))
            data = f.read()
    except OSError:
        return ()
    lines = data.decode("utf-8", "replace").splitlines()
    return tuple(lines[-n:]) if n > 0 else ()


def follow_file(path: Path, stop: threading.Event, alive: Callable[[], bool], poll: float = 0.2) -> Iterator[str]:
    """New text appended to ``path`` until ``stop`` is set or the writer's process ended."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        f = path.open("rb")
    except OSError:
        return
    with f:
        f.seek(0, os.SEEK_END)
        idle = 0
        while not stop.is_set():
            data = f.read(65536)
            if data:
                idle = 0
                yield decoder.decode(data)
                continue
            idle += 1
            if idle % 10 == 0 and not alive():
                break
            try:  # rotated: start reading the new file
                if path.stat().st_ino != os.fstat(f.fileno()).st_ino:
                    break
            except OSError:
                break
            stop.wait(poll)


@dataclass(frozen=True, slots=True)
class FoundProcess:
    """An engine process running on this host that enginedeck did not start (monitor-only)."""

    pid: int
    profile: str
    command: list[str]  # secrets masked
    listen: tuple[str, ...]  # "host:port" it listens on


def _engine_signatures(profiles: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(executable basename -> profile, python module -> profile) from the profiles' commands."""
    exes: dict[str, str] = {}
    modules: dict[str, str] = {}
    for name, prof in profiles.items():
        cmd = list(prof.process.command)
        if not cmd:
            continue
        base = os.path.basename(cmd[0])
        if base.startswith("python") and len(cmd) > 2 and cmd[1] == "-m":
            modules.setdefault(cmd[2], name)
        else:
            exes.setdefault(base, name)
    return exes, modules


def _match(cmd: list[str], exes: Mapping[str, str], modules: Mapping[str, str]) -> str | None:
    if not cmd:
        return None
    base = os.path.basename(cmd[0])
    # The simulator (`enginedeck sim` / `python -m console sim`) says which engine it plays.
    is_sim = (base == "enginedeck" and cmd[1:2] == ["sim"]) or (
        base.startswith("python") and cmd[1:4] == ["-m", "console", "sim"]
    )
    if is_sim:
        if "--fleet" in cmd:
            return None
        if "--engine" in cmd and cmd.index("--engine") + 1 < len(cmd):
            return cmd[cmd.index("--engine") + 1]
        return "vllm"
    if base in exes:
        return exes[base]
    if base.startswith("python") and "-m" in cmd and cmd.index("-m") + 1 < len(cmd):
        return modules.get(cmd[cmd.index("-m") + 1])
    return None


def find_engine_processes(profiles: Mapping[str, Any]) -> list[FoundProcess]:
    """Listening engine processes not started by any enginedeck (by command line and profile)."""
    from console.secrets import mask_args

    exes, modules = _engine_signatures(profiles)
    ours: set[int] = {os.getpid()}
    for rec in all_records():
        if rec.alive():
            ours |= _group_pids(rec.pgid) | {rec.pid}
    ours |= set(registered_groups())
    found: list[FoundProcess] = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = p.info.get("cmdline") or []
            if p.pid in ours or not cmd:
                continue
            profile = _match(list(cmd), exes, modules)
            if profile is None:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(p.pid) in registered_groups():
                    continue
            listen = tuple(
                sorted(
                    {
                        f"{c.laddr.ip}:{c.laddr.port}"
                        for c in p.net_connections(kind="tcp")
                        if c.status == psutil.CONN_LISTEN and c.laddr
                    }
                )
            )
        except (psutil.Error, OSError):
            continue
        if listen:
            found.append(FoundProcess(p.pid, profile, mask_args(list(cmd)), listen))
    return found


class ProcessEngines:
    """Engines as local process groups (an ``EngineBackend``)."""

    kind = Backend.PROCESS
    noun = "process"
    keeps_crashed = False  # an ended process leaves only its log copy, which stays
    can_adopt = False

    def launch(self, spec: LaunchSpec) -> Handle:
        return launch(spec)

    def attach(self, inst: EngineInstance) -> Found | None:
        handle = attach(inst.name)
        if handle is None:
            return None
        rec = handle.rec
        return Found(handle, True, address=rec.address, gpus=rec.gpus, config_hash=rec.config_hash,
                     detail=f"running (started by enginedeck pid {rec.owner_pid})")  # fmt: skip

    def replacement(self, inst: EngineInstance, old: Handle | None, *, adopted: bool) -> Found | None:
        # A newer record: the engine was started again by another enginedeck (a headless restart).
        rec = read_record(inst.name)
        if rec is None or not rec.alive() or (old is not None and old.pid == rec.pid):
            return None
        return Found(ForeignProcessHandle(rec), True, address=rec.address, gpus=rec.gpus, config_hash=rec.config_hash)

    def release(self, old: Handle) -> None:
        if isinstance(old, ProcessHandle):  # reap our ended child; its record only, not the new one's
            with contextlib.suppress(LifecycleError):
                old.remove()

    def foreign(self, inst: EngineInstance) -> str | None:
        return None  # a process on the port is found by `ps`; it cannot be adopted

    def adopt(self, inst: EngineInstance, ident: str | None) -> str:
        raise LifecycleError(NOT_ADOPTABLE.format(name=inst.name), 1)

    def remove_leftovers(self, inst: EngineInstance) -> str:
        rec = read_record(inst.name)
        if rec is not None and rec.alive():
            raise LifecycleError(f"{inst.name} is running (pid {rec.pid}); stop it first", 1)
        drop_record(inst.name)
        return "process record removed" if rec else "nothing to remove"

    def image(self, inst: EngineInstance) -> str | None:
        return None

    def pull(self, image: str, progress: PullProgress) -> None:
        raise LifecycleError("process engines run no image; nothing to pull", 1)

    def listing(self, instances: Sequence[EngineInstance], profiles: Mapping[str, EngineProfile]) -> Listing:
        live = [r for r in all_records() if r.alive()]
        managed = (
            Listed(ident=f"pid {r.pid}", name=r.name, managed=True, instance=r.name, status="running",
                   address=r.address, gpus=r.gpus, image=" ".join(r.command), profile=r.profile,
                   config_hash=r.config_hash)
            for r in live
        )  # fmt: skip
        found = (
            Listed(ident=f"pid {p.pid}", name=f"pid {p.pid}", managed=False, instance=None, status="running",
                   address=", ".join(p.listen), image=" ".join(p.command), profile=p.profile)
            for p in find_engine_processes(profiles)
        )  # fmt: skip
        return Listing((*managed, *found))

    def close(self) -> None:
        """Nothing to let go: the engines this process started end with it (see the module doc)."""
