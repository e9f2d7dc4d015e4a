"""``enginedeck export``: a recording (folder, cut file or bundle) as OpenMetrics text or CSV.

OpenMetrics output is what ``promtool tsdb create-blocks-from openmetrics FILE DIR`` loads into
Prometheus blocks; CSV has one row a sample (time, metric, engine, profile, model, gpu, value).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    from console.commands._args import command_help

    p = sub.add_parser("export", **command_help(
        "a recording as OpenMetrics (for promtool / Prometheus) or CSV",
        "enginedeck export ~/incidents --format openmetrics --from '1h ago' -o incident.om",
        "enginedeck export incident.tar.gz --format csv -o incident.csv"))
    p.add_argument("path", metavar="FILE|DIR|BUNDLE", help="a recording folder, a cut .edrec file or a bundle")
    p.add_argument("--format", choices=("openmetrics", "csv"), default="openmetrics", help="default openmetrics")
    p.add_argument("--from", dest="start", metavar="TIME", help="start: '10m ago', '19:05', a date and time")
    p.add_argument("--to", dest="end", metavar="TIME", help="end (default: the end of the recording)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write here (default, or '-': standard output); a symlink, FIFO or device is written "
                        "through, never replaced")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from console import outfile
    from console.errors import UserError
    from console.recording import RecordingError
    from console.recording.export import write_csv, write_openmetrics
    from console.recording.opening import open_any, window

    try:
        lo, hi = window(args.start, args.end)
        rec = open_any(Path(args.path))
        write = write_openmetrics if args.format == "openmetrics" else write_csv
        if args.output and not outfile.is_stdout(args.output):
            out = Path(args.output)
            try:
                with outfile.output(out) as f:
                    n = write(rec.documents(lo, hi), f)
            except OSError as exc:
                raise UserError(f"cannot write {out}: {exc.strerror}") from None
            print(f"{n} samples -> {out}", file=sys.stderr)
        else:
            write(rec.documents(lo, hi), sys.stdout)
    except RecordingError as exc:
        raise UserError(str(exc)) from None
    from console.textout import shown

    for note in rec.damage_notes():  # a note can quote the recording, which is anyone's file
        print(f"enginedeck: {shown(note)}", file=sys.stderr)
    if rec.skipped:
        print(f"enginedeck: {rec.skipped} damaged frame(s) skipped", file=sys.stderr)
    return 0
