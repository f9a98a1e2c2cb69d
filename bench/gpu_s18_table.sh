#!/usr/bin/env bash
# Session 18 (one H200), after the grouping default became the shared-memory map and f8s / persist were removed:
# issue 3's whole table at one tree, the commands of bench/gpu_s16_table.sh (results sparse_mla_s18_*.json).
#   DSATTN_GIT_COMMIT=<sha> bash bench/gpu_s18_table.sh      (log $OUT/tb.log, results under $OUT/r, $OUT/r.tgz)
TABLE_TAG=s18 exec bash "$(dirname "$0")/gpu_s16_table.sh"
