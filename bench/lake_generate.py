"""Benchmark: generate the `sample` profile and print time, peak memory, rows and bytes.

Usage: python bench/lake_generate.py [--out DIR] [--profile NAME] [--seed N]
The last line is machine-readable:
``lake_generate: seconds=<s> peak_mib=<MiB> rows=<n> bytes=<n>``.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
from pathlib import Path

from oda_analyst.lake.synth import build_spec, generate


def peak_rss_mib() -> float:
    """Peak resident memory of this process (Linux: /proc VmHWM, else getrusage)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--out", type=Path, default=None, help="output folder (default: a temp dir)"
    )
    parser.add_argument("--profile", default="sample")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    tmp = None if args.out else Path(tempfile.mkdtemp(prefix="oda-lake-"))
    out = args.out or tmp
    try:
        report = generate(build_spec(args.profile, seed=args.seed), out)
        peak = peak_rss_mib()
        print(f"profile={args.profile} partitions={report.partitions} path={report.path}")
        for plugin, rows in report.rows_per_plugin.items():
            print(f"  {plugin:<10} {rows:>13,} rows")
        print(
            f"total {report.rows:,} rows, {report.bytes / 2**20:,.1f} MiB, "
            f"{report.seconds:.1f} s, peak RSS {peak:,.0f} MiB"
        )
        print(
            f"lake_generate: seconds={report.seconds:.1f} peak_mib={peak:.0f} "
            f"rows={report.rows} bytes={report.bytes}"
        )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
