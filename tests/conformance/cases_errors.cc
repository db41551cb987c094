// Conformance cases of the contract's errors: the same call fails with the same message on
// every backend (op contract: dtypes, shapes, devices, parameters; upload_batch: the batch
// layout), and validate_batch rejects every batch value the kernels would otherwise see.
#include "conformance.h"
#include "kernels/batch_contract.h"
#include "kernels/kv_cache_int8.h"

namespace nanovllm::conformance {
namespace {

constexpr int Hq = 4, Hkv = 2, D = 16, W = (Hq + 2 * Hkv) * D;

// A valid prefill + decode batch over 4 blocks of 16: sequence 0 has 3 cached and 4 new tokens
// (blocks 2, 0), sequence 1 decodes at position 16 (blocks 1, 3).
HostBatch valid_batch() {
  HostBatch hb;
  hb.num_seqs = 2;
  hb.num_tokens = 5;
  hb.block_size = 16;
  hb.block_table_stride = 2;
  hb.input_ids = {5, 6, 7, 8, 9};
  hb.positions = {3, 4, 5, 6, 16};
  hb.slot_mapping = {2 * 16 + 3, 2 * 16 + 4, 2 * 16 + 5, 2 * 16 + 6, 3 * 16 + 0};
  hb.cu_seqlens_q = {0, 4, 5};
  hb.context_lens = {7, 17};
  hb.block_tables = {2, -1, 1, 3};
  hb.logits_indices = {3, 4};
  hb.max_seqlen_q = 4;
  hb.max_seqlen_k = 17;
  return hb;
}
const BatchLimits kLimits{100, 64, 4, 16};

void add(std::vector<Case>& out, const std::string& name, std::function<void(Harness&)> fn) {
  out.push_back({"error_" + name, false, std::move(fn)});
}

// validate_batch on a valid batch with one field changed.
void add_invalid(std::vector<Case>& out, const std::string& name,
                 std::function<void(HostBatch&)> edit, const std::string& needle) {
  add(out, "batch_" + name, [=](Harness&) {
    HostBatch hb = valid_batch();
    edit(hb);
    expect_error([&] { validate_batch(hb, kLimits); }, needle);
  });
}

}  // namespace

void add_error_cases(std::vector<Case>& out) {
  add(out, "batch_valid_passes", [](Harness& hx) {
    EXPECT_NO_THROW(validate_batch(valid_batch(), kLimits));
    EXPECT_NO_THROW(hx.be.upload_batch(valid_batch()));
  });
  add_invalid(out, "position_outside_rope_table", [](HostBatch& hb) { hb.positions[4] = 64; },
              "HostBatch.positions[4] = 64 is outside the rotary table [0, 64)");
  add_invalid(out, "position_not_key_position", [](HostBatch& hb) { hb.positions[1] = 9; },
              "HostBatch.positions[1] = 9 but token 1 of sequence 0 sits at key position");
  add_invalid(out, "slot_outside_cache", [](HostBatch& hb) { hb.slot_mapping[2] = 64; },
              "HostBatch.slot_mapping[2] = 64 is outside [-1, 64)");
  add_invalid(out, "slot_not_in_block_table", [](HostBatch& hb) { hb.slot_mapping[4] = 5; },
              "HostBatch.slot_mapping[4] = 5 but position 16 of sequence 1 lives in slot 48");
  add_invalid(out, "block_entry_outside_cache", [](HostBatch& hb) { hb.block_tables[1] = 4; },
              "HostBatch.block_tables[1] = 4 (sequence 0, block 1) is outside [-1, 4)");
  add_invalid(out, "needed_block_missing", [](HostBatch& hb) { hb.block_tables[3] = -1; },
              "HostBatch.block_tables[3] = -1 (sequence 1, block 1) is missing");
  add_invalid(out, "context_past_table", [](HostBatch& hb) {
    hb.context_lens[1] = 40, hb.max_seqlen_k = 40, hb.positions[4] = 39;
  }, "HostBatch.context_lens[1] = 40 needs 3 blocks; the block table has 2 columns");
  add_invalid(out, "context_below_seqlen_q", [](HostBatch& hb) { hb.context_lens[0] = 3; },
              "HostBatch.context_lens[0] = 3 is below the sequence's 4 query tokens");
  add_invalid(out, "cu_seqlens_decreasing", [](HostBatch& hb) { hb.cu_seqlens_q = {0, 6, 5}; },
              "HostBatch.cu_seqlens_q[2] = 5 is below cu_seqlens_q[1] = 6");
  add_invalid(out, "cu_seqlens_not_ending_at_t", [](HostBatch& hb) { hb.cu_seqlens_q[2] = 4; },
              "HostBatch.cu_seqlens_q[2] = 4 must equal num_tokens = 5");
  add_invalid(out, "input_id_outside_vocab", [](HostBatch& hb) { hb.input_ids[0] = 100; },
              "HostBatch.input_ids[0] = 100 is outside the vocabulary [0, 100)");
  add_invalid(out, "logits_index_outside", [](HostBatch& hb) { hb.logits_indices[1] = 5; },
              "HostBatch.logits_indices[1] = 5 is outside [0, 5)");
  add_invalid(out, "decode_only_with_prefill", [](HostBatch& hb) { hb.decode_only = true; },
              "decode_only batch but sequence 0 has 4 query tokens");
  add_invalid(out, "max_seqlen_q_understated", [](HostBatch& hb) { hb.max_seqlen_q = 1; },
              "sequence 0 has 4 query tokens, more than max_seqlen_q = 1");
  add_invalid(out, "block_size_differs", [](HostBatch& hb) { hb.block_size = 32; },
              "HostBatch.block_size = 32 differs from the KV cache's block size 16");
  // The layout check runs inside every backend's upload_batch.
  add(out, "upload_batch_layout", [](Harness& hx) {
    HostBatch hb = valid_batch();
    hb.positions.pop_back();
    expect_error([&] { hx.be.upload_batch(hb); },
                 "HostBatch.positions has 4 entries, expected 5 (num_tokens)");
    hb = valid_batch();
    hb.block_table_stride = 3;
    expect_error([&] { hx.be.upload_batch(hb); },
                 "HostBatch.block_tables has 4 entries, expected 6 (num_seqs * block_table_stride)");
  });

  // --- op contract -------------------------------------------------------------------------
  add(out, "rms_norm_i32_input", [](Harness& hx) {
    Tensor x = hx.i32(std::vector<int32_t>(8, 1), {2, 4}), out = hx.poisoned({2, 4}, hx.act());
    auto w = hx.random({4}, DType::BF16);
    expect_error([&] { hx.be.rms_norm(x, w.t, 1e-6f, out); }, "rms_norm: x I32[2, 4]");
    expect_error([&] { hx.be.rms_norm(x, w.t, 1e-6f, out); }, "must be an activation");
  });
  add(out, "rms_norm_weight_length", [](Harness& hx) {
    auto x = hx.random({2, 8}, hx.act());
    auto w = hx.random({6}, DType::BF16);
    Tensor out = hx.poisoned({2, 8}, hx.act());
    expect_error([&] { hx.be.rms_norm(x.t, w.t, 1e-6f, out); }, "must be [H] for x");
  });
  add(out, "linear_k_mismatch", [](Harness& hx) {
    auto x = hx.random({4, 64}, hx.act());
    auto w = hx.random({32, 48}, DType::BF16);
    Tensor out = hx.poisoned({4, 32}, hx.act());
    expect_error([&] { hx.be.linear(x.t, w.t, nullptr, out); }, "linear: x ");
    expect_error([&] { hx.be.linear(x.t, w.t, nullptr, out); }, "must be [T, 48]");
  });
  add(out, "linear_bias_length", [](Harness& hx) {
    auto x = hx.random({4, 48}, hx.act());
    auto w = hx.random({32, 48}, DType::BF16);
    auto b = hx.random({31}, DType::BF16);
    Tensor out = hx.poisoned({4, 32}, hx.act());
    expect_error([&] { hx.be.linear(x.t, w.t, &b.t, out); }, "must be [32]");
  });
  add(out, "silu_and_mul_odd_width", [](Harness& hx) {
    auto gu = hx.random({2, 7}, hx.act());
    Tensor out = hx.poisoned({2, 3}, hx.act());
    expect_error([&] { hx.be.silu_and_mul(gu.t, out); }, "must be [T, 2I]");
  });
  add(out, "qk_norm_rope_cos_sin_dtype", [](Harness& hx) {
    auto qkv = hx.random({3, W}, hx.act());
    auto cs = hx.random({8, D}, DType::BF16);
    Tensor pos = hx.i32({0, 1, 2}, {3});
    expect_error([&] { hx.be.qk_norm_rope(qkv.t, pos, nullptr, nullptr, 1e-6f, cs.t, {Hq, Hkv, D, 1.f}); },
                 "must be F32 [max_pos, 16]");
  });
  add(out, "qk_norm_rope_odd_head_dim", [](Harness& hx) {
    auto qkv = hx.random({3, (Hq + 2 * Hkv) * 15}, hx.act());
    auto cs = hx.random({8, 15}, DType::F32);
    Tensor pos = hx.i32({0, 1, 2}, {3});
    expect_error([&] { hx.be.qk_norm_rope(qkv.t, pos, nullptr, nullptr, 1e-6f, cs.t, {Hq, Hkv, 15, 1.f}); },
                 "RoPE needs an even head_dim, got 15");
  });
  add(out, "qk_norm_rope_positions_count", [](Harness& hx) {
    auto qkv = hx.random({3, W}, hx.act());
    auto cs = hx.random({8, D}, DType::F32);
    Tensor pos = hx.i32({0, 1}, {2});
    expect_error([&] { hx.be.qk_norm_rope(qkv.t, pos, nullptr, nullptr, 1e-6f, cs.t, {Hq, Hkv, D, 1.f}); },
                 "must have one entry per token of qkv");
  });
  add(out, "store_kv_slot_dtype", [](Harness& hx) {
    auto qkv = hx.random({3, W}, hx.act());
    auto slots = hx.random({3}, DType::F32);
    auto kc = hx.random({32, Hkv, D}, hx.act()), vc = hx.random({32, Hkv, D}, hx.act());
    expect_error([&] { hx.be.store_kv(qkv.t, slots.t, kc.t, vc.t, {Hq, Hkv, D, 1.f}); },
                 "store_kv: slot_mapping F32[3]");
  });
  add(out, "store_kv_cache_shape", [](Harness& hx) {
    auto qkv = hx.random({3, W}, hx.act());
    Tensor slots = hx.i32({0, 1, 2}, {3});
    auto kc = hx.random({32, Hkv, D + 2}, hx.act()), vc = hx.random({32, Hkv, D + 2}, hx.act());
    expect_error([&] { hx.be.store_kv(qkv.t, slots, kc.t, vc.t, {Hq, Hkv, D, 1.f}); },
                 "must be [num_slots, 2, 16]");
  });
  // An int8 cache's rows are D values and a 4-byte scale (kernels/kv_cache_int8.h): width D + 4.
  add(out, "store_kv_int8_cache_width", [](Harness& hx) {
    auto qkv = hx.random({3, W}, hx.act());
    Tensor slots = hx.i32({0, 1, 2}, {3});
    Tensor kc = hx.upload(Tensor::zeros({32, Hkv, D}, kKvCacheInt8));
    Tensor vc = hx.upload(Tensor::zeros({32, Hkv, D}, kKvCacheInt8));
    expect_error([&] { hx.be.store_kv(qkv.t, slots, kc, vc, {Hq, Hkv, D, 1.f}); },
                 "must be [num_slots, 2, 20]");
  });
  add(out, "attention_params", [](Harness& hx) {
    auto qkv = hx.random({1, 5 * D}, hx.act());
    auto kc = hx.random({16, 2, D}, hx.act()), vc = hx.random({16, 2, D}, hx.act());
    Tensor out = hx.poisoned({1, 3 * D}, hx.act());
    BatchTensors bt = hx.be.upload_batch(HostBatch{{0}, {0}, {0}, {0, 1}, {1}, {0}, {0}, 1, 1, 1, 1, 16, 1, true});
    expect_error([&] { hx.be.attention(qkv.t, kc.t, vc.t, bt, {3, 2, D, 1.f}, out); },
                 "num_q_heads 3 must be a positive multiple of num_kv_heads 2");
    expect_error([&] { hx.be.attention(qkv.t, kc.t, vc.t, bt, {3, 1, 300, 1.f}, out); },
                 "head_dim 300 is outside the supported [1, 256]");
  });
  add(out, "attention_qkv_width", [](Harness& hx) {
    auto qkv = hx.random({5, W + 16}, hx.act());
    auto kc = hx.random({64, Hkv, D}, hx.act()), vc = hx.random({64, Hkv, D}, hx.act());
    Tensor out = hx.poisoned({5, Hq * D}, hx.act());
    const HostBatch hb = valid_batch();
    BatchTensors bt = hx.be.upload_batch(hb);
    expect_error([&] { hx.be.attention(qkv.t, kc.t, vc.t, bt, {Hq, Hkv, D, 1.f}, out); },
                 "must be [T, 128] = [T, (Hq + 2 Hkv) * D]");
  });
  add(out, "attention_batch_token_count", [](Harness& hx) {
    auto qkv = hx.random({4, W}, hx.act());
    auto kc = hx.random({64, Hkv, D}, hx.act()), vc = hx.random({64, Hkv, D}, hx.act());
    Tensor out = hx.poisoned({4, Hq * D}, hx.act());
    const HostBatch hb = valid_batch();
    BatchTensors bt = hx.be.upload_batch(hb);
    expect_error([&] { hx.be.attention(qkv.t, kc.t, vc.t, bt, {Hq, Hkv, D, 1.f}, out); },
                 "attention: batch has num_tokens 5 and num_seqs 2; qkv has 4 tokens");
  });
  add(out, "gather_rows_out_shape", [](Harness& hx) {
    auto x = hx.random({5, 8}, hx.act());
    Tensor idx = hx.i32({0, 1}, {2});
    Tensor out = hx.poisoned({3, 8}, hx.act());
    expect_error([&] { hx.be.gather_rows(x.t, idx, out); }, "(one row of x per index)");
  });
  add(out, "add_inplace_shape", [](Harness& hx) {
    auto a = hx.random({4, 8}, hx.act()), b = hx.random({8, 4}, hx.act());
    expect_error([&] { hx.be.add_inplace(a.t, b.t); }, "add_inplace: b ");
  });
  add(out, "embedding_out_shape", [](Harness& hx) {
    auto table = hx.random({10, 8}, DType::BF16);
    Tensor ids = hx.i32({1, 2, 3}, {3}), out = hx.poisoned({3, 9}, hx.act());
    expect_error([&] { hx.be.embedding(ids, table.t, 0, out); }, "must be [3, 8]");
  });
  add(out, "tensor_on_other_device", [](Harness& hx) {
    Tensor a = hx.on_other_device({4, 8}, hx.act());
    auto b = hx.random({4, 8}, hx.act());
    expect_error([&] { hx.be.add_inplace(b.t, a); },
                 std::string("the backend runs on ") + device_name(hx.be.device()));
  });
}

}  // namespace nanovllm::conformance
