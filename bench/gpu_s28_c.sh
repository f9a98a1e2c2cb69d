# Session 28, call 3: after the L2 prefetch option left gluon_ws and gluon64, the GPU tests that run them (the public
# sparse MLA file: gluon_ws ahead / split-K, gluon64 vst / producer shapes, the defaults) and the backend file, whole.
LOG=s28_c.log TAG=s28 source bench/gpu_lib.sh
N=14 LIMIT=420 bash bench/gpu_tests_sharded.sh $R/tests tests/gpu/test_sparse_mla_gpu.py tests/gpu/test_backend_gpu.py
cat $R/tests/summary.log >> $L
pack
