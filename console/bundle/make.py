"""One bundle, put together: every part collected at once on worker threads (each with its own
deadline), then every file scrubbed into the archive with the manifest and the summary.

The caller says what it has: the headless command a fresh snapshot, the console its latest one,
its in-memory log tails and a screenshot. What cannot be collected is named in the manifest's
``collectors`` and in the summary, and the rest of the bundle is still written.
"""

from __future__ import annotations

import datetime as dt
import re
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console import __version__
from console.bundle import engines as engine_probes
from console.bundle import launch_facts as lf
from console.bundle.archive import Bundle
from console.bundle.gpu_facts import gpu_facts
from console.bundle.history_part import FILE as HISTORY_FILE
from console.bundle.history_part import HistoryPart, history_part
from console.bundle.host_facts import host_facts
from console.bundle.recorded import FILE as RECORDING_FILE
from console.bundle.recorded import RecordingPart, window_recording
from console.bundle.summary import EngineSummary, SummaryInput, summary_markdown
from console.bundle.window import Window
from console.config import EngineInstance
from console.model import EngineSnapshot, FleetSnapshot
from console.secrets import Scrubber, instance_secrets, scrub
from console.status_doc import gpus_doc, status_doc
from console.telemetry.metrics.history import History

LOG_LINES = 500
ARCHIVE_EXT = ".tar.gz"
LogSource = Callable[[str, int], "list[str] | None"]


@dataclass(frozen=True, slots=True)
class BundleRequest:
    instances: Sequence[EngineInstance]
    window: Window
    dest: Path  # the archive's path
    # The latest snapshot the caller has, or how to get it (called once, on a worker thread, while
    # the rest is collected: a headless command's fresh snapshot takes a round of probes).
    snapshot: FleetSnapshot | Callable[[], FleetSnapshot | None] | None = None
    recording_dir: Path | None = None  # where a recorder writes (None: the default folder)
    screenshot_svg: str | None = None
    screenshot_note: str = "headless `enginedeck bundle` has no screen (the console's bundle key adds one)"
    log_lines: int = LOG_LINES
    logs: LogSource | None = None  # the console's in-memory tails (already scrubbed); None: read them
    xid_errors: Mapping[int, Sequence[int]] | None = None  # per GPU index, seen by the console's reader
    snapshots: Sequence[FleetSnapshot] = ()  # what the caller kept, written when no recording covers the window
    history: History | None = None  # the console's chart history: history.csv (the window's rows)
    nvml: Any = None  # the pynvml module (tests pass a fake)
    source: str = "enginedeck bundle"


@dataclass(frozen=True, slots=True)
class BundleResult:
    path: Path
    bytes: int
    seconds: float
    manifest: Mapping[str, Any] = field(default_factory=dict)


def default_name(host: str, now: float) -> str:
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"enginedeck-bundle-{safe_name(host)}-{stamp}{ARCHIVE_EXT}"


def free_path(path: Path) -> Path:
    """``path``, or ``NAME-2.tar.gz``, ``NAME-3.tar.gz``... when it exists (two bundles in a second)."""
    stem, n = path.name.removesuffix(ARCHIVE_EXT), 2
    while path.exists():
        path, n = path.with_name(f"{stem}-{n}{ARCHIVE_EXT}"), n + 1
    return path


def safe_name(name: str) -> str:
    """A file name for anything (an engine given as PROFILE@URL): secrets out, then [A-Za-z0-9._-]."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", scrub(name)).strip("_") or "engine"


def _dirs(instances: Sequence[EngineInstance]) -> dict[str, str]:
    out: dict[str, str] = {}
    for inst in instances:
        base = name = safe_name(inst.name)
        n = 2
        while name in out.values():
            name, n = f"{base}-{n}", n + 1
        out[inst.name] = name
    return out


def _text(body: bytes) -> str:
    return body.decode("utf-8", "replace")


def _figures(e: EngineSnapshot) -> str:
    m = e.total
    if m is None:
        return ""
    parts = []
    for label, v in (("running", m.running), ("waiting", m.waiting)):
        if v is not None:
            parts.append(f"{label} {v:.0f}")
    if m.kv_usage is not None:
        parts.append(f"KV {100 * m.kv_usage:.0f}%")
    if m.generation_tps.now is not None:
        parts.append(f"gen {m.generation_tps.now:.0f} tok/s")
    if m.ttft.p99 is not None:
        parts.append(f"TTFT p99 {1000 * m.ttft.p99:.0f} ms")
    return ", ".join(parts)


class _Run:
    """One bundle being made."""

    def __init__(self, req: BundleRequest) -> None:
        self.req = req
        secrets = [s for inst in req.instances for s in instance_secrets(inst)]
        self.bundle = Bundle(Scrubber(secrets))
        self.dirs = _dirs(req.instances)
        self.summaries: dict[str, dict[str, Any]] = {inst.name: {} for inst in req.instances}
        self.failures: list[str] = []
        self._snapshot: Future[FleetSnapshot | None] | None = None

    def snapshot(self) -> FleetSnapshot | None:
        assert self._snapshot is not None
        return self._snapshot.result()

    def fallback(self) -> Sequence[FleetSnapshot]:
        """What the recording holds when no recording covers the window."""
        if self.req.snapshots:
            return self.req.snapshots
        snap = self.snapshot()
        return (snap,) if snap is not None else ()

    def fail(self, part: str, reason: str) -> None:
        self.failures.append(f"{part}: {reason}")

    # -- parts ------------------------------------------------------------------------------

    def engines(self, answers: Mapping[str, engine_probes.EngineAnswers]) -> None:
        for inst in self.req.instances:
            d = f"engines/{self.dirs[inst.name]}"
            a = answers[inst.name]
            probes: dict[str, Any] = {}
            for label, ep in (("metrics", a.metrics), ("models", a.models), ("version", a.version)):
                if ep is None:
                    probes[label] = {"path": None, "note": f"the {inst.profile.name} profile has no version path"}
                    continue
                f = ep.fetched
                ext = "json" if "json" in f.content_type or f.body[:1] in (b"{", b"[") else "txt"
                entry: dict[str, Any] = {"path": ep.path, "status": f.status, "elapsed_s": round(f.elapsed, 4),
                                         "content_type": f.content_type or None, "error": f.error or None}  # fmt: skip
                if f.body:
                    entry["file"] = f"{d}/{label}.{ext}"
                    self.bundle.add_text(entry["file"], _text(f.body))
                if not f.ok:
                    self.fail(f"{inst.name} {ep.path}", f.reason())
                probes[label] = entry
            self.bundle.add_json(f"{d}/probes.json", {"engine": inst.name, "profile": inst.profile.name,
                                                      "url": inst.url, "answers": probes})  # fmt: skip

    def launches(self) -> None:
        for inst in self.req.instances:
            path = f"engines/{self.dirs[inst.name]}/launch.json"
            facts = lf.launch_facts(inst)
            self._facts(path, facts)
            if isinstance(facts.data, dict):
                self.summaries[inst.name]["launch"] = facts.data.get("command")
            elif facts.note:
                self.summaries[inst.name].setdefault("notes", []).append(facts.note)

    def _facts(self, path: str, facts: lf.Facts) -> None:
        if facts.data is None:
            self.bundle.add_json(path, {"note": facts.note})
            return
        for kind, n in (facts.masked or {}).items():
            self.bundle.count(path, kind, n)
        self.bundle.add_json(path, facts.data)

    def logs_and_inspect(self, client: Any, docker_error: str) -> None:
        n = self.req.log_lines
        for inst in self.req.instances:
            d = f"engines/{self.dirs[inst.name]}"
            lines: list[str] | None = self.req.logs(inst.name, n) if self.req.logs is not None else None
            if lines is None:
                facts = lf.log_tail(inst, n, client)
                if facts.data is None and inst.config.managed == "docker" and docker_error:
                    facts = lf.Facts(note=f"Docker: {docker_error}")
                lines = facts.data
                if lines is None:
                    self.bundle.add_text(f"{d}/log.txt", f"(no log: {facts.note})\n")
                    self.summaries[inst.name]["log_note"] = facts.note
            if lines is not None:
                self.bundle.add_text(f"{d}/log.txt", "\n".join(lines) + ("\n" if lines else ""))
                # The summary shows the scrubbed tail, as written.
                self.summaries[inst.name]["log"] = tuple(self.bundle.files[f"{d}/log.txt"].decode().splitlines())
                self.summaries[inst.name]["log_path"] = f"{d}/log.txt"
            if inst.config.managed == "docker":
                facts = (lf.container_facts(inst, client) if client is not None
                         else lf.Facts(note=f"Docker: {docker_error}"))  # fmt: skip
                self._facts(f"{d}/inspect.json", facts)
            elif inst.config.managed == "process":
                self._facts(f"{d}/process.json", lf.process_facts(inst))

    def audit(self) -> None:
        from console.lifecycle.audit import AuditLog

        start = self.req.window.start
        rows = []
        for e in AuditLog().read():
            try:
                t = dt.datetime.fromisoformat(e.time.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
            if t >= start:
                rows.append({"time": e.time, "user": e.user, "action": e.action, "target": e.target,
                             "result": e.result, "detail": e.detail})  # fmt: skip
        self.bundle.add_jsonl("audit.jsonl", rows)

    # -- the whole ----------------------------------------------------------------------------

    def make(self) -> BundleResult:
        req, b = self.req, self.bundle
        started = time.perf_counter()
        created = time.time()
        wants_docker = any(inst.config.managed == "docker" for inst in req.instances)
        with ThreadPoolExecutor(max_workers=6, thread_name_prefix="enginedeck-bundle") as pool:
            t0 = time.perf_counter()
            given = req.snapshot
            self._snapshot = pool.submit(given) if callable(given) else pool.submit(lambda: given)
            probes = pool.submit(engine_probes.probe_engines, req.instances)
            gpu = pool.submit(gpu_facts, req.xid_errors, nv=req.nvml)
            host = pool.submit(host_facts)
            docker: Future[tuple[Any, str]] | None = pool.submit(lf.docker_client) if wants_docker else None
            recording = pool.submit(window_recording, req.recording_dir, req.window, b.scrubber, self.fallback)
            t = time.perf_counter()
            self.launches()
            b.collected("launch commands", t)
            client, docker_error = docker.result() if docker is not None else (None, "")
            t = time.perf_counter()
            self.logs_and_inspect(client, docker_error)
            b.collected("logs and inspect data", t, f"Docker: {docker_error}" if docker_error else "",
                        ok=not docker_error)  # fmt: skip
            if docker_error:
                self.fail("Docker", docker_error)
            if client is not None:
                try:
                    version = client.version()
                    docker_version = f"{version.get('Version')} (API {version.get('ApiVersion')})"
                except Exception as exc:
                    docker_version = f"n/a ({type(exc).__name__})"
                finally:
                    client.close()
            else:
                docker_version = None
            self.audit()
            answers = probes.result()
            b.collected("engine endpoints", t0)
            self.engines(answers)
            gpus = gpu.result()
            b.collected("NVML", t0, "" if gpus.get("available") else str(gpus.get("reason")),
                        ok=bool(gpus.get("available")))  # fmt: skip
            env = host.result()
            if docker_version:
                env["docker"] = docker_version
            rec: RecordingPart = recording.result()
            b.collected("recording", t0, rec.note, ok=rec.covers)
            hist: HistoryPart | None = None
            if req.history is not None:
                t = time.perf_counter()
                hist = history_part(req.history, req.window)
                b.add_text(HISTORY_FILE, hist.text)
                b.collected("history", t, hist.note(), ok=hist.span is not None)
            snap = self.snapshot()
            b.collected("snapshot", t0, "" if snap is not None else "none", ok=snap is not None)
        b.add_json("gpu/nvml.json", gpus)
        simulated: list[str] = []
        if snap is not None:
            b.add_json("status.json", status_doc(snap))
            if snap.gpus.source == "simulated":
                b.add_json("gpu/simulated.json", gpus_doc(snap.gpus, snap.engines))
                simulated.append(f"GPUs shown by the console: {len(snap.gpus.gpus)} simulated (gpu/simulated.json)")
        b.add_json("host.json", env)
        if rec.data is not None:
            b.add_binary(RECORDING_FILE, rec.data)
            for kind, n in rec.masked.items():
                b.count(RECORDING_FILE, kind, n)
        if req.screenshot_svg is not None:
            b.add_text("screen.svg", req.screenshot_svg)
        host_name = str(env.get("hostname") or socket.gethostname())
        head = {
            "enginedeck_version": __version__,
            "created_at": round(created, 3),
            "created_by": req.source,
            "host": host_name,
            "window": req.window.doc(),
            "engines": [
                {"name": i.name, "profile": i.profile.name, "dir": f"engines/{self.dirs[i.name]}"}
                for i in req.instances
            ],
            "recording": rec.doc(),
            "history": hist.doc() if hist is not None else None,
            "screenshot": {"path": "screen.svg" if req.screenshot_svg is not None else None,
                           "note": None if req.screenshot_svg is not None else req.screenshot_note},
            "summary": "README.md",
        }
        summary = self._summary_input(snap, host_name, created, env, gpus, rec, simulated,
                                      hist.note() if hist is not None else "")
        b.add_text("README.md", summary_markdown(summary))
        b.collected("total before writing", started)
        root = (default_name(host_name, created) if str(req.dest) == "-" else req.dest.name).removesuffix(ARCHIVE_EXT)
        size = b.write(req.dest, head, root=root)
        return BundleResult(req.dest, size, time.perf_counter() - started, b.manifest(head))

    def _summary_input(self, snap: FleetSnapshot | None, host: str, created: float, env: Mapping[str, Any],
                       gpus: Mapping[str, Any], rec: RecordingPart, simulated: Sequence[str],
                       history_note: str = "") -> SummaryInput:
        snaps = {e.name: e for e in (snap.engines if snap is not None else ())}
        engines = []
        for inst in self.req.instances:
            s = self.summaries[inst.name]
            e = snaps.get(inst.name)
            engines.append(EngineSummary(
                name=inst.name, profile=inst.profile.name, url=inst.url,
                phase=e.phase.value if e else "unknown", detail=e.health_detail if e else "",
                version=e.identity.version if e else None, models=e.identity.models if e else (),
                figures=_figures(e) if e else "", launch=s.get("launch"), log=s.get("log", ()),
                log_path=s.get("log_path", ""), log_note=s.get("log_note", ""), notes=tuple(s.get("notes", ())),
            ))  # fmt: skip
        alerts = [(a.engine, a.rule, a.severity, a.state.value, a.summary)
                  for a in (snap.alerts if snap is not None else ()) if a.state.value in ("pending", "firing")]
        return SummaryInput(host=host, created_at=created, window=self.req.window, archive_name=self.req.dest.name,
                            recording_note=rec.note, environment=env, gpus=gpus, engines=engines,
                            simulated_gpus=simulated, failures=self.failures, alerts=alerts,
                            history_note=history_note)  # fmt: skip


def make_bundle(req: BundleRequest) -> BundleResult:
    """Blocking (seconds): call it from a worker thread in a UI."""
    return _Run(req).make()
