# Session 71: issue 3's table read 16 heads s_q 1024 '+rows' (converted at ratio 1) at 0.441 ms (three rounds
# 0.453 / 0.441 / 0.436), where the same call alone read 0.296 by do_bench and 0.291 as graph replays
# (bench/s71/host_cprof.py). This runs the table's measure_case for 8 then 16 heads in one process, as the table does,
# then times the 16-head '+rows' call alone in the same process: host ms a call (idle GPU), do_bench, graph replay.
#   PYTHONPATH=src:.peer python bench/s71/table16.py [heads,...]
# PREDICTION: none firm; if the table's reading repeats here and the lone call reads ~0.29, the difference is the
# process's state (what ran before), else the table run was an outlier.
import sys, torch
from dsattn.bench.common import graph_replay, host_ms, time_ms
from dsattn.bench.kernels_mla import _peers, measure_case, ours, prefill_case

heads = [int(h) for h in (sys.argv[1] if len(sys.argv) > 1 else "8,16").split(",")]
dev = torch.device("cuda")
peers = _peers()
print(torch.cuda.get_device_name(), flush=True)
for h in heads:
    case = prefill_case(1024, h, dev)
    for r in measure_case(case, peers, ["native", "pad64"], rep_ms=20, rounds=3):
        print(f"table {h} heads {r['impl']}: {r['ms']:.4f} ms, rounds {[round(x, 4) for x in r['ms_rounds']]}",
              flush=True)
for h in heads:
    case = prefill_case(1024, h, dev)
    for rows in (False, True):
        fn = ours(case, "native", rows=rows)[0]
        fn()
        host = host_ms(fn)
        db20, db200 = time_ms(fn, rep_ms=20), time_ms(fn, rep_ms=200)
        gr = time_ms(graph_replay(fn), rep_ms=200)
        print(f"alone {h} heads rows {int(rows)}: host {host:.4f} ms a call, do_bench 20 ms "
              f"{db20:.4f}, 200 ms {db200:.4f}, graph replay {gr:.4f}", flush=True)
