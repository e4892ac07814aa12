"""Tiny checkpoints built offline, for the smoke serve (pytest_vllm_plugin.serve).

    python -m pytest_vllm_plugin.tiny DEST [--architecture NAME] [--model-type TYPE]
        [--script JSON]

writes a Llama checkpoint of 130k random parameters with a byte-level BPE tokenizer trained on
a few sentences: vLLM serves it on CPU in seconds, and nothing comes from a model hub.

The model is scripted. After the chat template's generation prompt (MARKER) it says the pieces
of script(), one vocabulary entry per piece, then `</s>`, under greedy decoding: each of those
tokens owns a hidden direction that the attention and MLP layers never write, and the output
layer maps it to the next piece, so that part of the model is a fixed chain that no context
disturbs. Any other prompt gets random-weight text that depends on every layer. So a real
serve's output is predictable where a parser must see a known text, and still exercises the
whole model. The same options give the same checkpoint, token for token (SEED).

This module imports only the standard library until a checkpoint is built (torch,
transformers, tokenizers, safetensors: vLLM's own dependencies), so that it also runs by path.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MARKER = "<|assistant|>"
REASONING = "The user wants the weather in Paris."
ANSWER = "Let me check."
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}


def script(
    tool_tags: Sequence[str] | None = None,
    reasoning_tags: Sequence[str] | None = None,
    says: list[str] | None = None,
) -> list[str]:
    """What the model says after MARKER, one token each (then </s>): `says` (the pieces your
    own parsers need), or REASONING between `reasoning_tags` (when given), ANSWER, and CALL as
    JSON between `tool_tags` (when given): what a reasoning and a tool-call parser read."""
    if says is not None:
        return list(says)
    pieces = []
    if reasoning_tags:
        r_start, r_end = reasoning_tags
        pieces += [r_start, REASONING, r_end]
    pieces.append(ANSWER)
    if tool_tags:
        t_start, t_end = tool_tags
        pieces += [t_start, json.dumps(CALL), t_end]
    return pieces


SCRIPT = script()
# Every message's content on its own line, then MARKER: the model answers its script.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}" + MARKER + "{% endif %}"
)
CORPUS = [
    "Hello world, this is a tiny model.",
    "The weather in Paris is sunny today.",
    "Let me think about it step by step.",
    "Tools answer questions about the weather.",
    "One two three four five six seven eight nine ten.",
]
SEED = 0


def build_tokenizer(pieces: list[str] = SCRIPT) -> Any:
    """The tokenizer: BPE on CORPUS plus MARKER and every script piece as single tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodes
    )
    tok.train_from_iterator(CORPUS, trainer)
    # Not special: vLLM drops special tokens from the text it returns, and parsers read text.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in [MARKER, *pieces]])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build(
    dest: Path, architecture: str | None = None, model_type: str | None = None, **options: Any
) -> Path:
    """Write the checkpoint (config.json names `architecture` and `model_type` when given) and
    return `dest`. `options` go to script(): a serve of a parser passes that parser's tags."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    pieces = script(**options)
    tokenizer = build_tokenizer(pieces)
    chain = tokenizer.convert_tokens_to_ids([MARKER, *pieces])
    if len(set(chain)) != len(chain) or tokenizer.unk_token_id in chain:
        raise ValueError(f"script pieces must be distinct single tokens: {[MARKER, *pieces]}")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,  # vLLM's CPU attention needs a head size of at least 32
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config)
    nexts = [*chain[1:], tokenizer.eos_token_id]
    k = len(chain)  # hidden dimensions 0..k-1 carry the chain and nothing else
    with torch.no_grad():
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        embed[:, :k] = 0
        head[:, :k] = 0
        for layer in model.model.layers:  # attention and MLP never write the chain dimensions
            layer.self_attn.o_proj.weight[:k] = 0
            layer.mlp.down_proj.weight[:k] = 0
        for i, (token, nxt) in enumerate(zip(chain, nexts, strict=True)):
            embed[token] = 0
            embed[token, i] = 1.0
            head[token] = head[nxt] = 0  # chain tokens appear only inside the chain
        for i, nxt in enumerate(nexts):
            head[nxt, i] = 10.0 / 8  # the logit of the next piece: about 10, others about 0
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    _check_script(model, tokenizer, pieces)
    if architecture or model_type:  # after saving: save_pretrained() writes Llama's
        config_json = dest / "config.json"
        data = json.loads(config_json.read_text())
        data["architectures"] = [architecture or data["architectures"][0]]
        data["model_type"] = model_type or data["model_type"]
        config_json.write_text(json.dumps(data, indent=2) + "\n")
    return dest


def build_lora(dest: Path, model: Path, rank: int = 8) -> Path:
    """A LoRA adapter (PEFT format) for the tiny checkpoint at `model`: q_proj and v_proj of
    every layer, random and strong enough to change the greedy output."""
    import torch
    from safetensors.torch import save_file

    config = json.loads((model / "config.json").read_text())
    head_dim, hidden = config["head_dim"], config["hidden_size"]
    outputs = {
        "q_proj": config["num_attention_heads"] * head_dim,
        "v_proj": config["num_key_value_heads"] * head_dim,
    }
    generator = torch.Generator().manual_seed(SEED + 1)
    tensors = {}
    for layer in range(config["num_hidden_layers"]):
        for proj, out in outputs.items():
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{proj}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, hidden, generator=generator)
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(out, rank, generator=generator)
    dest.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dest / "adapter_model.safetensors"))
    adapter = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": str(model),
        "r": rank,
        "lora_alpha": rank,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": list(outputs),
        "fan_in_fan_out": False,
        "modules_to_save": None,
    }
    (dest / "adapter_config.json").write_text(json.dumps(adapter, indent=2) + "\n")
    return dest


def _check_script(model: Any, tokenizer: Any, pieces: list[str]) -> None:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the weather in Paris?"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=len(pieces) + 2, do_sample=False)
    said = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    if said != "".join(pieces):
        raise AssertionError(f"the tiny model does not follow its script: {said!r}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--architecture", help='config.json "architectures" entry')
    parser.add_argument("--model-type", help='config.json "model_type"')
    parser.add_argument(
        "--script",
        type=json.loads,
        default={},
        help='script() options as JSON, as a serve plan gives them: {"tool_tags": [START, END],'
        ' "reasoning_tags": [START, END]} or {"says": [PIECE, ...]}',
    )
    args = parser.parse_args(argv)
    print(build(args.dest, args.architecture, args.model_type, **args.script))


if __name__ == "__main__":
    main()
