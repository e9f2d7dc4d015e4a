"""Host facts for a bug report: kernel, distribution, CPU, memory, Python, and the versions of the
packages an LLM-serving bug report asks for (those installed where enginedeck runs; an engine in a
container has its own, in its ``/version`` answer and its image)."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from console import __version__

# What the vLLM/SGLang/TRT-LLM templates ask for, plus what enginedeck itself runs on.
PACKAGES = (
    *("vllm", "sglang", "tensorrt_llm", "tensorrt", "torch", "transformers", "flashinfer-python", "triton"),
    *("xformers", "text-generation", "nvidia-ml-py", "textual", "httpx", "docker", "psutil"),
)


def os_release(path: Path = Path("/etc/os-release")) -> str | None:
    try:
        fields = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    except OSError:
        return None
    return fields.get("PRETTY_NAME", "").strip('"') or None


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def host_facts() -> dict[str, Any]:
    mem = psutil.virtual_memory()
    uname = platform.uname()
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "hostname": uname.node,
        "os": os_release() or f"{uname.system} {uname.release}",
        "kernel": f"{uname.system} {uname.release} {uname.version}",
        "machine": uname.machine,
        "cpu_model": cpu_model(),
        "cpu_count_logical": psutil.cpu_count(logical=True),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "mem_total_bytes": mem.total,
        "mem_available_bytes": mem.available,
        "load_avg": load,
        "boot_time": psutil.boot_time(),
        "python": sys.version.split()[0],
        "python_executable": Path(sys.executable).name,
        "enginedeck": __version__,
        "packages": package_versions(),
    }
