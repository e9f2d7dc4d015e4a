#!/usr/bin/env python3
"""Write a tiny, deterministic LLaMA-architecture GGUF model that the real llama-server can serve.

The weights are random, but shaped so the server behaves like a well-mannered test peer:

* tokenizer: GPT-2 byte-level BPE over ASCII only (control tokens, 97 byte symbols, about 200
  English words with a leading space plus all their prefixes, left-to-right merges), so streamed
  text is always valid UTF-8 and ``/tokenize`` round-trips;
* a ChatML chat template, so ``/v1/chat/completions`` works with llama-server's default ``--jinja``;
* hidden dimension 0 is a constant "bias channel" that no block writes to, so column 0 of the LM
  head is a per-token logit bias: end-of-sequence tokens are pushed far down (every request runs to
  ``max_tokens``, which keeps load tests deterministic) and whole words are pushed up (word salad
  rather than character noise).

Same arguments, same bytes: every random draw comes from one seeded generator.

    python tests/assets/make_tiny_gguf.py -o tiny.gguf                       # 0.22M params, ~0.9 MB
    python tests/assets/make_tiny_gguf.py -o medium.gguf --layers 8 --dim 512 --ff 1536 --heads 8
    python tests/assets/make_tiny_gguf.py -o large.gguf --layers 16 --dim 1024 --ff 2816 --heads 16 --f16
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt

WORDS = """
the of and to in is was for that with on as by at from his her they this have had not are but
one all were we when there can an which their said if do will each about how up out them then
she many some so these would other into has more two like him see time could no make than first
been its who now people my made over did down only way find use may water long little very after
words called just where most know get through back much before go good new write our used me man
too any day same right look think also around another came come work three word must because does
part even place well such here take why things help put years different away again off went old
number great tell men say small every found still between name should home big give air line set
own under read last never us left end along while might next sound below saw something thought both
few those always looked show large often together asked house world going want school important
until form food keep children feet land side without boy once animals life enough took sometimes
four head above kind began almost live page got earth need far hand high year mother light country
father let night following picture being study second eyes soon times story boys since white days
ever paper hard near sentence better best across during today others however sure means knew its
try told young miles sun ways thing whole hear example heard several change answer room sea against
top turned learn point city play toward five using himself usually river window
"""

CONTROL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
BOS_ID, IM_START_ID, EOS_ID = 0, 1, 2

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (space becomes 'Ġ', newline 'Ċ')."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    table: dict[int, str] = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def build_vocab() -> tuple[list[str], list[int], list[str], set[int]]:
    """Return tokens, token types, merges and the ids of whole-word tokens."""
    b2u = byte_to_unicode()
    tokens: list[str] = list(CONTROL_TOKENS)
    types: list[int] = [int(gguf.TokenType.CONTROL)] * len(CONTROL_TOKENS)
    # Only ASCII bytes exist as symbols, so the model can never emit half a UTF-8 sequence.
    for b in [*range(0x20, 0x7F), 0x0A, 0x09]:
        tokens.append(b2u[b])
        types.append(int(gguf.TokenType.NORMAL))
    words = list(dict.fromkeys(WORDS.split()))  # unique, in order
    merges: list[str] = []
    known = set(tokens)
    word_ids: set[int] = set()
    for word in words:
        text = b2u[0x20] + word
        for end in range(2, len(text) + 1):
            piece = text[:end]
            if piece not in known:
                # Left-to-right merges: every prefix is built from the previous prefix and one byte.
                merges.append(f"{text[: end - 1]} {text[end - 1]}")
                known.add(piece)
                tokens.append(piece)
                types.append(int(gguf.TokenType.NORMAL))
        word_ids.add(tokens.index(text))
    return tokens, types, merges, word_ids


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("-o", "--output", type=Path, required=True)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--ff", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=0, help="default: same as --heads")
    p.add_argument("--ctx", type=int, default=4096, help="trained context length")
    p.add_argument("--f16", action="store_true", help="store matrices as F16 (norms stay F32)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--eos-bias", type=float, default=-100.0, help="logit bias of BOS/EOS/EOT (default: never stop)")
    p.add_argument("--word-bias", type=float, default=2.5, help="logit bias of whole-word tokens")
    p.add_argument("--name", default="tiny-llama")
    a = p.parse_args(argv)

    kv_heads = a.kv_heads or a.heads
    if a.dim % a.heads or a.heads % kv_heads:
        p.error("--dim must be a multiple of --heads, and --heads a multiple of --kv-heads")
    head_dim = a.dim // a.heads
    kv_dim = head_dim * kv_heads

    tokens, types, merges, word_ids = build_vocab()
    n_vocab = len(tokens)
    rng = np.random.default_rng(a.seed)
    mat_type = np.float16 if a.f16 else np.float32

    def rand(rows: int, cols: int, std: float) -> npt.NDArray[np.float32]:
        return (rng.standard_normal((rows, cols)) * std).astype(np.float32)

    # Residual stream: dim 0 is the constant bias channel (1.0); the rest is small noise, so the
    # bias channel dominates the final RMSNorm and its scale stays about sqrt(dim) whatever the input.
    embd = rand(n_vocab, a.dim, 0.05)
    embd[:, 0] = 1.0
    out_norm = np.ones(a.dim, dtype=np.float32)
    out_norm[0] = 1.0 / np.sqrt(a.dim)  # makes the normalised bias channel about 1.0
    lm_head = rand(n_vocab, a.dim, 1.0 / np.sqrt(a.dim))
    bias = np.zeros(n_vocab, dtype=np.float32)
    bias[sorted(word_ids)] = a.word_bias
    bias[[BOS_ID, EOS_ID]] = a.eos_bias
    bias[IM_START_ID] = min(a.eos_bias, -100.0)  # a stray <|im_start|> would only confuse clients
    lm_head[:, 0] = bias

    w = gguf.GGUFWriter(str(a.output), "llama")
    w.add_name(a.name)
    w.add_description("random-weight test model generated by enginedeck tests/assets/make_tiny_gguf.py")
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16 if a.f16 else gguf.LlamaFileType.ALL_F32))
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.dim)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_eot_token_id(EOS_ID)
    w.add_pad_token_id(BOS_ID)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)

    w.add_tensor("token_embd.weight", embd.astype(mat_type))
    for i in range(a.layers):
        attn_out = rand(a.dim, a.dim, 0.02)
        ffn_down = rand(a.dim, a.ff, 0.02)
        attn_out[0, :] = 0.0  # no block writes to the bias channel
        ffn_down[0, :] = 0.0
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(a.dim, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", rand(a.dim, a.dim, 0.1).astype(mat_type))
        w.add_tensor(f"blk.{i}.attn_k.weight", rand(kv_dim, a.dim, 0.1).astype(mat_type))
        w.add_tensor(f"blk.{i}.attn_v.weight", rand(kv_dim, a.dim, 0.1).astype(mat_type))
        w.add_tensor(f"blk.{i}.attn_output.weight", attn_out.astype(mat_type))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(a.dim, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(a.ff, a.dim, 0.1).astype(mat_type))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(a.ff, a.dim, 0.1).astype(mat_type))
        w.add_tensor(f"blk.{i}.ffn_down.weight", ffn_down.astype(mat_type))
    w.add_tensor("output_norm.weight", out_norm)
    w.add_tensor("output.weight", lm_head.astype(mat_type))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    n_params = sum(int(t.size) for t in [embd, lm_head]) + a.layers * (
        2 * a.dim + 2 * a.dim * a.dim + 2 * kv_dim * a.dim + 3 * a.ff * a.dim
    )
    print(
        f"wrote {a.output}: {n_vocab} tokens, {len(merges)} merges, {len(word_ids)} words, "
        f"{n_params / 1e6:.2f}M params, {a.output.stat().st_size / 1e6:.1f} MB",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
