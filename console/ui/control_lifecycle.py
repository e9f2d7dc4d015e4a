"""LifecycleControl backed by console.lifecycle's LifecycleManager (managed engines only)."""

from __future__ import annotations

from console.config import Config
from console.lifecycle.manager import LifecycleManager
from console.model import Phase


class ManagerControl:
    """Blocking calls, meant for a worker thread; the manager itself never blocks its caller."""

    def __init__(self, manager: LifecycleManager, config: Config) -> None:
        self.manager = manager
        self._managed = {i.name for i in config.instances if i.managed}

    @classmethod
    def from_config(cls, config: Config) -> ManagerControl:
        manager = LifecycleManager(config)
        manager.refresh_all()  # engines started earlier (containers by label, process records)
        return cls(manager, config)

    def can_control(self, engine: str) -> bool:
        return engine in self._managed

    def start(self, engine: str) -> None:
        self.manager.start(engine).result()

    def stop(self, engine: str) -> None:
        self.manager.stop(engine).result()

    def restart(self, engine: str) -> None:
        self.manager.restart(engine).result()

    def launch_command(self, engine: str) -> str | None:
        if engine not in self._managed:
            return None
        try:
            return self.manager.launch_spec(engine).display()  # masked by the lifecycle layer
        except Exception as exc:  # a spec that cannot be built is shown as such, not raised in the UI
            return f"(cannot build the launch command: {exc})"

    def log_tail(self, engine: str, n: int) -> list[str] | None:
        """In-memory read only (no Docker call): the last ``n`` lines, or None when not managed."""
        if engine not in self._managed:
            return None
        return [line.text for line in self.manager.logs(engine).tail(n)]

    def phase_of(self, engine: str) -> tuple[Phase, str] | None:
        """The lifecycle's view of a managed engine, for the hub to show while it starts or stops."""
        if engine not in self._managed:
            return None
        st = self.manager.status(engine)
        if st.phase is Phase.UNKNOWN:
            return None
        detail = st.one_line().removeprefix(st.phase.value).removeprefix(" - ")
        if st.evidence and st.phase in (Phase.STARTING, Phase.LOADING):
            detail = f"{detail} · {st.evidence}" if detail else st.evidence
        return st.phase, detail

    def pids_of(self, engine: str) -> tuple[int, ...]:
        if engine not in self._managed:
            return ()
        pid = self.manager.status(engine).pid
        return (int(pid),) if pid else ()

    def close(self) -> None:
        self.manager.close()
