"""FLA side of the GPU parity and speed checks (run on the GPU machine by scripts/gpu_check.sh).

FLA (flash-linear-attention) is not part of this repository: the script imports it from FLA_PATH (a copy
of the fla/ package carried to the machine). Subcommands:

  init   OUT_DIR              build FLA's GatedDeltaNetForCausalLM (300M shapes), FLA init, save_pretrained
  train  HF_DIR DATA STEPS [options]
                              train with FLA in the recipe's setup (fp32 master weights, bf16 autocast,
                              AdamW 0.9/0.95 wd 0.01 on >1-D tensors, Megatron cosine schedule, clip 1.0)
                              on DATA (a .bin/.idx prefix of 2048-token chunks) in FLA's sample order
                              (numpy default_rng(42).permutation, then torch.randperm(seed 42 + epoch), as
                              gdn's sampler); prints a JSON line per step and the steady-state step time.
                              Options: --mbs --lr --min-lr --warmup --decay (schedule), --valid PREFIX
                              --eval-interval K --valid-samples M (validation loss every K steps and at the
                              end over items 0..M-1 of the held-out chunks in FLA's order, as gdn train's
                              validation with eval_same_samples reads them), --log FILE (the JSON lines, also trainer_state.json beside it in
                              HF Trainer's log_history form), --save DIR (the trained model, save_pretrained),
                              --warmup-step (one untimed forward/backward first: Triton autotunes there)
  logits HF_DIR IDS_FILE OUT  fp32 logits of one sequence (FLA's fused_recurrent path, no TF32) to OUT (.npy)
  warmup HF_DIR MBS T         the kernel shapes of every command above once, on random tokens: Triton's
                              autotuning results land in its cache dir for the later processes
  prompt-logits OUT_DIR IDS[,IDS...] HF_DIR...
                              fp32 logits (as `logits`) of each ids file under each model, one process:
                              OUT_DIR/m<i>_p<j>.npy
  score-requests REQ_LOG OUT HF_DIR...
                              replay `gdn eval --log-requests` requests with FLA (bf16 model, as lm-eval
                              with dtype=bfloat16): ll = sum of bf16 log_softmax of the continuation rows,
                              is_greedy; OUT: one JSON line per request, fields ll_<i>, greedy_<i> per model
  decode HF_DIR BATCH STEPS   FLA's own decoding loop (bf16 model, its recurrent cache, greedy): prefill
                              "The capital of France is", then STEPS single-token steps; prints tokens/s
"""
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch

FLA_PATH = os.environ.get('FLA_PATH', '.fla')
if not os.path.isfile(os.path.join(FLA_PATH, 'fla', '__init__.py')):
    sys.exit(f"fla_ref: FLA_PATH={FLA_PATH} must be a folder holding FLA's fla/ package ({FLA_PATH}/fla/__init__.py "
             "missing): e.g. git archive the fla/ directory of flash-linear-attention into it")
sys.path.insert(0, FLA_PATH)
import fla  # noqa: E402,F401  (registers the model type)
import fla.ops.common.chunk_o as chunk_o  # noqa: E402
from fla.models import GatedDeltaNetConfig, GatedDeltaNetForCausalLM  # noqa: E402

from recipe_tools import FlaOrder, write_trainer_state  # noqa: E402  (scripts/, the sample order CI checks against gdn's)

# FLA refuses its gated backward on Triton < 3.7.1 on Hopper (its issue #640); the brief reports that
# bypassing the guard gives gradients within bf16 error of a float64 reference on this machine.
chunk_o.TRITON_ABOVE_3_7_1 = True
# transformers 5 wants the tied-weights declaration as a mapping
GatedDeltaNetForCausalLM._tied_weights_keys = {'lm_head.weight': 'model.embeddings.weight'}

CFG = dict(attn_mode='chunk', hidden_size=1024, expand_v=1.0, use_gate=True, use_short_conv=True, allow_neg_eigval=False,
           conv_size=4, head_dim=64, num_heads=4, num_v_heads=8, max_position_embeddings=2048, hidden_ratio=4,
           intermediate_size=4096, hidden_act='swish', num_hidden_layers=12, norm_eps=1e-6, initializer_range=0.02,
           fuse_norm=True, fuse_swiglu=True, fuse_cross_entropy=True, fuse_linear_cross_entropy=False, use_l2warp=False,
           vocab_size=128256, tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128001)


def read_dataset(prefix):
    idx = open(prefix + '.idx', 'rb').read()
    assert idx[:9] == b'MMIDIDX\x00\x00'
    S = struct.unpack('<Q', idx[18:26])[0]
    lens = np.frombuffer(idx, dtype=np.int32, count=S, offset=34)
    toks = np.fromfile(prefix + '.bin', dtype=np.int32)
    L = int(lens[0])
    assert (lens == L).all(), 'FLA order needs fixed-length chunks'
    return toks.reshape(S, L)


def megatron_lr(done, lr, min_lr, warm, decay):
    if warm > 0 and done <= warm:
        return lr * done / warm
    if done > decay:
        return min_lr
    ratio = (done - warm) / max(decay - warm, 1)
    return min_lr + 0.5 * (math.cos(math.pi * ratio) + 1) * (lr - min_lr)


def cmd_init(out):
    torch.manual_seed(0)
    model = GatedDeltaNetForCausalLM(GatedDeltaNetConfig(**CFG))
    model.save_pretrained(out)
    print('saved', out, sum(p.numel() for p in model.parameters()), 'parameters')


def valid_loss(model, chunks, order, count, mbs):
    """Token-weighted mean loss over validation items 0..count-1 in FLA's order of the held-out chunks, each
    chunk's labels shifted inside it (last position unscored): what `gdn train` computes at every eval_interval
    with data_order fla and eval_same_samples, and `gdn score --set valid` after it."""
    total, tokens = 0.0, 0
    model.eval()
    with torch.no_grad(), torch.autocast('cuda', dtype=torch.bfloat16):
        for s0 in range(0, count, mbs):
            x = torch.from_numpy(np.stack([chunks[order(g)] for g in range(s0, min(count, s0 + mbs))]).astype(np.int64)).cuda()
            h = model.model(input_ids=x, use_cache=False).last_hidden_state
            for r in range(h.shape[0]):  # one row of [T-1, vocab] fp32 logits at a time
                logits = model.lm_head(h[r, :-1]).float()
                total += torch.nn.functional.cross_entropy(logits, x[r, 1:], reduction='sum').item()
                tokens += x.shape[1] - 1
    model.train()
    return total / tokens


def cmd_train(hf, data, steps, mbs=16, lr=2e-4, min_lr=2e-5, warm=2, decay=0, valid=None, eval_interval=0,
              valid_samples=0, log=None, save=None, warmup_step=False, reset_at_eos=None):
    chunks = read_dataset(data)
    N, T = chunks.shape
    decay = decay or steps
    order = FlaOrder(N, 42)  # numpy default_rng(42).permutation, then torch.randperm(seed 42 + epoch)

    def chunk_at(g):
        return chunks[order(g)]

    vchunks, vorder, nvalid = None, None, 0
    if valid:
        vchunks = read_dataset(valid)
        vorder = FlaOrder(vchunks.shape[0], 42)
        nvalid = min(vchunks.shape[0], valid_samples) if valid_samples > 0 else vchunks.shape[0]
    model = GatedDeltaNetForCausalLM.from_pretrained(hf, torch_dtype=torch.float32).cuda()
    decay_p = [p for n, p in model.named_parameters() if p.dim() > 1]
    plain = [p for n, p in model.named_parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{'params': decay_p, 'weight_decay': 0.01}, {'params': plain, 'weight_decay': 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    logf = open(log, 'w') if log else None
    rows = []

    def emit(row):
        rows.append(row)
        print(json.dumps(row), flush=True)
        if logf:
            logf.write(json.dumps(row) + '\n')
            logf.flush()

    def batch_at(t):
        batch = np.stack([chunk_at(t * mbs + j) for j in range(mbs)])
        return torch.from_numpy(batch.astype(np.int64)).cuda()

    def model_inputs(ids):
        # Packed documents (gdn's reset_state_at_eod): FLA's varlen call takes one row, so the batch is flattened to
        # [1, mbs*T] with cu_seqlens at every row start and after every EOS (spec train.md 7.3's EOS rule). Labels:
        # EOS targets ignored (FLA's collator pads with EOS, as gdn's data_order fla does) and no target across a
        # row end, so the loss counts the same tokens as the unflattened batch.
        if reset_at_eos is None:
            return dict(input_ids=ids, labels=ids)
        flat = ids.reshape(1, -1)
        n = flat.shape[1]
        labels = flat.clone()
        labels[labels == reset_at_eos] = -100
        labels[0, T::T] = -100
        cuts = set(range(0, n, T)) | {n} | set((torch.nonzero(flat[0, :-1] == reset_at_eos)[:, 0] + 1).tolist())
        cu = torch.tensor(sorted(cuts), dtype=torch.long, device=ids.device)
        return dict(input_ids=flat, labels=labels, cu_seqlens=cu)

    if warmup_step:  # Triton autotunes every kernel shape on first use (minutes): once here, untimed, no update
        t0 = time.time()
        ids = batch_at(0)
        with torch.autocast('cuda', dtype=torch.bfloat16):
            model(**model_inputs(ids)).loss.backward()
        opt.zero_grad(set_to_none=True)
        if vchunks is not None:
            valid_loss(model, vchunks, vorder, min(nvalid, mbs), mbs)
        torch.cuda.synchronize()
        emit({'warmup_s': time.time() - t0})

    def evaluate(it):
        t0 = time.time()
        v = valid_loss(model, vchunks, vorder, nvalid, mbs)
        emit({'iteration': it, 'valid_loss': v, 'valid_ppl': math.exp(min(v, 20)), 'valid_samples': nvalid,
              'valid_s': time.time() - t0})

    times = []
    t_start = time.time()
    for t in range(steps):
        ids = batch_at(t)
        step_lr = megatron_lr(t, lr, min_lr, warm, decay)
        for g in opt.param_groups:
            g['lr'] = step_lr
        torch.cuda.synchronize()
        t0 = time.time()
        with torch.autocast('cuda', dtype=torch.bfloat16):
            loss = model(**model_inputs(ids)).loss
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.time() - t0)
        row = {'iteration': t + 1, 'lm_loss': loss.item(), 'lr': step_lr, 'grad_norm': gn.item(),
               'ms_per_iter': times[-1] * 1e3, 'tokens_per_s': mbs * T / times[-1]}
        emit(row)
        if vchunks is not None and eval_interval > 0 and (t + 1) % eval_interval == 0 and t + 1 < steps:
            evaluate(t + 1)
    if vchunks is not None:
        evaluate(steps)
    wall = time.time() - t_start
    steady = times[3:] if len(times) > 5 else times
    ms = 1e3 * sum(steady) / len(steady)
    emit({'fla_ms_per_step': ms, 'fla_tokens_per_s': mbs * T / (ms / 1e3), 'wall_s': wall,
          'peak_mem_gib': torch.cuda.max_memory_allocated() / 2**30})
    if logf:
        logf.close()
        logf = None
        write_trainer_state(os.path.join(os.path.dirname(os.path.abspath(log)), 'trainer_state.json'), rows, N, mbs)
    if save:
        model.save_pretrained(save)
        emit({'saved': save})


def cmd_logits(hf, ids_file, out):
    # tight fp32 parity: FLA's fused_recurrent forward (fp32 state, no TF32), IEEE fp32 GEMMs
    torch.backends.cuda.matmul.allow_tf32 = False
    ids = np.fromfile(ids_file, dtype=np.int32).astype(np.int64)
    model = GatedDeltaNetForCausalLM.from_pretrained(hf, torch_dtype=torch.float32, attn_mode='fused_recurrent').cuda().eval()
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(ids)[None].cuda()).logits[0].float().cpu().numpy()
    np.save(out, logits)
    print('logits', logits.shape)


def cmd_warmup(hf, mbs, T):
    """Triton autotunes each FLA kernel on first use (minutes on a fresh machine) and FLA keeps the results in
    Triton's cache dir (FLA_CACHE_RESULTS): run the shapes and dtypes of train, validation, prompt-logits and
    score-requests once, on random tokens, while the GPU is otherwise idle (recipe.sh: during gdn's build)."""
    t0 = time.time()
    model = GatedDeltaNetForCausalLM.from_pretrained(hf, torch_dtype=torch.float32).cuda()
    ids = torch.randint(0, model.config.vocab_size, (mbs, T), generator=torch.Generator().manual_seed(0)).cuda()
    with torch.autocast('cuda', dtype=torch.bfloat16):
        model(input_ids=ids, labels=ids).loss.backward()  # training: chunk fwd + bwd
    model.zero_grad(set_to_none=True)
    model.eval()
    with torch.no_grad():
        with torch.autocast('cuda', dtype=torch.bfloat16):
            model.model(input_ids=ids, use_cache=False)  # validation: chunk forward only
        model(input_ids=ids[:1, :12], use_cache=False)  # prompt logits: fp32, fused_recurrent (<= 64 tokens)
        model.to(torch.bfloat16)
        model(input_ids=ids[:, :40], use_cache=False)  # eval requests: bf16, fused_recurrent and chunk
        model(input_ids=ids[:, :100], use_cache=False)
    torch.cuda.synchronize()
    print(json.dumps({'fla_warmup_s': time.time() - t0}), flush=True)


def cmd_prompt_logits(out_dir, ids_files, hfs):
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(out_dir, exist_ok=True)
    for i, hf in enumerate(hfs):
        model = GatedDeltaNetForCausalLM.from_pretrained(hf, torch_dtype=torch.float32, attn_mode='fused_recurrent').cuda().eval()
        for j, f in enumerate(ids_files):
            ids = torch.from_numpy(np.fromfile(f, dtype=np.int32).astype(np.int64))[None].cuda()
            with torch.no_grad():
                np.save(os.path.join(out_dir, f'm{i}_p{j}.npy'), model(input_ids=ids).logits[0].float().cpu().numpy())
        print('prompt-logits', hf, len(ids_files), 'prompts', flush=True)
        del model
        torch.cuda.empty_cache()


def cmd_score_requests(req_log, out, hfs, max_tokens=65536):
    """lm-eval's HFLM._loglikelihood_tokens with dtype=bfloat16: the model reads tokens[:-1] (right-padded
    batches; padding never reaches earlier positions of this causal recurrent model), the last cont_len rows
    are log-softmaxed in the logits' dtype (bf16), gathered and summed as a bf16 tensor."""
    reqs = [json.loads(l) for l in open(req_log)]
    order = sorted(range(len(reqs)), key=lambda i: -len(reqs[i]['tokens']))  # longest first, as lm-eval
    res = [dict() for _ in reqs]
    for mi, hf in enumerate(hfs):
        model = GatedDeltaNetForCausalLM.from_pretrained(hf, torch_dtype=torch.bfloat16).cuda().eval()
        t0, pos = time.time(), 0
        while pos < len(order):
            L = len(reqs[order[pos]]['tokens']) - 1
            nb = max(1, min(64, max_tokens // max(L, 1)))
            group = order[pos:pos + nb]
            pos += len(group)
            x = torch.zeros(len(group), L, dtype=torch.int64)
            for r, i in enumerate(group):
                tk = reqs[i]['tokens'][:-1]
                x[r, :len(tk)] = torch.tensor(tk)
            with torch.no_grad():
                logits = model(input_ids=x.cuda(), use_cache=False).logits
            for r, i in enumerate(group):
                q = reqs[i]
                n, m = len(q['tokens']) - 1, q['cont_len']
                lp = torch.nn.functional.log_softmax(logits[r, n - m:n], dim=-1)
                tgt = torch.tensor(q['tokens'][n + 1 - m:n + 1], device='cuda')
                res[i][f'll_{mi}'] = lp.gather(-1, tgt[:, None]).sum().item()
                res[i][f'greedy_{mi}'] = bool((lp.argmax(-1) == tgt).all().item())
        torch.cuda.synchronize()
        print(json.dumps({'model': hf, 'requests': len(reqs), 'req_per_s': len(reqs) / (time.time() - t0)}), flush=True)
        del model
        torch.cuda.empty_cache()
    with open(out, 'w') as f:
        for q, r in zip(reqs, res):
            f.write(json.dumps(dict({k: q[k] for k in ('task', 'doc', 'idx') if k in q}, **r)) + '\n')


def cmd_decode(hf, batch, steps):
    # "The capital of France is" with Llama 3's BOS (gdn tokenize)
    prompt = [128000, 791, 6864, 315, 9822, 374]
    model = GatedDeltaNetForCausalLM.from_pretrained(hf, torch_dtype=torch.bfloat16).cuda().eval()
    ids = torch.tensor([prompt] * batch, device='cuda')
    times = []
    with torch.no_grad():
        for rep in range(2):  # the first pass compiles and autotunes FLA's kernels
            out = model(input_ids=ids, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            times = []
            for _ in range(steps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = model(input_ids=nxt, past_key_values=past, use_cache=True)
                past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
    ms = 1e3 * sum(times[2:]) / len(times[2:])
    print(json.dumps({'fla_decode_batch': batch, 'ms_per_step': ms, 'tokens_per_s': batch / (ms / 1e3)}), flush=True)


def parse_train(args):
    import argparse
    ap = argparse.ArgumentParser(prog='fla_ref.py train')
    ap.add_argument('hf')
    ap.add_argument('data')
    ap.add_argument('steps', type=int)
    ap.add_argument('--mbs', type=int, default=16)
    ap.add_argument('--lr', type=float, default=2e-4)
    ap.add_argument('--min-lr', type=float, default=2e-5)
    ap.add_argument('--warmup', type=int, default=2)
    ap.add_argument('--decay', type=int, default=0, help='decay length in steps (default: steps)')
    ap.add_argument('--valid')
    ap.add_argument('--eval-interval', type=int, default=0)
    ap.add_argument('--valid-samples', type=int, default=0)
    ap.add_argument('--log')
    ap.add_argument('--save')
    ap.add_argument('--warmup-step', action='store_true')
    ap.add_argument('--reset-at-eos', type=int, help='packed documents: cu_seqlens after every EOS id (gdn reset_state_at_eod)')
    a = ap.parse_args(args)
    return dict(hf=a.hf, data=a.data, steps=a.steps, mbs=a.mbs, lr=a.lr, min_lr=a.min_lr, warm=a.warmup,
                decay=a.decay, valid=a.valid, eval_interval=a.eval_interval, valid_samples=a.valid_samples,
                log=a.log, save=a.save, warmup_step=a.warmup_step, reset_at_eos=a.reset_at_eos)


if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == 'init':
        cmd_init(*args)
    elif cmd == 'train':
        cmd_train(**parse_train(args))
    elif cmd == 'logits':
        cmd_logits(*args)
    elif cmd == 'warmup':
        cmd_warmup(args[0], int(args[1]), int(args[2]))
    elif cmd == 'prompt-logits':
        cmd_prompt_logits(args[0], args[1].split(','), args[2:])
    elif cmd == 'score-requests':
        cmd_score_requests(args[0], args[1], args[2:])
    elif cmd == 'decode':
        cmd_decode(args[0], int(args[1]), int(args[2]))
    else:
        sys.exit(__doc__)
