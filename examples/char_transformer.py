"""A tiny character-level transformer language model, trained on text that ships with Python.

The corpus is the documentation strings of a few standard-library modules.  The model reads
``block`` characters and predicts, at every position, the next character (a causal mask stops
it from looking ahead).  After training it writes a sample, one character at a time.

    python examples/char_transformer.py
    python examples/char_transformer.py --compile    # compile the training step
    python examples/char_transformer.py --smoke      # a few steps, with checks (for CI)
"""
import argparse
import collections
import functools
import json
import math
import random
import string
import textwrap
import time

import dynograph as torch
import dynograph.nn as nn
import dynograph.nn.functional as F

from _progress import Progress, timed_first_call

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=1500)
parser.add_argument("--compile", action="store_true", help="compile the training step")
parser.add_argument("--smoke", action="store_true", help="a few steps with checks (for CI)")
args = parser.parse_args()
torch.manual_seed(0)

# --- The data: a string of text, and a character <-> integer mapping ------------------------
modules = [collections, functools, json, random, string, textwrap]
text = "\n\n".join(m.__doc__ for m in modules)
for m in modules:            # add the docstrings of each module's public functions and classes
    text += "\n\n".join(getattr(m, name).__doc__ or "" for name in sorted(dir(m)) if not name.startswith("_"))
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
encode = lambda s: [stoi[c] for c in s]                 # noqa: E731  string -> list of ints
decode = lambda ids: "".join(chars[i] for i in ids)     # noqa: E731  list of ints -> string
data = torch.tensor(encode(text), dtype=torch.long)
split = int(0.9 * len(data))
train_data, val_data = data[:split], data[split:]
print(f"{len(text):,} characters, {len(chars)} distinct")

# Small settings: this trains in minutes on a CPU.
block, batch, d_model, heads, layers = 64, 32, 64, 4, 2
if args.smoke:
    args.steps, block, batch = 60, 32, 16


def get_batch(source):
    """`batch` random windows of the text: inputs x and targets y (x shifted by one)."""
    starts = torch.randint(len(source) - block - 1, (batch,))
    x = torch.stack([source[i:i + block] for i in starts.tolist()])
    y = torch.stack([source[i + 1:i + block + 1] for i in starts.tolist()])
    return x, y


# --- The model: embeddings, a stack of transformer layers with a causal mask, a linear head -
class CharTransformer(nn.Module):
    def __init__(self, vocab, d_model, heads, layers, block):
        super().__init__()
        self.token = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(block, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        # position i may attend to positions <= i only (-inf above the diagonal)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(block))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.token(idx) + self.position(torch.arange(t))
        x = self.encoder(x, mask=self.mask[:t, :t], is_causal=True)
        return self.head(self.norm(x))             # (batch, t, vocab) logits


model = CharTransformer(len(chars), d_model, heads, layers, block)
print(f"{sum(p.numel() for p in model.parameters()):,} parameters")
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)


def train_step(x, y):
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


if args.compile:
    train_step = timed_first_call(torch.compile(train_step))


@torch.no_grad()
def estimate_loss(source, batches=4):
    model.eval()
    loss = sum(F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1)).item()
               for x, y in (get_batch(source) for _ in range(batches))) / batches
    model.train()
    return loss


@torch.no_grad()
def generate(prompt, length):
    """Sample one character at a time from the model's predicted distribution."""
    model.eval()
    idx = torch.tensor([encode(prompt)], dtype=torch.long)
    for _ in range(length):
        logits = model(idx[:, -block:])[:, -1, :]           # the prediction for the last position
        probs = F.softmax(logits, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, num_samples=1)], dim=1)
    return decode(idx[0].tolist())


# --- Training -------------------------------------------------------------------------------
val_before = estimate_loss(val_data)
uniform = math.log(len(chars))                              # the loss of guessing uniformly
print(f"validation loss before training {val_before:.3f} (uniform guessing: {uniform:.3f})")
start = time.perf_counter()
bar = Progress(range(args.steps), desc="training", unit="char")
for step in bar:
    loss = train_step(*get_batch(train_data)).item()
    bar.update(loss=loss, items=batch * block)
    if (step + 1) % max(args.steps // 10, 1) == 0:
        print(f"step {step + 1:5d}  loss {loss:.3f}  ({time.perf_counter() - start:.1f} s)")
val_after = estimate_loss(val_data)
print(f"validation loss after training {val_after:.3f}")

sample = generate("The ", 100 if args.smoke else 400)
print("--- sample ---")
print(sample)

if args.smoke:
    assert val_after < val_before - 0.5, (val_before, val_after)
    assert len(sample) == 104 and set(sample) <= set(chars)
    print("smoke: the validation loss decreased and the model wrote a sample")
