#!/usr/bin/env bash
# Session 33, call 2: every GPU test file whole at the session's code (as session 30's bench/gpu_s30_d.sh). It ran at
# 9e57da9 with the commands now in bench/gpu_tests_all.sh written out here (the same ones; the archive was $OUT/t.tgz).
bash bench/gpu_tests_all.sh s33_tests
