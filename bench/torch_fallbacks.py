"""What torch.compile(backend=lazuli) leaves to PyTorch eager, per model: ATen graphs, Lazuli
partitions, the `fallback::aten.*` counters, and the first call's wall and CPU time (the table
"Models today" of docs/torch.md).

    PYTHONPATH=python <torch venv>/bin/python bench/torch_fallbacks.py [--models resnet18,...]
        [--modes inference,training]

Each model and mode runs in its own process (dynamo's caches and Lazuli's counters start empty;
a shared fresh LAZULI_CACHE_DIR). Sizes as the table states: batch 2, torchvision models at
64x64 (ViT: vit_b_16's architecture at 32x32, 2 layers, hidden 32), GPT-2 and BERT with 2 layers,
hidden 32, vocabulary 100, 16 tokens, dropout as their configs default (on). Training is
zero_grad, loss, backward and AdamW.step() inside the compiled function. Counters are read after
two calls, so `fallback::` counts are per two steps.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

MODELS = ["resnet18", "mobilenet_v3_small", "vit", "gpt2", "bert"]
VOCAB, SEQ = 100, 16


def build(name):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    if name in ("resnet18", "mobilenet_v3_small", "vit"):
        import torchvision
        if name == "vit":
            model = torchvision.models.VisionTransformer(
                image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=32,
                mlp_dim=64, num_classes=10)
            x = torch.randn(2, 3, 32, 32)
        else:
            model = getattr(torchvision.models, name)(num_classes=10)
            x = torch.randn(2, 3, 64, 64)
        target = torch.randint(0, 10, (2,))
        return model, (x,), lambda out: F.cross_entropy(out, target)
    import transformers
    ids = torch.randint(0, VOCAB, (2, SEQ))
    if name == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=64, bos_token_id=0,
            eos_token_id=0))
        return model, (ids,), lambda out: F.cross_entropy(
            out.logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    model = transformers.BertForSequenceClassification(transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=64, num_labels=3))
    return model, (ids,), lambda out: out.logits.sum()


def worker(name, mode):
    import torch
    import lazuli as lz
    import lazuli.torch as lzt
    model, args, loss_of = build(name)
    if mode == "inference":
        model.eval()
        fn = torch.compile(model, backend=lzt.backend)

        def call():
            with torch.no_grad():
                return fn(*args)
    else:
        model.train()
        opt = torch.optim.AdamW(model.parameters())

        def step(*a):
            opt.zero_grad()
            loss = loss_of(model(*a))
            loss.backward()
            opt.step()
            return loss
        fn = torch.compile(step, backend=lzt.backend)

        def call():
            return fn(*args)
    w0, c0 = time.perf_counter(), time.process_time()
    call()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    call()
    c = lz.debug.counter_value
    eager = {n[len("fallback::"):]: c(n) for n in lz.debug.counter_names()
             if n.startswith("fallback::aten.") and c(n) > 0}
    eager_s = ", ".join(f"{k} {v}" for k, v in sorted(eager.items())) or "none"
    print(f"{name:20s} {mode:9s} graphs {c('TorchGraphCompiled')}, partitions "
          f"{c('TorchPartition')}, ATen ops in eager over 2 calls: {eager_s}; first call "
          f"{wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default="inference,training")
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(*a.worker)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, LAZULI_CACHE_DIR=cache)
        for name in a.models.split(","):
            for mode in a.modes.split(","):
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name,
                                      mode], env=env, capture_output=True, text=True)
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith(name)]
                print(lines[-1] if lines and out.returncode == 0 else
                      f"{name} {mode}: failed\n{out.stderr[-2000:]}", flush=True)


if __name__ == "__main__":
    main()
