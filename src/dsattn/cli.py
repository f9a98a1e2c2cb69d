"""The ``dsattn`` command.

    dsattn demo                      a scaled-down DSA attention step, end to end, on this machine
    dsattn info                      presets, devices, what runs where
    dsattn bench kernels --op OP     kernel benchmarks against the floor and the peers
    dsattn bench serve               serving-step simulation
    dsattn bench tp                  tensor-parallel indexer prefill (run under torchrun)
    dsattn bench ab --op OP --a .. --b ..   two settings of one op, alternated, ratio with a confidence interval
    dsattn calibrate                 measure head-dispatch variants on this GPU, write the table

Each subcommand lives in its own module with a ``main(argv)``; this file only routes.
"""
from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "demo": "dsattn.demo",
    "info": "dsattn.info",
    "calibrate": "dsattn.backend.calibrate",
    "bench kernels": "dsattn.bench.kernels",
    "bench serve": "dsattn.bench.serve",
    "bench tp": "dsattn.bench.tp",
    "bench ab": "dsattn.bench.ab",
}


def _usage() -> str:
    return "usage: dsattn {" + " | ".join(COMMANDS) + "} [options]\n" + (__doc__ or "")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    for n in (2, 1):
        key = " ".join(argv[:n])
        if key in COMMANDS:
            module = importlib.import_module(COMMANDS[key])
            return int(module.main(argv[n:]) or 0)
    print(f"dsattn: unknown command {' '.join(argv[:2])!r}\n" + _usage(), file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
