# Sourced by session 24's device scripts (bench/gpu_s24_pp*.sh): the environment, the log header and the A/B helper
# they share. Set LOG (the log's name under $OUT) before sourcing.
set -u
export PYTHONPATH=$PWD/src:$PWD/.peer PYTHONUNBUFFERED=1
unset TRITON_INTERPRET DSATTN_SPARSE_MLA_IMPL DSATTN_RX_CONFIG DSATTN_RX_CONSUMERS DSATTN_WS_CONFIG DSATTN_G64_CONFIG \
  DSATTN_PF_CONFIG DSATTN_GROUPING_IMPL DSATTN_PREFILL_SCRATCH_MIB
R=$OUT/r; mkdir -p $R; L=$OUT/$LOG
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader > $L
pack() { tar -czf $OUT/r.tgz -C $OUT r; }
ab() {  # layout heads configB name [tokens]: dsattn bench ab, the default against DSATTN_WS_CONFIG=configB
  timeout 90 python -m dsattn.cli bench ab --op sparse_mla_decode --tokens ${5:-512} --heads $2 --layout $1 \
    --b env:DSATTN_WS_CONFIG=$3 --name ab_s24_$4 --out $R > $R/ab_$4.log 2>&1
  echo "ab default vs $3 ($1, $2 heads, ${5:-512} tokens) rc=$?" >> $L; tail -n 3 $R/ab_$4.log | head -n 2 >> $L
  pack
}
