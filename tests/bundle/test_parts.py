"""The bundle's parts on their own: NVML facts (against a fake pynvml module, the only thing
replaced), container inspect masking, the summary's size limit, the window's duration, and the
command's answers to bad input."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

from console.bundle.gpu_facts import gpu_facts
from console.bundle.launch_facts import SECRET_ARGUMENT, SECRET_VARIABLE, mask_inspect
from console.bundle.summary import MAX_CHARS, EngineSummary, SummaryInput, summary_markdown
from console.bundle.window import Window, duration_text, parse_duration
from console.errors import UserError
from tests import procgroup
from tests.bundle.conftest import extract
from tests.telemetry.test_nvml import FakeDevice, FakeNvml, two_gpus

ENGINEDECK = [sys.executable, "-m", "console"]


class BundleNvml(FakeNvml):
    """The fake pynvml with the getters only a bug report reads."""

    reasons = int(pynvml.nvmlClocksThrottleReasonSwPowerCap) | int(pynvml.nvmlClocksThrottleReasonHwSlowdown)

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12080

    def nvmlDeviceGetPerformanceState(self, h: int) -> int:
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self.reasons if h == 0 else 0

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        return [1, 1]

    def nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(busId=f"00000000:{h + 0x18:02X}:00.0".encode())

    def nvmlDeviceGetTotalEccErrors(self, h: int, etype: int, counter: int) -> int:  # type: ignore[override]
        if (etype, counter) == (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC):
            return 3
        return 0


def test_nvml_facts_name_throttle_reasons_ecc_and_the_xids_the_console_saw() -> None:
    nv = BundleNvml(two_gpus().devices)
    facts = gpu_facts({0: (79,), 1: ()}, nv=nv)
    assert facts["available"] and facts["driver_version"] == "570.86.15" and facts["cuda_driver_version"] == "12.8"
    a, b = facts["devices"]
    assert a["throttle_reasons"] == ["sw_power_cap", "hw_slowdown"] and b["throttle_reasons"] == []
    assert a["pstate"] == "P0" and a["clocks_mhz"]["sm"] == 1755 and a["max_clocks_mhz"]["sm"] == 1980
    assert a["ecc_errors"]["aggregate_uncorrected"] == 3 and a["ecc_mode"] == {"current": 1, "pending": 1}
    assert a["pci_bus_id"] == "00000000:18:00.0" and a["uuid"] == "GPU-aaaa"
    assert [p["pid"] for p in a["processes"]] == [4242, 4343]
    assert a["xid_errors"] == [79] and b["xid_errors"] == []
    assert b["power_w"] is None  # the second device does not support it: null, the rest still read
    assert nv.calls["init"] == nv.calls["shutdown"] == 1


def test_nvml_facts_without_a_reader_say_xids_cannot_be_known() -> None:
    facts = gpu_facts(None, nv=BundleNvml([FakeDevice("NVIDIA L4", "GPU-cccc")]))
    assert facts["devices"][0]["xid_errors"] is None and "registered" in facts["xid_note"]


def test_nvml_facts_say_why_when_nvml_fails_or_hangs() -> None:
    failed = gpu_facts(nv=BundleNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    assert not failed["available"] and failed["reason"].startswith("NVML unavailable:")
    hung = BundleNvml([FakeDevice("NVIDIA L4", "GPU-cccc")])
    hung.hang.set()
    started = time.monotonic()
    try:
        facts = gpu_facts(nv=hung, timeout=0.5)
    finally:
        hung.release.set()
    assert time.monotonic() - started < 3
    assert facts == {"available": False, "reason": "NVML did not answer within 0.5 s"}
    assert not [t for t in threading.enumerate() if t.name == "enginedeck-bundle-nvml" and not t.daemon]


def test_container_inspect_masks_secret_variables_and_arguments() -> None:
    attrs: dict[str, Any] = {
        "Id": "abc",
        "Path": "vllm",
        "Args": ["serve", "m", "--api-key", "arg-secret-1", "--max-num-batched-tokens", "8192"],
        "Config": {"Env": ["HF_TOKEN=env-secret-2", "PATH=/usr/bin", "TOKENIZERS_PARALLELISM=false"],
                   "Cmd": ["serve", "m", "--hf-token=cmd-secret-3"], "Image": "vllm/vllm-openai:v0.11.0"},
    }  # fmt: skip
    out, masked = mask_inspect(attrs, ())
    text = repr(out)
    assert "arg-secret-1" not in text and "env-secret-2" not in text and "cmd-secret-3" not in text
    assert out["Config"]["Env"] == ["HF_TOKEN=****", "PATH=/usr/bin", "TOKENIZERS_PARALLELISM=false"]
    assert out["Args"][2:6] == ["--api-key", "****", "--max-num-batched-tokens", "8192"]
    assert masked == {SECRET_VARIABLE: 1, SECRET_ARGUMENT: 2}
    assert attrs["Config"]["Env"][0] == "HF_TOKEN=env-secret-2"  # the container's own data is left alone


def _summary(lines: int, width: int, engines: int = 8) -> SummaryInput:
    log = tuple(f"{i:05d} " + "x" * width for i in range(lines))
    return SummaryInput(
        host="h", created_at=1_796_000_000.0, window=Window(1_796_000_000.0 - 900, 1_796_000_000.0),
        archive_name="b.tar.gz", recording_note="recorded: 900 snapshots in the window",
        environment={"os": "Debian", "python": "3.11.7", "packages": {"vllm": "0.11.0", "sglang": None}},
        gpus={"available": False, "reason": "NVML unavailable: no driver"},
        engines=[EngineSummary(f"e{i}", "vllm", "http://127.0.0.1:8000", launch="vllm serve m", log=log,
                               log_path=f"engines/e{i}/log.txt") for i in range(engines)],
    )  # fmt: skip


def test_summary_fits_an_issue_body_whatever_the_logs() -> None:
    small = summary_markdown(_summary(10, 40))
    assert "00009 " in small and "vllm==0.11.0" in small and "sglang" not in small.split("Packages:")[1][:40]
    assert small.index("### Your current environment") < small.index("### 🐛 Describe the bug")
    for lines, width in ((500, 300), (5000, 2000)):
        text = summary_markdown(_summary(lines, width))
        assert len(text) < MAX_CHARS, (lines, width)
        assert "### Reproduction" in text and "vllm serve m" in text
    huge = summary_markdown(_summary(5, 10, engines=3000))  # more engines than fit: cut, and says so
    assert len(huge) < MAX_CHARS and huge.rstrip().endswith("the whole report is in the bundle)_")


def test_a_fence_in_a_log_line_does_not_end_the_block() -> None:
    s = dataclasses.replace(_summary(3, 5, engines=1), engines=[EngineSummary("e", "vllm", "u", log=("``` x",))])
    assert "````text\n``` x\n````" in summary_markdown(s)


def test_durations() -> None:
    assert parse_duration("15m") == 900 and parse_duration("90") == 90 and parse_duration("2h") == 7200
    assert parse_duration("1.5h") == 5400 and parse_duration("1d") == 86400
    for bad in ("", "abc", "-5m", "0", "15 minutes"):
        try:
            parse_duration(bad)
        except UserError as exc:
            assert "--last" in exc.message
        else:
            raise AssertionError(bad)
    assert duration_text(900) == "15m" and duration_text(5400) == "1h30m" and duration_text(42) == "42s"


def test_bad_input_is_one_line_and_exit_1(tmp_path: Path) -> None:
    for args in (["--last", "soon"], ["--log-lines", "-1"], ["--engine", "nosuch"]):
        r = procgroup.run([*ENGINEDECK, "bundle", *args, "-o", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
        assert r.returncode == 1, (args, r.stderr)
        assert r.stderr.startswith("enginedeck: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Traceback" not in r.stderr
    assert not list(tmp_path.iterdir())


def test_output_folder_gets_the_default_name(tmp_path: Path) -> None:
    r = procgroup.run([*ENGINEDECK, "bundle", "--gpus", "none", "-o", str(tmp_path)], capture_output=True,
                      text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    [made] = list(tmp_path.iterdir())
    assert r.stdout.strip() == str(made)
    assert made.name.startswith("enginedeck-bundle-") and made.name.endswith(".tar.gz")
    assert "no engine" not in r.stderr  # no engine configured: the environment report is still written


def test_a_headless_bundle_carries_alerts_and_says_why_an_engine_has_no_log(tmp_path: Path) -> None:
    """`enginedeck bundle` evaluates the console's alert rules on its snapshot (status.json, and the
    README's Alerts section), and its Logs section says why a monitor-only engine has no log."""
    from tests.client.simproc import sims

    with sims(("vllm",)) as (proc,):
        r = procgroup.run([*ENGINEDECK, "bundle", "--gpus", "none", "--engine", proc.ref, "--recording",
                           str(tmp_path / "no-recording"), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    root = extract(Path(r.stdout.strip()), tmp_path / "x")
    status = json.loads((root / "status.json").read_text())
    assert status["alerts"] and {a["engine"] for a in status["alerts"]} == {proc.ref}
    readme = (root / "README.md").read_text()
    logs = readme[readme.index("### Logs"):]
    assert f"{proc.ref}: no log (monitor-only" in logs
    assert "### Alerts" in readme
