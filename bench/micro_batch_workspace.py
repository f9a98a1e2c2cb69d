"""Workspace bytes of DSAAttention with two micro-batch slots (micro_batches=2: the slots' step-long regions apart, the
per-call scratch shared) against one slot and against two backends with a workspace each (slots whose forwards may
run at once on different streams), at serving limits: 8192 tokens, 256 requests, 131072 tokens of context, block 64.
Exact (the workspace's reservations), so no GPU is needed.

    PYTHONPATH=src python bench/micro_batch_workspace.py
"""
from __future__ import annotations

from dsattn.backend.attention import DSAAttention
from dsattn.config import preset


def main() -> None:
    for name, tp, layout in (("glm-5", 8, "fp8_ds_mla"), ("glm-5", 8, "bf16"), ("deepseek-v3.2", 1, "fp8_ds_mla"),
                             ("glm-5.3-flash", 8, "fp8_ds_mla_nope")):
        mib = [DSAAttention(preset(name), tp=tp, kv_layout=layout, block_size=64, device="cpu", max_num_tokens=8192,
                            max_num_reqs=256, max_model_len=131072, micro_batches=n).workspace_bytes / 2**20
               for n in (1, 2)]
        print(f"{name} TP{tp} {layout}: one slot {mib[0]:.1f} MiB; two slots, shared scratch {mib[1]:.1f} MiB; two "
              f"backends, a workspace each {2 * mib[0]:.1f} MiB")


if __name__ == "__main__":
    main()
