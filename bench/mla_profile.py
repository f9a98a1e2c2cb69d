"""One launch of the default sparse MLA kernels per case, for Nsight Compute:

    ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        -k regex:sparse_mla_kernel python bench/mla_profile.py
"""
import torch

from dsattn.bench import kernels_mla as km

dev = torch.device("cuda")
for case in (km.decode_case(512, 8, "fp8_ds_mla", dev), km.decode_case(512, 64, "fp8_ds_mla", dev),
             km.prefill_case(1024, 64, dev)):
    fn, out, lse = km.ours(case, "native")
    fn()
    torch.cuda.synchronize()
