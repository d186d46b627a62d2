"""The CPU side of scripts/recipe.sh: data splits, task files, and the recipe's comparison tables.

No FLA and no GPU here (numpy; torch only for FLA's sampler permutation), so CI runs all of it. Subcommands:

  split-corpus IN OUT_TRAIN OUT_VALID FRAC   the last FRAC of IN's documents (JSON Lines) held out
  make-tasks VALID_JSONL DIR N_ARC N_HELLA   ARC-Easy and HellaSwag files in the hub's schema, made from held-out
                                             corpus text: a sentence's ending vs endings of other sentences
  compare-train --gdn METRICS [--fla LOG] [--gdn-score LOG] [--steps N] --out MD
                                             iteration-1 loss, the loss table at chosen iterations with delta %,
                                             validation, tokens/s and wall time, ours vs FLA (step 6)
  compare-logits --prompts N --gdn DIR --fla DIR --out MD [--self]
                                             export parity (same weights, gdn vs FLA) and the recipe's step-8
                                             check (our export vs FLA's model: cosine >= 0.95, top-5 overlap >= 3/5)
  eval-delta --requests REQ --ours JSON [--fla SCORES] --out MD
                                             lm-eval's acc / acc_norm from per-request log-likelihoods, checked
                                             against gdn eval's results JSON; ours vs FLA's model (+-1.5 points)
  fla-order N POSITIONS...                   chunk index FLA's Trainer reads at each sample position
  trainer-state FLA_LOG OUT N_CHUNKS MBS     FLA's JSON lines as an HF trainer_state.json (for gdn report)
"""
import argparse
import json
import math
import os
import random
import re
import sys

import numpy as np


# ---------------------------------------------------------------- data

def split_corpus(src, out_train, out_valid, frac):
    lines = [l for l in open(src, encoding='utf-8') if l.strip()]
    n_valid = max(1, int(round(len(lines) * frac)))
    with open(out_train, 'w', encoding='utf-8') as f:
        f.writelines(lines[:-n_valid])
    with open(out_valid, 'w', encoding='utf-8') as f:
        f.writelines(lines[-n_valid:])
    print(f'split-corpus: {len(lines) - n_valid} training documents, {n_valid} held out')


def sentences(path):
    out = []
    for l in open(path, encoding='utf-8'):
        text = json.loads(l)['text']
        out += [s.strip() for s in re.split(r'(?<=[.!?])\s+', text) if 6 <= len(s.split()) <= 40]
    return out


def make_tasks(valid_jsonl, root, n_arc, n_hella, seed=17):
    """Multiple-choice docs whose right answer is the true continuation of a held-out sentence and whose
    distractors are continuations of other sentences: a model that learned English scores above chance."""
    r = random.Random(seed)
    sents = sentences(valid_jsonl)
    assert len(sents) >= 8, f'{valid_jsonl}: only {len(sents)} usable sentences'
    arc_dir = os.path.join(root, 'allenai/ai2_arc/ARC-Easy')
    hs_dir = os.path.join(root, 'Rowan/hellaswag')
    os.makedirs(arc_dir, exist_ok=True)
    os.makedirs(hs_dir, exist_ok=True)

    def split_at(s, k):  # (head, the last k words)
        w = s.split()
        return ' '.join(w[:-k]), ' '.join(w[-k:])

    with open(os.path.join(arc_dir, 'test.jsonl'), 'w', encoding='utf-8') as f:
        for i in range(n_arc):
            s = sents[r.randrange(len(sents))]
            head, tail = split_at(s, r.randint(1, 3))
            others = [split_at(o, len(tail.split()))[1] for o in r.sample(sents, 3)]
            choices = others + [tail]
            r.shuffle(choices)
            labels = list('ABCD')
            f.write(json.dumps({'id': f'recipe-{i}', 'question': head,
                                'choices': {'text': choices, 'label': labels},
                                'answerKey': labels[choices.index(tail)]}) + '\n')
    with open(os.path.join(hs_dir, 'validation.jsonl'), 'w', encoding='utf-8') as f:
        for i in range(n_hella):
            s = sents[r.randrange(len(sents))]
            w = s.split()
            cut = max(3, len(w) // 2)
            ctx_a, ctx_b = ' '.join(w[:cut - 2]), ' '.join(w[cut - 2:cut])
            ending = ' '.join(w[cut:])
            endings = [' '.join(o.split()[len(o.split()) // 2:]) for o in r.sample(sents, 3)] + [ending]
            r.shuffle(endings)
            f.write(json.dumps({'ind': i, 'activity_label': 'Reading', 'ctx_a': ctx_a, 'ctx_b': ctx_b,
                                'ctx': ctx_a + ' ' + ctx_b, 'endings': endings, 'source_id': f'recipe-{i}',
                                'split': 'val', 'split_type': 'indomain', 'label': str(endings.index(ending))})
                    + '\n')
    print(f'make-tasks: {n_arc} arc_easy docs, {n_hella} hellaswag docs from {len(sents)} held-out sentences '
          f'under {root}')


class FlaOrder:
    """FLA's Trainer order as gdn's sampler serves it (spec data.md §4.2): p2 = datasets.shuffle(seed), then
    per epoch e torch.randperm(n) seeded seed + e; sample position g reads chunk p2[p3_e[g mod n]], e = g // n."""

    def __init__(self, n, seed=42):
        self.n, self.seed, self.perms = n, seed, {}
        self.p2 = np.random.default_rng(seed).permutation(n)

    def __call__(self, g):
        import torch
        e = g // self.n
        if e not in self.perms:
            self.perms[e] = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed + e)).numpy()
        return int(self.p2[self.perms[e][g % self.n]])


# ---------------------------------------------------------------- training

def write_trainer_state(path, rows, n_chunks, mbs):
    """FLA's JSON lines (scripts/fla_ref.py train) as HF Trainer's trainer_state.json (log_history: step,
    loss, grad_norm, learning_rate, epoch, throughput; eval_loss rows; train_runtime), which gdn report reads."""
    hist, last = [], 0
    for r in rows:
        if 'lm_loss' in r:
            last = r['iteration']
            hist.append({'step': last, 'loss': r['lm_loss'], 'grad_norm': r.get('grad_norm'),
                         'learning_rate': r.get('lr'), 'epoch': last * mbs / n_chunks,
                         'throughput': r.get('tokens_per_s')})
        elif 'valid_loss' in r:
            hist.append({'step': r['iteration'], 'eval_loss': r['valid_loss'], 'epoch': r['iteration'] * mbs / n_chunks})
        elif 'wall_s' in r:
            hist.append({'step': last, 'train_runtime': r['wall_s']})
    with open(path, 'w') as f:
        json.dump({'global_step': last, 'train_batch_size': mbs, 'log_history': hist}, f, indent=1)


VALID_KEYS = ('valid_loss', 'validation_loss', 'val_loss', 'lm_loss_valid')


def read_gdn_metrics(path):
    """gdn train's metrics JSONL: per-step rows (lm_loss), log rows (log: true), validation rows (any of
    VALID_KEYS, or lm_loss in a row marked valid/eval/validation)."""
    loss, logs, valid = {}, [], {}
    for l in open(path):
        r = json.loads(l)
        it = r.get('iteration')
        vk = next((k for k in VALID_KEYS if k in r), None)
        if vk is None and any(r.get(m) for m in ('valid', 'eval', 'validation')) and 'lm_loss' in r:
            vk = 'lm_loss'
        if vk is not None:
            valid[it] = r[vk]
        elif r.get('log'):
            logs.append(r)
        elif 'lm_loss' in r:
            loss[it] = r['lm_loss']
    return loss, logs, valid


def read_fla_log(path):
    loss, valid, summary, other = {}, {}, {}, {}
    for l in open(path):
        if not l.startswith('{'):
            continue
        r = json.loads(l)
        if 'valid_loss' in r:
            valid[r['iteration']] = r['valid_loss']
        elif 'lm_loss' in r:
            loss[r['iteration']] = r['lm_loss']
        elif 'fla_ms_per_step' in r:
            summary = r
        else:
            other.update(r)
    return loss, valid, summary, other


def table_iters(last):
    its = [1, 2, 5, 10, 25, 50] + list(range(100, last, 50)) + [last]
    return sorted({i for i in its if 1 <= i <= last})


def compare_train(a):
    g_loss, g_logs, g_valid = read_gdn_metrics(a.gdn)
    assert g_loss, f'{a.gdn}: no lm_loss rows'
    last = a.steps or max(g_loss)
    have_fla = bool(a.fla and os.path.exists(a.fla))
    f_loss, f_valid, f_sum, f_other = read_fla_log(a.fla) if have_fla else ({}, {}, {}, {})
    out, ok = [], True
    out.append('### Training: ours (gdn train) vs FLA, same init, batches and learning rates\n')
    if have_fla and 1 in f_loss:
        e1 = abs(g_loss[1] - f_loss[1]) / f_loss[1]
        ok &= e1 <= 1e-3
        out.append(f'iteration-1 loss: FLA {f_loss[1]:.6f}  ours {g_loss[1]:.6f}  relative difference {e1:.2e} '
                   f'(tolerance 1e-3)\n')
    else:
        out.append(f'iteration-1 loss: ours {g_loss[1]:.6f} (no FLA log: FLA stages skipped)\n')
    out.append('| iteration | FLA | ours | delta % |')
    out.append('|---|---|---|---|')
    for it in table_iters(last):
        g, f = g_loss.get(it), f_loss.get(it)
        d = f'{100 * (g - f) / f:+.3f}' if g is not None and f is not None else '-'
        out.append(f'| {it} | {f"{f:.5f}" if f is not None else "-"} | {f"{g:.5f}" if g is not None else "-"} | {d} |')
    common = sorted(set(g_loss) & set(f_loss))
    if common:
        rel = [abs(g_loss[i] - f_loss[i]) / f_loss[i] for i in common]
        w = max(range(len(rel)), key=lambda k: rel[k])
        tail = [i for i in common if i > last * 0.8] or common
        mean_tail = sum(100 * (g_loss[i] - f_loss[i]) / f_loss[i] for i in tail) / len(tail)
        out.append(f'\n{len(common)} common iterations: largest |delta| {100 * rel[w]:.3f}% at iteration {common[w]}; '
                   f'mean delta over the last 20% of the run {mean_tail:+.3f}%')
    out.append('')
    # validation
    if g_valid or f_valid:
        out.append('| validation at iteration | FLA valid loss | ours valid loss | delta % |')
        out.append('|---|---|---|---|')
        for it in sorted(set(g_valid) | set(f_valid)):
            g, f = g_valid.get(it), f_valid.get(it)
            d = f'{100 * (g - f) / f:+.3f}' if g is not None and f is not None else '-'
            out.append(f'| {it} | {f"{f:.5f}" if f is not None else "-"} | {f"{g:.5f}" if g is not None else "-"} | {d} |')
        out.append('(both: items 0..eval_iters x global batch - 1 of the held-out FLA chunks in FLA\'s order, the same '
                   'items at every evaluation: gdn train\'s eval_same_samples)\n')
    else:
        out.append('validation during training: none in either log\n')
    if a.gdn_score and os.path.exists(a.gdn_score):
        m = re.search(r'loss: ([0-9.]+) ppl', open(a.gdn_score).read())
        if m:
            s = float(m.group(1))
            fv = f_valid.get(last)
            gv = g_valid.get(last)
            if a.score_items and gv is not None:  # the saved checkpoint scores what the run's last validation did
                same = abs(s - gv) <= 1e-5 * abs(gv)
                ok &= same
                out.append(f'gdn score --set valid on the saved checkpoint: {s:.6f} (the run\'s final validation '
                           f'{gv:.6f}: {"equal" if same else "DIFFERENT"})')
            if a.score_items and fv is not None:
                out.append(f'final held-out loss on the same items: FLA {fv:.5f}  ours (gdn score) {s:.5f}  '
                           f'delta {100 * (s - fv) / fv:+.3f}%\n')
            else:
                out.append(f'final held-out loss (gdn score{" --set valid" if a.score_items else ", consecutive windows"}): '
                           f'ours {s:.5f}\n')
    # speed
    steady = [r for r in g_logs if r['iteration'] > 1]
    if steady:
        ms = sum(r['ms_per_iter'] for r in steady) / len(steady)
        tps = sum(r['tokens_per_s'] for r in steady) / len(steady)
    else:
        ms = tps = float('nan')
    out.append('| | ms/iter | tokens/s | wall time (s) |')
    out.append('|---|---|---|---|')
    if f_sum:
        out.append(f'| FLA | {f_sum["fla_ms_per_step"]:.1f} | {f_sum["fla_tokens_per_s"]:,.0f} | '
                   f'{f_sum.get("wall_s", float("nan")):.1f} (+ {f_other.get("warmup_s", 0):.0f} s autotuning warm-up) |')
    wall = a.gdn_wall if a.gdn_wall else float('nan')
    out.append(f'| ours | {ms:.1f} | {tps:,.0f} | {wall:.1f} (the whole gdn train command) |')
    if f_sum and tps == tps:
        out.append(f'\nthroughput ours / FLA: {tps / f_sum["fla_tokens_per_s"]:.3f}')
    text = '\n'.join(out) + '\n'
    open(a.out, 'w').write(text)
    print(text)
    return 0 if ok else 1


# ---------------------------------------------------------------- logits

def cosine(x, y):
    return float((x * y).sum() / math.sqrt(float((x * x).sum()) * float((y * y).sum())))


def top5(v):
    return [int(i) for i in np.argsort(-v, kind='stable')[:5]]


def load_f32(path, like_rows=None, vocab=None):
    a = np.fromfile(path, dtype=np.float32).astype(np.float64)
    return a.reshape(-1, vocab)


def compare_logits(a):
    """gdn's logits are DIR/p<j>.f32 ([T, vocab] float32); FLA's DIR/m<i>_p<j>.npy (m0 = our export loaded by
    FLA, m1 = FLA's own trained model). --self: the FLA side is gdn too (CPU mode): DIR/p<j>.f32 of the export."""
    out, ok = ['### Export: gdn convert --to-hf, loaded by FLA (recipe step 8)\n'], True
    out.append('| prompt | same weights: cosine (all positions) | max rel | top-5 overlap (last) | '
               'vs FLA\'s model: cosine (last) | top-5 overlap | top-1 same |')
    out.append('|---|---|---|---|---|---|---|')
    for j in range(a.prompts):
        g = np.fromfile(os.path.join(a.gdn, f'p{j}.f32'), dtype=np.float32).astype(np.float64)
        if a.self:
            e = np.fromfile(os.path.join(a.fla, f'p{j}.f32'), dtype=np.float32).astype(np.float64)
            ref = None
        else:
            e = np.load(os.path.join(a.fla, f'm0_p{j}.npy')).astype(np.float64).ravel()
            p = os.path.join(a.fla, f'm1_p{j}.npy')
            ref = np.load(p).astype(np.float64) if os.path.exists(p) else None
        vocab = a.vocab
        g, e = g.reshape(-1, vocab), e.reshape(-1, vocab)
        c = cosine(g, e)
        rel = float(np.abs(g - e).max() / np.abs(e).max())
        ov = len(set(top5(g[-1])) & set(top5(e[-1])))
        ok &= c >= 0.99999 and rel <= 1e-4  # the top-5 sets may differ by a near tie at rank 5
        row = f'| {j} | {c:.8f} | {rel:.2e} | {ov}/5 |'
        if ref is not None:
            r = ref.reshape(-1, vocab)[-1]
            cr = cosine(g[-1], r)
            ovr = len(set(top5(g[-1])) & set(top5(r)))
            ok &= cr >= 0.95 and ovr >= 3
            row += f' {cr:.5f} | {ovr}/5 | {"yes" if top5(g[-1])[0] == top5(r)[0] else "no"} |'
        else:
            row += ' - | - | - |'
        out.append(row)
    out.append('\nsame weights: cosine >= 0.99999, max rel <= 1e-4 (fp32 both sides); recipe step 8 vs '
               'the FLA-trained model: cosine >= 0.95, top-5 overlap >= 3/5')
    if a.self:
        out.append('(CPU mode: the "FLA" side is gdn reading the exported HF directory)')
    text = '\n'.join(out) + '\n'
    open(a.out, 'w').write(text)
    print(text)
    return 0 if ok else 1


# ---------------------------------------------------------------- eval

def mc_metrics(reqs, ll_key):
    """lm-eval multiple choice (spec eval.md §3.1): pred = argmax ll, pred_norm = argmax ll / len(choice in
    code points), first index wins ties; acc, acc_norm = means; stderr sqrt(p(1-p)/(n-1))."""
    docs = {}
    for q in reqs:
        docs.setdefault((q['task'], q['doc']), []).append(q)
    per_task = {}
    for (task, _), qs in sorted(docs.items()):
        qs.sort(key=lambda q: q['idx'])
        ll = [q[ll_key] for q in qs]
        lens = [len(q['continuation'][1:] if q['continuation'].startswith(' ') else q['continuation']) for q in qs]
        gold = qs[0]['gold']
        pred = max(range(len(ll)), key=lambda i: (ll[i], -i))
        pred_n = max(range(len(ll)), key=lambda i: (ll[i] / lens[i], -i))
        t = per_task.setdefault(task, {'acc': [], 'acc_norm': [], 'pred': []})
        t['acc'].append(float(pred == gold))
        t['acc_norm'].append(float(pred_n == gold))
        t['pred'].append((pred, pred_n))
    res = {}
    for task, m in per_task.items():
        res[task] = {'pred': m.pop('pred')}
        for k, xs in m.items():
            p, n = sum(xs) / len(xs), len(xs)
            res[task][k] = p
            res[task][k + '_stderr'] = math.sqrt(p * (1 - p) / (n - 1)) if n > 1 else float('nan')
        res[task]['n'] = len(m['acc'])
    return res


def eval_delta(a):
    reqs = [json.loads(l) for l in open(a.requests)]
    ours = mc_metrics(reqs, 'll')
    js = json.load(open(a.ours))['results']
    ok = True
    out = ['### Evaluation: gdn eval (ours) vs FLA\'s model scored lm-eval style on the same requests\n']
    # the script's scoring must reproduce gdn eval's own numbers from the same log-likelihoods
    for task, m in ours.items():
        for k in ('acc', 'acc_norm'):
            if abs(js[task][k + ',none'] - m[k]) > 1e-12:
                ok = False
                out.append(f'MISMATCH {task} {k}: gdn eval {js[task][k + ",none"]} vs recomputed {m[k]}')
    out.append(f'gdn eval\'s results JSON reproduced from its request log: {"yes" if ok else "NO"} '
               f'({len(reqs)} requests, {sum(m["n"] for m in ours.values())} docs)\n')
    fla = same = None
    if a.fla and os.path.exists(a.fla):
        sc = [json.loads(l) for l in open(a.fla)]
        assert len(sc) == len(reqs), (len(sc), len(reqs))
        for q, s in zip(reqs, sc):
            assert (q['task'], q['doc'], q['idx']) == (s['task'], s['doc'], s['idx'])
            q.update({k: v for k, v in s.items() if k.startswith('ll_') or k.startswith('greedy_')})
        same = mc_metrics(reqs, 'll_0')
        if 'll_1' in reqs[0]:
            fla = mc_metrics(reqs, 'll_1')
        d = [abs(q['ll'] - q['ll_0']) / max(1.0, abs(q['ll_0'])) for q in reqs]

        def agree(x):  # share of docs where both pick the same choice (acc's and acc_norm's argmax)
            pairs = [(p, q) for t in ours for p, q in zip(ours[t]['pred'], x[t]['pred'])]
            return 100 * sum(p[0] == q[0] for p, q in pairs) / len(pairs), 100 * sum(p[1] == q[1] for p, q in pairs) / len(pairs)
        a0 = agree(same)
        out.append(f'same weights (our export scored by FLA, bf16): per-request |ll difference| / max(1, |ll|): '
                   f'median {sorted(d)[len(d) // 2]:.2e}, max {max(d):.2e}; same choice on {a0[0]:.1f}% of docs '
                   f'(acc), {a0[1]:.1f}% (acc_norm)')
        if fla:
            a1 = agree(fla)
            out.append(f'ours vs FLA\'s model: same choice on {a1[0]:.1f}% of docs (acc), {a1[1]:.1f}% (acc_norm)')
    out.append('')
    out.append('| task | metric | ours | FLA\'s model | delta (points) | within 1.5 | FLA on our export |')
    out.append('|---|---|---|---|---|---|---|')
    for task in sorted(ours):
        for k in ('acc', 'acc_norm'):
            o = 100 * ours[task][k]
            f = 100 * fla[task][k] if fla else None
            s = 100 * same[task][k] if same else None
            d = o - f if f is not None else None
            if d is not None:
                ok &= abs(d) <= 1.5 or not a.strict
            out.append(f'| {task} | {k} | {o:.2f} ± {100 * ours[task][k + "_stderr"]:.2f} | '
                       f'{f"{f:.2f}" if f is not None else "-"} | {f"{d:+.2f}" if d is not None else "-"} | '
                       f'{("yes" if abs(d) <= 1.5 else "NO") if d is not None else "-"} | '
                       f'{f"{s:.2f}" if s is not None else "-"} |')
    counts = ', '.join('%s %d' % (t, m['n']) for t, m in sorted(ours.items()))
    out.append(f'\n(docs per task: {counts}; task files made '
               f'from held-out corpus text by scripts/recipe_tools.py make-tasks; the recipe\'s tolerance is 1.5 points '
               f'per task)')
    text = '\n'.join(out) + '\n'
    open(a.out, 'w').write(text)
    print(text)
    return 0 if ok else 1


def main():
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == 'split-corpus':
        split_corpus(rest[0], rest[1], rest[2], float(rest[3]))
        return 0
    if cmd == 'make-tasks':
        make_tasks(rest[0], rest[1], int(rest[2]), int(rest[3]))
        return 0
    if cmd == 'trainer-state':
        rows = [json.loads(l) for l in open(rest[0]) if l.startswith('{')]
        write_trainer_state(rest[1], rows, int(rest[2]), int(rest[3]))
        return 0
    if cmd == 'fla-order':
        order = FlaOrder(int(rest[0]))
        print(' '.join(str(order(int(x))) for x in rest[1:]))
        return 0
    ap = argparse.ArgumentParser(prog=f'recipe_tools.py {cmd}')
    ap.add_argument('--out', required=True)
    if cmd == 'compare-train':
        ap.add_argument('--gdn', required=True)
        ap.add_argument('--fla')
        ap.add_argument('--gdn-score')
        ap.add_argument('--score-items', action='store_true', help='--gdn-score scored the run\'s valid items')
        ap.add_argument('--gdn-wall', type=float)
        ap.add_argument('--steps', type=int, default=0)
        return compare_train(ap.parse_args(rest))
    if cmd == 'compare-logits':
        ap.add_argument('--prompts', type=int, required=True)
        ap.add_argument('--gdn', required=True)
        ap.add_argument('--fla', required=True)
        ap.add_argument('--vocab', type=int, default=128256)
        ap.add_argument('--self', action='store_true')
        return compare_logits(ap.parse_args(rest))
    if cmd == 'eval-delta':
        ap.add_argument('--requests', required=True)
        ap.add_argument('--ours', required=True)
        ap.add_argument('--fla')
        ap.add_argument('--strict', action='store_true', help='fail when a delta exceeds 1.5 points')
        return eval_delta(ap.parse_args(rest))
    sys.exit(__doc__)


if __name__ == '__main__':
    sys.exit(main())
