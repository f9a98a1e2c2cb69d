# Record of a session 29 call: the persist config it runs was removed afterwards (code at 97adb7b), so this script
# only runs at its own commit.
# Session 29, call 4: why gluon_ws persist is slower (calls 2-3: 0.82-0.89x, bit-equal). (1) the persist code with
# one token a CTA (ctas 1000 > tokens: the non-persistent schedule) and with two (ctas 264), against the default;
# (2) Nsight Compute of the default and of persist (fp8_ds_mla, 32 heads, 512 tokens).
LOG=s29_c.log TAG=s29 source bench/gpu_lib.sh
ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/136/4/2/1/1000 persist_one
ab DSATTN_WS_CONFIG fp8_ds_mla 32 2/136/4/2/1/264 persist_two
command -v ncu > /dev/null || { echo "no ncu" >> $L; exit 0; }
prof ws32_default "sparse_mla_ws_kernel" --case decode-fp8-32
export DSATTN_WS_CONFIG=2/136/4/2/1
prof ws32_persist "sparse_mla_ws_kernel" --case decode-fp8-32
