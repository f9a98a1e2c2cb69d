#!/usr/bin/env bash
# Session 34, after gluon_rx lost the halves (two consumers in step): call 1 every GPU test file whole
# (bench/gpu_tests_all.sh), call 2 issue 3's decode rows at the same code (FlashMLA in the same process).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s34.sh tests|decode
set -u
case $1 in
  tests) bash bench/gpu_tests_all.sh s34_tests ;;
  decode) PARTS=decode TABLE_TAG=s34 bash bench/gpu_s16_table.sh; cat $OUT/tb.log ;;
esac
