"""LifecycleControl backed by console.lifecycle's LifecycleManager (managed engines only)."""

from __future__ import annotations

from console.config import Config
from console.lifecycle.manager import LifecycleManager


class ManagerControl:
    """Blocking calls, meant for a worker thread; the manager itself never blocks its caller."""

    def __init__(self, manager: LifecycleManager, config: Config) -> None:
        self.manager = manager
        self._managed = {i.name for i in config.instances if i.managed}

    @classmethod
    def from_config(cls, config: Config) -> ManagerControl:
        return cls(LifecycleManager(config), config)

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

    def close(self) -> None:
        self.manager.close()
