"""`enginedeck status`: every engine, GPU and the host, normalised, headless.

Exit codes: 0 every engine reachable with its metrics read, 2 any engine unreachable (or a remote
host of ``[hosts.*]`` or a Prometheus source of ``[sources.*]`` stale: its report is the ``hosts``
array), 3 every engine reachable but the metrics of one or more could not be read (no metrics endpoint, wrong API key,
another engine's payload: the reason is in the report), 4 all of that fine but a critical alert is
firing, 1 configuration error (including no engine at all, or a broken alert rules file: a cron
check pointed at the wrong configuration must not pass). Alerts need their hold time: in one-shot
status most show as pending; ``--watch`` keeps evaluating them.
Rates and windowed quantiles need two scrapes or more, so one-shot status samples for
``--sample`` seconds (default 5) before it reports; ``--sample 0`` reports health and gauges only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.model import FleetSnapshot
    from console.telemetry.source import FleetSource, LiveSource

EXIT_OK, EXIT_CONFIG, EXIT_UNREACHABLE, EXIT_METRICS, EXIT_CRITICAL = 0, 1, 2, 3, 4


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("status", **command_help(
        "engines, GPUs and host, normalised (exit 2 if an engine is unreachable, "
        "3 if its metrics cannot be read, 4 if a critical alert fires)",
        "enginedeck status", "enginedeck status --engine vllm@http://127.0.0.1:8000 --json",
        "enginedeck status --json --watch 5"))
    p.add_argument("--engine", action="append", default=[], metavar="NAME|PROFILE@URL",
                   help="an engine to include (configured name, or PROFILE@URL such as vllm@http://127.0.0.1:8000); "
                   "repeatable; without it every configured engine")
    p.add_argument("--json", action="store_true", help="print the versioned JSON document (docs/status-json.md)")
    p.add_argument("--watch", type=float, metavar="SECS", help="print again every SECS seconds until interrupted")
    p.add_argument("--sample", type=float, default=5.0, metavar="SECS",
                   help="seconds of scraping before the first report, so rates/quantiles have data (default 5)")
    p.add_argument("--refresh", type=float, default=1.0, metavar="SECS", help="scrape period (default 1)")
    p.add_argument("--gpus", choices=["nvml", "simulated", "none"], help="GPU source (default: from config, nvml)")
    p.add_argument("--api-key-env", metavar="NAME",
                   help="environment variable holding the API key for PROFILE@URL engines")
    p.add_argument("--config", metavar="FILE", help="configuration file (default: the platform config path)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.alerts.evaluate import evaluator_for
    from console.config import load_config, selected_instances
    from console.errors import UserError
    from console.telemetry.hub import Hub

    if args.refresh <= 0 or args.sample < 0 or (args.watch is not None and args.watch <= 0):
        raise UserError("--refresh and --watch must be positive and --sample not negative")
    try:
        from console.lifecycle.running import with_running

        cfg = with_running(load_config(args.config))  # a running demo's engines by name, as `ps` lists them
        instances = selected_instances(cfg, args.engine, api_key_env=args.api_key_env)
    except UserError as exc:
        print(f"enginedeck: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    hosts = cfg.hosts if not args.engine else ()
    sources = cfg.sources if not args.engine else ()  # [sources.*]: Prometheus servers (console/prometheus)
    if not instances and not hosts and not sources:
        print(f"enginedeck: {_no_engines_reason(cfg)}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        alerts = evaluator_for(instances)
    except UserError as exc:
        print(f"enginedeck: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    gpu_source = args.gpus or cfg.console.gpu_source
    local = Hub(instances, refresh=args.refresh, gpu_source=gpu_source, alerts=alerts)
    hub: LiveSource = local
    remote = None
    if hosts or sources:  # [hosts.*]: each host's own `enginedeck status` over ssh, merged (console/remote)
        from console.remote.fleet import RemoteFleet

        hub = remote = RemoteFleet(hosts, local=local if instances else None, refresh=args.refresh, sources=sources)
    if hosts:  # SIGHUP/SIGTERM unwind through `finally`: the hosts' ssh process groups end with us
        _exit_on_hangup()
    hub.start()
    try:
        deadline = time.monotonic() + args.sample
        hub.wait_published(timeout=max(args.sample, 3.0) + 2.0)
        if remote is not None:
            remote.wait_hosts(deadline + 15.0)
            remote.publish()
        if instances:
            wait_until_collected(hub, deadline + 3.0)
        time.sleep(max(0.0, deadline - time.monotonic()))
        code = _report(hub, args)
        while args.watch:
            time.sleep(args.watch)
            code = _report(hub, args)
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`| head`, the ssh of a console that ended)
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    finally:
        hub.stop()


def _exit_on_hangup() -> None:
    import signal

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, leave)


def _no_engines_reason(cfg: Any) -> str:
    from console.paths import config_file

    where = f"in {cfg.path}" if cfg.path is not None else f"(no configuration file at {config_file()})"
    return (f"no engine configured {where}; add one under [engines], [hosts.NAME] or [sources.NAME], "
            "or pass --engine PROFILE@URL")


def wait_until_collected(hub: FleetSource, deadline: float) -> None:
    """Wait until every engine has been probed once (its health has a verdict) and the host is in."""
    while time.monotonic() < deadline:
        snap = hub.latest()
        if snap.host is not None and not any(e.health_freshness.pending for e in snap.engines):
            return
        time.sleep(0.05)


def _report(hub: FleetSource, args: argparse.Namespace) -> int:
    from console.status_doc import status_json

    snap = hub.latest()
    if args.json:
        print(status_json(snap, indent=None if args.watch else 2), flush=True)
    else:
        print(render_text(snap), flush=True)
    return exit_code(snap)


def exit_code(snap: FleetSnapshot) -> int:
    """2 unreachable, else 3 metrics unreadable, else 4 a critical alert firing, else 0."""
    from console.model import AlertState

    if not all(e.reachable for e in snap.engines) or any(h.freshness.stale for h in snap.hosts):
        return EXIT_UNREACHABLE
    if any(e.metrics_freshness.stale for e in snap.engines):
        return EXIT_METRICS
    critical = any(a.state is AlertState.FIRING and a.severity == "critical" for a in snap.alerts)
    return EXIT_CRITICAL if critical else EXIT_OK


def _num(v: float | None, fmt: str = "{:.0f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{1000 * v:.0f}ms"


def _q_ms(q: Any, which: str) -> str:
    """A quantile in ms; ">" when it fell in the +Inf bucket (the value is then a lower bound)."""
    v = getattr(q, which)
    return "n/a" if v is None else (">" if which in q.capped else "") + _ms(v)


def _rate(r: Any) -> str:
    """The current rate; marked "*" when it is over 60 s (a counter bumped when requests finish)."""
    return _num(r.now, "{:.1f}") + ("*" if r.at_finish and r.now is not None else "")


def render_text(snap: Any) -> str:
    from console.model import FleetSnapshot, Phase
    from console.status_doc import gpu_owners
    from console.textout import shown

    assert isinstance(snap, FleetSnapshot)
    lines: list[str] = []
    header = (f"{'ENGINE':<34} {'PHASE':<11} {'RUN':>4} {'WAIT':>4} {'KV':>6} {'HIT':>6} "
              f"{'GEN/s':>7} {'PRM/s':>7} {'TTFT50':>7} {'TTFT99':>7} {'ITL50':>6}")
    lines.append(header)
    if not snap.engines:
        lines.append("(no engines: configure some (enginedeck config path) or pass --engine PROFILE@URL)")
    marked = False
    for e in snap.engines:
        m = e.total
        stale = f"  [stale: {e.metrics_freshness.reason}]" if e.metrics_freshness.stale else ""
        name = shown(e.name)  # before the cut: a placeholder is wider than what it stands for
        name = name if len(name) <= 34 else name[:33] + "…"
        # What answered, where it says why the engine is not ready ("not an engine: /v1/models answered
        # text/html"): outside text, so made inert.
        why = f"  {e.phase.value}: {shown(e.health_detail)}" if e.phase is Phase.UNHEALTHY and e.health_detail else ""
        if m is None:
            lines.append(f"{name:<34} {e.phase.value:<11}{stale}")
            if why:
                lines.append(why)
            continue
        lines.append(
            f"{name:<34} {e.phase.value:<11} {_num(m.running):>4} {_num(m.waiting):>4} {_pct(m.kv_usage):>6} "
            f"{_pct(m.prefix_hit_rate):>6} {_rate(m.generation_tps):>7} "
            f"{_rate(m.prompt_tps):>7} {_q_ms(m.ttft, 'p50'):>7} {_q_ms(m.ttft, 'p99'):>7} "
            f"{_q_ms(m.itl, 'p50'):>6}{stale}"
        )
        if why:
            lines.append(why)
        if m.invalid:
            invalid = "; ".join(f.describe() for f in m.invalid)
            lines.append(f"  invalid data, shown as n/a: {shown(invalid)}")
        marked = marked or m.generation_tps.at_finish or m.prompt_tps.at_finish
    if marked:
        lines.append("* over 60 s: the engine counts these tokens only when a request finishes (5 s would read 0, "
                     "then spike)")
    g = snap.gpus
    if g.unavailable_reason:
        lines.append(f"GPUs: {g.unavailable_reason}")
    for gpu in g.gpus:
        used = "n/a" if gpu.mem_used_bytes is None else f"{gpu.mem_used_bytes / 2**30:.1f}"
        total = "n/a" if gpu.mem_total_bytes is None else f"{gpu.mem_total_bytes / 2**30:.1f}"
        sim = " (simulated)" if gpu.simulated else ""
        lines.append(
            f"GPU{gpu.index} {gpu.name}{sim}: util {_num(gpu.util_percent)}% HBM {used}/{total} GiB "
            f"{_num(gpu.temperature_c)}C {_num(gpu.power_w)}W  {', '.join(gpu_owners(gpu, snap.engines)) or '-'}"
        )
    for hv in snap.hosts:
        state = "ok" if not hv.freshness.stale else f"STALE: {hv.freshness.reason}"
        what = "source" if hv.kind == "prometheus" else "host"
        lines.append(f"{what} {hv.name} ({hv.destination}): {hv.engines} engines, {state}")
    h = snap.host
    if h is not None:
        mem = "n/a" if h.mem_used_bytes is None or not h.mem_total_bytes else (
            f"{h.mem_used_bytes / 2**30:.1f}/{h.mem_total_bytes / 2**30:.1f} GiB")
        load = " ".join(f"{x:.2f}" for x in h.load_avg) if h.load_avg else "n/a"
        cpu = "n/a" if h.cpu_percent is None else f"{h.cpu_percent:.0f}%"
        lines.append(f"host {h.hostname}: cpu {cpu} mem {mem} load {load}")
    for a in snap.alerts:
        if a.active:
            value = "n/a" if a.value is None else f"{a.value:.4g}"
            lines.append(f"ALERT {a.state.value} {a.severity} {a.rule} on {a.engine}: {a.summary} "
                         f"({a.condition}; now {value})")
    # Names, model ids, versions, reasons and evidence come from engines, remote hosts and sources:
    # each line leaves scrubbed and inert (a line break inside one shows as a placeholder).
    return "\n".join(shown(line) for line in lines)
