"""The README's pictures, taken from `enginedeck demo` itself.

    python scripts/screenshots.py [--out docs/images] [--history SECONDS]

Boots the demo's fleet as `enginedeck demo` does (``DemoFleet``: the four simulators as managed
process engines with the demo's seeds and names, vllm-sim ... tgi-sim, and its synthetic load),
watches it through the console's own hub, and drives the console at 160x48 with Textual's pilot,
pressing the keys a user would:

  overview.svg  the overview after --history seconds of the fleet running
  detail.svg    the engine detail of vllm-sim (enter on its row)
  compare.svg   vllm-sim against sglang-sim (m on one, c on the other)
  bench.svg     a finished A/B bench of the same two (B, a small form, r): real requests to the
                simulators, in the bench's own process, as the console runs it

The history is the demo's wall-clock time: a simulator's ``--speed`` shortens its step times, not
the clock the console samples, so nothing can hurry it. The default (180 s) covers more than one
period (150 s) of the synthetic load's wave; the whole run takes about four minutes.
Every process it starts (simulators, load, the bench's child) ends with it, on Ctrl-C and SIGTERM
too. The user's own configuration and state are left out: it runs in temporary folders.

The data is live, so two runs never give the same bytes. docs/images/screenshots.json records
instead a digest of the code that draws the pictures (``DRAWN_BY``) and the digest of each picture;
tests/ui/test_screenshots.py fails when either no longer matches.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.sim.fleet_spec import FLEET_ENGINES  # noqa: E402 - light: names only

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from console.ui.app import DeckApp

SIZE = (160, 48)
HISTORY_S = 180.0
SETTLE_S = 2.5  # after a key that opens a screen: two refreshes, so its charts and raw series have data
BENCH_TIMEOUT_S = 180.0
# The bench form's fields (console/ui/screens/bench.py FORM): one level of a few seconds per engine,
# whose table fits the picture; its engines are the two compared.
BENCH_FORM = {"bench-conc": "4", "bench-n": "8"}
PICTURES = ("overview.svg", "detail.svg", "compare.svg", "bench.svg")
MANIFEST = "screenshots.json"

# What draws the pictures: every screen, widget and format rule of the UI, the layouts, the profiles
# of the demo's engines (names, units, which metrics exist), the bench's table rows and this script.
# Not the simulators or the collectors: they change the data, which differs on every run anyway.
DRAWN_BY: tuple[str, ...] = (
    "console/ui/**/*.py",
    "layouts/*.tcss",
    *(f"engines/{flavour}.toml" for flavour in FLEET_ENGINES),
    "console/client/report.py",
    "scripts/screenshots.py",
)


def drawn_files(root: Path = ROOT) -> list[Path]:
    """The files of ``DRAWN_BY`` under ``root``, sorted by their path relative to it."""
    found = {p for pattern in DRAWN_BY for p in root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts}
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def code_digest(root: Path = ROOT) -> str:
    """sha256 over the path and bytes of every file that draws the pictures."""
    h = hashlib.sha256()
    for p in drawn_files(root):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def picture_digest(svg: str) -> str:
    return hashlib.sha256(svg.encode()).hexdigest()


_STARTED = time.monotonic()


def _say(line: str) -> None:
    print(f"screenshots: {time.monotonic() - _STARTED:5.0f} s  {line}", file=sys.stderr, flush=True)


def _export(app: DeckApp) -> str:
    return app.export_screenshot(title="enginedeck demo")


async def _row_of(pilot: Pilot[Any], name: str) -> None:
    """Move the overview's cursor to engine ``name`` with the arrow keys."""
    from console.ui.screens.overview import OverviewScreen

    app = pilot.app
    if not isinstance(app.screen, OverviewScreen):
        await pilot.press("o")
    rows = 2 * len(FLEET_ENGINES)  # the table does not wrap: down to its end, then up to its top
    for key in ("down",) * rows + ("up",) * rows:
        screen = app.screen
        assert isinstance(screen, OverviewScreen), screen
        if screen.selected_engine() == name:
            return
        await pilot.press(key)
        await pilot.pause()
    raise RuntimeError(f"{name} is not a row of the overview")


async def _wait_for(pilot: Pilot[Any], done: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what()} after {timeout:.0f} s")
        await pilot.pause(0.5)


async def _bench(pilot: Pilot[Any], engines: tuple[str, str]) -> None:
    """Open the bench, fill the form, run it, and wait for its table."""
    from textual.widgets import Input, Static

    from console.ui.screens.bench import BenchScreen

    await pilot.press("B")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, BenchScreen), screen
    for field, value in {"bench-engines": ",".join(engines), **BENCH_FORM}.items():
        screen.query_one(f"#{field}", Input).value = value
    await pilot.press("r")

    def progress() -> str:
        return "the bench did not finish: " + str(screen.query_one("#bench-progress", Static).content)

    await _wait_for(pilot, lambda: screen.doc is not None, BENCH_TIMEOUT_S, progress)
    await pilot.pause(SETTLE_S)


def _check_ready(app: DeckApp, engines: list[str]) -> None:
    """Every engine of the demo ready and its metrics current: the pictures show the demo working."""
    from console.model import Phase

    fleet = app.fleet
    assert fleet is not None, "no snapshot from the hub"
    for name in engines:
        e = fleet.engine(name)
        if e is None or e.phase is not Phase.READY or not e.live:
            state = "missing" if e is None else f"{e.phase.value} {e.health_detail}".strip()
            raise RuntimeError(f"demo engine {name} is not ready ({state}): no pictures of a broken demo")


async def _shoot(app: DeckApp, history_s: float, engines: list[str]) -> dict[str, str]:
    """The pictures, in the order a user would see them. ``engines``: the demo's, in its order; the
    first two (vLLM and SGLang flavours) both have every compared metric."""
    compared = (engines[0], engines[1])
    shots: dict[str, str] = {}
    async with app.run_test(size=SIZE) as pilot:
        started = time.monotonic()
        while (left := history_s - (time.monotonic() - started)) > 0:
            _say(f"history {history_s - left:.0f}/{history_s:.0f} s")
            await pilot.pause(min(30.0, left))
        await pilot.press("o")
        await pilot.pause(SETTLE_S)
        _check_ready(app, engines)
        shots["overview.svg"] = _export(app)

        await _row_of(pilot, compared[0])
        await pilot.press("enter")
        await pilot.pause(SETTLE_S)
        shots["detail.svg"] = _export(app)

        await _row_of(pilot, compared[0])
        await pilot.press("m")
        await _row_of(pilot, compared[1])
        await pilot.press("c")
        await pilot.pause(SETTLE_S)
        shots["compare.svg"] = _export(app)

        _say(f"bench of {' and '.join(compared)}")
        await _bench(pilot, compared)
        shots["bench.svg"] = _export(app)
    return shots


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def shoot_demo(history_s: float) -> dict[str, str]:
    """File name -> SVG of every picture, from a demo fleet started and stopped here."""
    from console.alerts.evaluate import evaluator_for
    from console.commands.demo import DemoFleet
    from console.config import Config
    from console.profiles import load_profiles
    from console.telemetry.hub import Hub
    from console.ui.app import DeckApp, UiOptions
    from console.ui.control_lifecycle import ManagerControl
    from console.ui.input_gate import GATE
    from console.ui.launch import recording_writer_factory

    settings = Config(path=None).console  # the demo's, with no configuration file
    _say("starting the demo fleet")
    fleet = DemoFleet.start()
    try:
        # As `enginedeck demo` runs the console (commands/demo.py run_demo, ui/launch.py run_console).
        instances = fleet.instances()
        lifecycle = ManagerControl(fleet.manager, fleet.config)
        try:
            hub = Hub(instances, refresh=settings.refresh, gpu_source="simulated",
                      gpu_assignment={i.name: i.gpus for i in instances}, pids_of=lifecycle.pids_of,
                      lifecycle_phase=lifecycle.phase_of, alerts=evaluator_for(instances), foreground=GATE)
            hub.start()
            try:
                app = DeckApp(
                    hub,
                    options=UiOptions(layout=settings.layout, simulated=True, title="demo"),
                    profiles={**load_profiles(), **{i.profile.name: i.profile for i in instances}},
                    instances={i.name: i for i in instances},
                    lifecycle=lifecycle,
                    check_backing=fleet.gone,
                    recording=recording_writer_factory(settings, instances),
                )
                return asyncio.run(_shoot(app, history_s, [i.name for i in instances]))
            finally:
                hub.stop()
        finally:
            lifecycle.close()
    finally:
        _say("stopping the demo fleet")
        fleet.stop(grace=1.0)


def write_pictures(shots: dict[str, str], out: Path) -> Path:
    """The pictures and their manifest (the code's digest, each picture's) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name in PICTURES:
        (out / name).write_text(shots[name], encoding="utf-8")
    manifest = {
        "made_by": "python scripts/screenshots.py",
        "drawn_by": list(DRAWN_BY),
        "code_digest": code_digest(),
        "pictures": {name: picture_digest(shots[name]) for name in PICTURES},
    }
    path = out / MANIFEST
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "images"), help="folder for the pictures and manifest")
    ap.add_argument("--history", type=float, default=HISTORY_S, metavar="SECONDS",
                    help=f"how long the fleet runs before the first picture (default {HISTORY_S:g})")
    args = ap.parse_args()
    out = Path(args.out)
    # SIGTERM and SIGHUP unwind as Ctrl-C does, through the finally blocks that stop the fleet.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    with tempfile.TemporaryDirectory(prefix="enginedeck-screenshots-") as tmp:
        os.environ["ENGINEDECK_CONFIG_DIR"] = str(Path(tmp) / "config")  # no one's own config,
        os.environ["ENGINEDECK_STATE_DIR"] = str(Path(tmp) / "state")  # state or demo slots
        try:
            shots = shoot_demo(args.history)
        except KeyboardInterrupt:
            _say("interrupted: nothing written")
            return 130
        except SystemExit:
            _say("stopped by a signal: nothing written")
            raise
    manifest = write_pictures(shots, out)
    for name in PICTURES:
        print(out / name)
    print(manifest)
    _say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
