"""Head-dispatch policy and path choice (SPEC 7): pure functions, with and without a calibration table."""
import json

import pytest

from dsattn.backend.policy import (Path, bf16_decode_variant, buckets_from_winners, choose_path, choose_variant,
                                   load_table, prefill_variant_for_slots)


@pytest.mark.parametrize("layout, heads, path", [
    ("bf16", 8, Path.BF16_PREFILL), ("bf16", 128, Path.BF16_PREFILL),
    ("fp8_ds_mla", 8, Path.FP8_MIXED), ("fp8_ds_mla", 31, Path.FP8_MIXED), ("fp8_ds_mla_nope", 16, Path.FP8_MIXED),
    ("fp8_ds_mla", 32, Path.FP8_GATHERED), ("fp8_ds_mla", 64, Path.FP8_GATHERED),
    ("fp8_ds_mla_nope", 128, Path.FP8_GATHERED),
])
def test_path_table(layout, heads, path):
    assert choose_path(layout, heads) is path


def test_path_rejects():
    with pytest.raises(ValueError, match="layout"):
        choose_path("fp16", 8)
    with pytest.raises(ValueError, match="heads"):
        choose_path("bf16", 0)


@pytest.mark.parametrize("kernel", ["prefill", "decode"])
def test_fallback_thresholds(kernel):
    # SPEC 7: native when tokens > SM count (8 or 16 heads), > 2 x SM count (32 heads), else padded
    for heads, threshold in ((8, 132), (16, 132), (32, 264)):
        assert choose_variant(kernel, heads, threshold) == "pad64"
        assert choose_variant(kernel, heads, threshold + 1) == "native"
    assert choose_variant(kernel, 8, 100, sm_count=78) == "native"
    assert choose_variant(kernel, 64, 1) == "native" and choose_variant(kernel, 128, 10**6) == "native"
    assert choose_variant(kernel, 40, 1) == "pad64"  # only variant for 33..63 heads


TABLE = {"sm_count": 132, "table": {
    "decode/fp8_ds_mla": {"8": [{"max_tokens": 90, "variant": "pad64"}, {"max_tokens": 1000, "variant": "native"},
                                {"max_tokens": None, "variant": "pad64"}]},
    "decode": {"16": [{"max_tokens": None, "variant": "native"}]},
    "prefill": {"8": [{"max_tokens": 4, "variant": "native"}, {"max_tokens": 64, "variant": "pad64"}],
                "32": [{"max_tokens": None, "variant": "no-such-variant"}]},
}}


def test_policy_follows_the_table():
    v = lambda kernel, heads, tokens, layout=None: choose_variant(kernel, heads, tokens, TABLE, layout=layout)
    assert [v("decode", 8, t, "fp8_ds_mla") for t in (1, 90, 91, 1000, 1001)] == \
        ["pad64", "pad64", "native", "native", "pad64"]
    # no entry for this layout: the generic 'decode' key, then SPEC 7
    assert v("decode", 16, 1, "fp8_ds_mla_nope") == "native"
    assert v("decode", 8, 1, "fp8_ds_mla_nope") == "pad64" and v("decode", 8, 500, "fp8_ds_mla_nope") == "native"
    # past the last bound: the last bucket
    assert [v("prefill", 8, t) for t in (1, 4, 5, 64, 65, 10**5)] == ["native", "native", "pad64", "pad64", "pad64",
                                                                      "pad64"]
    # a winner the kernel does not offer, or heads the table lacks: SPEC 7
    assert v("prefill", 32, 1) == "pad64" and v("prefill", 32, 300) == "native"
    assert v("prefill", 16, 1) == "pad64"


def test_choose_variant_rejects():
    with pytest.raises(ValueError, match="kernel"):
        choose_variant("attention", 8, 1)
    with pytest.raises(ValueError, match="tokens"):
        choose_variant("decode", 8, -1)
    with pytest.raises(ValueError, match="num_heads"):
        choose_variant("decode", 129, 1)


def test_buckets_from_winners():
    b = buckets_from_winners([(512, "native"), (64, "pad64"), (128, "pad64"), (256, "native"), (2048, "native")])
    assert b == [{"max_tokens": 181, "variant": "pad64"}, {"max_tokens": None, "variant": "native"}]
    assert buckets_from_winners([(100, "pad64")]) == [{"max_tokens": None, "variant": "pad64"}]


def test_load_table(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(TABLE))
    assert load_table(path)["table"] == TABLE["table"]
    path.write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="calibration table"):
        load_table(path)
    path.write_text(json.dumps({"table": {"prefill": {"8": [{"variant": "native"}]}}}))
    with pytest.raises(ValueError, match="buckets"):
        load_table(path)


def test_bf16_decode_variant():
    """A bf16 cache's decode rows (no keys shared between them) run one token a program: pad64 where the kernel
    offers it (<= 32 heads: native would group them over the union of their lists), native from 64 heads."""
    assert [bf16_decode_variant(h) for h in (1, 8, 16, 32, 33, 64, 128)] == \
        ["pad64"] * 4 + ["pad64", "native", "native"]


def test_prefill_variant_for_slots():
    """17-32 heads (G 2): 'native' whose union lists would take the hash path (grouping.dense_reach: on the CPU 65536
    slots at topk 2048) runs 'pad64'; fewer heads, 64 heads, pad64 itself and calls within the dense reach keep the
    variant."""
    assert prefill_variant_for_slots("native", 32, 65536, 2048, "cpu") == "native"
    assert prefill_variant_for_slots("native", 32, 65537, 2048, "cpu") == "pad64"
    assert prefill_variant_for_slots("native", 17, 1 << 20, 2048, "cpu") == "pad64"
    assert prefill_variant_for_slots("pad64", 32, 1 << 20, 2048, "cpu") == "pad64"
    for heads in (8, 16, 64, 128):
        assert prefill_variant_for_slots("native", heads, 1 << 20, 2048, "cpu") == "native"


def test_prefill_variant_for_slots_where_the_fused_lists_run(monkeypatch):
    """Where the shared-memory union kernel runs (a CUDA GPU with Gluon: grouping_smem.usable) the dense reach at G 2
    is 524288 slots, and native holds up to NATIVE_G2_MAX_SLOTS (131072, where it was measured faster than pad64)."""
    from dsattn.backend.policy import NATIVE_G2_MAX_SLOTS
    from dsattn.ops.sparse_mla import grouping, grouping_smem
    monkeypatch.setattr(grouping_smem, "usable", lambda device: True)
    assert grouping.dense_reach(2, 2048, "cpu") == 524288 and NATIVE_G2_MAX_SLOTS == 131072
    assert prefill_variant_for_slots("native", 32, 131072, 2048, "cpu") == "native"
    assert prefill_variant_for_slots("native", 32, 131073, 2048, "cpu") == "pad64"
    assert prefill_variant_for_slots("native", 16, 1 << 20, 2048, "cpu") == "native"
