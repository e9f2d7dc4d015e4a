"""Energy per GPU and per engine over a window: tokens per joule, joules per 1k output tokens.

The primitive is each GPU's cumulative energy (``GpuSnapshot.energy_mj``): NVML's total-energy
counter where the device has one, else power integrated at 10 Hz (``nvml.PowerIntegrator``), or
the simulated GPUs' own counter. ΔE over a window needs no power sampling, which covers only part
of the runtime on A100/H100 ("Part-time Power Measurements", SC24).

``EnergyMeter.update(snapshot)`` is called once per published snapshot (UI-free, no I/O):

* **Reset-safe.** The counter restarts when the driver reloads, and a device may be replaced (a
  new UUID). A drop counts that one interval as its sampled power times the interval (0 without a
  power reading), never as a negative or a huge step; a new UUID starts a new baseline.
* **Per engine.** Each interval's ΔE of a GPU goes to the engines on it. On a GPU the engine has
  alone (every visible process on it is the engine's) the share is 1: "exact". On a shared GPU
  (other engines or unattributed processes), on MIG (the counter covers the whole device), or where
  no process is visible (no way to tell it is alone), the GPU's energy is split by the processes'
  memory share (equally where memory is unknown) and the result is an "estimate", always labelled,
  with the reason. The shares of one GPU sum to 1 over its engines and its unattributed processes.
* **Window.** Energy and tokens come from the same frames, so tokens per joule is exactly Δtokens /
  ΔE over the window (60 s; while the history is shorter, what there is). Token counters use the
  same new-baseline rule on a drop as ``windows.py``.
* **One run.** An engine's window never reaches back past its current run: once it stops being
  live (stopped, unreachable, restarting) its token counters take a new baseline and its window
  starts again where it is live again, so a figure from before a restart is never shown as current
  (while it is not live it has no windowed figure at all).
* **Idle against busy.** An interval is busy for an engine when it had running requests or its
  generated-token counter moved (for a GPU: utilisation above 0); the mean power of each kind over
  the whole history held (5 min) gives ``idle_w`` and ``busy_w``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from console.model import EnergyView, EngineSnapshot, FleetSnapshot, GpuSnapshot

__all__ = ["ENERGY_WINDOW_S", "EnergyMeter", "gpu_shares"]

ENERGY_WINDOW_S = 60.0
HISTORY_S = 300.0


@dataclass(slots=True)
class _GpuAcc:
    uuid: str
    last_mj: float
    total_j: float = 0.0
    resets: int = 0


@dataclass(slots=True)
class _TokAcc:
    last_gen: float | None = None
    last_prompt: float | None = None
    # When the engine's current run was first seen live (None: not live now, no run to show).
    run_since: float | None = None
    gen: float = 0.0
    prompt: float = 0.0


@dataclass(slots=True)
class _Cum:
    """Cumulative figures of one GPU or engine at one frame."""

    joules: float = 0.0
    gen: float = 0.0
    prompt: float = 0.0
    busy_j: float = 0.0
    busy_t: float = 0.0
    idle_j: float = 0.0
    idle_t: float = 0.0


@dataclass(slots=True)
class _Frame:
    t: float
    gpus: dict[int, _Cum] = field(default_factory=dict)
    engines: dict[str, _Cum] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Share:
    fraction: float
    exact: bool
    reason: str


_Pick = Callable[[_Frame], _Cum | None]


def gpu_shares(g: GpuSnapshot, claimants: Iterable[str]) -> dict[str, _Share]:
    """Each engine's share of one GPU's energy, and whether that share is exact.

    ``claimants``: engines that hold the GPU (attributed processes or assignment)."""
    names = list(dict.fromkeys([*g.engines, *claimants]))
    if not names:
        return {}
    procs = g.processes
    others = [p for p in procs if p.engine is None]
    if g.mig:
        why = "MIG: the energy counter covers the whole GPU; split by memory share"
    elif len(names) > 1:
        why = f"GPU {g.index} is shared ({', '.join(names)}); split by memory share"
    elif others:
        why = f"GPU {g.index} also runs processes of no engine; split by memory share"
    elif not procs:
        why = "no GPU process visible: assumed to be the engine's alone"
    else:
        return {names[0]: _Share(1.0, True, "")}
    mem: dict[str, int] = {}
    unknown = False
    for p in procs:
        if p.used_bytes is None:
            unknown = True
            continue
        key = p.engine or ""
        mem[key] = mem.get(key, 0) + p.used_bytes
    total = sum(mem.values())
    if unknown or total <= 0 or any(mem.get(n, 0) <= 0 for n in names):
        parts = len(names) + (1 if others else 0)
        return {n: _Share(1.0 / parts, False, why) for n in names}
    return {n: _Share(mem[n] / total, False, why) for n in names}


def _delta(now: _Cum, base: _Cum) -> _Cum:
    return _Cum(*(a - b for a, b in zip(_astuple(now), _astuple(base), strict=True)))


def _astuple(c: _Cum) -> tuple[float, ...]:
    return (c.joules, c.gen, c.prompt, c.busy_j, c.busy_t, c.idle_j, c.idle_t)


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


class EnergyMeter:
    """Keeps the frames and returns snapshots with ``energy`` filled in on engines and GPUs."""

    def __init__(self, window_s: float = ENERGY_WINDOW_S, history_s: float = HISTORY_S) -> None:
        self.window_s = window_s
        self.history_s = max(history_s, window_s)
        self._gpus: dict[int, _GpuAcc] = {}
        self._last_t: dict[int, float] = {}  # GPU index -> taken_at of its last reading
        self._tokens: dict[str, _TokAcc] = {}
        self._frames: deque[_Frame] = deque()

    def update(self, snap: FleetSnapshot) -> FleetSnapshot:
        t = snap.taken_at
        prev = self._frames[-1] if self._frames else None
        if prev is not None and t <= prev.t:
            return self._apply(snap)
        dt = 0.0 if prev is None else t - prev.t
        # Cumulative figures carry over, so a GPU or engine missing from one snapshot is no drop.
        frame = _Frame(t)
        if prev is not None:
            frame.gpus = {i: replace(c) for i, c in prev.gpus.items()}
            frame.engines = {n: replace(c) for n, c in prev.engines.items()}
        gpu_de: dict[int, float] = {}
        for g in snap.gpus.gpus:
            de = self._gpu_delta(g)
            if de is None:
                continue
            gpu_de[g.index] = de
            cum = frame.gpus.get(g.index) or _Cum()
            cum.joules += de
            if dt > 0:
                if (g.util_percent or 0.0) > 0:
                    cum.busy_j, cum.busy_t = cum.busy_j + de, cum.busy_t + dt
                else:
                    cum.idle_j, cum.idle_t = cum.idle_j + de, cum.idle_t + dt
            frame.gpus[g.index] = cum
        shares = self._shares(snap)
        for e in snap.engines:
            dgen, dprompt = self._token_delta(e, t)  # every frame, so a gap is not counted later
            mine = shares.get(e.name)
            if not mine or not any(i in gpu_de for i in mine):
                continue
            de = sum(s.fraction * gpu_de.get(i, 0.0) for i, s in mine.items())
            cum = frame.engines.get(e.name) or _Cum()
            cum.joules += de
            cum.gen += dgen
            cum.prompt += dprompt
            running = e.total.running if e.total is not None else None
            if dt > 0:
                if (running or 0.0) > 0 or dgen > 0:
                    cum.busy_j, cum.busy_t = cum.busy_j + de, cum.busy_t + dt
                else:
                    cum.idle_j, cum.idle_t = cum.idle_j + de, cum.idle_t + dt
            frame.engines[e.name] = cum
        self._frames.append(frame)
        while len(self._frames) > 2 and self._frames[1].t <= t - self.history_s:
            self._frames.popleft()
        return self._apply(snap, shares)

    # -- accumulation ------------------------------------------------------------------------------

    def _gpu_delta(self, g: GpuSnapshot) -> float | None:
        """Joules since the previous reading of this GPU; None while it has no energy figure."""
        mj = g.energy_mj
        if mj is None:
            return None
        acc = self._gpus.get(g.index)
        if acc is None or acc.uuid != g.uuid:
            self._gpus[g.index] = _GpuAcc(g.uuid, mj)
            self._last_t[g.index] = g.taken_at
            return 0.0
        last_t = self._last_t.get(g.index, g.taken_at)
        if g.taken_at <= last_t:  # the same reading again (a stale fleet)
            return 0.0
        de = (mj - acc.last_mj) / 1000.0
        if de < 0:  # the counter restarted (driver reload): that interval from the sampled power
            acc.resets += 1
            de = (g.power_w or 0.0) * (g.taken_at - last_t)
        acc.last_mj = mj
        acc.total_j += de
        self._last_t[g.index] = g.taken_at
        return de

    def _token_delta(self, e: EngineSnapshot, t: float) -> tuple[float, float]:
        acc = self._tokens.setdefault(e.name, _TokAcc())
        if not e.live or e.total is None:
            # Not live: what comes next may be a new run (a restart), counted from its own baseline.
            acc.last_gen = acc.last_prompt = acc.run_since = None
            return 0.0, 0.0
        gen = e.total.counters.get("generation_tokens")
        prompt = e.total.counters.get("prompt_tokens")
        if acc.run_since is None or (gen is not None and acc.last_gen is not None and gen < acc.last_gen):
            acc.run_since = t  # a run begins (or restarted between two reads: its counter dropped)
        dgen = _step(acc.last_gen, gen)
        dprompt = _step(acc.last_prompt, prompt)
        acc.last_gen = gen if gen is not None else acc.last_gen
        acc.last_prompt = prompt if prompt is not None else acc.last_prompt
        return dgen, dprompt

    @staticmethod
    def _shares(snap: FleetSnapshot) -> dict[str, dict[int, _Share]]:
        claim: dict[int, list[str]] = {}
        for e in snap.engines:
            for i in e.gpus:
                claim.setdefault(i, []).append(e.name)
        out: dict[str, dict[int, _Share]] = {}
        for g in snap.gpus.gpus:
            for name, share in gpu_shares(g, claim.get(g.index, ())).items():
                out.setdefault(name, {})[g.index] = share
        return out

    # -- results -----------------------------------------------------------------------------------

    def _base(self, since: float = -math.inf) -> _Frame | None:
        """The window's first frame: ``window_s`` before the newest, never before ``since``; None
        where no frame before the newest qualifies (no window to take a figure over)."""
        frames = self._frames
        if len(frames) < 2:
            return None
        target = frames[-1].t - self.window_s
        for i in range(len(frames) - 2, -1, -1):
            if frames[i].t < since:
                return frames[i + 1] if i + 1 < len(frames) - 1 else None
            if frames[i].t <= target:
                return frames[i]
        return frames[0]

    def _oldest(self, since: float) -> _Frame | None:
        """The first frame at or after ``since``."""
        return next((f for f in self._frames if f.t >= since), None)

    def _apply(self, snap: FleetSnapshot, shares: Mapping[str, dict[int, _Share]] | None = None) -> FleetSnapshot:
        if not self._frames:
            return snap
        shares = self._shares(snap) if shares is None else shares
        last, base, oldest = self._frames[-1], self._base(), self._frames[0]
        by_index = {g.index: g for g in snap.gpus.gpus}
        gpus = tuple(
            replace(g, energy=self._view(last.gpus[g.index], base, oldest, _gpu_pick(g.index),
                                         _source([g]), True, "", (g.index,), g.simulated, tokens=False))
            if g.index in last.gpus else g
            for g in snap.gpus.gpus
        )  # fmt: skip
        engines = []
        for e in snap.engines:
            mine = shares.get(e.name, {})
            cum = last.engines.get(e.name)
            if cum is None or not mine:
                engines.append(e if e.energy is None else replace(e, energy=None))
                continue
            held = [by_index[i] for i in sorted(mine) if i in by_index and by_index[i].energy_mj is not None]
            reasons = [s.reason for s in mine.values() if not s.exact]
            # The engine's figures cover its current run only (none while it is not live).
            since = self._run_since(e.name)
            view = self._view(cum, self._base(since), self._oldest(since), _engine_pick(e.name), _source(held),
                              not reasons, "; ".join(dict.fromkeys(reasons)), tuple(g.index for g in held),
                              bool(held) and all(g.simulated for g in held), tokens=True)  # fmt: skip
            engines.append(replace(e, energy=view))
        return replace(snap, engines=tuple(engines), gpus=replace(snap.gpus, gpus=gpus))

    def _run_since(self, name: str) -> float:
        acc = self._tokens.get(name)
        since = acc.run_since if acc is not None else None
        return math.inf if since is None else since

    def _view(self, cum: _Cum, base: _Frame | None, oldest: _Frame | None, pick: _Pick, source: str, exact: bool,
              reason: str, gpus: tuple[int, ...], simulated: bool, *, tokens: bool) -> EnergyView:  # fmt: skip
        view = EnergyView(total_joules=cum.joules, source=source, attribution="exact" if exact else "estimate",
                          reason=reason, gpus=gpus, simulated=simulated)  # fmt: skip
        start = pick(oldest) if oldest is not None else None
        if start is not None:
            span = _delta(cum, start)
            view = replace(view, idle_w=_ratio(span.idle_j, span.idle_t), busy_w=_ratio(span.busy_j, span.busy_t))
        at_base = pick(base) if base is not None else None
        if base is None or at_base is None:
            return view
        d = _delta(cum, at_base)
        window = self._frames[-1].t - base.t
        view = replace(view, joules=d.joules, window_s=window, power_w=_ratio(d.joules, window))
        if tokens and d.joules > 0:
            view = replace(view, tokens_per_joule=d.gen / d.joules,
                           total_tokens_per_joule=(d.gen + d.prompt) / d.joules,
                           joules_per_1k_output=1000.0 * d.joules / d.gen if d.gen > 0 else None)  # fmt: skip
        return view


def _gpu_pick(index: int) -> _Pick:
    def pick(f: _Frame) -> _Cum | None:
        return f.gpus.get(index)

    return pick


def _engine_pick(name: str) -> _Pick:
    def pick(f: _Frame) -> _Cum | None:
        return f.engines.get(name)

    return pick


def _step(last: float | None, cur: float | None) -> float:
    """A counter's increase since ``last``; a drop (restart) is a new baseline, counted as 0."""
    if last is None or cur is None or cur < last:
        return 0.0
    return cur - last


def _source(gpus: Iterable[GpuSnapshot]) -> str:
    kinds = {g.energy_source for g in gpus if g.energy_source}
    if not kinds:
        return ""
    return kinds.pop() if len(kinds) == 1 else "mixed"
