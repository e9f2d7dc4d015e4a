"""``enginedeck sim``: run one simulated inference engine, or a fleet of them with synthetic load."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from console.errors import UserError
from console.sim.fleet_spec import FLEET_ENGINES

ENGINES = ("vllm", "sglang", "trtllm", "tgi", "llamacpp")


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("sim", **command_help(
        "run a simulated inference engine (or --fleet of them)",
        "enginedeck sim --engine vllm --port 8000",
        "enginedeck sim --engine vllm --spec-decode 3:0.7 --pd-decode --lora 2",
        "enginedeck sim --fleet",
        description="Run a simulated vLLM / SGLang / trtllm-serve / TGI / llama-server that behaves like the "
        "real one on the wire: OpenAI API, SSE streaming, health, errors, API key and metrics."))
    p.add_argument("--engine", choices=ENGINES, help="engine flavour to simulate")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default: the engine's usual port)")
    p.add_argument("--model", default=None, help="served model name")
    p.add_argument("--seed", type=int, default=0, help="seed for generated text and lengths")
    p.add_argument("--api-key", default=None, help="require this API key where the real engine would")
    p.add_argument("--load-time", type=float, default=0.0, metavar="S", help="seconds of simulated model loading")
    p.add_argument("--metrics-version", choices=("current", "legacy"), default="current",
                   help="vllm: legacy = pre-0.9.2 metric names (0.9.1); sglang: legacy = 0.5.4 shapes (P/D "
                        "gauges, no TPOT histogram); current = the newest release's")
    p.add_argument("--priority-scheduling", type=int, default=0, metavar="N",
                   help="sglang only: priority scheduling with N priority values (priority-labelled gauges)")
    p.add_argument("--fault", action="append", default=[], metavar="FAULT",
                   help="slow-metrics=S, hang-metrics, garbage-metrics, error-rate=F, stall=START:S, crash-after=S "
                        "(repeatable)")
    p.add_argument("--kv-blocks", type=int, default=None, metavar="N", help="KV cache size in 16-token blocks")
    p.add_argument("--max-running", type=int, default=None, metavar="N", help="max concurrently running sequences")
    p.add_argument("--speed", type=float, default=1.0, metavar="F", help="time speed-up factor (step times / F)")
    p.add_argument("--data-parallel", type=int, default=1, metavar="N",
                   help="vllm only: N engine ranks in /metrics (engine=\"0\"..); ranks above 0 get no requests")
    p.add_argument("--metrics-every", type=float, default=0.0, metavar="S",
                   help="vllm only: render /metrics at most once per S seconds (many scrapers on one simulator)")
    p.add_argument("--spec-decode", default="", metavar="K[:P]",
                   help="vllm, sglang: speculative decoding with K draft tokens, per-position acceptance P (0.7)")
    p.add_argument("--pd-decode", action="store_true",
                   help="vllm, sglang: the decode instance of disaggregated prefill/decode (KV-transfer metrics)")
    p.add_argument("--pd-fail-every", type=int, default=0, metavar="N",
                   help="--pd-decode: every Nth KV transfer fails")
    p.add_argument("--lora", type=int, default=0, metavar="N", help="vllm, sglang: LoRA with N adapter slots")
    p.add_argument("--no-access-log", action="store_true", help="do not log one line per request")
    p.add_argument("--fleet", action="store_true", help="start one engine of each flavour plus synthetic load")
    p.add_argument("--engines", default=",".join(FLEET_ENGINES), help="--fleet: comma-separated flavours")
    p.add_argument("--no-load", action="store_true", help="--fleet: no synthetic client load")
    p.add_argument("--base-port", type=int, default=None, help="--fleet: first port (default: free ports)")
    p.add_argument("--print-json", action="store_true", help="--fleet: one JSON line per endpoint")
    p.add_argument("--load", action="append", default=[], metavar="PROFILE@URL",
                   help="only run the fleet's synthetic client load against these running engines (repeatable)")
    p.add_argument("--load-api-key-env", metavar="NAME", help="--load: environment variable holding an API key")
    p.set_defaults(func=run)


def _check_features(args: argparse.Namespace) -> None:
    from console.sim.engines.features import SpecMode

    wanted = args.spec_decode or args.pd_decode or args.lora or args.pd_fail_every
    if wanted and args.engine not in ("vllm", "sglang"):
        raise UserError("--spec-decode, --pd-decode and --lora exist only for --engine vllm and sglang")
    if args.spec_decode:
        try:
            SpecMode.parse(args.spec_decode)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    if args.lora < 0 or args.pd_fail_every < 0:
        raise UserError("--lora and --pd-fail-every must not be negative")
    if args.pd_fail_every and not args.pd_decode:
        raise UserError("--pd-fail-every needs --pd-decode")


_DEFAULT_PORTS = {"vllm": 8000, "sglang": 30000, "trtllm": 8000, "tgi": 3000, "llamacpp": 8080}


def run(args: argparse.Namespace) -> int:
    if args.load:
        return _run_load(args)
    if args.fleet:
        return _run_fleet(args)
    if not args.engine:
        raise UserError("sim needs --engine {vllm,sglang,trtllm,tgi,llamacpp} or --fleet")
    return _run_one(args)


def _run_one(args: argparse.Namespace) -> int:
    import asyncio

    from console.sim.engines import DEFAULT_MODELS, SimOptions
    from console.sim.faults import parse_faults
    from console.sim.server import serve

    if args.engine == "trtllm" and args.api_key:
        raise UserError("trtllm-serve has no API key option (--api-key is not supported for --engine trtllm)")
    if args.metrics_version == "legacy" and args.engine not in ("vllm", "sglang"):
        raise UserError("--metrics-version legacy exists only for --engine vllm and sglang")
    if args.priority_scheduling and args.engine != "sglang":
        raise UserError("--priority-scheduling exists only for --engine sglang")
    if not 0 <= args.priority_scheduling <= 16:
        raise UserError("--priority-scheduling must be 0..16")
    if args.speed <= 0:
        raise UserError("--speed must be positive")
    for name in ("kv_blocks", "max_running"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1")
    if (args.data_parallel != 1 or args.metrics_every) and args.engine != "vllm":
        raise UserError("--data-parallel and --metrics-every exist only for --engine vllm")
    if args.data_parallel < 1 or args.metrics_every < 0:
        raise UserError("--data-parallel must be at least 1 and --metrics-every not negative")
    _check_features(args)
    try:
        faults = parse_faults(args.fault)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    opts = SimOptions(
        engine=args.engine,
        model=args.model or DEFAULT_MODELS[args.engine],
        seed=args.seed,
        api_key=args.api_key,
        metrics_version=args.metrics_version,
        max_running=args.max_running,
        kv_blocks=args.kv_blocks,
        speed=args.speed,
        data_parallel=args.data_parallel,
        metrics_every=args.metrics_every,
        spec_decode=args.spec_decode,
        priority_levels=args.priority_scheduling,
        pd_decode=args.pd_decode,
        pd_fail_every=args.pd_fail_every,
        max_lora=args.lora,
    )
    port = args.port if args.port is not None else _DEFAULT_PORTS[args.engine]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        await serve(opts, host=args.host, port=port, load_time=args.load_time, faults=faults,
                    access_log=not args.no_access_log)

    try:
        asyncio.run(main())
    except asyncio.CancelledError:
        pass
    except OSError as exc:
        raise UserError(f"cannot listen on {args.host}:{port}: {exc.strerror or exc}") from None
    return 0


def _run_fleet(args: argparse.Namespace) -> int:
    from console.sim.fleet import start_fleet

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    bad = [e for e in engines if e not in ENGINES]
    if bad or not engines:
        raise UserError(f"unknown engine(s) in --engines: {', '.join(bad) or '(none)'} (known: {', '.join(ENGINES)})")
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        fleet = start_fleet(engines, load=not args.no_load, seed=args.seed, base_port=args.base_port,
                            host=args.host)
    except (RuntimeError, OSError) as exc:
        raise UserError(f"fleet did not start: {exc}") from None
    failed = False
    try:
        for profile, url, pid in fleet.endpoints:
            if args.print_json:
                print(json.dumps({"profile": profile, "url": url, "pid": pid, "model": fleet.models[url]}))
            else:
                print(f"{profile}@{url}")
        sys.stdout.flush()
        print(f"fleet logs: {fleet.log_dir} (removed when the fleet stops; Ctrl-C to stop)", file=sys.stderr,
              flush=True)  # fmt: skip
        while not stop.is_set():
            stop.wait(0.5)
            for (profile, url, _), proc in zip(fleet.endpoints, fleet.procs, strict=True):
                if proc.poll() is not None:
                    print(f"{profile}@{url} exited with {proc.returncode}; stopping the fleet "
                          f"(log kept: {fleet.log_path(profile)})", file=sys.stderr, flush=True)
                    failed = True
                    stop.set()
    finally:
        fleet.stop(keep_logs=failed)  # the temporary folder goes, unless it holds why an engine died
    return 1 if failed else 0


def _model_of(url: str, api_key: str | None, stop: threading.Event) -> str | None:
    """The served model, asked until the engine answers (it may still be starting)."""
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    while not stop.is_set():
        try:
            req = urllib.request.Request(f"{url}/v1/models", headers=headers)
            with urllib.request.urlopen(req, timeout=2) as resp:
                data = json.load(resp)
            return str(data["data"][0]["id"])
        except (OSError, ValueError, KeyError, IndexError, urllib.error.URLError):
            stop.wait(0.5)
    return None


def _run_load(args: argparse.Namespace) -> int:
    """Synthetic load only, against engines that run elsewhere (the demo's managed simulators)."""
    from console.sim.load import LoadTarget, LoadThread
    from console.target import api_key_from_env

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    api_key = api_key_from_env(args.load_api_key_env)
    targets: list[LoadTarget] = []
    for ref in args.load:
        profile, sep, url = ref.partition("@")
        if not sep or profile not in ENGINES or not url.startswith(("http://", "https://")):
            raise UserError(f"--load {ref!r}: expected PROFILE@URL with PROFILE one of {', '.join(ENGINES)}")
        model = _model_of(url.rstrip("/"), api_key, stop)
        if model is None:
            return 0
        targets.append(LoadTarget(profile, url.rstrip("/"), model, api_key))
    load = LoadThread(targets, seed=args.seed)
    load.start()
    print(f"synthetic load on {len(targets)} engine(s) (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        while not stop.is_set():
            stop.wait(0.5)
    finally:
        load.stop()
    return 0
