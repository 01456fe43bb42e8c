#!/usr/bin/env python3
"""A Llama-style causal LM from transformers (LlamaConfig: 4 layers, hidden
256, SDPA attention), trained under bf16 autocast (common.autocast) with AdamW(fused=True) on
synthetic token batches; with --checkpointing, each layer's forward is
recomputed in the backward pass. Default mode leaves what a user leaves:
nothing but torch.manual_seed (common.py).

Exits 77 (skipped) without PyTorch, transformers or the device.
"""
import common

args = common.arguments(__doc__.split("\n\n")[0], extra=lambda p: p.add_argument(
    "--checkpointing", action="store_true", help="activation checkpointing (gradient_checkpointing_enable)"))
torch, device = common.setup(args)
transformers = common.need("transformers")

config = transformers.LlamaConfig(
    vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
    num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256,
    attn_implementation="sdpa")
model = transformers.LlamaForCausalLM(config).to(device)
model.train()
if args.checkpointing:
    model.gradient_checkpointing_enable()  # each layer's forward recomputed in the backward pass
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
g = common.generator(torch)
batches = [torch.randint(0, config.vocab_size, (8, 128), generator=g) for _ in range(args.steps)]

steps = common.Steps(torch, device)
for i, tokens in enumerate(batches):
    tokens = tokens.to(device)
    with steps.timed(i):
        optimizer.zero_grad(set_to_none=True)
        with common.autocast(torch, device, torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
    steps.done(i, loss, model)
steps.final()
