"""A sweep over small variants of the public model families of PyTorch's inductor CPU dashboard
torch.compile(backend=lazuli.torch.backend) against eager and inductor.

The models: the families of pytorch/pytorch's benchmarks/dynamo/timm_models_list_cpu.txt and
huggingface_models_list_cpu.txt, each as its smallest timm variant (or a timm model shrunk by
constructor arguments) or a transformers model built from a tiny config (the HF hub cannot be
reached: random weights), plus a few torchvision models. One list, MODELS, read by
tests/python/torch_frontend/test_model_sweep.py too. Random weights (seed 0), dropout off, small
inputs: images batch 2 at 64x64 (or the model's minimum), token ids batch 2 x 32.

Per model, in one process of its own (fresh LAZULI_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR: nothing
is cached between runs, nor between models):
  inference  lazuli's output against eager (max abs error and that over eager's largest output);
             where float32 disagrees beyond tolerance, a float64 copy of the model in eager
             (the referee) decides: lazuli passes if it is at most 2x as far from float64 as eager
  training   one step (cross entropy against random targets, backward): the loss and every
             parameter's gradient against eager, a gradient's error over that parameter's largest
             gradient (floored at 1e-5 of the model's largest, for gradients that are zero in
             exact arithmetic); and each side's worst gradient error against the float64 referee:
             "match" within tolerance of eager, "referee" at most 2x as far from float64 as eager
             (loss and gradients), "ill-conditioned" where eager's own gradients are over 0.1 off
             float64's (float32 lost them: no side to trust), else "MISMATCH"
  fallbacks  the ATen overloads Lazuli left to eager (fallback::aten.* counters that ran)
  partitions FX graphs, Lazuli partitions and partition traces of the first call (counters)
  first call the first compiled call (dynamo + compile + run) of lazuli and of inductor
  steady     per-call time of eager, inductor and lazuli, inference and the training step,
             candidates interleaved (round robin, rotated each round), median over rounds.
             OpenMP's wait policy is left as the caller has it (unset: OpenMP's default, what
             users run): OMP_WAIT_POLICY=PASSIVE, which this sweep set before 2026-12-06, makes
             every small ATen op of eager and inductor wake PyTorch's OpenMP team from sleep, and
             made them 3x slower on the tiny transformers (bench/RESULTS.md 23).
             bench/sweep_isolated.py times each candidate in a process of its own instead

Run (the torch venv of scripts/torch-venv.sh, timm included):
  PYTHONPATH=python <torch venv>/bin/python bench/model_sweep.py [--models a,b,...]
      [--no-inductor] [--quick] [--busy] [--rounds 5] [--json out.json] [--timeout 1200]
  --models   comma-separated names or substrings of names, families or groups ("timm", "hf")
  --quick    fewer rounds (3) and shorter rounds, for a look
  --busy     one process spins on the last core while the steady rounds run (bench/busy_bench.py)
  --report results.json  prints the tables of an earlier run again
Output: the markdown tables on stdout, the JSON under bench/results/ (or --json).
"""
import argparse
import copy
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULT = "MODEL_SWEEP_RESULT "

IMAGE, BATCH, SEQ, VOCAB = 64, 2, 32, 1000
# Tolerances. Inference: max abs error over eager's largest output. Training: the loss's relative
# error; a gradient's max abs error over its parameter's largest gradient. Beyond them the float64
# referee decides (REFEREE_SLACK: how much farther from float64 than eager lazuli may be).
INFER_TOL, LOSS_TOL, GRAD_TOL, REFEREE_SLACK = 1e-4, 1e-4, 1e-3, 2.0
# A parameter's gradient scale is floored at this fraction of the model's largest gradient: some
# gradients are zero in exact arithmetic (attention's key bias, a bias before a training-mode batch
# norm) and both sides compute rounding noise there (tests/python/torch_frontend/model_checks.py).
GRAD_FLOOR = 1e-5
# Where eager's worst gradient is this far from float64's (its parameter's scale), float32 has lost
# the gradients (a training-mode batch norm over 2 values: 1x1 maps at batch 2); such a step is
# "ill-conditioned", neither a match nor a mismatch.
ILL_CONDITIONED = 0.1


# ---- the models -----------------------------------------------------------------------------------
# name -> spec. kind: "timm" (timm.create_model(arch, pretrained=False, num_classes=10, **kw)),
# "tv" (torchvision.models.<arch>(weights=None, num_classes=10, **kw)), "hf" (transformers:
# <cls>(<config>(**kw)); enc-dec models also get decoder_input_ids). group: geomeans are per group;
# family: the dashboard's family the model stands for.

def _timm(family, arch=None, img=IMAGE, **kw):
    return {"kind": "timm", "group": "timm-cnn", "family": family, "arch": arch, "img": img, "kw": kw}


def _vit(family, arch=None, img=IMAGE, **kw):
    return {"kind": "timm", "group": "timm-vit", "family": family, "arch": arch, "img": img, "kw": kw}


def _tv(family, arch=None, img=IMAGE, **kw):
    return {"kind": "tv", "group": "torchvision", "family": family, "arch": arch, "img": img, "kw": kw}


def _hf(family, cls, config, encdec=False, **kw):
    return {"kind": "hf", "group": "hf", "family": family, "cls": cls, "config": config,
            "encdec": encdec, "kw": kw}


# Tiny transformer sizes: 2 layers, hidden 64, 2 heads, vocabulary 1000, no dropout.
_BERT = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)
_BART = dict(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
             encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128,
             decoder_ffn_dim=128, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
             activation_dropout=0.0, use_cache=False, pad_token_id=1, bos_token_id=0, eos_token_id=2,
             decoder_start_token_id=2,
             # LayerDrop (M2M100's default 0.05) skips layers at random: eager and the compiled
             # model draw differently, and each draw is a graph break
             encoder_layerdrop=0.0, decoder_layerdrop=0.0)
_T5 = dict(vocab_size=VOCAB, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_decoder_layers=2,
           num_heads=2, dropout_rate=0.0, use_cache=False, decoder_start_token_id=0)

MODELS = {
    # timm, convolutional (the dashboard's timm list: resnet..., with the smallest variants)
    "resnet10t": _timm("resnet"),
    "resnest14d": _timm("resnest"),
    "mobilenetv2_050": _timm("mobilenetv2"),
    "mobilenetv3_small_050": _timm("mobilenetv3"),
    "tf_mixnet_s": _timm("mixnet"),
    "tf_efficientnet_b0": _timm("efficientnet"),
    "dm_nfnet_f0": _timm("nfnet", drop_rate=0.0),
    "regnety_002": _timm("regnet"),
    "rexnet_100": _timm("rexnet"),
    "ghostnet_050": _timm("ghostnet"),
    "convnext_atto": _timm("convnext"),
    "poolformer_s12": _timm("poolformer"),
    "mnasnet_small": _timm("mnasnet"),
    "spnasnet_100": _timm("spnasnet"),
    "tinynet_e": _timm("tinynet"),
    "lcnet_050": _timm("lcnet"),
    "hrnet_w18_small": _timm("hrnet"),
    # 160: the last stage's maps are 3x3; at 96 they are 1x1, and a training-mode batch norm over
    # 2 values leaves float32 no digits (eager's gradients 3x their scale off float64's).
    "inception_v3": _timm("inception", img=160),
    "xception41": _timm("xception", img=96),
    "res2net50_14w_8s": _timm("res2net"),
    "selecsls42b": _timm("selecsls"),
    "sebotnet33ts_256": _timm("botnet (self-attention in a resnet)", img_size=64),
    "cspdarknet53": _timm("cspdarknet"),
    "dla46_c": _timm("dla"),
    "dpn48b": _timm("dpn"),
    "convmixer_768_32": _timm("convmixer"),
    "mobilevit_xxs": _timm("mobilevit"),
    # timm, attention and MLP models, shrunk where the smallest variant is large
    "vit_tiny_patch16_224": _vit("vit", img_size=64),
    "deit_tiny_distilled_patch16_224": _vit("deit", img_size=64),
    "beit_base_patch16_224": _vit("beit", img_size=64, embed_dim=96, depth=2, num_heads=2),
    "convit_tiny": _vit("convit", img_size=64),
    "swin_tiny_patch4_window7_224": _vit("swin", img_size=64, window_size=4, embed_dim=48,
                                         depths=(2, 2, 2, 2), num_heads=(2, 2, 4, 4)),
    "gmixer_12_224": _vit("mixer (gated)", img_size=64),
    "gmlp_s16_224": _vit("gmlp", img_size=64),
    "pit_ti_224": _vit("pit", img_size=64),
    "tnt_s_legacy_patch16_224": _vit("tnt", img_size=64, depth=4),
    "visformer_tiny": _vit("visformer", img_size=64),
    "volo_d1_224": _vit("volo", img_size=64),
    "crossvit_tiny_240": _vit("crossvit", img=240),
    "coat_lite_tiny": _vit("coat", img_size=64),
    "levit_128s": _vit("levit", img_size=64),
    "nest_tiny_jx": _vit("jx_nest", img_size=64),
    "twins_pcpvt_small": _vit("twins", img_size=64, depths=(1, 1, 1, 1)),
    "xcit_nano_12_p16_224": _vit("xcit", img_size=64, depth=4),
    "cait_xxs24_224": _vit("cait", img_size=64, depth=4),
    # torchvision
    "tv_resnet18": _tv("resnet", "resnet18"),
    "tv_mobilenet_v3_small": _tv("mobilenet", "mobilenet_v3_small"),
    # transformers (the dashboard's HF list), tiny configs
    "BertForMaskedLM": _hf("bert", "BertForMaskedLM", "BertConfig", **_BERT),
    "AlbertForMaskedLM": _hf("albert", "AlbertForMaskedLM", "AlbertConfig", embedding_size=32, **_BERT),
    "DistilBertForMaskedLM": _hf("distilbert", "DistilBertForMaskedLM", "DistilBertConfig",
                                 vocab_size=VOCAB, dim=64, n_layers=2, n_heads=2, hidden_dim=128,
                                 max_position_embeddings=64, dropout=0.0, attention_dropout=0.0),
    "RobertaForCausalLM": _hf("roberta", "RobertaForCausalLM", "RobertaConfig", is_decoder=True,
                              pad_token_id=1, **_BERT),
    "ElectraForCausalLM": _hf("electra", "ElectraForCausalLM", "ElectraConfig", is_decoder=True,
                              embedding_size=32, **_BERT),
    "LayoutLMForMaskedLM": _hf("layoutlm", "LayoutLMForMaskedLM", "LayoutLMConfig", **_BERT),
    "MobileBertForMaskedLM": _hf("mobilebert", "MobileBertForMaskedLM", "MobileBertConfig",
                                 vocab_size=VOCAB, hidden_size=64, embedding_size=32,
                                 true_hidden_size=32, intra_bottleneck_size=32,
                                 num_feedforward_networks=2, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=64,
                                 max_position_embeddings=64, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0),
    "DebertaV2ForMaskedLM": _hf("deberta-v2", "DebertaV2ForMaskedLM", "DebertaV2Config",
                                relative_attention=True, pos_att_type=["p2c", "c2p"],
                                position_buckets=16, **_BERT),
    "ConvBertForMaskedLM": _hf("convbert (YituTechConvBert)", "ConvBertForMaskedLM", "ConvBertConfig",
                               embedding_size=64, **_BERT),
    "FNetForMaskedLM": _hf("fnet (GoogleFnet)", "FNetForMaskedLM", "FNetConfig", vocab_size=VOCAB,
                           hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                           max_position_embeddings=64, hidden_dropout_prob=0.0),
    "GPT2ForSequenceClassification": _hf("gpt2", "GPT2ForSequenceClassification", "GPT2Config",
                                         vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=2,
                                         n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                         attn_pdrop=0.0, num_labels=4, pad_token_id=0,
                                         use_cache=False),
    "DistillGPT2": _hf("gpt2", "GPT2LMHeadModel", "GPT2Config", vocab_size=VOCAB, n_embd=64, n_layer=2,
                       n_head=2, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                       use_cache=False),
    "GPTNeoForCausalLM": _hf("gpt-neo", "GPTNeoForCausalLM", "GPTNeoConfig", vocab_size=VOCAB,
                             hidden_size=64, num_layers=2, num_heads=2,
                             attention_types=[[["global", "local"], 1]], window_size=16,
                             max_position_embeddings=64, embed_dropout=0.0, attention_dropout=0.0,
                             resid_dropout=0.0, use_cache=False),
    "OPTForCausalLM": _hf("opt", "OPTForCausalLM", "OPTConfig", vocab_size=VOCAB, hidden_size=64,
                          num_hidden_layers=2, ffn_dim=128, num_attention_heads=2,
                          word_embed_proj_dim=64, max_position_embeddings=64, dropout=0.0,
                          attention_dropout=0.0, use_cache=False),
    "XLNetLMHeadModel": _hf("xlnet", "XLNetLMHeadModel", "XLNetConfig", vocab_size=VOCAB, d_model=64,
                            n_layer=2, n_head=2, d_inner=128, dropout=0.0, use_mems_train=False,
                            use_mems_eval=False),
    "BartForCausalLM": _hf("bart", "BartForCausalLM", "BartConfig", **_BART),
    "MBartForCausalLM": _hf("mbart", "MBartForCausalLM", "MBartConfig", **_BART),
    "PegasusForCausalLM": _hf("pegasus", "PegasusForCausalLM", "PegasusConfig", **_BART),
    "TrOCRForCausalLM": _hf("trocr", "TrOCRForCausalLM", "TrOCRConfig", vocab_size=VOCAB, d_model=64,
                            decoder_layers=2, decoder_attention_heads=2, decoder_ffn_dim=128,
                            max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                            activation_dropout=0.0, use_cache=False, pad_token_id=1),
    "M2M100ForConditionalGeneration": _hf("m2m100", "M2M100ForConditionalGeneration", "M2M100Config",
                                          encdec=True, **_BART),
    "T5ForConditionalGeneration": _hf("t5", "T5ForConditionalGeneration", "T5Config", encdec=True, **_T5),
}


# The sweep's smallest models of three kinds, which tests/python/torch_frontend/test_model_sweep.py
# runs through the same checks in CI: a timm convolutional net, a timm vision transformer (shrunk),
# a transformers encoder.
CI_SUBSET = ("lcnet_050", "beit_base_patch16_224", "BertForMaskedLM")


def select(patterns):
    """The names of MODELS that match any of the comma-separated patterns (a name, or a substring of
    a name, family or group); all of them for None."""
    if not patterns:
        return list(MODELS)
    pats = [p.strip().lower() for p in patterns.split(",") if p.strip()]
    exact = {n.lower(): n for n in MODELS}
    out = [exact[p] for p in pats if p in exact]
    for name, s in MODELS.items():
        keys = (name.lower(), s["family"].lower(), s["group"].lower(), s["kind"])
        if name not in out and any(p not in exact and p in k for p in pats for k in keys):
            out.append(name)
    return sorted(out, key=list(MODELS).index)


# ---- building -------------------------------------------------------------------------------------

def _transformers():
    sys.path.insert(0, HERE)
    from torch_workloads import _import_transformers  # hides a scipy the venv cannot load
    return _import_transformers()


def build(name):
    """(model, example inputs tuple, float64 inputs tuple): the model with random weights from seed
    0, in train mode. Every model takes one tensor and returns one tensor (transformers models are
    wrapped: token ids in, logits out)."""
    import torch
    spec = MODELS[name]
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if spec["kind"] in ("timm", "tv"):
        if spec["kind"] == "timm":
            import timm
            model = timm.create_model(spec["arch"] or name, pretrained=False, num_classes=10,
                                      **spec["kw"])
        else:
            import torchvision
            model = getattr(torchvision.models, spec["arch"])(weights=None, num_classes=10, **spec["kw"])
        x = torch.randn(BATCH, 3, spec["img"], spec["img"], generator=g)
        return model.train(), x
    tf = _transformers()
    config = getattr(tf, spec["config"])(**spec["kw"])
    inner = getattr(tf, spec["cls"])(config)
    ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=g)
    return _HFWrap(inner, spec["encdec"]).train(), ids


def _hf_wrapper_class():
    import torch

    class HFWrap(torch.nn.Module):
        """Token ids in, logits out (an encoder-decoder model gets the ids on both sides)."""

        def __init__(self, inner, encdec):
            super().__init__()
            self.inner, self.encdec = inner, encdec

        def forward(self, ids):
            if self.encdec:
                return self.inner(input_ids=ids, decoder_input_ids=ids).logits
            return self.inner(input_ids=ids).logits
    return HFWrap


def _HFWrap(inner, encdec):
    global _HFWRAP
    if _HFWRAP is None:
        _HFWRAP = _hf_wrapper_class()
    return _HFWRAP(inner, encdec)


_HFWRAP = None


def _double_input(x):
    import torch
    return x.double() if x.is_floating_point() else x


def loss_fn(out, target):
    import torch.nn.functional as F
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def make_target(out_shape, seed=2):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, out_shape[-1], tuple(out_shape[:-1]), generator=g)


# ---- counters -------------------------------------------------------------------------------------

MARKS = ("TorchGraphCompiled", "TorchPartition", "TorchTrace", "TorchTraceFailed", "UncachedCompile",
         "KernelCompile")


def lazuli_counts():
    """The compile counters and every fallback::aten.* counter, now."""
    import lazuli as lz
    c = lz.debug.counter_value
    out = {n: c(n) for n in MARKS}
    out.update({n: c(n) for n in lz.debug.counter_names() if n.startswith("fallback::aten.")})
    return out


def diff_counts(before, after):
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def fallbacks_of(delta):
    """{"aten.convolution.default": runs, ...} of a counter difference."""
    return {k[len("fallback::"):]: v for k, v in delta.items() if k.startswith("fallback::aten.")}


# ---- the checks -----------------------------------------------------------------------------------

def _finish(cand):
    if cand == "lazuli":
        import lazuli
        lazuli.wait()


def _max_abs(t):
    return t.detach().abs().max().item() if t.numel() else 0.0


def check_inference(model, x, compiled=None):
    """Lazuli's inference output against eager (and the float64 referee). `model` in eval mode
    after this. Returns a dict: err (max abs over eager's largest output), ok, the referee's
    errors where it was asked, the fallbacks, the first call's counters and time."""
    import torch
    import lazuli.torch as lzt
    model.eval()
    if compiled is None:
        compiled = torch.compile(model, backend=lzt.backend)
    before = lazuli_counts()
    t = time.perf_counter()
    with torch.no_grad():
        got = compiled(x)
        _finish("lazuli")
    first_s = time.perf_counter() - t
    first = diff_counts(before, lazuli_counts())
    with torch.no_grad():
        want = model(x)
        again = compiled(x)  # a second call: replayed, nothing new compiled
        _finish("lazuli")
    after = diff_counts(before, lazuli_counts())
    scale = _max_abs(want)
    err = _max_abs(got.float() - want.float())
    res = {"first_s": first_s, "err": err, "scale": scale, "rel": err / scale if scale else err,
           "second_call_err": _max_abs(again.float() - want.float()) / (scale or 1.0),
           "first_counts": {k: v for k, v in first.items() if k in MARKS},
           "recompiled_on_second": {k: after.get(k, 0) - first.get(k, 0) for k in
                                    ("TorchTrace", "UncachedCompile") if after.get(k, 0) != first.get(k, 0)},
           "fallbacks": fallbacks_of(after), "out_shape": list(want.shape)}
    res["ok"] = res["rel"] <= INFER_TOL and res["second_call_err"] <= INFER_TOL
    if not res["ok"]:
        ref = copy.deepcopy(model).double().eval()
        with torch.no_grad():
            want64 = ref(_double_input(x))
        s64 = _max_abs(want64) or 1.0
        res["lazuli_vs_f64"] = _max_abs(got.double() - want64) / s64
        res["eager_vs_f64"] = _max_abs(want.double() - want64) / s64
        res["ok"] = res["second_call_err"] <= max(INFER_TOL, res["rel"]) and \
            res["lazuli_vs_f64"] <= REFEREE_SLACK * res["eager_vs_f64"]
        res["verdict"] = "referee" if res["ok"] else "MISMATCH"
    else:
        res["verdict"] = "match"
    return res


def train_step(m, x, target):
    """The training step every candidate runs (the compiled ones compile this function)."""
    loss = loss_fn(m(x), target)
    loss.backward()
    return loss.detach()


def _grads(model):
    return {n: (p.grad.detach().clone() if p.grad is not None else None)
            for n, p in model.named_parameters() if p.requires_grad}


def _grad_errors(got, want):
    """Worst over parameters of max|got - want| over max(|want| of that parameter, GRAD_FLOOR x
    the model's largest); the parameter it is; parameters whose gradient is None on one side only."""
    top = max((_max_abs(g) for g in want.values() if g is not None), default=0.0) or 1.0
    worst, where, missing = 0.0, None, []
    for n, w in want.items():
        gv = got.get(n)
        if (w is None) != (gv is None):
            missing.append(n)
            continue
        if w is None:
            continue
        e = _max_abs(gv.double() - w.double()) / max(_max_abs(w), GRAD_FLOOR * top)
        if e > worst:
            worst, where = e, n
    return worst, where, missing


def check_training(model, x, compiled_step=None):
    """One training step of lazuli against eager on a copy, and both against a float64 copy.
    `model` (in train mode after this) holds lazuli's gradients. Returns a dict: the loss error,
    the worst gradient error against eager and (per side) against float64, the verdict, the
    fallbacks, the first call's counters and time."""
    import torch
    import lazuli.torch as lzt
    model.train()
    eager = copy.deepcopy(model)
    ref = copy.deepcopy(model).double()
    with torch.no_grad():
        out_shape = eager.eval()(x).shape
    eager.train()
    target = make_target(out_shape)
    if compiled_step is None:
        compiled_step = torch.compile(train_step, backend=lzt.backend)
    model.zero_grad(set_to_none=True)
    before = lazuli_counts()
    t = time.perf_counter()
    loss = compiled_step(model, x, target)
    _finish("lazuli")
    first_s = time.perf_counter() - t
    first = diff_counts(before, lazuli_counts())
    loss_e = train_step(eager, x, target)
    loss_64 = train_step(ref, _double_input(x), target)
    g_l, g_e, g_64 = _grads(model), _grads(eager), _grads(ref)
    worst, where, missing = _grad_errors(g_l, g_e)
    w64_l, where64, _ = _grad_errors(g_l, g_64)
    w64_e, _, _ = _grad_errors(g_e, g_64)
    # A second step (fresh gradients): replayed, nothing new compiled, same gradients.
    model.zero_grad(set_to_none=True)
    mid = lazuli_counts()
    loss2 = compiled_step(model, x, target)
    _finish("lazuli")
    second = diff_counts(mid, lazuli_counts())
    # Batch norm's running statistics moved in the first step (on every side alike); the second
    # step's gradients in train mode do not depend on them.
    worst2, _, _ = _grad_errors(_grads(model), g_e)
    after = diff_counts(before, lazuli_counts())
    le, l64 = loss_e.item(), loss_64.item()
    res = {"first_s": first_s, "loss": loss.item(), "loss_eager": le, "loss_f64": l64,
           "loss_rel": abs(loss.item() - le) / (abs(le) or 1.0),
           "loss2_rel": abs(loss2.item() - le) / (abs(le) or 1.0),
           "grad_err": worst, "grad_err_param": where, "grad_err_second": worst2,
           "grad_missing": missing,
           "lazuli_vs_f64": w64_l, "lazuli_vs_f64_param": where64, "eager_vs_f64": w64_e,
           "loss_lazuli_vs_f64": abs(loss.item() - l64) / (abs(l64) or 1.0),
           "loss_eager_vs_f64": abs(le - l64) / (abs(l64) or 1.0),
           "first_counts": {k: v for k, v in first.items() if k in MARKS},
           "recompiled_on_second": {k: v for k, v in second.items() if k in ("TorchTrace", "UncachedCompile")},
           "fallbacks": fallbacks_of(after), "n_params": sum(p.numel() for p in model.parameters())}
    direct = (res["loss_rel"] <= LOSS_TOL and worst <= GRAD_TOL and worst2 <= GRAD_TOL)
    loss_ref = res["loss_rel"] <= LOSS_TOL or \
        res["loss_lazuli_vs_f64"] <= REFEREE_SLACK * res["loss_eager_vs_f64"]
    referee = loss_ref and w64_l <= REFEREE_SLACK * w64_e and worst2 <= max(GRAD_TOL, 2 * worst)
    res["verdict"] = "MISMATCH" if missing else ("match" if direct else ("referee" if referee else "MISMATCH"))
    if res["verdict"] == "MISMATCH" and not missing and w64_e > ILL_CONDITIONED:
        # float32 itself has lost the gradients (eager is that far from float64): no side to trust.
        res["verdict"] = "ill-conditioned"
    res["ok"] = res["verdict"] != "MISMATCH"
    return res


# ---- timing ---------------------------------------------------------------------------------------

def interleaved(cands, rounds, target_s, busy=False):
    """Median seconds per call of each candidate (name -> (call, finish)): round robin, rotated
    each round; per round one untimed call, then `steps` timed calls, with steps sized from the
    slowest candidate's warm call so a round takes about target_s per candidate."""
    names = list(cands)
    per = {}
    for n in names:  # warm-up (after the first calls measured apart)
        call, fin = cands[n]
        call(); fin()
        t = time.perf_counter()
        call(); fin()
        per[n] = time.perf_counter() - t
    steps = max(1, min(50, int(target_s / max(max(per.values()), 1e-5))))
    hog = None
    if busy:
        sys.path.insert(0, HERE)
        from busy_bench import start_hog
        hog = start_hog(True)
        time.sleep(0.2)
    samples = {n: [] for n in names}
    try:
        for r in range(rounds):
            for n in names[r % len(names):] + names[:r % len(names)]:
                call, fin = cands[n]
                call(); fin()  # one untimed call: the previous candidate's threads settle
                t = time.perf_counter()
                for _ in range(steps):
                    call()
                fin()
                samples[n].append((time.perf_counter() - t) / steps)
    finally:
        if hog:
            hog.kill()
            hog.wait()
    return {n: statistics.median(v) for n, v in samples.items()}, samples, steps


# ---- the worker: one model in one process ---------------------------------------------------------

def run_model(name, args):
    import torch
    import torch._dynamo
    torch.set_num_threads(args.threads)
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.accumulated_recompile_limit = 256
    import lazuli.torch as lzt
    res = {"model": name, "family": MODELS[name]["family"], "group": MODELS[name]["group"]}
    stage = "build"
    try:
        model, x = build(name)
        res["n_params"] = sum(p.numel() for p in model.parameters())
        res["input"] = list(x.shape)
        model_i = copy.deepcopy(model) if args.inductor else None
        model_e = copy.deepcopy(model)
        # inference
        stage = "inference"
        lz_inf = torch.compile(model, backend=lzt.backend)
        res["inference"] = check_inference(model, x, lz_inf)
        print(f"  {name}: inference {res['inference']['verdict']} (err {res['inference']['rel']:.2g}), "
              f"first call {res['inference']['first_s']:.2f} s", file=sys.stderr, flush=True)
        model_e.eval()

        def no_grad(f):
            def g():
                with torch.no_grad():
                    return f(x)
            return g
        cands = {"eager": (no_grad(model_e), lambda: None),
                 "lazuli": (no_grad(lz_inf), lambda: _finish("lazuli"))}
        if args.inductor:
            stage = "inference (inductor)"
            model_i.eval()
            ind_inf = torch.compile(model_i, backend="inductor")
            t = time.perf_counter()
            with torch.no_grad():
                out_i = ind_inf(x)
            res["inference"]["inductor_first_s"] = time.perf_counter() - t
            with torch.no_grad():
                want = model_e(x)
            res["inference"]["inductor_err"] = _max_abs(out_i - want) / (_max_abs(want) or 1.0)
            cands["inductor"] = (no_grad(ind_inf), lambda: None)
        stage = "inference timing"
        med, samples, steps = interleaved(cands, args.rounds, args.round_s, args.busy)
        res["inference"]["steady_s"], res["inference"]["samples"] = med, samples
        res["inference"]["steps_per_round"] = steps
        # training
        stage = "training"
        lz_step = torch.compile(train_step, backend=lzt.backend)
        res["training"] = check_training(model, x, lz_step)
        tr = res["training"]
        print(f"  {name}: training {tr['verdict']} (loss {tr['loss_rel']:.2g}, grad {tr['grad_err']:.2g}, "
              f"f64 lazuli {tr['lazuli_vs_f64']:.2g} eager {tr['eager_vs_f64']:.2g}), first call "
              f"{tr['first_s']:.2f} s", file=sys.stderr, flush=True)
        model_e.train()
        target = make_target(res["inference"]["out_shape"])

        def trainer(m, f):
            def g():
                m.zero_grad(set_to_none=True)
                return f(m, x, target)
            return g
        cands = {"eager": (trainer(model_e, train_step), lambda: None),
                 "lazuli": (trainer(model, lz_step), lambda: _finish("lazuli"))}
        if args.inductor:
            stage = "training (inductor)"
            model_i.train()
            ind_step = torch.compile(train_step, backend="inductor")
            model_i.zero_grad(set_to_none=True)
            t = time.perf_counter()
            ind_step(model_i, x, target)
            tr["inductor_first_s"] = time.perf_counter() - t
            cands["inductor"] = (trainer(model_i, ind_step), lambda: None)
        stage = "training timing"
        med, samples, steps = interleaved(cands, args.rounds, args.round_s, args.busy)
        tr["steady_s"], tr["samples"], tr["steps_per_round"] = med, samples, steps
    except Exception as e:  # noqa: BLE001  (one model's failure is a result of the sweep)
        first_line = (str(e).strip().splitlines() or [""])[0]
        res["error"] = f"{stage}: {type(e).__name__}: {first_line}"[:300]
        res["traceback"] = traceback.format_exc()[-4000:]
        print(f"  {name}: FAILED in {stage}: {type(e).__name__}: {first_line[:200]}", file=sys.stderr,
              flush=True)
    return res


# ---- the driver -----------------------------------------------------------------------------------

def _lazuli_path():
    """The folder the driver imports lazuli from (PYTHONPATH's, e.g. a copy of a build), else the
    checkout's python/."""
    import importlib.util
    spec = importlib.util.find_spec("lazuli")
    if spec and spec.origin:
        return os.path.dirname(os.path.dirname(spec.origin))
    return os.path.join(ROOT, "python")


def run_worker_process(name, args):
    cache = tempfile.mkdtemp(prefix="model_sweep_")
    env = dict(os.environ)
    env["LAZULI_NUM_THREADS"] = str(args.threads)
    env["LAZULI_CACHE_DIR"] = os.path.join(cache, "lazuli")
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    env["PYTHONPATH"] = _lazuli_path() + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--threads", str(args.threads),
           "--rounds", str(args.rounds), "--round-s", str(args.round_s)]
    cmd += ["--no-inductor"] if not args.inductor else []
    cmd += ["--busy"] if args.busy else []
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc = f"timeout after {args.timeout} s"
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    wall = time.perf_counter() - t
    for line in out.splitlines():
        if line.startswith(RESULT):
            res = json.loads(line[len(RESULT):])
            res["process_s"] = wall
            return res, err
    tail = [l for l in err.strip().splitlines() if l.strip()]
    last = tail[-1] if tail else ""
    return {"model": name, "family": MODELS[name]["family"], "group": MODELS[name]["group"],
            "error": f"worker: rc {rc}: {last}"[:300], "process_s": wall,
            "traceback": "\n".join(tail[-40:])}, err


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _ms(s):
    return "-" if s is None else (f"{s * 1e3:.1f}" if s < 10 else f"{s * 1e3:.0f}")


def _sec(s):
    return "-" if s is None else f"{s:.1f}"


def _ratio(a, b):
    return (a / b) if a and b else None


def _x(r):
    return "-" if r is None else f"{r:.2f}x"


def _speedups(r, phase):
    st = (r.get(phase) or {}).get("steady_s") or {}
    lz = st.get("lazuli")
    return _ratio(st.get("eager"), lz), _ratio(st.get("inductor"), lz)


def _fallback_cell(r):
    ops = set()
    for phase in ("inference", "training"):
        ops |= set((r.get(phase) or {}).get("fallbacks", {}))
    return ", ".join(sorted(o[len("aten."):] for o in ops)) or "none"


def _verdict(p, with_numbers=True):
    if not p:
        return "-"
    v = p["verdict"]
    if "grad_err" in p:
        if v == "match":
            return f"match ({p['grad_err']:.0e})" if with_numbers else v
        return (f"{v} (vs eager {p['grad_err']:.1e}; vs f64 lazuli {p['lazuli_vs_f64']:.1e}, "
                f"eager {p['eager_vs_f64']:.1e})")
    if v == "match":
        return f"match ({p['rel']:.0e})"
    return f"{v} (vs eager {p['rel']:.1e}; vs f64 lazuli {p['lazuli_vs_f64']:.1e}, eager {p['eager_vs_f64']:.1e})"


def report(results, meta, out=sys.stdout, header_only=False):
    p = lambda s="": print(s, file=out)  # noqa: E731
    p(f"model sweep: {meta.get('date')}, {meta.get('cores')} cores, threads {meta.get('threads')}, "
      f"load before {meta.get('load_before')}, after {meta.get('load_after')}, "
      f"{'busy (one core spinning while timed)' if meta.get('busy') else 'quiet'}, "
      f"inductor {'on' if meta.get('inductor') else 'off'}, rounds {meta.get('rounds')}, "
      f"{len(meta.get('argv', []))and ' '.join(meta['argv']) or 'all models'}")
    if header_only:
        return
    p()
    p("| model | family | fallbacks (ATen ops in eager) | partitions inf/train (traces) | inference | "
      "training (grad error) | first call lazuli inf/train s | first call inductor inf/train s | "
      "inference eager/inductor/lazuli ms | train step eager/inductor/lazuli ms | lazuli vs eager "
      "inf/train | lazuli vs inductor inf/train |")
    p("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r and "inference" not in r:
            p(f"| {r['model']} | {r['family']} | - | - | FAILED: {r['error'][:160]} | | | | | | | |")
            continue
        inf, tr = r.get("inference") or {}, r.get("training") or {}

        def parts(ph):
            c = ph.get("first_counts") or {}
            return f"{c.get('TorchPartition', 0)} ({c.get('TorchTrace', 0)})" if ph else "-"

        def steady(ph):
            st = ph.get("steady_s") or {}
            return "/".join(_ms(st.get(k)) for k in ("eager", "inductor", "lazuli"))
        ie, ii = _speedups(r, "inference")
        te, ti = _speedups(r, "training")
        inf_cell = _verdict(inf)
        tr_cell = _verdict(tr)
        if "error" in r:
            tr_cell = (tr_cell + "; " if tr else "") + f"FAILED: {r['error'][:160]}"
        p(f"| {r['model']} | {r['family']} | {_fallback_cell(r)} | {parts(inf)} / {parts(tr)} | "
          f"{inf_cell} | {tr_cell} | {_sec(inf.get('first_s'))} / {_sec(tr.get('first_s'))} | "
          f"{_sec(inf.get('inductor_first_s'))} / {_sec(tr.get('inductor_first_s'))} | {steady(inf)} | "
          f"{steady(tr)} | {_x(ie)} / {_x(te)} | {_x(ii)} / {_x(ti)} |")
    p()
    p("Geometric means of lazuli's speedup (the other's steady time over lazuli's; above 1: lazuli "
      "faster), over the models with timings:")
    p()
    p("| group | models | vs eager, inference | vs eager, training | vs inductor, inference | "
      "vs inductor, training |")
    p("|---|---|---|---|---|---|")
    groups = sorted({r["group"] for r in results})
    for g in groups + ["all"]:
        rs = [r for r in results if g == "all" or r["group"] == g]
        cols = [geomean([_speedups(r, ph)[k] for r in rs]) for k in (0, 1) for ph in ("inference", "training")]
        cols = [cols[0], cols[1], cols[2], cols[3]]
        n = sum(1 for r in rs if (r.get("inference") or {}).get("steady_s"))
        p(f"| {g} | {n} of {len(rs)} | " + " | ".join(_x(c) for c in cols) + " |")
    p()
    # The lists
    by_op = {}
    for r in results:
        for phase in ("inference", "training"):
            for op in (r.get(phase) or {}).get("fallbacks", {}):
                by_op.setdefault(op, set()).add(r["model"])
    p("Fallback ops (models):")
    for op, ms in sorted(by_op.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        p(f"- {op}: {len(ms)}: {', '.join(sorted(ms))}")
    if not by_op:
        p("- none")
    p()
    p("Not matching (MISMATCH, ill-conditioned):")
    none = True
    for r in results:
        for phase in ("inference", "training"):
            ph = r.get(phase)
            if ph and ph["verdict"] not in ("match", "referee"):
                none = False
                p(f"- {r['model']} {phase}: {_verdict(ph)}")
    if none:
        p("- none")
    p()
    p("Failed:")
    fails = [r for r in results if "error" in r]
    for r in fails:
        p(f"- {r['model']}: {r['error']}")
    if not fails:
        p("- none")
    p()
    p("Slower than eager or inductor (lazuli's time over the other's):")
    none = True
    for r in results:
        for phase in ("inference", "training"):
            e, i = _speedups(r, phase)
            bits = []
            if e is not None and e < 1:
                bits.append(f"{1 / e:.2f}x eager's time")
            if i is not None and i < 1:
                bits.append(f"{1 / i:.2f}x inductor's time")
            if bits:
                none = False
                p(f"- {r['model']} {phase}: " + ", ".join(bits))
    if none:
        p("- none")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated names or substrings (default: all)")
    ap.add_argument("--no-inductor", dest="inductor", action="store_false")
    ap.add_argument("--quick", action="store_true", help="3 rounds of about 0.1 s per candidate")
    ap.add_argument("--busy", action="store_true", help="one core kept busy while timing")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--round-s", type=float, default=None, help="about this much per candidate and round")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--timeout", type=int, default=1500, help="seconds per model's process")
    ap.add_argument("--json", help="where the results go (default bench/results/model_sweep-<date>.json)")
    ap.add_argument("--report", help="print the tables of this results file again")
    ap.add_argument("--list", action="store_true", help="print the models and exit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds is None:
        args.rounds = 3 if args.quick else 5
    if args.round_s is None:
        args.round_s = 0.1 if args.quick else 0.3
    if args.report:
        # Several files: one table; a model in a later file replaces its row from an earlier one.
        by_model, metas = {}, []
        for path in args.report.split(","):
            with open(path) as f:
                data = json.load(f)
            metas.append(data["meta"])
            for r in data["results"]:
                by_model[r["model"]] = dict(r, source=os.path.basename(path))
        order = {n: i for i, n in enumerate(MODELS)}
        results = sorted(by_model.values(), key=lambda r: order.get(r["model"], len(order)))
        for m in metas[1:]:
            print(f"(and) ", end="")
            report([], m, header_only=True)
        report(results, metas[0])
        return
    if args.list:
        for n in select(args.models):
            print(n, MODELS[n]["group"], MODELS[n]["family"])
        return
    if args.worker:
        res = run_model(args.worker, args)
        print(RESULT + json.dumps(res, default=str), flush=True)
        return
    names = select(args.models)
    if not names:
        sys.exit(f"no model matches {args.models!r}")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "cores": os.cpu_count(),
            "threads": args.threads, "load_before": " ".join(f"{v:.2f}" for v in os.getloadavg()),
            "busy": args.busy, "inductor": args.inductor, "rounds": args.rounds,
            "round_s": args.round_s, "argv": sys.argv[1:], "python": sys.executable,
            "tolerances": {"inference": INFER_TOL, "loss": LOSS_TOL, "grad": GRAD_TOL,
                           "referee_slack": REFEREE_SLACK, "grad_floor": GRAD_FLOOR}}
    try:
        import torch
        meta["torch"] = torch.__version__
        import re
        meta["torch_blas"] = re.findall(r"(?:BLAS_INFO|LAPACK_INFO|USE_MKLDNN)=\w+", torch.__config__.show())
    except Exception:  # noqa: BLE001
        pass
    path = args.json or os.path.join(HERE, "results", f"model_sweep-{time.strftime('%Y-%m-%d-%H%M', time.gmtime())}"
                                     f"{'-busy' if args.busy else ''}{'' if args.inductor else '-noinductor'}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    print(f"model sweep: {len(names)} models, load {meta['load_before']}, results to {path}", file=sys.stderr,
          flush=True)
    results = []
    t0 = time.perf_counter()
    for i, name in enumerate(names):
        load = os.getloadavg()[0]
        res, err = run_worker_process(name, args)
        res["load_before"] = load
        results.append(res)
        print(f"[{i + 1}/{len(names)}] {name}: {res.get('error', 'ok')} ({res['process_s']:.0f} s, "
              f"load {load:.2f}, {time.perf_counter() - t0:.0f} s so far)", file=sys.stderr, flush=True)
        meta["load_after"] = " ".join(f"{v:.2f}" for v in os.getloadavg())
        meta["total_s"] = time.perf_counter() - t0
        with open(path, "w") as f:  # after every model: a partial sweep is still a result
            json.dump({"meta": meta, "results": results}, f, indent=1, default=str)
    report(results, meta)


if __name__ == "__main__":
    main()
