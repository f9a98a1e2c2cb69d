"""``dsattn bench kernels --op OP [options]``: kernel benchmarks against the floor and the peers.

This file only routes: each op names the module that benchmarks it, imported when asked for. A module
exposes ``run(op: str, argv: list[str]) -> int``, or a ``main(argv)`` that takes ``--op`` itself; either
parses its own options (``--help`` after the op lists them).
"""
from __future__ import annotations

import importlib
import sys

# op -> module holding its benchmark (one module may serve several ops)
OPS = {
    "sparse_mla": "dsattn.bench.kernels_mla",
    "indexer": "dsattn.bench.kernels_indexer",
    "indexer_decode": "dsattn.bench.kernels_indexer",
    "indexer_prefill": "dsattn.bench.kernels_indexer",
    "topk": "dsattn.bench.kernels_indexer",
    "topk_tune": "dsattn.bench.kernels_indexer",
    "kpool": "dsattn.bench.kernels_indexer",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: dsattn bench kernels --op {{{','.join(OPS)}}} [options]"
    if "--op" not in argv or argv.index("--op") + 1 >= len(argv):
        print(usage + "\n" + (__doc__ or ""), file=sys.stderr if argv else sys.stdout)
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    i = argv.index("--op")
    op = argv[i + 1]
    if op not in OPS:
        print(f"dsattn bench kernels: unknown op {op!r}\n{usage}", file=sys.stderr)
        return 2
    rest = argv[:i] + argv[i + 2:]
    module = importlib.import_module(OPS[op])
    if hasattr(module, "run"):
        return int(module.run(op, rest) or 0)
    return int(module.main(["--op", op] + rest) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
