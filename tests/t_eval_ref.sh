#!/usr/bin/env bash
# gdn eval's loglikelihoods against a float64 PyTorch reference (tests/ref/gdn_ref.py, written from the spec):
# a tiny model with the real 128k vocabulary, briefly trained so its predictions are not uniform, scores the
# small task files of every family (tests/eval/real_data.py: multiple choice, partial scoring, lambada's
# greedy check, wikitext's rolling windows); every scored request (tokens and continuation length from
# --log-requests) is re-scored by the reference: log-likelihood within 1e-5 relative (fp32 vs float64), and
# the is_greedy flag equal wherever the reference's top-2 logits are not a near tie.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
bash scripts/fetch_assets.sh >/dev/null
TOK=.assets/llama3/tokenizer.json
W=$(mktemp -d "${TMPDIR:-/tmp}/t_eval_ref.XXXXXX"); trap 'rm -rf "$W"' EXIT
$PY tests/ref/make_dataset.py "$W/data" 60000 2000 3
./gdn train --config configs/tiny.yaml --train_data_path "$W/data" --train_iters 30 --lr_warmup_iters 3 \
    --init_method_std 0.1 --save "$W/ck" --device cpu --log_interval 10 > "$W/train.log"
$PY tests/eval/real_data.py "$W/tasks"
TASKS=arc_easy,hellaswag,openbookqa,piqa,winogrande,race,lambada_openai,wikitext,mmlu_abstract_algebra
./gdn eval --load "$W/ck" --tasks "$TASKS" --data-dir "$W/tasks" --device cpu --tokenizer "$TOK" \
    --log-requests "$W/req.jsonl" --output-path "$W/out.json" > "$W/eval.log" 2>&1 || { cat "$W/eval.log"; exit 1; }
$PY - "$W" <<'PY'
import json, sys
import torch
sys.path.insert(0, 'tests/ref')
import gdn_ref
import st
w = sys.argv[1]
it = open(f'{w}/ck/latest_checkpointed_iteration.txt').read().strip()
path = f'{w}/ck/iter_{int(it):07d}/model.safetensors'
hdr, meta, _, _ = st.header(path)
cfg = json.loads(meta['config'])
P = {k: torch.tensor(v, dtype=torch.float64).view(hdr[k]['shape']) for k, v in st.tensors_f32(path).items()}
reqs = [json.loads(l) for l in open(f'{w}/req.jsonl')]
assert len(reqs) >= 30, len(reqs)
worst, nflag, skipped, ntrue = 0.0, 0, 0, 0
cache = {}
with torch.no_grad():
    for r in reqs:
        toks, c = r['tokens'], r['cont_len']
        key = tuple(toks[:-1])
        if key not in cache:
            cache = {key: torch.log_softmax(gdn_ref.forward(P, torch.tensor([toks[:-1]]), cfg)[0], -1)}
        lp = cache[key]
        rows = range(len(toks) - 1 - c, len(toks) - 1)
        ref = sum(lp[t, toks[t + 1]].item() for t in rows)
        err = abs(r['ll'] - ref) / max(1.0, abs(ref))
        worst = max(worst, err)
        assert err <= 1e-5, (r, ref, err)
        greedy, near_tie = True, False
        for t in rows:
            top = torch.topk(lp[t], 2)
            greedy &= top.indices[0].item() == toks[t + 1]
            near_tie |= (top.values[0] - top.values[1]).item() < 1e-4
        if near_tie:
            skipped += 1
        else:
            assert bool(r['is_greedy']) == greedy, (r, greedy)
            nflag += 1
            ntrue += greedy
tasks = sorted({r.get('task', '?') for r in reqs})
print(f'{len(reqs)} requests ({", ".join(tasks)}): loglikelihood vs float64 reference within {worst:.1e} '
      f'(tol 1e-5); is_greedy equal on {nflag} ({ntrue} of them greedy; {skipped} near ties skipped)')
PY
