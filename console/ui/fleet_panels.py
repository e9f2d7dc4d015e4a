"""The overview's plain-text panels under the engines table: the GPU rows (also the GPU screen's
columns), the host line and, with remote hosts, one line per host (``hosts_lines``: its state, why
it is stale, its CPU/RAM and GPUs) with the fleet's totals. Pure rendering of snapshots to Rich text.
"""

from __future__ import annotations

import functools

from rich.text import Text

from console.model import EngineSnapshot, FleetSnapshot, GpuFleet, GpuSnapshot, HostSnapshot, HostView
from console.ui import format as fmt


@functools.lru_cache(maxsize=1024)
def short_name(name: str) -> str:
    """An engine's name as screens show it: without the scheme of an attached engine's URL, and
    inert (a remote host's engine names are outside text). Credentials are masked before the scheme
    goes: without it ``admin:pw@host`` no longer reads as a URL.

    Kept per name (a bounded LRU; the result depends on the name only): an attached engine's name
    holds "://", so the scrubber's URL rules run on it, 15-35 us a call on the development machine,
    and the overview asks for every name several times a second (docs/performance.md)."""
    return fmt.shown(name).replace("http://", "").replace("https://", "")


GPU_COLUMNS: tuple[tuple[str, str, int, str], ...] = (
    ("gpu", "GPU", 12, "gpu_util"),
    ("util", "util", 4, "gpu_util"),
    ("hbm", "HBM used/total", 19, "gpu_mem"),
    ("temp", "temp", 5, "gpu_temp"),
    ("power", "power", 10, "gpu_power"),
    ("engine", "engine", 14, "gpu_engine"),
    ("energy", "kJ/60s", 8, "gpu_energy"),  # the window in the header: the figure falls as load does
)


GPU_ENGINE_W = next(w for key, _, w, _ in GPU_COLUMNS if key == "engine")
GPU_NAME_W = 10  # the GPU column: "7 H100 80GB…", its index and model


def gpu_cells(g: GpuSnapshot, engine_of: dict[int, str]) -> list[Text]:
    name = g.name.replace("NVIDIA ", "").replace("Simulated ", "")  # the panel title says "simulated"
    label = Text(f"{g.index} ")
    label.append(fmt.fit_words(fmt.shown(name), GPU_NAME_W), style="dim")
    power = fmt.na()
    if g.power_w is not None:
        power = Text(f"{g.power_w:.0f}" + (f"/{g.power_limit_w:.0f}" if g.power_limit_w else "") + " W")
    engines = g.engines or ((engine_of[g.index],) if g.index in engine_of else ())
    # short_name's names are inert already.
    owner = Text(fmt.fit_name(", ".join(short_name(x) for x in engines), GPU_ENGINE_W)) if engines else Text(
        "-", style="dim")
    temp = fmt.unit(g.temperature_c, "°C")
    if g.temperature_c is not None and g.temperature_c >= 85:
        temp.stylize(fmt.CRIT)
    return [label, fmt.unit(g.util_percent, "%"), fmt.hbm(g.mem_used_bytes, g.mem_total_bytes), temp, power, owner,
            gpu_energy(g)]


def gpu_energy(g: GpuSnapshot) -> Text:
    """Energy over the last 60 s (the window), from the counter; '≈' where power was integrated."""
    v = g.energy
    if v is None or v.joules is None:
        return fmt.na()
    mark = "≈" if v.source == "integrated" else ""
    return Text(f"{mark}{v.joules / 1000:.1f} kJ")


# Which GPU columns go first when the width runs out (GPU and util stay): energy, power, temp,
# engine, HBM.
GPU_DROP_ORDER = ("energy", "power", "temp", "engine", "hbm")


def gpu_columns_for(width: int) -> list[int]:
    """Indices of the GPU columns that fit ``width``: narrow terminals drop columns, rows never wrap."""
    keep = list(range(len(GPU_COLUMNS)))
    for key in GPU_DROP_ORDER:
        if sum(GPU_COLUMNS[i][2] + 2 for i in keep) <= width:
            break
        keep.remove(next(i for i in keep if GPU_COLUMNS[i][0] == key))
    return keep


def gpu_text_table(rows: list[list[Text]], width: int = 10_000) -> Text:
    """GPU rows as fixed-width text with a header (styles kept), only the columns that fit ``width``."""
    cols = gpu_columns_for(width)
    out = Text()
    for i in cols:
        _key, label, w, _metric = GPU_COLUMNS[i]
        out.append(" " + label.ljust(w) + " ", style="bold")
    for cells in rows:
        out.append("\n")
        for i in cols:
            t = cells[i].copy()
            t.truncate(GPU_COLUMNS[i][2], overflow="ellipsis", pad=True)
            out.append(" ")
            out.append_text(t)
            out.append(" ")
    return out


def gpu_title(gf: GpuFleet, now: float) -> Text:
    t = Text("GPUs", style="bold")
    if gf.source == "simulated":
        t.append(" (simulated)", style=fmt.SIM)
    if gf.driver_version:
        t.append(f" · driver {gf.driver_version}", style="dim")
    if gf.unavailable_reason:
        t.append(f" · {fmt.shown(gf.unavailable_reason)}", style=fmt.WARN)
    st = "" if gf.unavailable_reason else fmt.staleness(gf.freshness, now)
    if st:
        t.append(f" · {st}", style=fmt.WARN)
    if not gf.gpus and not gf.unavailable_reason and not st:
        t.append(" · none found", style="dim")
    return t


def host_line(h: HostSnapshot | None, now: float) -> Text:
    if h is None:
        return Text("host: no data yet", style="dim")
    t = Text("host ", style="bold")
    t.append(fmt.shown(h.hostname) or "?")
    if h.cpu_percent is not None:
        t.append(f" · CPU {h.cpu_percent:.0f}%" + (f" of {h.cpu_count} cores" if h.cpu_count else ""))
    if h.mem_used_bytes is not None:
        t.append(" · RAM ")
        t.append_text(fmt.hbm(h.mem_used_bytes, h.mem_total_bytes))
    if h.load_avg:
        t.append(" · load " + " ".join(f"{x:.1f}" for x in h.load_avg))
    st = fmt.staleness(h.freshness, now)
    if st:
        t.append(f" · {st}", style=fmt.WARN)
    return t


def ask_backfill(source: object, e: EngineSnapshot) -> None:
    """A chart of an engine read from Prometheus is opening: ask its source for the older history
    (``query_range``, in the source's own thread; it returns at once, and only the first ask works)."""
    request = getattr(source, "request_backfill", None) if e.source else None
    if request is not None:
        request(e.name)


def shows_hosts(fleet: FleetSnapshot) -> bool:
    """The host column shows: with a remote host or source in view (even a single one: its name is
    where the engines are read from), or engines of more than one host."""
    return bool(fleet.hosts) or len({e.host for e in fleet.engines}) > 1


def _host_state(h: HostView, now: float) -> Text:
    # A remote host's name, destination and reason (its stderr) are outside text: inert, one line.
    t = Text(f"{fmt.shown(h.name)} ", style="bold")
    if h.last_doc_at is None and h.freshness.reason == "connecting":
        return t.append(f"connecting… · {fmt.shown(h.destination)}", style="dim")
    if h.freshness.stale:
        t.append("STALE ", style=fmt.CRIT)
        t.append(fmt.shown(h.freshness.reason) or "no data", style=fmt.WARN)
        age = h.doc_age(now)
        if age is not None:
            t.append(f" · last report {age:.0f} s ago", style="dim")
        return t
    t.append("✓ ", style="green")
    t.append(f"{fmt.plural(h.engines, 'engine')}", style="")
    s = h.host
    if s is not None:
        if s.cpu_percent is not None:
            t.append(f" · CPU {s.cpu_percent:.0f}%")
        if s.mem_used_bytes is not None:
            t.append(" · RAM ")
            t.append_text(fmt.hbm(s.mem_used_bytes, s.mem_total_bytes))
    if h.gpus.gpus:
        t.append(f" · {fmt.plural(len(h.gpus.gpus), 'GPU')}" + (" (simulated)" if h.gpus.source == "simulated" else ""))
    t.append(f" · {fmt.shown(h.destination)}", style="dim")
    return t


def hosts_lines(fleet: FleetSnapshot, now: float, width: int) -> Text:
    """The fleet's totals across hosts, then one line per remote host (truncated to ``width``)."""
    engines = fleet.engines
    live = [e for e in engines if e.live and e.total is not None]
    gen = sum(e.total.generation_tps.now or 0.0 for e in live if e.total is not None)
    running = sum(e.total.running or 0.0 for e in live if e.total is not None)
    n_hosts = len(fleet.hosts) + (1 if any(not e.host for e in engines) else 0)
    top = Text("fleet ", style="bold")
    top.append(f"{fmt.plural(len(engines), 'engine')} on {fmt.plural(n_hosts, 'host')} · {len(live)} live · "
               f"{running:.0f} running · {gen:.0f} gen tok/s")
    stale = sum(1 for h in fleet.hosts if h.freshness.stale)
    if stale:
        top.append(f" · {stale} stale", style=fmt.CRIT)
    lines = [top, *(_host_state(h, now) for h in fleet.hosts)]
    out = Text()
    for i, line in enumerate(lines):
        line.truncate(max(10, width), overflow="ellipsis")
        if i:
            out.append("\n")
        out.append_text(line)
    return out


def stale_host_lines(fleet: FleetSnapshot, now: float, width: int) -> Text:
    """One attention line per stale remote host: how many of its engines are not live, and why
    (each cut to ``width``; the host's own line below has the rest)."""
    out = Text()
    for h in fleet.hosts:
        if not h.freshness.stale:
            continue
        n = sum(1 for e in fleet.engines if e.host == h.name)
        line = Text("✖ ", style=fmt.CRIT)
        line.append(f"host {fmt.shown(h.name)}", style="bold")
        since = h.freshness.stale_since
        ago = f" {max(0, now - since):.0f} s" if since is not None else ""
        line.append(f" stale{ago}: {fmt.plural(n, 'engine')} not live · {fmt.shown(h.freshness.reason) or 'no data'}")
        line.truncate(max(10, width), overflow="ellipsis")
        if out.plain:
            out.append("\n")
        out.append_text(line)
    return out
