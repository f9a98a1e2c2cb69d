# Session 29, call 1: the L-independent cost of a decode program at whole waves (one CTA an SM: 528 tokens = 4 waves
# of 132 programs), from topk_length 64 (one block) to 2048, CUDA-graph replays (bench/decode_fixed_cost.py).
# At 32 heads (gluon_ws) this bounds what a persistent / stream-K schedule could take back beyond the wave
# quantization measured in session 28; at 8 heads (gluon_rx ping-pong) it is session 18's intercept at whole waves.
LOG=s29_a.log TAG=s29 source bench/gpu_lib.sh
timeout 240 python bench/decode_fixed_cost.py --tokens 264 528 --heads 32 --lengths 64 128 256 512 1024 2048 \
  --out $R/decode_fixed_cost_s29_h32.json > $R/fixed32.log 2>&1
echo "fixed32 rc=$?" >> $L; cat $R/fixed32.log >> $L
pack
timeout 200 python bench/decode_fixed_cost.py --tokens 528 --heads 8 --lengths 64 128 256 512 1024 2048 \
  --out $R/decode_fixed_cost_s29_h8.json > $R/fixed8.log 2>&1
echo "fixed8 rc=$?" >> $L; cat $R/fixed8.log >> $L
pack
