#!/usr/bin/env python3
"""GPT-2 from transformers (GPT2Config: 2 layers, width 256), trained in
float32 with AdamW on synthetic token batches; --compile trains it under
torch.compile (Inductor's Triton kernels; --compile-backend aot_eager, as
the suite's CPU half runs it, dispatches the ops themselves). Default mode
leaves what a user leaves: nothing but torch.manual_seed (common.py).

Exits 77 (skipped) without PyTorch, transformers or the device.
"""
import common


def extra(p):
    p.add_argument("--compile", action="store_true", help="train the model under torch.compile")
    p.add_argument("--compile-backend", default="inductor", help="torch.compile's backend")


args = common.arguments(__doc__.split("\n\n")[0], extra=extra)
torch, device = common.setup(args)
transformers = common.need("transformers")

config = transformers.GPT2Config(vocab_size=4096, n_positions=256, n_embd=256, n_layer=2, n_head=4)
model = transformers.GPT2LMHeadModel(config).to(device)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
g = common.generator(torch)
batches = [torch.randint(0, config.vocab_size, (8, 128), generator=g) for _ in range(args.steps)]


def loss_of(tokens):
    return model(input_ids=tokens, labels=tokens).loss


if args.compile:
    loss_of = torch.compile(loss_of, backend=args.compile_backend)

steps = common.Steps(torch, device)
for i, tokens in enumerate(batches):
    tokens = tokens.to(device)
    with steps.timed(i):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(tokens)
        loss.backward()
        optimizer.step()
    steps.done(i, loss, model)
steps.final()
