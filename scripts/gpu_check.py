#!/usr/bin/env python3
"""Prepared check of the GPU telemetry on a machine with a real NVIDIA GPU (a few minutes at most).

It starts a short PyTorch workload in a child process (a few GB allocated, fp16 matmuls for about
20 s), prints the GPU part of ``enginedeck status --json`` a few times while it runs (or, when that
command cannot run here, the NvmlSource fleet itself), then prints PASS/FAIL/WARN lines:

* NVML initialises and every device has the basic fields; nothing is printed by the library;
* utilisation above 0 while the workload runs;
* HBM used rises against the reading taken before;
* the workload's PID is among the GPU processes and is attributed to a pseudo engine instance
  registered with that PID (if NVML reports PIDs of another PID namespace, say so: WARN, no crash);
* memory is released after the workload exits;
* energy: while the workload runs, NVML's total-energy counter over 60 s (``--energy-seconds``)
  agrees within 5% with power sampled at 10 Hz and integrated over the same span (both figures
  printed), and enginedeck's NvmlSource reports the counter as its energy source.

No network needed. Exit: 0 all passed, 1 a check failed, 2 cannot run here (no torch, no CUDA).
Usage: python scripts/gpu_check.py [--seconds 20] [--gib 4] [--device 0] [--energy-seconds 60]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.model import GpuFleet, GpuSnapshot, SourceState  # noqa: E402
from console.telemetry.gpu.attribution import EngineLocator, attribute  # noqa: E402
from console.telemetry.gpu.nvml import NvmlPoller  # noqa: E402

GiB = 1024**3
PSEUDO_ENGINE = "gpu-check"

WORKLOAD = r"""
import os, sys, threading, time
import torch
limit, gib, dev = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()  # EOF: stop
if not torch.cuda.is_available():
    print("NOCUDA " + str(torch.version.cuda), flush=True)
    sys.exit(3)
torch.cuda.set_device(dev)
buf = torch.empty(int(gib * 1024**3), dtype=torch.uint8, device="cuda")
buf.fill_(1)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
print("READY %d %s" % (os.getpid(), torch.cuda.get_device_name(dev)), flush=True)
end = time.time() + limit  # safety net; the parent closes stdin when it is done measuring
n = 0
while not stop.is_set() and time.time() < end:
    for _ in range(10):
        c = a @ b
    torch.cuda.synchronize()
    n += 10
print("DONE %d matmuls" % n, flush=True)
"""

QUIET_PROBE = (
    "import sys; sys.path.insert(0, sys.argv[1]);"
    "from console.telemetry.gpu.nvml import NvmlPoller;"
    "p = NvmlPoller(timeout_s=10.0); f = p.poll(); p.close()"
)

results: list[tuple[str, str, str]] = []


def report(status: str, name: str, detail: str = "") -> None:
    results.append((status, name, detail))
    print(f"{status:<4} {name}" + (f": {detail}" if detail else ""), flush=True)


def fleet_json(fleet: GpuFleet) -> str:
    doc: dict[str, Any] = dataclasses.asdict(fleet)
    return json.dumps(doc, default=str)


def status_gpus() -> str | None:
    """The "gpus" part of `enginedeck status --json`, or None when that command cannot run here."""
    cmd = [sys.executable, "-m", "console", "status", "--json", "--gpus", "nvml", "--sample", "1.5"]
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
        doc = json.loads(done.stdout)
        return json.dumps(doc["gpus"])
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        return None


def show(poller: NvmlPoller, label: str, use_status: bool) -> GpuFleet:
    t0 = time.monotonic()
    fleet = poller.poll()
    took = (time.monotonic() - t0) * 1000
    text = status_gpus() if use_status else None
    source = "enginedeck status --json [gpus]"
    if text is None:
        text, source = fleet_json(fleet), "NvmlSource (dataclasses.asdict)"
    print(f"--- {label}: {source}; NVML sweep {took:.0f} ms", flush=True)
    print(text, flush=True)
    return fleet


def used(fleet: GpuFleet) -> dict[int, int]:
    return {g.index: g.mem_used_bytes for g in fleet.gpus if g.mem_used_bytes is not None}


def pids(fleet: GpuFleet) -> set[int]:
    return {p.pid for g in fleet.gpus for p in g.processes}


ENERGY_TOLERANCE = 0.05


def power_reader(nv: Any, handle: Any) -> tuple[Callable[[], float], str]:
    """A function reading power in mW: the instantaneous field where the driver has it (as Zeus
    does), else nvmlDeviceGetPowerUsage (a 1 s average on Ampere and newer)."""
    field = getattr(nv, "NVML_FI_DEV_POWER_INSTANT", None)
    if field is not None and hasattr(nv, "nvmlDeviceGetFieldValues"):
        def instant() -> float:
            v = nv.nvmlDeviceGetFieldValues(handle, [field])[0]
            if getattr(v, "nvmlReturn", 0) != 0:
                raise RuntimeError(f"field value error {v.nvmlReturn}")
            return float(v.value.uiVal)

        try:
            instant()
            return instant, "NVML_FI_DEV_POWER_INSTANT"
        except Exception:
            pass
    return (lambda: float(nv.nvmlDeviceGetPowerUsage(handle))), "nvmlDeviceGetPowerUsage"


def energy_check(
    nv: Any,
    handle: Any,
    seconds: float,
    *,
    hz: float = 10.0,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, str]:
    """The energy counter against power integrated at ``hz`` over ``seconds``: (status, detail)."""
    try:
        e0 = float(nv.nvmlDeviceGetTotalEnergyConsumption(handle))
    except Exception as exc:
        return "WARN", (f"the total-energy counter is not supported here ({exc}); enginedeck integrates "
                        "power at 10 Hz instead (energy_source 'integrated')")  # fmt: skip
    power, how = power_reader(nv, handle)
    t0 = t_prev = monotonic()
    p_prev = power()
    integral_mj, samples, failed = 0.0, 1, 0
    next_at = t0
    while t_prev - t0 < seconds:
        next_at += 1.0 / hz
        sleep(max(0.0, next_at - monotonic()))
        try:
            p = power()
        except Exception:
            failed += 1
            continue
        t = monotonic()
        integral_mj += (t - t_prev) * (p_prev + p) / 2.0
        t_prev, p_prev = t, p
        samples += 1
    e1 = float(nv.nvmlDeviceGetTotalEnergyConsumption(handle))
    span = t_prev - t0
    counter_j, integral_j = (e1 - e0) / 1000.0, integral_mj / 1000.0
    if counter_j < 0:
        return "FAIL", f"the counter went down ({e0:.0f} -> {e1:.0f} mJ): a driver reload during the check?"
    off = abs(counter_j - integral_j) / integral_j if integral_j > 0 else float("inf")
    detail = (f"counter {counter_j:.1f} J ({counter_j / span:.1f} W) vs {how} at {hz:g} Hz integrated "
              f"{integral_j:.1f} J ({integral_j / span:.1f} W) over {span:.1f} s, {samples} samples"
              f"{f', {failed} failed' if failed else ''}: {off * 100:.2f}% apart "
              f"(limit {ENERGY_TOLERANCE:.0%})")  # fmt: skip
    return ("PASS" if off <= ENERGY_TOLERANCE else "FAIL"), detail


def check_fields(g: GpuSnapshot) -> None:
    basics = {
        "name": g.name,
        "uuid": g.uuid,
        "util_percent": g.util_percent,
        "mem_used_bytes": g.mem_used_bytes,
        "mem_total_bytes": g.mem_total_bytes,
    }
    missing = [k for k, v in basics.items() if v in (None, "")]
    optional = {
        "temperature_c": g.temperature_c,
        "power_w": g.power_w,
        "power_limit_w": g.power_limit_w,
        "sm_clock_mhz": g.sm_clock_mhz,
        "mem_clock_mhz": g.mem_clock_mhz,
        "ecc_errors": g.ecc_errors,
        "mem_util_percent": g.mem_util_percent,
    }
    na = [k for k, v in optional.items() if v is None]
    report(
        "FAIL" if missing else "PASS",
        f"GPU {g.index} fields",
        f"{g.name} {g.uuid}; missing basics: {missing or 'none'}; n/a (not supported here): {na or 'none'}; "
        f"xid={list(g.xid_errors)}",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=20.0, help="workload duration (default 20)")
    ap.add_argument("--gib", type=float, default=4.0, help="GiB the workload allocates (default 4)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device for the workload (default 0)")
    ap.add_argument("--no-status", action="store_true", help="do not try `enginedeck status --json`")
    ap.add_argument("--energy-seconds", type=float, default=60.0,
                    help="span of the energy check under load (default 60; 0 skips it)")
    args = ap.parse_args()

    if importlib.util.find_spec("torch") is None:
        print(
            "torch is not installed in this Python; install a CUDA build and run again:\n"
            "  pip install torch\n"
            "(or a wheel index matching the driver, e.g. pip install torch --index-url "
            "https://download.pytorch.org/whl/cu124, from a machine with network access)",
            file=sys.stderr,
        )
        return 2

    # 1. The library must stay silent (a full-screen app would be corrupted by stray output).
    probe = subprocess.run([sys.executable, "-c", QUIET_PROBE, str(ROOT)], capture_output=True, text=True, timeout=60)
    quiet = probe.returncode == 0 and not probe.stdout and not probe.stderr
    report(
        "PASS" if quiet else "FAIL",
        "NVML poll prints nothing",
        "" if quiet else f"rc={probe.returncode} stdout={probe.stdout!r} stderr={probe.stderr!r}",
    )

    poller = NvmlPoller(timeout_s=10.0)  # generous: the first sweep on a cold driver can be slow
    child: subprocess.Popen[str] | None = None
    try:
        before = show(poller, "before the workload", not args.no_status)
        if before.freshness.state is not SourceState.OK:
            report("FAIL", "NVML available", before.freshness.reason or before.unavailable_reason)
            return summary()
        report("PASS", "NVML available", f"driver {before.driver_version}, {len(before.gpus)} GPU(s)")
        for g in before.gpus:
            check_fields(g)

        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")  # CUDA numbering = NVML numbering
        child = subprocess.Popen(
            [sys.executable, "-c", WORKLOAD, str(args.seconds + args.energy_seconds + 120), str(args.gib),
             str(args.device)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert child.stdout is not None
        line = child.stdout.readline().strip()  # blocks until allocated (CUDA init can take a while)
        if not line.startswith("READY"):
            err = child.stderr.read() if child.stderr else ""
            child.wait(30)
            why = "torch has no CUDA here" if line.startswith("NOCUDA") else "the workload did not start"
            print(f"{why}: {line} {err[-2000:]}", file=sys.stderr)
            return 2
        print(f"workload running: {line}", flush=True)

        during: list[GpuFleet] = []
        rounds = 3
        started = time.monotonic()
        for n in range(rounds):
            time.sleep(max(0.0, started + (n + 1) * args.seconds / (rounds + 1) - time.monotonic()))
            during.append(show(poller, f"during the workload ({n + 1}/{rounds})", not args.no_status))
        if child.poll() is not None:
            report("FAIL", "workload still running while measured", f"exited early, rc={child.returncode}")
        time.sleep(max(0.0, started + args.seconds - time.monotonic()))

        # 2. Utilisation above 0 on some GPU while the workload ran.
        peak = max((g.util_percent or 0.0 for f in during for g in f.gpus), default=0.0)
        report("PASS" if peak > 0 else "FAIL", "utilisation above 0 under load", f"max {peak:.0f}%")

        # 3. HBM used rose against the reading before.
        base = used(before)
        rise = max(
            (u - base.get(i, u) for f in during for i, u in used(f).items()),
            default=0,
        )
        want = int(0.5 * args.gib * GiB)
        report(
            "PASS" if rise >= want else "FAIL",
            "HBM used rises",
            f"+{rise / GiB:.2f} GiB (workload allocated {args.gib:g} GiB; need >= {want / GiB:.2f})",
        )

        # 4. The workload's PID among the GPU processes, attributed to a pseudo engine.
        last = during[-1]
        seen = pids(last)
        engines = {PSEUDO_ENGINE: EngineLocator.of(pids=[child.pid])}
        attributed = attribute(last, engines)
        mine = [(g.index, p) for g in attributed.gpus for p in g.processes if p.pid == child.pid]
        if mine:
            idx, proc = mine[0]
            mem = "n/a" if proc.used_bytes is None else f"{proc.used_bytes / GiB:.2f} GiB"
            report("PASS", "workload PID among GPU processes", f"PID {child.pid} on GPU {idx}, {mem}, {proc.name!r}")
            ok = all(p.engine == PSEUDO_ENGINE for _, p in mine)
            report(
                "PASS" if ok else "FAIL",
                "workload attributed to the pseudo engine",
                f"engine={[p.engine for _, p in mine]} container={[p.container for _, p in mine]}",
            )
        else:
            new = sorted(seen - pids(before))
            if new:
                detail = (
                    f"NVML lists new PID(s) {new} but the workload is PID {child.pid} here: PID namespaces "
                    "differ (a container without --pid=host); attribution by PID needs the host namespace"
                )
            elif not seen:
                detail = (
                    "NVML listed no GPU processes at all: usual inside a container without --pid=host "
                    "(the driver hides processes of other PID namespaces)"
                )
            else:
                detail = f"PID {child.pid} not among {sorted(seen)}"
            report("WARN" if new or not seen else "FAIL", "workload PID among GPU processes", detail)
            report("WARN", "workload attributed to the pseudo engine", "not checkable: PID not visible")

        # 5. Energy: the counter against 10 Hz power integration, at the workload's steady load.
        if args.energy_seconds > 0:
            dev = during[-1].gpus[args.device] if args.device < len(during[-1].gpus) else None
            source = dev.energy_source if dev is not None else ""
            report("PASS" if source == "counter" else "WARN", "NvmlSource energy source",
                   f"{source or 'n/a'} (energy_mj={dev.energy_mj if dev is not None else None})")
            print(f"energy check: {args.energy_seconds:g} s at 10 Hz on GPU {args.device} ...", flush=True)
            nv = poller.source.nvml_module()
            status, detail = energy_check(nv, nv.nvmlDeviceGetHandleByIndex(args.device), args.energy_seconds)
            report(status, "energy counter vs 10 Hz power integration", detail)
            if child.poll() is not None:
                report("WARN", "workload still running during the energy check", f"rc={child.returncode}")

        assert child.stdin is not None
        child.stdin.close()  # tells the workload to stop
        tail = child.stdout.read().strip()
        child.wait(120)
        print(f"workload finished: rc={child.returncode} {tail}", flush=True)
        time.sleep(2.0)
        after = show(poller, "after the workload", False)
        left = [p.pid for g in after.gpus for p in g.processes if p.pid == child.pid]
        back = max((u - base.get(i, u) for i, u in used(after).items()), default=0)
        released = not left and back < want
        report(
            "PASS" if released else "WARN",
            "memory released after exit",
            f"PID listed: {bool(left)}; used vs before: {back / GiB:+.2f} GiB",
        )
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(30)
        poller.close()
    return summary()


def summary() -> int:
    failed = [r for r in results if r[0] == "FAIL"]
    warned = [r for r in results if r[0] == "WARN"]
    print(f"== {len(results) - len(failed) - len(warned)} passed, {len(warned)} warnings, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
