"""Planted secrets on screen (Pilot): a managed engine that prints its secrets every way, seen through
the overview, the engine screen's identity tab (launch command, config) and its logs tab."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from console.config import parse_config
from console.lifecycle.manager import LifecycleManager
from console.ports import free_port
from console.telemetry.hub import Hub
from console.ui.app import DeckApp, UiOptions
from console.ui.control_lifecycle import ManagerControl
from tests.lifecycle.test_planted_secrets import ARG, ENGINE, HF, KEY, PLANTED, STRAY, WANDB


def _screen_text(app: DeckApp) -> str:
    """What the terminal shows, as plain text (the same render as a screenshot)."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
                      force_terminal=True, color_system="truecolor", legacy_windows=False)  # fmt: skip
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


async def test_planted_secrets_never_on_screen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("PLANTED_KEY", KEY), ("HF_TOKEN", HF), ("WANDB_API_KEY", WANDB),
                        ("STRAY_SECRET_TOKEN", STRAY)):  # fmt: skip
        monkeypatch.setenv(name, value)
    command = ["{python}", "-c", ENGINE, "--host", "{host}", "--port", "{port}", "{extra}"]
    cfg = parse_config(
        {"engines": {"planted": {"profile": "vllm", "managed": "process", "model": "demo-model", "port": free_port(),
                                 "api_key_env": "PLANTED_KEY", "env_passthrough": ["HF_TOKEN", "WANDB_API_KEY"],
                                 "extra_args": ["--hf-token", ARG], "command": command}}},
        str(tmp_path / "config.toml"),
    )  # fmt: skip
    control = ManagerControl(LifecycleManager(cfg), cfg)
    hub = Hub(cfg.instances, refresh=0.5, gpu_source="none", pids_of=control.pids_of,
              lifecycle_phase=control.phase_of)  # fmt: skip
    try:
        control.start("planted")
        assert control.manager.wait("planted", timeout=90).phase.value == "ready"
        while not control.manager.logs("planted").search("split"):  # the split key's second half
            await asyncio.sleep(0.05)
        hub.start()
        app = DeckApp(hub, options=UiOptions(), profiles={i.profile.name: i.profile for i in cfg.instances},
                      instances={i.name: i for i in cfg.instances}, lifecycle=control)  # fmt: skip
        seen: dict[str, str] = {}
        async with app.run_test(size=(220, 50)) as pilot:
            for _ in range(40):
                await pilot.pause(0.1)
                if "planted" in _screen_text(app):
                    break
            seen["overview"] = _screen_text(app)
            await pilot.press("enter")
            await pilot.pause(0.3)
            for tab in ("identity", "logs"):
                app.screen.query_one("#tabs").active = tab  # type: ignore[attr-defined]
                await pilot.pause(0.5)
                seen[tab] = _screen_text(app)
            # No snapshot may arrive while the app tears its screens down (a UI race, not the subject here).
            await asyncio.to_thread(hub.stop)
            await pilot.pause(0.2)
        assert "Authorization: Bearer ****" in seen["logs"] and "split **** done" in seen["logs"]
        assert "--hf-token ****" in seen["identity"]
        for where, text in seen.items():
            leaked = [s for s in PLANTED if s in text]
            assert not leaked, f"{where} shows {leaked}:\n{text}"
    finally:
        hub.stop()
        if control.manager.status("planted").running:
            control.manager.stop("planted", timeout=5).result(timeout=30)
        control.close()
        assert os.environ["PLANTED_KEY"] == KEY

