"""`wmsuite bench <what>`: every benchmark prints its figures and writes them to `--out DIR/metrics.json`."""

from __future__ import annotations

from wmsuite.cli import BENCHES, _dispatch


def main(argv: list[str]) -> int:
    return _dispatch("wmsuite bench", BENCHES, argv)
