# Session 28, one call: the gluon_rx GPU test file whole (sharded) after the prefetch / alu / pipe options were removed
# and DSATTN_RX_CONFIG became field=value pairs. Run at the commit it names (DSATTN_GIT_COMMIT).
LOG=s28_rx.log TAG=s28 source bench/gpu_lib.sh
N=12 LIMIT=480 bash bench/gpu_tests_sharded.sh $R/tests tests/gpu/test_sparse_mla_rx_gpu.py
cat $R/tests/summary.log >> $L
pack
