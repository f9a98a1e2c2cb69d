# Session 28, call 2: (1) the 32-head decode at token counts around whole waves of 132 programs (one CTA an SM), to
# test notes/sparse_mla.md's wave-quantization estimate; (2) the public sparse MLA GPU test file whole (sharded), at
# the tree whose gluon_rx lost its prefetch / alu / pipe options.
LOG=s28_b.log TAG=s28 source bench/gpu_lib.sh
timeout 200 python -m dsattn.cli bench kernels --op sparse_mla --cases decode --heads 32 \
  --tokens 264,396,512,528,1980,2048,2112 --no-peer --rounds 3 --out $R --name s28_waves32 > $R/waves.log 2>&1
echo "waves rc=$?" >> $L; grep -E "decode|ms" $R/waves.log | head -40 >> $L
pack
N=12 LIMIT=300 bash bench/gpu_tests_sharded.sh $R/tests tests/gpu/test_sparse_mla_gpu.py
cat $R/tests/summary.log >> $L
pack
