/* llama.cpp's logits for a prompt, through its C API: the reference side of gguf_check.py.
   Every position's full logit row ([T, n_vocab] float32, raw little-endian) so the two engines'
   distributions can be compared exactly (KL, top-1), which llama-server's top-n probabilities
   cannot give.

     llama_logits MODEL.gguf IDS(1,2,3) OUT.f32 [THREADS]

   f32 KV cache and no flash attention (its f16 Q path adds noise). Built by gguf_check.py
   against compare.py's llama.cpp build (.cache/peer/llama.cpp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char* text, void* user) {
  (void)user;
  if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL.gguf IDS OUT.f32 [THREADS]\n", argv[0]);
    return 2;
  }
  int n = 0, cap = 16;
  llama_token* ids = malloc(sizeof(llama_token) * cap);
  for (char* s = strtok(argv[2], ","); s; s = strtok(NULL, ",")) {
    if (n == cap) ids = realloc(ids, sizeof(llama_token) * (cap *= 2));
    ids[n++] = atoi(s);
  }
  llama_log_set(quiet, NULL);
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  struct llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t)(n < 64 ? 64 : n);
  cp.n_threads = cp.n_threads_batch = argc > 4 ? atoi(argv[4]) : 2;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  struct llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    b.token[i] = ids[i];
    b.pos[i] = i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = n;
  if (llama_decode(ctx, b) != 0) { fprintf(stderr, "llama_decode failed\n"); return 1; }
  FILE* f = fopen(argv[3], "wb");
  if (!f) { perror(argv[3]); return 1; }
  for (int i = 0; i < n; ++i) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)n_vocab, f);
  fclose(f);
  printf("%d %d\n", n, n_vocab);
  llama_batch_free(b);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  free(ids);
  return 0;
}
