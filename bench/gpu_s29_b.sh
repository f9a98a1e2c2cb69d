# Record of a session 29 call: the persist config it runs was removed afterwards (code at 97adb7b), so this script
# only runs at its own commit.
# Session 29, calls 2 and 3: gluon_ws persist (one CTA an SM walking the tokens along one ring; WsConfig persist 1):
# its GPU tests (bit-equal to the default, beside the reference; a hang guard: timeout), then `dsattn bench ab`
# against the default at 32 heads, only if the tests passed. Call 2 at 923af26: right, 0.87-0.89x. Call 3 at 11e0317
# (the producer's entry position advanced without integer divisions, no split-K): right, 0.82-0.83x.
LOG=s29_b.log TAG=s29 source bench/gpu_lib.sh
timeout 300 python -m pytest -q -x tests/gpu/test_sparse_mla_gpu.py -k "gluon_ws and (persist or ahead)" \
  > $R/tests.log 2>&1
rc=$?
echo "tests rc=$rc" >> $L; tail -n 5 $R/tests.log >> $L
pack
if [ $rc -eq 0 ]; then
  ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/136/4/2/1 persist136
  ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/128/4/2/1 persist128
  ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/136/4/2 regs136
  ab DSATTN_WS_CONFIG fp8_ds_mla_nope 32 3/128/4/2/1 persist_nope
  ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/136/4/2/1 persist136_2048 2048
fi
