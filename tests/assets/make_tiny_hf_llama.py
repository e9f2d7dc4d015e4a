#!/usr/bin/env python3
"""Write a tiny Hugging Face-format Llama with random weights that the real vLLM and SGLang serve.

Run with the engine's own Python (its ``transformers``, ``tokenizers`` and ``torch``): the folder is
what the engine's loader reads from a model hub download, made here without a download:

* ``config.json`` (LlamaForCausalLM: hidden 256, 2 layers, 4 heads of 64, the head size the engines'
  CPU attention kernels take), ``generation_config.json``, ``model.safetensors`` in bfloat16 (about
  1.5 M parameters, 3 MB);
* a byte-level BPE tokenizer (``tokenizer.json`` + ``tokenizer_config.json``) trained on the English
  words of tests/assets/make_tiny_gguf.py with a small vocabulary, so common words split into
  several tokens, as on a real model whose vocabulary the bench's words do not match: a prompt of N
  words is not N tokens (the bench sizes prompts with the engine's ``/tokenize``);
* a ChatML chat template, so ``/v1/chat/completions`` works.

Replies are gibberish; timing, scheduling, metrics and logs are the engine's own. Same arguments,
same files: the weights come from one seeded generator and the tokenizer trainer is deterministic.

    ENGINE_PY tests/assets/make_tiny_hf_llama.py -o DIR
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def corpus() -> list[str]:
    """Lines to train the tokenizer on: the GGUF model's word list, in sentences of 12 words."""
    # Read, not imported: that module needs gguf, which the engines' virtualenvs do not have.
    source = (Path(__file__).resolve().parent / "make_tiny_gguf.py").read_text()
    tree = ast.parse(source)
    words_text = next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == "WORDS" for t in node.targets)
                      and isinstance(node.value, ast.Constant))
    words = str(words_text).split()
    return [" ".join(words[i:i + 12]) for i in range(0, len(words), 12)]


def write_tokenizer(out: Path, vocab_size: int) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIAL[0], eos_token=SPECIAL[2],
                                   pad_token=SPECIAL[0], unk_token=SPECIAL[0])
    fast.chat_template = CHATML_TEMPLATE
    fast.save_pretrained(out)
    return int(tok.get_vocab_size())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", required=True, help="folder to write (created)")
    ap.add_argument("--vocab", type=int, default=512, help="tokenizer vocabulary size")
    ap.add_argument("--seed", type=int, default=20261207)
    args = ap.parse_args()

    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    vocab = write_tokenizer(out, args.vocab)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, head_dim=64, max_position_embeddings=2048, rms_norm_eps=1e-5,
        bos_token_id=0, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False, torch_dtype="bfloat16",
    )
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(bos_token_id=0, eos_token_id=2, pad_token_id=0).save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"out": str(out), "vocab": vocab, "parameters": params}), file=sys.stderr)


if __name__ == "__main__":
    main()
