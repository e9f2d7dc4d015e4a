"""Managed engines running here that the configuration does not hold: the engines of a running
``enginedeck demo`` (process engines it configures in memory), or of another configuration.

``ps`` lists them by name from their process records (``console.lifecycle.process_records``);
``with_running`` adds them to a configuration, so that ``status``, ``logs NAME``, ``down NAME``,
``bench --engine NAME`` and the other commands that take an engine name resolve the same names.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from console.config import Config, parse_config
from console.lifecycle.process_records import ProcessRecord, all_records


def _engine_table(rec: ProcessRecord) -> dict[str, Any] | None:
    bind, _, port = rec.address.rpartition(":")
    if not port.isdigit() or not bind:
        return None
    # `enginedeck sim` is the simulator by its command line, which the starting enginedeck chose:
    # configuration, not a guess from what the engine answers.
    simulated = any(rec.command[i:i + 3] == ["-m", "console", "sim"] for i in range(len(rec.command)))
    return {"profile": rec.profile, "managed": "process", "port": int(port), "bind": bind,
            "command": list(rec.command), "simulated": simulated}


def running_unconfigured(cfg: Config) -> Config:
    """A configuration of the live process engines ``cfg`` does not name (an empty one when none)."""
    configured = {i.name for i in cfg.instances}
    engines: dict[str, Any] = {}
    for rec in all_records():
        if rec.name in configured or not rec.alive():
            continue
        table = _engine_table(rec)
        if table is not None:
            engines[rec.name] = table
    if not engines:
        return Config(path=None)
    try:
        return parse_config({"engines": engines}, "<running engines>")
    except Exception:  # a record of an unknown profile (a user profile since removed): not resolvable
        return Config(path=None)


def with_running(cfg: Config) -> Config:
    """``cfg`` with the managed engines running here that it does not configure added after its own."""
    extra = running_unconfigured(cfg)
    if not extra.instances:
        return cfg
    return replace(cfg, instances=cfg.instances + extra.instances)
