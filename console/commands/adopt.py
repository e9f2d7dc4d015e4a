"""`enginedeck adopt NAME [--container ID]`: take control of a recognised engine container that
enginedeck did not start (it is monitor-only until then; `ps` lists such containers).

After adoption `down`, `restart` and the console's stop/restart act on it; an adopted container is
never removed, only stopped. Asks first on a terminal; elsewhere needs --yes.
Exit codes: 0 adopted, 1 user error (nothing to adopt, not confirmed), 2 Docker failure.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import add_change_command, add_yes

    p = add_change_command(sub, "adopt", "take control of a running engine container enginedeck did not start",
                           "enginedeck adopt prod-vllm --container 3f2a9c1b7d4e --yes")
    p.add_argument("--container", metavar="ID", help="the container (default: the one found for NAME's image/port)")
    add_yes(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.errors import UserError
    from console.lifecycle.audit import AuditLog
    from console.lifecycle.cli_support import confirmed, load_for_change
    from console.lifecycle.manager import LifecycleManager

    cfg, inst = load_for_change(args, "adopt")
    if inst.config.managed != "docker":
        raise UserError(f"adopt {inst.name}: only Docker engines can be adopted (this one is {inst.config.managed})")
    target = args.container or "the container found for it"
    prompt = f"Take control of {target} as {inst.name}? enginedeck may then stop and restart it."
    if not confirmed(args, "adopt", inst.name, prompt):
        raise UserError("not confirmed; nothing was done")
    manager = LifecycleManager(cfg, audit=AuditLog())
    try:
        manager.refresh(inst.name).result()  # find the running container for NAME's image and port
        st = manager.adopt(inst.name, args.container).result()
    finally:
        manager.close()
    from console.textout import shown

    print(shown(f"{inst.name}: adopted ({st.one_line()})"))  # the container's details are Docker's
    return 0
