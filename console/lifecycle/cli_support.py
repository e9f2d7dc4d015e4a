"""Shared pieces of the headless lifecycle commands (up, down, restart, logs, ps, pull); ``bring_up``
is the one path of `up` and `restart`."""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Literal, TextIO

from console.config import Config, EngineInstance, load_config
from console.errors import UserError
from console.lifecycle.errors import LifecycleError, LifecycleTimeout
from console.lifecycle.manager import LifecycleManager
from console.lifecycle.state import InstanceState
from console.model import Phase
from console.secrets import secret_values_in_args
from console.textout import shown as shown_text


def load(args: argparse.Namespace) -> tuple[Config, EngineInstance | None]:
    cfg = load_config(getattr(args, "config", None))
    name = getattr(args, "name", None)
    if name is None:
        return cfg, None
    if all(i.name != name for i in cfg.instances):
        from console.lifecycle.running import with_running

        cfg = with_running(cfg)  # a running demo's engines (and others' process engines) that `ps` lists
    if cfg.path is None and all(i.name != name for i in cfg.instances):
        raise UserError(f"no configuration file: {name!r} is not defined (use --config FILE)")
    inst = cfg.instance(name)
    if inst.config.managed is None:
        raise UserError(f"{name} is monitor-only (url = {inst.url}); enginedeck does not start or stop it")
    return cfg, inst


def load_for_change(args: argparse.Namespace, action: str) -> tuple[Config, EngineInstance]:
    """The configuration and NAME's instance for a command that changes something (up, down,
    restart, pull, adopt); in read-only mode the attempt is refused (and audited) here."""
    cfg, inst = load(args)
    if inst is None:
        raise UserError(f"{action}: which engine? (NAME is required)")
    refuse_if_read_only(args, cfg, action, inst.name)
    return cfg, inst


@contextlib.contextmanager
def manager_for_change(args: argparse.Namespace, action: str) -> Iterator[tuple[LifecycleManager, EngineInstance, str]]:
    """NAME's manager, instance and shown name for `up`/`down`/`restart`: this machine's, or with
    ``--host HOST`` (or NAME written ``HOST/NAME``) that host's Docker engine, reached through its
    forwarded Docker socket (``console.lifecycle.remote_docker``). Read-only mode here or in the
    host's own configuration refuses the attempt (audited)."""
    host, name = getattr(args, "host", None), str(args.name)
    if host is None and "/" in name:
        host, _, name = name.partition("/")
    if not host:
        cfg, inst = load_for_change(args, action)
        manager = LifecycleManager(cfg)
        try:
            yield manager, inst, inst.name
        finally:
            manager.close()
        return
    from console.lifecycle.remote_docker import open_remote

    local = load_config(getattr(args, "config", None))
    refuse_if_read_only(args, local, action, f"{host}/{name}")
    with open_remote(local, host, name) as manager:
        refuse_if_read_only(args, manager.config, action, f"{host}/{name}")
        yield manager, manager.config.instance(name), f"{host}/{name}"


def refuse_if_read_only(args: argparse.Namespace, cfg: Config, action: str, name: str) -> None:
    """Read-only mode (``--read-only`` or ``[console] read_only = true``) binds the headless commands
    as it binds the console: the attempt is audited as refused and nothing is done."""
    flag = bool(getattr(args, "read_only", False))
    if not (flag or cfg.console.read_only):
        return
    why = "--read-only" if flag else f"[console] read_only = true in {cfg.path}"
    from console.lifecycle.audit import AuditLog

    AuditLog().record(action, name, "refused", f"read-only mode ({why})")
    raise UserError(f"{action} {name}: refused in read-only mode ({why})")


def literal_secret_warning(inst: EngineInstance) -> str:
    """A warning when ``extra_args`` or ``command`` holds a secret written out (``--api-key sk-...``):
    it ends up on a command line every user of the host can read. Never quotes the secret."""
    literal = secret_values_in_args([*inst.config.extra_args, *(inst.config.command or ())])
    if not literal:
        return ""
    return (f"warning: {inst.name}: extra_args/command hold a secret written out; every user of this host can read "
            "it on the engine's command line (`ps`, `docker inspect`). Put it in an environment variable and name "
            'that with api_key_env = "VAR"')


def key_on_command_line_note(manager: LifecycleManager, name: str) -> str:
    """A warning when the engine takes its API key only as an argument (SGLang has no environment
    variable for it): anyone on the host can read it in `ps` / `docker inspect`; or when the
    configuration writes a secret out in its arguments."""
    try:
        spec = manager.launch_spec(name)
    except UserError:
        return ""
    if warning := literal_secret_warning(manager.config.instance(name)):
        return warning
    if not spec.key_in_argv:
        return ""
    where = "`ps` and `docker inspect`" if spec.backend == "docker" else "`ps`"
    return (f"note: {spec.profile} takes its API key only on the command line, so users of this host can read it "
            f"with {where} (enginedeck masks it in everything it shows)")


class PhaseReporter:
    """Prints each phase change of one instance as a line (and a live countdown on a terminal)."""

    def __init__(self, manager: LifecycleManager, name: str, out: TextIO | None = None) -> None:
        self.name = name
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self._last: tuple[Phase, str] | None = None
        self._countdown: int | None = None
        self._lock = threading.Lock()
        self._manager = manager
        self._unsub = manager.subscribe(self._on_state)

    def _on_state(self, st: InstanceState) -> None:
        # Creating is brief, and a failure is printed once, as the command's error line.
        if st.name != self.name or st.phase in (Phase.CREATING, Phase.FAILED):
            return
        with self._lock:
            key = (st.phase, st.detail if st.phase is not Phase.LOADING else "")
            if st.phase is Phase.STOPPING and st.countdown is not None and st.countdown != self._countdown:
                self._countdown = st.countdown
                if self.tty:
                    self.out.write(f"\r{self.name}: stopping - kill in {st.countdown:3d} s ")
                    self.out.flush()
                    return
            if key != self._last:
                if self.tty and self._countdown is not None:
                    self.out.write("\n")
                self._countdown = None
                self._last = key
                line = f"{self.name}: {st.phase.value}"
                if st.detail:
                    line += f" - {st.detail}"
                if st.phase is Phase.LOADING and st.evidence:
                    line += f" | {st.evidence[:100]}"
                self.out.write(self._scrub(line) + "\n")
                self.out.flush()
            if st.warning:
                self.out.write(self._scrub(f"{self.name}: WARNING: {st.warning}") + "\n")

    def _scrub(self, text: str) -> str:
        # Details and evidence quote engine output: the same rule as its log lines, and inert (an
        # escape sequence in a loading line shows as placeholders).
        return shown_text(text, self._manager.logs(self.name).scrubber)

    def close(self) -> None:
        self._unsub()


def bring_up(manager: LifecycleManager, inst: EngineInstance, action: Literal["start", "restart"], *, wait: bool,
             timeout: float | None, shown: str | None = None) -> int:
    """The path `up` and `restart` share once the action is allowed: start (or restart) the engine,
    wait until it is ready (``wait``; always for a process engine, which ends with this enginedeck)
    and, for a process engine, stay in the foreground until Ctrl-C or until it ends. ``shown``: a
    remote engine's ``HOST/NAME`` (its address is then said as the host's, not the forwarded one).

    Exit codes: 0 ready (or started without waiting); raises LifecycleError (one line, its exit
    code: 1 user error, 2 the engine failed, 3 timed out waiting)."""
    from console.lifecycle.process_backend import install_signal_cleanup

    name = inst.name
    is_process = inst.config.managed == "process"
    if is_process:
        install_signal_cleanup()
    reporter = PhaseReporter(manager, name)
    t0 = time.monotonic()
    try:
        (manager.start if action == "start" else manager.restart)(name).result()
        if note := key_on_command_line_note(manager, name):
            print(note, file=sys.stderr)
        if wait or is_process:
            try:
                st = manager.wait(name, timeout=timeout)
            except LifecycleTimeout as exc:
                if is_process:  # it would end with this enginedeck anyway: stop it properly
                    manager.stop(name).result()
                    still = "stopped it (process engines end with enginedeck)"
                else:
                    still = f"it keeps running; `enginedeck down {shown or name}` stops it"
                raise LifecycleTimeout(f"{exc.message}; {still}") from None
            if st.phase is not Phase.READY:
                raise fail_from_state(st, action)
            at = inst.url
            if shown and shown != name:
                at = f"127.0.0.1:{inst.config.port or inst.profile.container.port} on {shown.partition('/')[0]}"
            # Flushed: a script reading this line from a pipe waits for it while the engine runs on.
            print(shown_text(f"{shown or name} ready at {at} ({time.monotonic() - t0:.1f} s)"), flush=True)
            if st.config_changed:
                print(f"note: {name} was already running with an older configuration; "
                      f"`enginedeck restart {name}` applies the current one", file=sys.stderr)  # fmt: skip
        else:
            print(f"{name} {action}ed ({manager.status(name).container_id}); not waiting for ready", flush=True)
        return _foreground(manager, name) if is_process else 0
    finally:
        reporter.close()


def _foreground(manager: LifecycleManager, name: str) -> int:
    """Keep a process engine running until Ctrl-C or until it ends by itself."""
    print(f"{name} runs in the foreground (process engines end with enginedeck); Ctrl-C stops it", file=sys.stderr)
    try:
        st = manager.wait(name, until={Phase.EXITED, Phase.FAILED})
    except KeyboardInterrupt:
        print(f"\n{name}: stopping", file=sys.stderr)
        st = manager.stop(name).result()
        print(f"{name}: {shown_text(st.detail)}")
        return 0
    if st.phase is Phase.EXITED and st.exit_code in (0, 143):
        print(f"{name}: {shown_text(st.detail)}")
        return 0
    raise fail_from_state(st, "run")


def fail_from_state(st: InstanceState, action: str = "start") -> LifecycleError:
    """The one-line error for an instance that ended, with its last log lines printed above it."""
    if st.last_log_lines:
        print(f"last log lines of {st.name}:", file=sys.stderr)
        for line in st.last_log_lines[-10:]:
            print(f"  | {shown_text(line)}", file=sys.stderr)
    return LifecycleError(f"{st.name}: {action} failed: {st.detail or st.phase.value}")  # made safe by UserError


def confirmed(args: argparse.Namespace, action: str, name: str, prompt: str) -> bool:
    """``--yes``, or a yes typed on the terminal. Without a terminal ``--yes`` is required (a one-line
    error, exit 1), so a script never hangs on a question nobody sees."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise UserError(f"{action} {name}: not on a terminal; add --yes to confirm")
    return confirm(prompt)


def confirm(prompt: str) -> bool:
    try:
        answer = input(f"{prompt} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
