# Record of a session 29 call: the persist config it runs was removed afterwards (code at 97adb7b), so this script
# only runs at its own commit.
# Session 29, call 5: gluon_ws persist after the fix of call 4's finding (the consumer's q / out index vectors, hoisted
# out of the token loop by LLVM, held ~50 registers through the block loop and serialized its softmax reductions:
# now built from an opaque 0 in each token). GPU tests, then A/B against the default at 32 heads.
LOG=s29_d.log TAG=s29d source bench/gpu_lib.sh
timeout 300 python -m pytest -q -x tests/gpu/test_sparse_mla_gpu.py -k "gluon_ws and (persist or ahead)" \
  > $R/tests.log 2>&1
rc=$?
echo "tests rc=$rc" >> $L; tail -n 5 $R/tests.log >> $L
pack
if [ $rc -eq 0 ]; then
  ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/136/4/2/1 persist136
  ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/136/4/2/1/1000 persist_one
  ab DSATTN_WS_CONFIG fp8_ds_mla_nope 32 3/128/4/2/1 persist_nope
  ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/136/4/2/1 persist136_2048 2048
fi
