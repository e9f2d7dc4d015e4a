"""`enginedeck up NAME`: start a configured engine (container or process) and wait until it is ready.

Exit codes: 0 ready (or started with --no-wait), 1 configuration/user error (also: image not
present, port in use), 2 the engine failed or Docker is unreachable, 3 timed out waiting.
Process engines (managed = "process") belong to the enginedeck that started them: `up` stays in
the foreground until Ctrl-C (or SIGTERM), then stops the engine.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_common, add_read_only

    p = sub.add_parser("up", help="start a configured engine and wait until it is ready")
    add_common(p)
    add_read_only(p)
    p.add_argument(
        "--wait", action=argparse.BooleanOptionalAction, default=True, help="wait until ready (default: --wait)"
    )
    p.add_argument("--timeout", type=float, metavar="S", help="give up waiting after S seconds (exit 3)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.lifecycle.cli_support import (
        PhaseReporter,
        fail_from_state,
        key_on_command_line_note,
        load,
        refuse_if_read_only,
    )
    from console.lifecycle.errors import LifecycleTimeout
    from console.lifecycle.manager import LifecycleManager
    from console.lifecycle.process_backend import install_signal_cleanup
    from console.model import Phase

    cfg, inst = load(args)
    assert inst is not None
    refuse_if_read_only(args, cfg, "up", inst.name)
    is_process = inst.config.managed == "process"
    if is_process:
        install_signal_cleanup()
    manager = LifecycleManager(cfg)
    reporter = PhaseReporter(manager, inst.name)
    t0 = time.monotonic()
    try:
        manager.start(inst.name).result()
        if note := key_on_command_line_note(manager, inst.name):
            print(note, file=sys.stderr)
        if args.wait or is_process:
            try:
                st = manager.wait(inst.name, timeout=args.timeout)
            except LifecycleTimeout as exc:
                if is_process:  # it would end with this enginedeck anyway: stop it properly
                    manager.stop(inst.name).result()
                    still = "stopped it (process engines end with enginedeck)"
                else:
                    still = f"it keeps running; `enginedeck down {inst.name}` stops it"
                raise LifecycleTimeout(f"{exc.message}; {still}") from None
            if st.phase is not Phase.READY:
                raise fail_from_state(st)
            print(f"{inst.name} ready at {inst.url} ({time.monotonic() - t0:.1f} s)")
            if st.config_changed:
                print(
                    f"note: {inst.name} was already running with an older configuration; "
                    f"`enginedeck restart {inst.name}` applies the current one",
                    file=sys.stderr,
                )
        else:
            print(f"{inst.name} started ({manager.status(inst.name).container_id}); not waiting for ready")
        if is_process:
            return _foreground(manager, inst.name)
        return 0
    finally:
        reporter.close()
        manager.close()


def _foreground(manager: Any, name: str) -> int:
    """Keep a process engine running until Ctrl-C or until it ends by itself."""
    import sys

    from console.lifecycle.cli_support import fail_from_state
    from console.model import Phase

    print(f"{name} runs in the foreground (process engines end with enginedeck); Ctrl-C stops it", file=sys.stderr)
    try:
        st = manager.wait(name, until={Phase.EXITED, Phase.FAILED})
    except KeyboardInterrupt:
        print(f"\n{name}: stopping", file=sys.stderr)
        st = manager.stop(name).result()
        print(f"{name}: {st.detail}")
        return 0
    if st.phase is Phase.EXITED and st.exit_code in (0, 143):
        print(f"{name}: {st.detail}")
        return 0
    raise fail_from_state(st, "run")
