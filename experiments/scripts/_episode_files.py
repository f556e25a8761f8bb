"""What the data scripts beside this file share: one HDF5 of episodes in, a new one out, N copies."""

from __future__ import annotations

import argparse
import os


def parse_args(doc: str, copies_help: str, copies_default: int,
               extra: list[tuple[str, dict]] = ()) -> argparse.Namespace:
    """--data, --out (must not exist yet: checked before any work), --copies (>= 1), plus `extra` flags."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="PushCube episodes recorded by `wmsuite collect`")
    parser.add_argument("--out", required=True, help="new HDF5 file (must not exist)")
    parser.add_argument("--copies", type=int, default=copies_default, help=copies_help)
    for flag, kwargs in extra:
        parser.add_argument(flag, **kwargs)
    args = parser.parse_args()
    if args.copies < 1:
        parser.error(f"--copies must be >= 1, got {args.copies}")
    if os.path.exists(args.out):
        parser.error(f"--out {args.out} exists; choose another path or delete it")
    return args
