"""Shared pieces of the headless lifecycle commands (up, down, restart, logs, ps, pull)."""

from __future__ import annotations

import argparse
import sys
import threading
from typing import TextIO

from console.config import Config, EngineInstance, load_config
from console.errors import UserError
from console.lifecycle.errors import LifecycleError
from console.lifecycle.manager import LifecycleManager
from console.lifecycle.state import InstanceState
from console.model import Phase
from console.secrets import scrub


def load(args: argparse.Namespace) -> tuple[Config, EngineInstance | None]:
    cfg = load_config(getattr(args, "config", None))
    name = getattr(args, "name", None)
    if name is None:
        return cfg, None
    if cfg.path is None:
        raise UserError(f"no configuration file: {name!r} is not defined (use --config FILE)")
    inst = cfg.instance(name)
    if inst.config.managed is None:
        raise UserError(f"{name} is monitor-only (url = {inst.url}); enginedeck does not start or stop it")
    return cfg, inst


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


def key_on_command_line_note(manager: LifecycleManager, name: str) -> str:
    """A warning when the engine takes its API key only as an argument (SGLang has no environment
    variable for it): anyone on the host can read it in `ps` / `docker inspect`."""
    try:
        spec = manager.launch_spec(name)
    except UserError:
        return ""
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
        # Details and evidence quote engine output: the same rule as its log lines.
        return self._manager.logs(self.name).scrubber(text)

    def close(self) -> None:
        self._unsub()


def fail_from_state(st: InstanceState, action: str = "start") -> LifecycleError:
    """The one-line error for an instance that ended, with its last log lines printed above it."""
    if st.last_log_lines:
        print(f"last log lines of {st.name}:", file=sys.stderr)
        for line in st.last_log_lines[-10:]:
            print(f"  | {scrub(line)}", file=sys.stderr)
    return LifecycleError(scrub(f"{st.name}: {action} failed: {st.detail or st.phase.value}"))


def confirm(prompt: str) -> bool:
    try:
        answer = input(f"{prompt} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
