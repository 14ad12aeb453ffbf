#!/usr/bin/env python3
"""A transformers model generating with its KV cache in kvcache, on the GPU,
compared with the model's own generate().

A small Llama-architecture model with random weights (LlamaConfig, no
download; bf16 on cuda:0) generates greedily twice:

1. request 1: a 552-token prompt. Its prefill runs the model's layers with
   attention computed by torch's scaled_dot_product_attention (kvcache's
   prefill-attention kernel is not on this branch); every layer's K and V
   go into kvcache with kvc_store_kv_strided straight from the
   [batch, kv_heads, tokens, head_dim] views the layers produce (no copy).
   Each decoded token: kvc_batch_extend, kvc_batch_slot_mapping, the
   strided store and kvc_decode_attention over the paged blocks.
2. request 2: a prompt sharing request 1's first 512 tokens. kvcache says
   512 tokens are cached; only the other 40 are computed (their attention
   over the cached K/V read back from the pool through the layer views, with
   torch SDPA), then decoding as above.

Each is compared with model.generate() on the same prompt (the model's own
DynamicCache and attention): the tokens must be identical except where the
reference's two best logits are within one bf16 step of each other (a tie
that rounding decides; reported, and the comparison goes on from the
reference's token), and the largest logit difference is printed. The K/V
bytes kvcache holds for request 1 are also checked bit for bit against the
tensors the layers produced.

Needs torch, transformers and a CUDA GPU with a CUDA build of libkvcache;
elsewhere it prints why and exits 77 (ctest: skipped).

    KVCACHE_LIBRARY=build/libkvcache.so.0 PYTHONPATH=bindings/python \\
        python3 examples/python/transformers_e2e.py
"""
import math
import os
import sys
import time

SKIP = 77


def skip(reason):
    print("transformers_e2e: skipped: " + reason)
    sys.exit(SKIP)


try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError:
    skip("torch is not installed (this example runs on a GPU machine with PyTorch)")
try:
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError:
    skip("transformers is not installed")
if not torch.cuda.is_available():
    skip("no CUDA device visible to torch")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bindings", "python"))
import kvcache  # noqa: E402

try:  # the model's own SDPA call, so that a prefill computes what generate() does
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
except ImportError:
    sdpa_attention_forward = None
PREFILL_ATTENTION = []  # which path the prefill took, for the report


def sdpa(module, q, k, v, mask):
    """Prefill attention: transformers' sdpa_attention_forward (mask None:
    causal), else torch's SDPA; [1, n, heads, dim]."""
    if sdpa_attention_forward is not None:
        try:
            o, _ = sdpa_attention_forward(module, q, k, v,
                                          None if mask is None else mask[None, None],
                                          dropout=0.0, scaling=module.scaling,
                                          is_causal=mask is None)
            PREFILL_ATTENTION.append("transformers' sdpa_attention_forward")
            return o
        except TypeError as e:  # another signature: fall back
            PREFILL_ATTENTION.append("torch SDPA (sdpa_attention_forward: %s)" % e)
    PREFILL_ATTENTION.append("torch SDPA")
    if mask is None:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    else:
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    return o.transpose(1, 2)

if not kvcache.features() & kvcache.Feature.CUDA_DEVICE:
    skip("libkvcache (%s) has no usable CUDA device (features %s)"
         % (kvcache.library_path, kvcache.features()))

LAYERS, HEADS, KV_HEADS, HEAD_DIM = 4, 16, 4, 128
SHARED, REST, NEW_TOKENS, T = 512, 40, 32, 16
MAX_LEN = 1024
dev = torch.device("cuda:0")


def build_model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=4096, hidden_size=HEADS * HEAD_DIM, intermediate_size=4096,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
                      max_position_embeddings=MAX_LEN,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(cfg).to(device=dev, dtype=torch.bfloat16).eval()
    return model


def reference(model, prompt):
    """model.generate(): greedy, the model's own cache and attention.
    Returns (tokens, [logits per step] as float32)."""
    ids = torch.tensor([prompt], device=dev)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                         do_sample=False, output_logits=True,
                         return_dict_in_generate=True, pad_token_id=0)
    tokens = out.sequences[0, len(prompt):].tolist()
    return tokens, [x[0].float() for x in out.logits]


class KvcacheRunner:
    """The model's layers, with the KV cache in kvcache."""

    def __init__(self, model, cache):
        self.model, self.cache = model, cache
        self.m = model.model
        self.stream = torch.cuda.current_stream()
        self.q_heads = HEADS
        self.table = np.full((1, MAX_LEN // T), -1, dtype=np.int32)
        ws = cache.decode_workspace_size(0, 1, HEADS, MAX_LEN)
        self.workspace = torch.empty(max(ws, 1), dtype=torch.uint8, device=dev)
        self.out = torch.empty((1, HEADS, HEAD_DIM), dtype=torch.bfloat16, device=dev)
        # Every layer's K/V as a torch view of the pool: [blocks, kv, T, heads, dim].
        self.pool_views = [self._layer_tensor(i) for i in range(LAYERS)]
        self.rotary = getattr(self.m, "rotary_emb", None)

    def _layer_tensor(self, layer):
        v = self.cache.layer_view(layer)

        class DeviceArray:  # __cuda_array_interface__ over kvcache's pool
            __cuda_array_interface__ = {
                "shape": (v.num_blocks, v.kv_factor, v.tokens_per_block, v.kv_heads, v.head_dim),
                "strides": (v.block_stride, v.kv_stride, v.token_stride, v.head_stride,
                            v.elem_size),
                "typestr": "<i2", "data": (v.base, False), "version": 3}
        return torch.as_tensor(DeviceArray(), device=dev).view(torch.bfloat16)

    def cached_kv(self, layer, seq, n):
        """K and V of the first n tokens of `seq`, read from the pool:
        [1, kv_heads, n, dim] each."""
        blocks = torch.tensor(self.cache.block_ids(seq)[:(n + T - 1) // T], device=dev)
        kv = self.pool_views[layer][blocks]          # [blocks, 2, T, heads, dim]
        kv = kv.permute(1, 3, 0, 2, 4).reshape(2, KV_HEADS, -1, HEAD_DIM)[:, :, :n]
        return kv[0].unsqueeze(0), kv[1].unsqueeze(0)

    @staticmethod
    def rope(x, cos, sin):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return (x * cos) + (rotated * sin)

    def forward(self, seq, tokens, start, slots, attention):
        """Runs `tokens` (positions start..) through the model; K/V of each
        layer stored at `slots` (device int64) with the strided store;
        attention(layer, q, k, v) gives [1, n, heads, dim]. Returns the
        last position's logits (float32) and the per-layer (k, v)."""
        n = len(tokens)
        ids = torch.tensor([tokens], device=dev)
        pos = torch.arange(start, start + n, device=dev).unsqueeze(0)
        h = self.m.embed_tokens(ids)
        rotary = self.rotary or self.m.layers[0].self_attn.rotary_emb
        cos, sin = rotary(h, pos)
        kvs = []
        for i, layer in enumerate(self.m.layers):
            a = layer.self_attn
            residual = h
            x = layer.input_layernorm(h)
            shape = (1, n, -1, HEAD_DIM)
            q = a.q_proj(x).view(shape).transpose(1, 2)
            k = a.k_proj(x).view(shape).transpose(1, 2)
            v = a.v_proj(x).view(shape).transpose(1, 2)   # a strided view
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            # [1, kv_heads, n, dim] views, as the layer holds them: no copy.
            self.cache.store_kv(i, k, v, slots, stream=self.stream)
            kvs.append((k, v))
            o = attention(i, a, q, k, v).reshape(1, n, -1).contiguous()
            h = residual + a.o_proj(o)
            residual = h
            h = residual + layer.mlp(layer.post_attention_layernorm(h))
        h = self.m.norm(h)
        return self.model.lm_head(h[:, -1:, :])[0, -1].float(), kvs

    def prefill(self, seq, prompt):
        cached = self.cache.add_sequence(seq, prompt, stream=self.stream)
        slots = torch.from_numpy(self.cache.slot_mapping([seq]).slots[cached:]).to(dev)
        rest = prompt[cached:]

        def attention(i, a, q, k, v):
            if not cached:
                return sdpa(a, q, k, v, None)
            # The cached prefix's K/V, read back from kvcache's pool.
            ck, cv = self.cached_kv(i, seq, cached)
            k, v = torch.cat((ck, k), dim=2), torch.cat((cv, v), dim=2)
            n = q.shape[2]
            mask = torch.ones(n, cached + n, dtype=torch.bool, device=dev).tril(cached)
            return sdpa(a, q, k, v, mask)

        logits, kvs = self.forward(seq, rest, cached, slots, attention)
        self.cache.commit(seq, len(prompt))
        return cached, logits, kvs

    def decode(self, seq, token, position):
        """Appends `token` and computes the next logits through
        kvc_decode_attention."""
        self.cache.batch_extend([seq], [token])
        slots = torch.from_numpy(self.cache.slot_mapping([seq]).slots).to(dev)
        self.cache.block_table([seq], self.table)
        table = torch.from_numpy(self.table).to(dev)
        lens = torch.from_numpy(self.cache.sequence_lengths([seq])).to(dev)

        def attention(i, a, q, k, v):
            self.cache.decode_attention(i, q[:, :, 0], self.out, lens, table,
                                        max_seq_len=MAX_LEN, workspace=self.workspace,
                                        stream=self.stream)
            return self.out.unsqueeze(1)

        logits, _ = self.forward(seq, [token], position, slots, attention)
        return logits


def bf16_step(x):
    """One bf16 step (ulp) at the magnitude of x."""
    return 2.0 ** (math.floor(math.log2(abs(x))) - 7) if x != 0 else 2.0 ** -133


def generate(runner, seq, prompt, ref_tokens, ref_logits):
    """Greedy decoding through kvcache; where its token differs from the
    reference's, the reference must have had a top-2 tie (then decoding
    goes on from the reference's token). Returns a report dict."""
    t0 = time.perf_counter()
    cached, logits, kvs = runner.prefill(seq, prompt)
    tokens, ties, mismatches, max_diff, prefill_diff = [], [], [], 0.0, 0.0
    for step in range(len(ref_tokens)):
        if step > 0:
            logits = runner.decode(seq, tokens[-1], len(prompt) + step - 1)
        ref = ref_logits[step]
        diff = (logits - ref).abs().max().item()
        if step == 0:
            prefill_diff = diff
        else:
            max_diff = max(max_diff, diff)
        mine = int(logits.argmax())
        want = ref_tokens[step]
        if mine != want:
            top = torch.topk(ref, 2).values.tolist()
            if top[0] - top[1] <= bf16_step(top[0]):
                ties.append((step, want, mine, top[0], top[1]))
            else:
                mismatches.append((step, want, mine, top[0], top[1]))
            mine = want
        tokens.append(mine)
    torch.cuda.synchronize()
    return dict(cached=cached, computed=len(prompt) - cached, tokens=tokens, ties=ties,
                mismatches=mismatches, max_diff=max_diff, prefill_diff=prefill_diff, kvs=kvs,
                seconds=time.perf_counter() - t0)


def check_stored_bytes(runner, seq, kvs, n):
    """The K/V kvcache holds for `seq` equal the layers' tensors bit for bit."""
    for i, (k, v) in enumerate(kvs):
        ck, cv = runner.cached_kv(i, seq, n)
        if not (torch.equal(ck.view(torch.int16), k.contiguous().view(torch.int16)) and
                torch.equal(cv.view(torch.int16), v.contiguous().view(torch.int16))):
            return False
    return True


def report(name, prompt, r, ref_tokens):
    same = len(ref_tokens) - len(r["ties"]) - len(r["mismatches"])
    print("%s: prompt %d tokens, %d cached by kvcache, %d computed; %d new tokens in %.2f s"
          % (name, len(prompt), r["cached"], r["computed"], len(ref_tokens), r["seconds"]))
    print("  tokens identical to generate(): %d of %d; ties (reference top-2 within one bf16 "
          "step): %d; other differences: %d" % (same, len(ref_tokens), len(r["ties"]),
                                                len(r["mismatches"])))
    for step, want, mine, a, b in r["ties"] + r["mismatches"]:
        print("    step %d: generate() chose %d, kvcache %d (reference top-2 logits %.4f, %.4f: "
              "%.0f bf16 steps apart)" % (step, want, mine, a, b, (a - b) / bf16_step(a)))
    print("  max |logit difference|: %.4g after the prefill, %.4g over the decode steps"
          % (r["prefill_diff"], r["max_diff"]))
    return not r["mismatches"]


def main():
    print("torch %s, transformers %s, %s; kvcache %s (%s)"
          % (torch.__version__, transformers.__version__, torch.cuda.get_device_name(0),
             kvcache.version_string(), kvcache.library_path))
    model = build_model()
    print("model: Llama architecture, random weights, %d layers, %d query / %d kv heads, head "
          "dim %d, bf16" % (LAYERS, HEADS, KV_HEADS, HEAD_DIM))
    g = torch.Generator().manual_seed(1)
    shared = torch.randint(3, 4096, (SHARED,), generator=g).tolist()
    prompt1 = shared + torch.randint(3, 4096, (REST,), generator=g).tolist()
    prompt2 = shared + torch.randint(3, 4096, (REST,), generator=g).tolist()
    if prompt2[SHARED] == prompt1[SHARED]:  # the prompts part at token SHARED exactly
        prompt2[SHARED] = 3 + (prompt2[SHARED] - 2) % 4093
    with torch.inference_mode():
        ref1 = reference(model, prompt1)
        ref2 = reference(model, prompt2)
        # The model's process keeps its memory: the pool is bounded by
        # max_tokens, not by the default 90% of the free GPU memory.
        with kvcache.Cache(num_layers=LAYERS, kv_heads=KV_HEADS, head_dim=HEAD_DIM,
                           dtype="bf16", tokens_per_block=T, device="cuda:0",
                           max_tokens=8 * MAX_LEN, free_gpu_memory_fraction=0.5) as cache:
            print("cache: %r" % cache)
            print("attention: decode by kvc_decode_attention; prefill by SDPA "
                  "(kvc_prefill_attention is not on this branch); K/V stored by "
                  "kvc_store_kv_strided from the layers' [1, kv_heads, tokens, head_dim] views")
            runner = KvcacheRunner(model, cache)
            r1 = generate(runner, 1, prompt1, *ref1)
            stored_ok = check_stored_bytes(runner, 1, r1["kvs"], len(prompt1))
            r2 = generate(runner, 2, prompt2, *ref2)
            err = cache.async_error(runner.stream)
            stats = cache.stats()
    ok = report("request 1", prompt1, r1, ref1[0])
    print("  K/V of its %d prompt tokens read back from kvcache's pool: %s"
          % (len(prompt1), "bit-identical to the layers' tensors" if stored_ok else "DIFFERENT"))
    ok = report("request 2 (shares request 1's first %d tokens)" % SHARED, prompt2, r2,
                ref2[0]) and ok
    print("prefill attention path: %s" % ", ".join(sorted(set(PREFILL_ATTENTION))))
    print("cache stats: %d blocks reused, hit rate %.2f; kernel errors: %s"
          % (stats.reused_blocks, stats.hit_rate, err or "none"))
    ok = ok and stored_ok and err is None and r2["cached"] == SHARED
    print("transformers_e2e: %s" % ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
