"""`enginedeck inspect-metrics`: one metrics payload through the parser and the profile's mapping.

    enginedeck inspect-metrics --engine vllm http://127.0.0.1:8000        # base URL + profile path
    enginedeck inspect-metrics vllm@http://127.0.0.1:8000
    enginedeck inspect-metrics --engine sglang saved-metrics.txt
    curl -s host:8000/metrics | enginedeck inspect-metrics --engine vllm - --json

Prints, per served model, every canonical metric's value or n/a, the raw name it came from (legacy
names flagged), then the canonical metrics the payload lacked, the raw families no mapping used,
and the malformed lines. Counters and histograms are cumulative since engine start (one payload has
no time window). Exit 0; 1 with one line on stderr for bad input, a failed fetch, a payload
with no metric samples at all, or one with none of the profile's metrics (another engine's: the line
names its families; the report is still printed then). trtllm-serve's JSON ``[]`` is its normal
"already drained" state: said so in ``note``, exit 0.

``--json`` schema (``schema: 1``)::

    {"schema": 1, "profile": str, "source": str, "format": "prometheus"|"trtllm-json",
     "samples": int, "error_count": int, "errors": [str],            # at most 50 listed
     "missing": [canonical], "unmapped": [raw family], "not_in_profile": [canonical],
     "note": str|null,                # drained trtllm JSON, or the hint for another engine's payload
     "models": [{"model": str, "replicas": int,
                 "metrics": {canonical: null | {"raw_name": str, "legacy": bool, "kind": str,
                     "none_yet": true,                    # only on a first-use counter with no series yet (0)
                     "value": float|null,                 # gauges, counters
                     "mean": float|null,                   # kv_usage: mean over replicas
                     "series": int,                        # counters, histograms
                     "count", "sum", "p50", "p90", "p99": float|null, "capped": [str]}}}]}
                                                           # histograms, since start
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Any
from urllib.parse import urljoin, urlsplit

MAX_BYTES = 32 * 1024 * 1024
TIMEOUT_S = 10.0
_PROFILE_AT_URL = re.compile(r"^([a-z][a-z0-9_-]*)@(https?://.+)$")


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("inspect-metrics", **command_help(
        "parse one metrics payload (URL, file or -) and show canonical values and unmapped series",
        "enginedeck inspect-metrics --engine vllm http://127.0.0.1:8000/metrics",
        "enginedeck inspect-metrics --engine sglang --json metrics.txt"))
    p.add_argument("source", metavar="URL|FILE|-|PROFILE@URL", help="where the payload comes from")
    p.add_argument("--engine", metavar="PROFILE", help="engine profile (vllm, sglang, trtllm, tgi, llamacpp, ...)")
    p.add_argument("--json", action="store_true", help="print a JSON document (schema in the module docstring)")
    p.add_argument("--api-key-env", metavar="NAME", help="environment variable holding the engine's API key")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.errors import UserError
    from console.profiles import get_profile
    from console.secrets import mask_url
    from console.telemetry.metrics.normalize import normalize
    from console.telemetry.metrics.recognize import DRAINED, foreign_hint, is_drained

    source: str = args.source
    profile_name: str | None = args.engine
    m = _PROFILE_AT_URL.match(source)
    if m:
        if profile_name and profile_name != m.group(1):
            raise UserError(f"--engine {profile_name} contradicts {m.group(1)}@... in {source}")
        profile_name, source = m.group(1), m.group(2)
    if not profile_name:
        raise UserError("say which engine profile to use: --engine PROFILE, or PROFILE@URL")
    profile = get_profile(profile_name)

    if source.startswith(("http://", "https://")):
        payload, shown = _fetch(profile, source, args.api_key_env)
    elif source == "-":
        payload, shown = _read_stdin(), "<stdin>"
    else:
        payload, shown = _read_file(source), source
    shown = mask_url(shown)  # the report names the source: never with its credentials
    reading = normalize(profile, payload)
    report = _report(profile, reading, shown)
    drained = reading.format == "trtllm-json" and reading.empty and is_drained(payload)
    hint = foreign_hint(profile, reading, payload)
    report["note"] = DRAINED if drained else hint
    if args.json:
        from console import strictjson
        from console.textout import scrubbed_data

        print(strictjson.dumps(scrubbed_data(report), indent=2))
    else:
        _print_text(profile.display_name, report)
    if drained:
        return 0
    if reading.empty:
        raise UserError(f"no metric samples in {shown} ({reading.error_summary()})")
    if hint:
        raise UserError(hint)
    return 0


# -- input ------------------------------------------------------------------------------------------


def _read_file(path: str) -> bytes:
    from console.errors import UserError

    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise UserError(f"{path} is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    return data


def _read_stdin() -> bytes:
    from console.errors import UserError

    data = sys.stdin.buffer.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise UserError(f"stdin is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    return data


def _api_key(profile: Any, env_name: str | None) -> str | None:
    from console.errors import UserError
    from console.target import api_key_from_env

    if env_name:
        key = api_key_from_env(env_name)
        if not key:
            raise UserError(f"--api-key-env {env_name}: that environment variable is not set")
        return key
    # Without the flag, use the engine's own key variable when the metrics path needs a key.
    if profile.metrics.requires_api_key:
        for name in (profile.container.api_key_env, profile.process.api_key_env):
            key = api_key_from_env(name)
            if key:
                return key
    return None


def _fetch(profile: Any, url: str, api_key_env: str | None) -> tuple[bytes, str]:
    """The payload at ``url`` and the URL that answered, fetched as the console scrapes (the same
    client, body decoding and caps), following redirects only within the origin."""
    import asyncio

    from console.errors import UserError
    from console.telemetry.engine.scrape import Failure, fetch
    from console.transport.http import HTTPClient

    parts = urlsplit(url)
    if parts.path in ("", "/"):
        url = url.rstrip("/") + profile.metrics.path
    key = _api_key(profile, api_key_env)
    headers = {"Accept": "text/plain;version=0.0.4, application/json;q=0.5, */*;q=0.1"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    origin = "{}://{}".format(*_origin(url))
    try:
        client = HTTPClient(origin, connect_timeout=TIMEOUT_S)
    except ValueError as exc:  # a port out of range, a scheme other than http(s)
        raise UserError(f"{url}: {exc}") from None

    async def follow() -> tuple[bytes, str]:
        answered = url
        for _hop in range(MAX_REDIRECTS + 1):
            target = urlsplit(answered)
            path = (target.path or "/") + (f"?{target.query}" if target.query else "")
            got = await fetch(client, path, headers, max_bytes=MAX_BYTES, timeout=TIMEOUT_S)
            if got.status is None:
                reason = "connection refused" if got.failure is Failure.REFUSED else got.error
                raise UserError(f"{answered}: {reason}")
            if got.status in (301, 302, 303, 307, 308) and got.location:
                # Another host's numbers are not this engine's (the console and `status` do not
                # follow such a redirect either): a redirect is followed only within the origin.
                nxt = urljoin(answered, got.location)
                if _origin(nxt) != _origin(answered):
                    raise UserError(f"{answered}: HTTP {got.status} redirects to another host ({nxt}); "
                                    "not followed: inspect that URL itself if it is the engine")
                answered = nxt
                continue
            if got.status != 200:
                raise UserError(_http_error(profile, answered, got.status, key is not None))
            if got.error:  # over the size cap, or an encoding that cannot be undone
                raise UserError(f"{answered}: {got.error}")
            return got.body, answered
        raise UserError(f"{url}: more than {MAX_REDIRECTS} redirects")

    async def run() -> tuple[bytes, str]:
        try:
            return await follow()
        finally:
            client.close()

    return asyncio.run(run())


MAX_REDIRECTS = 5


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def _http_error(profile: Any, url: str, status: int, sent_key: bool) -> str:
    msg = f"{url}: HTTP {status}"
    if status in (401, 403):
        msg += " (wrong API key)" if sent_key else " (the endpoint needs an API key: --api-key-env NAME)"
    elif status == 404:
        msg += " (no metrics endpoint here"
        msg += f"; {profile.metrics.enable_hint})" if profile.metrics.enable_hint else ")"
    elif status == 503:
        msg += " (engine still loading?)"
    return msg


# -- report -----------------------------------------------------------------------------------------


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def _report(profile: Any, reading: Any, source: str) -> dict[str, Any]:
    from console.profiles import CANONICAL, COUNTERS, HISTOGRAMS
    from console.telemetry.metrics.readings import ModelReading
    from console.telemetry.metrics.windows import merge_histograms, quantiles_from_buckets

    spec_map = profile.metrics.map
    models = list(reading.models.values()) or [ModelReading(model="")]
    out_models: list[dict[str, Any]] = []
    for mr in models:
        metrics: dict[str, Any] = {}
        for canonical in CANONICAL:
            res = reading.resolved.get(canonical)
            if canonical not in spec_map or res is None:
                metrics[canonical] = None
                continue
            entry: dict[str, Any] = {"raw_name": res.raw_name, "legacy": res.legacy, "kind": res.kind}
            if res.none_yet:
                entry["none_yet"] = True  # created on first use, none yet: 0
            if canonical in HISTOGRAMS:
                series = mr.histograms.get(canonical)
                if not series:
                    metrics[canonical] = None
                    continue
                bounds, counts, hsum, hcount = merge_histograms(series.values())
                q = quantiles_from_buckets(bounds, counts, hsum, hcount) if bounds else None
                entry.update(
                    series=len(series),
                    count=_num(hcount),
                    sum=_num(hsum),
                    p50=_num(q.p50) if q else None,
                    p90=_num(q.p90) if q else None,
                    p99=_num(q.p99) if q else None,
                    capped=list(q.capped) if q else [],
                )
            elif canonical in COUNTERS:
                total = mr.counter_total(canonical)
                if total is None:
                    metrics[canonical] = None
                    continue
                entry.update(value=_num(total), series=len(mr.counters.get(canonical, {})))
            else:
                value = mr.gauges.get(canonical)
                if value is None:
                    metrics[canonical] = None
                    continue
                entry["value"] = _num(value)
                if canonical == "kv_usage":
                    entry["mean"] = _num(mr.kv_usage_mean)
            metrics[canonical] = entry
        out_models.append({"model": mr.model, "replicas": mr.replicas, "metrics": metrics})
    return {
        "schema": 1,
        "profile": profile.name,
        "source": source,
        "format": reading.format,
        "samples": reading.sample_count,
        "error_count": max(reading.parsed.error_count, len(reading.errors)),
        "errors": list(reading.errors),
        "missing": list(reading.missing),
        "unmapped": list(reading.unmapped),
        "not_in_profile": [c for c in CANONICAL if c not in spec_map],
        "models": out_models,
    }


def _fmt(x: float | None) -> str:
    if x is None:
        return "n/a"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.6g}"


def _describe(canonical: str, entry: dict[str, Any] | None, in_profile: bool) -> tuple[str, str]:
    if entry is None:
        return ("n/a" if in_profile else "n/a (engine has no such metric)"), ""
    source = entry["raw_name"] + ("  [legacy name]" if entry["legacy"] else "")
    if entry.get("none_yet"):
        source += "  [no series yet: created at first use]"
    if "p50" in entry:
        capped = set(entry["capped"])

        def q(name: str) -> str:
            return (">" if name in capped else "") + _fmt(entry[name])

        text = (
            f"count {_fmt(entry['count'])}  sum {_fmt(entry['sum'])}  p50 {q('p50')}  p90 {q('p90')}  "
            f"p99 {q('p99')}  (since start)"
        )
    elif canonical == "kv_usage":
        text = f"{_fmt(entry['value'])} max  {_fmt(entry.get('mean'))} mean"
    elif entry["kind"] in ("counter", "histogram_sum", "histogram_count"):
        text = f"{_fmt(entry['value'])} total"
    else:
        text = _fmt(entry["value"])
    return text, source


def _print_text(display_name: str, report: dict[str, Any]) -> None:
    from console.textout import shown, shown_data

    # Metric names, label values (model ids), malformed lines and the note come from the payload:
    # every string is made safe before it is formatted (and padded: a placeholder is wider).
    report = shown_data(report)
    display_name = shown(display_name)
    not_in_profile = set(report["not_in_profile"])
    print(
        f"{display_name} ({report['profile']})  source: {report['source']}  format: {report['format']}  "
        f"samples: {report['samples']}  malformed lines: {report['error_count']}"
    )
    for model in report["models"]:
        label = model["model"] or "(no model label)"
        print(f"\nmodel {label}  replicas: {model['replicas']}")
        for canonical, entry in model["metrics"].items():
            text, source = _describe(canonical, entry, canonical not in not_in_profile)
            print(f"  {canonical:<22} {text:<48} {source}".rstrip())
    if report["missing"]:
        print(f"\nmapped but absent from this payload: {', '.join(report['missing'])}")
    print(f"\nraw families not mapped ({len(report['unmapped'])}):")
    for name in report["unmapped"]:
        print(f"  {name}")
    if report.get("note"):
        print(f"\nnote: {report['note']}")
    if report["errors"]:
        print(f"\nmalformed input ({report['error_count']} lines, skipped):")
        for err in report["errors"]:
            print(f"  {err}")
