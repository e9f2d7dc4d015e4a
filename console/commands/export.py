"""``enginedeck export``: a recording (folder, cut file or bundle) as OpenMetrics text or CSV.

OpenMetrics output is what ``promtool tsdb create-blocks-from openmetrics FILE DIR`` loads into
Prometheus blocks; CSV has one row a sample (time, metric, engine, profile, model, gpu, value).

Exit codes: 0 written; 1 bad arguments, or nothing readable to export; 3 written, but the recording
is damaged inside (what reads back is in the output, and stderr names each loss: a damaged frame or
dictionary, documents that are not status documents). A torn end, what a kill leaves, is named
too, with exit 0. SIGTERM, SIGHUP and SIGINT remove the temporary files on the way out.
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


EXIT_DAMAGED = 3


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from console import outfile
    from console.errors import UserError
    from console.recording import RecordingError
    from console.recording.export import Skipped, write_csv, write_openmetrics
    from console.recording.opening import cleanup_on_signals, open_any, window
    from console.textout import shown
    from console.textsafe import inert

    skipped = Skipped()
    with cleanup_on_signals():
        try:
            lo, hi = window(args.start, args.end)
            rec = open_any(Path(args.path))
            write = write_openmetrics if args.format == "openmetrics" else write_csv
            if args.output and not outfile.is_stdout(args.output):
                out = Path(args.output)
                try:
                    with outfile.output(out) as f:
                        n = write(rec.documents(lo, hi), f, skipped)
                except OSError as exc:
                    raise UserError(f"cannot write {out}: {exc.strerror}") from None
                print(f"{n} samples -> {inert(str(out))}", file=sys.stderr)
            else:
                write(rec.documents(lo, hi), sys.stdout, skipped)
        except RecordingError as exc:
            raise UserError(inert(str(exc))) from None
    # What a recording says about itself (file names in a folder someone handed over) is shown inert.
    for note in rec.damage_notes():
        print(f"enginedeck: {shown(note)}", file=sys.stderr)
    if skipped.count:
        print(f"enginedeck: {skipped.count} document(s) that are not status documents left out "
              f"(the first: {inert(skipped.reason)[:200]})", file=sys.stderr)
    return EXIT_DAMAGED if rec.damaged_inside or skipped.count else 0
