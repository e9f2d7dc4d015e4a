"""What the console's start pays for reading its settings, and what pydantic would add to it.

    .venv/bin/python benchmarks/import_cost.py [--rounds 5]

Each figure is a fresh interpreter (median of --rounds), time and RSS growth from just before to just
after the step:
1. settings: import console.config and console.alerts.rules, then read the configuration, the
   shipped engine profiles and alert rules (console.schema's frozen dataclasses): what `attach` does.
2. pydantic: import it and validate one small model with a Field constraint and a validator, the
   least a pydantic-based settings layer costs (the console's models were 14 such classes).
3. the live console's modules: import console.ui.app and console.commands.attach, then step 1.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

MEASURE = """
import json, sys, time, psutil
proc = psutil.Process()
r0, t0 = proc.memory_info().rss, time.perf_counter()
{body}
t1, r1 = time.perf_counter(), proc.memory_info().rss
print(json.dumps({{"ms": (t1 - t0) * 1e3, "mb": (r1 - r0) / 2**20, "modules": len(sys.modules),
                  "pydantic": "pydantic" in sys.modules}}))
"""

SETTINGS = """
from console.alerts.rules import load_rules
from console.config import load_config
from console.profiles import load_profiles
load_config(); load_profiles(); load_rules(user=False)
"""

PYDANTIC = """
from pydantic import BaseModel, ConfigDict, Field, field_validator
class Timeouts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    loading: float = Field(default=1800, gt=0)
    name: str = "x"
    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return v
Timeouts.model_validate({"loading": 60})
"""

LIVE = "import console.ui.app, console.commands.attach\n" + SETTINGS


def run(body: str, rounds: int) -> dict[str, float]:
    env_code = MEASURE.format(body=body)
    got = []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", env_code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYDANTIC_DISABLE_PLUGINS": "__all__"})
        got.append(json.loads(out.stdout))
    return {k: statistics.median(float(g[k]) for g in got) for k in ("ms", "mb", "modules", "pydantic")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    for label, body in (("settings (config, profiles, rules)", SETTINGS), ("pydantic, one small model", PYDANTIC),
                        ("live console modules + settings", LIVE)):
        f = run(body, a.rounds)
        print(f"{label:36s} {f['ms']:6.0f} ms  +{f['mb']:5.1f} MB RSS  {f['modules']:4.0f} modules loaded"
              f"{'  (pydantic loaded)' if f['pydantic'] else ''}")


if __name__ == "__main__":
    main()
