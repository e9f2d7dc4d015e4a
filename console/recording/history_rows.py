"""The history rows of one status document: what ``telemetry.hub.record`` appends for the snapshot the
document was made from, read straight from the document.

A replay rebuilds ten minutes of chart history on every seek; going through a ``FleetSnapshot`` for
each of 600 documents costs seconds, reading the few numbers the charts keep costs milliseconds.
A test holds this equal to ``record(history, snapshot_from_doc(doc))`` for live, stale and
unreachable engines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from console.model import NOT_LIVE
from console.telemetry.source import ENGINE_SERIES

Row = tuple[tuple[str, str], float, float | None]
_NOT_LIVE = frozenset(p.value for p in NOT_LIVE)


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def doc_rows(doc: Mapping[str, Any]) -> list[Row]:
    t = float(doc["taken_at"])
    out: list[Row] = []
    add = out.append
    for e in doc["engines"]:
        name = e["name"]
        m = e["summary"]
        live = e["reachable"] and e["metrics"]["state"] == "ok" and e["phase"] not in _NOT_LIVE
        if m is None or not live:
            for key in ENGINE_SERIES:
                add(((name, key), t, None))
            continue
        add(((name, "running"), t, _f(m["running"])))
        add(((name, "waiting"), t, _f(m["waiting"])))
        add(((name, "kv_usage"), t, _f(m["kv_usage"])))
        add(((name, "prefix_hit_rate"), t, _f(m["prefix_hit_rate"])))
        add(((name, "generation_tps"), t, _f(m["generation_tokens_per_s"]["now"])))
        add(((name, "prompt_tps"), t, _f(m["prompt_tokens_per_s"]["now"])))
        add(((name, "request_rate"), t, _f(m["requests_per_s"]["5s"])))
        add(((name, "error_rate"), t, _f(m["errors_per_s"]["5s"])))
        for key, q in (("ttft", m["ttft_s"]), ("itl", m["itl_s"]), ("e2e", m["e2e_s"])):
            add(((name, f"{key}_p50"), t, _f(q["p50"])))
            add(((name, f"{key}_p99"), t, _f(q["p99"])))
    for g in doc["gpus"]["devices"]:
        key = f"gpu:{g['index']}"
        add(((key, "util"), t, _f(g["util_percent"])))
        add(((key, "mem_used"), t, _f(g["mem_used_bytes"])))
        add(((key, "power"), t, _f(g["power_w"])))
        add(((key, "temperature"), t, _f(g["temperature_c"])))
    host = doc["host"]
    if host is not None:
        add((("host", "cpu"), t, _f(host["cpu_percent"])))
        add((("host", "mem_used"), t, _f(host["mem_used_bytes"])))
    return out

