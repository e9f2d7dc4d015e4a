"""A real Prometheus server on 127.0.0.1 for the source tests and the backfill benchmark.

``PromServer.start(targets)`` writes a config (``scrape_interval`` 1 s, one static job ``sim``
with the simulators' host:port targets, an optional label per target), runs Debian's
``prometheus`` on a free port with a temporary ``--storage.tsdb.path``, waits until it answers
``/-/ready``, and ``stop()`` ends it by its PID and removes the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from console.ports import free_port
from tests import procgroup

PROMETHEUS = os.environ.get("ENGINEDECK_PROMETHEUS", "/usr/bin/prometheus")
HOW_PROMETHEUS = ("run scripts/provision/promtool.sh as root (make test does; it installs Debian's prometheus "
                  "package), or set ENGINEDECK_SKIP_PROMETHEUS=1 to skip the prometheus tests explicitly")


def skip_prometheus() -> bool:
    return os.environ.get("ENGINEDECK_SKIP_PROMETHEUS", "").strip().lower() in ("1", "true", "yes")


@dataclass
class PromServer:
    """One running server: its URL, its folder and its process."""

    url: str
    folder: Path
    proc: subprocess.Popen[bytes]
    targets: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, targets: Sequence[str], *, labels: Mapping[str, Mapping[str, str]] | None = None,
              interval: str = "1s", timeout: float = 30.0) -> PromServer:
        folder = Path(tempfile.mkdtemp(prefix="enginedeck-prom-"))
        groups = [{"targets": [t], "labels": dict((labels or {}).get(t, {}))} for t in targets]
        config = {"global": {"scrape_interval": interval, "scrape_timeout": interval},
                  "scrape_configs": [{"job_name": "sim", "static_configs": groups}]}
        (folder / "prometheus.yml").write_text(json.dumps(config))  # YAML is a superset of JSON
        port = free_port("127.0.0.1")
        log = open(folder / "prometheus.log", "wb")  # noqa: SIM115 - the child writes it until stop()
        proc = procgroup.popen([PROMETHEUS, f"--config.file={folder / 'prometheus.yml'}",
                                f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        srv = cls(url=f"http://127.0.0.1:{port}", folder=folder, proc=proc, targets=list(targets))
        try:
            srv._wait_ready(timeout)
        except BaseException:
            srv.stop()
            raise
        return srv

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.folder / "prometheus.log").read_text(errors="replace")[-600:]
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}: {tail}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                if r.status == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"prometheus at {self.url} not ready after {timeout:g} s")

    def wait_scraped(self, scrapes: int = 2, timeout: float = 30.0) -> None:
        """Until every target was scraped successfully ``scrapes`` times (``up`` over that many samples)."""
        deadline = time.monotonic() + timeout
        q = urllib.parse.quote(f"count_over_time(up[1m]) >= {scrapes} and up == 1")
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(
                    f"{self.url}/api/v1/query?query={q}", timeout=2) as r:
                if len(json.loads(r.read())["data"]["result"]) >= len(self.targets):
                    return
            time.sleep(0.2)
        raise RuntimeError(f"prometheus did not scrape all {len(self.targets)} targets {scrapes} times")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # its own PID (never by name)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.folder, ignore_errors=True)
