"""Single-GPU A/B: only the engine under test runs while it is measured.

Before each run the ``Swapper`` stops every other engine of the comparison (the lifecycle layer
waits until their GPU memory is released, or says why it could not check), starts the engine to
measure, and waits until it is ready. It uses the lifecycle manager, so the engines must be
configured ``managed`` instances. Blocking: call it from a worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from console.errors import UserError


class Swapper:
    def __init__(self, config_path: str | None, names: Sequence[str], *, ready_timeout: float = 1800.0) -> None:
        from console.config import load_config
        from console.lifecycle.manager import LifecycleManager

        self.config = load_config(config_path)
        for name in names:
            inst = self.config.instance(name)
            if not inst.managed:
                raise UserError(f"--swap: {name} is monitor-only; swapping needs engines enginedeck starts and stops")
        self.names = list(dict.fromkeys(names))
        self.ready_timeout = ready_timeout
        self.manager = LifecycleManager(self.config)
        try:
            for name in self.names:  # read-only mode: refused (and audited) before anything is stopped
                self.manager.check_writable("swap", name)
        except UserError:
            self.manager.close()
            raise
        for fut in self.manager.refresh_all().values():
            fut.result()

    def activate(self, name: str) -> dict[str, Any]:
        """Stop the others (GPU memory released), start ``name``, wait until ready; what happened."""
        from console.model import Phase

        idle = (Phase.EXITED, Phase.FAILED, Phase.UNKNOWN)
        t0 = time.monotonic()
        stopped = []
        for other in self.names:
            if other == name or self.manager.status(other).phase in idle:
                continue
            st = self.manager.stop(other).result()
            stopped.append({"engine": other, "phase": st.phase.value, "detail": st.detail})
        t1 = time.monotonic()
        st = self.manager.status(name)
        if st.phase is not Phase.READY:
            self.manager.start(name).result()
            st = self.manager.wait(name, timeout=self.ready_timeout)
        if st.phase is not Phase.READY:
            raise RuntimeError(f"swap: {name} did not become ready: {st.one_line()}")
        return {
            "engine": name,
            "stopped": stopped,
            "stop_s": round(t1 - t0, 3),
            "start_to_ready_s": round(time.monotonic() - t1, 3),
        }

    def close(self) -> None:
        self.manager.close()
