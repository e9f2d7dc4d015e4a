"""`enginedeck bench`: compare engines on the same seeded workload (A/B in ABBA order).

Checks every engine's readiness first (GET /v1/models; an unreachable engine is one line and exit
2), runs the load in a child process, prints the comparison table (rows = metrics, columns =
engines, B/A), and writes JSON (docs/bench-json-schema.md), CSV and Markdown on request.

Exit codes: 0 every level ran to the end, 1 bad input or no request succeeded on an engine,
2 an engine is unreachable, 3 a level stopped early because too many requests failed (the results
are written), 130 interrupted (Ctrl-C), 143 stopped by SIGTERM, 129 by SIGHUP: in those three cases
the load process stops too and the levels that finished are written, marked "interrupted".
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

EXIT_UNREACHABLE = 2
EXIT_STOPPED_ON_ERRORS = 3
EXIT_INTERRUPTED = 130
# SIGTERM (a service manager, `kill`) and SIGHUP (the terminal went away) stop the run as Ctrl-C does.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("bench", **command_help(
        "compare engines: TTFT/TPOT/ITL/E2E, throughput, engine metrics (A/B)",
        "enginedeck bench --engine vllm@http://127.0.0.1:8000 --concurrency 1,8 --json out.json",
        "enginedeck bench --engine prod-vllm --engine qwen-sglang --workload shared-prefix --repeats 2",
        "enginedeck bench --engine A --engine B --swap --rate 4 --rate 8 --arrival gamma --burstiness 0.5"))
    p.add_argument("--engine", action="append", default=[], metavar="NAME|PROFILE@URL", required=True,
                   help="engine to benchmark (configured name or PROFILE@URL); give it twice for A/B")
    p.add_argument("--concurrency", default=None, metavar="C1,C2,...",
                   help="closed-loop concurrency levels (default 1,8,32,64; with --rate: in-flight cap)")
    p.add_argument("--rate", type=float, action="append", metavar="REQ_PER_S",
                   help="open-loop request rate (repeatable for several levels)")
    p.add_argument("--arrival", choices=["poisson", "gamma", "constant"], default="poisson",
                   help="open loop: gaps between requests (default poisson; gamma with --burstiness)")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (1 = Poisson, <1 burstier)")
    p.add_argument("--num-prompts", type=int, default=64, help="measured requests per level (default 64)")
    p.add_argument("--warmup", type=int, default=None, help="warmup requests per level (default: C; open loop 0)")
    p.add_argument("--max-duration", type=float, default=None, metavar="SECS", help="stop sending after SECS")
    p.add_argument("--input-len", type=int, default=128, help="prompt tokens per request (default 128)")
    p.add_argument("--output-len", type=int, default=64,
                   help="tokens to generate per request (default 64; forced unless --natural-eos)")
    p.add_argument("--workload", default="random", help="random | shared-prefix | file:PATH (JSONL)")
    p.add_argument("--prefix-groups", type=int, default=4, help="shared-prefix: number of system prompts")
    p.add_argument("--prefix-ratio", type=float, default=0.75, help="shared-prefix: share of input-len in the prefix")
    p.add_argument("--range-ratio", type=float, default=0.0, help="random: input lengths in [L(1-r), L(1+r)]")
    p.add_argument("--endpoint", choices=["completions", "chat"], default="completions",
                   help="OpenAI API: /v1/completions or /v1/chat/completions (default completions)")
    p.add_argument("--natural-eos", action="store_true", help="do not force the output length")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature sent (default 0)")
    p.add_argument("--model", default=None, help="served model to ask for (default: the first /v1/models lists)")
    p.add_argument("--repeats", type=int, default=1, help="runs per engine, in ABBA order")
    p.add_argument("--slo", default=None, metavar="ttft:MS,tpot:MS,e2e:MS", help="SLOs for goodput")
    p.add_argument("--seed", type=int, default=0, help="seed of the prompts and the arrival times (default 0)")
    p.add_argument("--flush-cache", action="store_true",
                   help="flush the prefix cache before every level (SGLang /flush_cache; vLLM /reset_prefix_cache, "
                   "dev mode only); the result records whether it worked")
    p.add_argument("--swap", action="store_true",
                   help="single-GPU A/B: before each run stop the other engines (waiting until their GPU memory "
                        "is freed) and start this one; engines must be configured managed instances")
    p.add_argument("--no-engine-metrics", action="store_true", help="do not scrape the engines' /metrics")
    p.add_argument("--no-gpu", action="store_true", help="do not sample GPU utilisation/power")
    p.add_argument("--gpus", choices=["nvml", "simulated", "none"], default=None,
                   help="GPU source for utilisation/power (default: the config's gpu_source, nvml)")
    p.add_argument("--no-events", action="store_true", help="leave per-event timestamps out of the JSON")
    p.add_argument("--json", dest="json_out", metavar="FILE", help="write the result document (JSON)")
    p.add_argument("--csv", dest="csv_out", metavar="FILE", help="write one row per level, engine and metric (CSV)")
    p.add_argument("--markdown", dest="md_out", metavar="FILE", help="write the result table (Markdown)")
    p.add_argument("--save", action="store_true",
                   help="also save JSON and Markdown into the results folder ([console] bench_dir, "
                        "$ENGINEDECK_BENCH_DIR, else the state folder's bench), as the console's s does")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--api-key-env", metavar="NAME", help="env var with the API key for PROFILE@URL engines")
    p.add_argument("--config", metavar="FILE", help="configuration file (default: the platform config path)")
    p.set_defaults(func=run)


def _ints(text: str, what: str) -> list[int]:
    from console.errors import UserError

    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{what}: expected comma-separated integers, got {text!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise UserError(f"{what}: values must be >= 1")
    return vals


def build_config(args: argparse.Namespace) -> Any:
    from console.client.aggregate import parse_slo
    from console.client.bench import BenchConfig
    from console.client.loadgen import LevelSpec
    from console.client.stream import GenParams
    from console.client.workloads import WorkloadSpec
    from console.config import load_config, resolve_engines
    from console.errors import UserError

    if args.num_prompts < 1 or args.input_len < 1 or args.output_len < 1 or args.repeats < 1:
        raise UserError("--num-prompts, --input-len, --output-len and --repeats must be >= 1")
    try:
        slo = parse_slo(args.slo)
    except ValueError as exc:
        raise UserError(f"--slo: {exc}") from None
    from console.lifecycle.running import with_running

    cfg = with_running(load_config(args.config))  # a running demo's engines by name, as `ps` lists them
    instances = resolve_engines(cfg, args.engine, api_key_env=args.api_key_env)
    engines = tuple(i.target for i in instances)
    levels: list[LevelSpec] = []
    if args.rate:
        cap = _ints(args.concurrency, "--concurrency")[0] if args.concurrency else 0
        for r in args.rate:
            if not r > 0:
                raise UserError("--rate must be > 0")
            levels.append(LevelSpec("open", cap, r, args.arrival, args.burstiness, args.num_prompts, args.warmup,
                                    args.max_duration, args.seed))  # fmt: skip
    else:
        for c in sorted(set(_ints(args.concurrency or "1,8,32,64", "--concurrency"))):
            levels.append(LevelSpec("closed", c, None, "poisson", 1.0, args.num_prompts, args.warmup,
                                    args.max_duration, args.seed))  # fmt: skip
    workload = WorkloadSpec.parse(
        args.workload, input_len=args.input_len, output_len=args.output_len, prefix_groups=args.prefix_groups,
        prefix_ratio=args.prefix_ratio, range_ratio=args.range_ratio,
    )  # fmt: skip
    if workload.kind == "file":
        from pathlib import Path

        from console.client.workloads import load_jsonl

        load_jsonl(Path(workload.path or ""))  # fail early, in the parent, with one line
    params = GenParams(max_tokens=args.output_len, temperature=args.temperature, fixed_length=not args.natural_eos)
    return BenchConfig(
        engines=engines, levels=tuple(levels), workload=workload, params=params, repeats=args.repeats,
        seed=args.seed, slo=slo, endpoint=args.endpoint, scrape_metrics=not args.no_engine_metrics,
        flush_cache=args.flush_cache, gpu="none" if args.no_gpu else (args.gpus or cfg.console.gpu_source),
        keep_events=not args.no_events, swap=args.swap, config_path=args.config,
    )  # fmt: skip


def swap_models(args: argparse.Namespace) -> list[str]:
    from console.config import load_config
    from console.errors import UserError

    cfg = load_config(args.config)
    models = []
    for ref in args.engine:
        if "@" in ref:
            raise UserError(f"--swap: {ref} must be a configured managed engine name, not PROFILE@URL")
        inst = cfg.instance(ref)
        if not inst.managed:
            raise UserError(f"--swap: {ref} is monitor-only; swapping needs engines enginedeck starts and stops")
        models.append(args.model or inst.config.served_name or inst.config.model or "")
    return models


def run(args: argparse.Namespace) -> int:
    import asyncio

    from console.client.bench import BenchFailed, check_ready, run_in_subprocess
    from console.client.progress import BenchEvent, LevelDone, LevelProgress, RunStarted, SwapStarted
    from console.client.report import render_text, scrubbed, write_outputs
    from console.errors import UserError
    from console.textout import shown
    from console.transport.http import HTTPError

    cfg = build_config(args)
    if args.swap:
        # The engines take turns on the GPU, so they are not all up now: the served model comes
        # from the configuration and readiness is checked by each swap.
        models = swap_models(args)
    else:
        try:
            models = asyncio.run(check_ready(cfg.engines, model=args.model))
        except HTTPError as exc:
            raise UserError(shown(str(exc)), exit_code=EXIT_UNREACHABLE) from None
    last = [0.0]
    live_width = [0]  # the counts line rewritten in place ("\r"): a shorter one is padded over the last

    from console.client.bench import plan_line

    # Said with the first event, not before the run: a refusal (read-only, an unready engine) stays
    # the one line on stderr.
    plan = [f"{', '.join(lv.label for lv in cfg.levels)}: {plan_line(cfg)}"]

    def progress(ev: BenchEvent) -> None:
        if args.quiet:
            return
        if plan and isinstance(ev, SwapStarted | RunStarted):
            _say(plan.pop())
        now = time.monotonic()
        line, end = "", "\n"
        if isinstance(ev, SwapStarted):
            line = f"swap: stopping the others, starting {shown(ev.engine)} and waiting until ready"
        elif isinstance(ev, RunStarted):
            line = f"[{ev.position + 1}/{ev.of}] {shown(ev.engine)} (repeat {ev.repeat + 1})"
        elif isinstance(ev, LevelDone):
            ttft, tput = ev.ttft_p50_ms, ev.output_tput
            line = (f"    {ev.level}: {ev.completed} ok, {ev.failed} failed"
                    + (f", {ev.cut} cut at max duration" if ev.cut else "")
                    + (f", TTFT p50 {ttft:.1f} ms" if ttft is not None else "")
                    + (f", {tput:.0f} tok/s" if tput else ""))  # fmt: skip
        elif isinstance(ev, LevelProgress) and _isatty(sys.stderr) and now - last[0] > 0.5:
            last[0] = now
            # The measured count against --num-prompts, the warmup apart: "C=1: 2/32 (+1 warmup)".
            line = f"    {ev.level}: {ev.counts()}" + (f", {ev.errors} failed" if ev.errors else "")
            line, end = line.ljust(live_width[0]), "\r"
            live_width[0] = len(line)
        if line:
            if end == "\n" and live_width[0]:
                line = line.ljust(live_width[0])
                live_width[0] = 0
            _say(line, end=end)

    got: list[int] = []
    try:
        with _stop_signals(got.append):
            doc = run_in_subprocess(cfg, models, progress, interrupted=lambda: bool(got))
    except BenchFailed as exc:
        raise UserError(f"bench failed: {shown(str(exc))}") from None
    doc = scrubbed(doc)
    if got:
        doc["interrupted_by"] = signal.Signals(got[0]).name
    # The files first: after a hangup the terminal may be gone, and the results must not be.
    write_outputs(doc, json_path=args.json_out, csv_path=args.csv_out, md_path=args.md_out)
    saved: tuple[Any, ...] = ()
    if args.save:
        from console.client.report import save_results
        from console.config import load_config
        from console.paths import bench_results_dir

        folder = bench_results_dir(load_config(args.config).console.bench_dir)
        try:
            saved = save_results(doc, folder)
        except OSError as exc:
            _say(f"enginedeck: bench: could not save into {folder}: {exc.strerror or exc}")
    # In a terminal, as wide as it is (a 160-column table wraps into a mess at 80); else 160.
    width = shutil.get_terminal_size((160, 24)).columns if _isatty(sys.stdout) else 160
    _say(render_text(doc, width=max(60, width)), end="", out=sys.stdout)
    for label, path in (("JSON", args.json_out), ("CSV", args.csv_out), ("Markdown", args.md_out)):
        if path:
            _say(f"{label} written to {path}")
    if saved:
        _say(f"saved {saved[0]} and {saved[1].name}")
    if doc.get("interrupted"):
        done = len(doc["summary"]["levels"])
        why = f" by {doc['interrupted_by']}" if got else ""
        _say(f"enginedeck: bench interrupted{why}: {done} of {len(cfg.levels)} level(s) finished "
             "and are in the results (marked interrupted)")  # fmt: skip
        return 128 + got[0] if got else EXIT_INTERRUPTED
    dead = [e["name"] for e in doc["engines"]
            if not any(lv["requests"]["completed"] for run in doc["runs"] if run["engine"] == e["name"]
                       for lv in run["levels"])]  # fmt: skip
    if dead:
        raise UserError(f"no request succeeded on {shown(', '.join(dead))} (see the errors in the table/JSON)")
    stopped = [(run["engine"], lv["level"]["label"], lv["requests"]["stopped_early"]) for run in doc["runs"]
               for lv in run["levels"] if lv["requests"].get("stopped_on_errors")]  # fmt: skip
    if stopped:
        engine, level, why = stopped[0]
        more = f" (and {len(stopped) - 1} more)" if len(stopped) > 1 else ""
        _say(f"enginedeck: bench: level {level} on {shown(engine)} stopped early: {why}{more}")
        return EXIT_STOPPED_ON_ERRORS
    return 0


@contextlib.contextmanager
def _stop_signals(record: Callable[[int], object]) -> Iterator[None]:
    """While the load runs, SIGINT, SIGTERM and SIGHUP are recorded, not raised: the run polls the
    record between progress events and stops the load process, keeping the finished levels (an
    exception raised inside the result queue's read could leave its lock taken and the result lost).
    A second signal gives up at once."""

    seen: list[int] = []

    def handler(signum: int, frame: object) -> None:
        seen.append(signum)
        record(signum)
        if len(seen) > 1:  # a second one: give up at once (the load process is killed)
            raise KeyboardInterrupt

    # A signal ignored when we started stays ignored: `nohup enginedeck bench` outlives its terminal.
    saved = {s: signal.signal(s, handler) for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, old in saved.items():
            signal.signal(s, old)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (OSError, ValueError):
        return False


def _say(text: str, *, end: str = "\n", out: Any = None) -> None:
    """Print, unless the terminal is gone (after a hangup): the run's results are in the files."""
    with contextlib.suppress(OSError, ValueError):
        print(text, end=end, file=out if out is not None else sys.stderr, flush=True)
