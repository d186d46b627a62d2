#!/usr/bin/env bash
# Speed side by side with FLA's fastest configurations, in one call on the GPU machine (issue: speed).
# Builds gdn with CUDA, then alternates `gdn bench` and FLA's harness (.flabench/fla_bench.py, a copy of
# ../shared/tools; FLA's fla/ package in .fla/) at micro-batch 16, 32 and 64 for the 300M, optionally the 1B
# and decoding, and prints the ratio table last.
#   BENCH_B="16 32 64"  BENCH_1B=1  BENCH_DECODE=1  BENCH_STEPS=10  FLA_STEPS=12  FLA_TIMEOUT=420 (s per FLA run: its
#   autotuning takes ~3 min for the first shape, ~45 s for each next one)  FLA_PLAN="bf16-fce:16" (FLA's variants and
#   micro-batches for the 300M; both variants at BENCH_B by default)
# Logs and fla_results*.json go to build/bench_out (and a tarball to $OUT when the device tool sets it).
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS_DIR=${OUT:-}
O=build/bench_out; rm -rf "$O"; mkdir -p "$O"
export PYTHONPATH=${FLA_PATH:-.fla} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
BS=${BENCH_B:-16 32 64}
STEPS=${BENCH_STEPS:-10}
[ -f .flabench/fla_bench.py ] || { echo "bench_vs_fla: .flabench/fla_bench.py missing (copy ../shared/tools there and carry it)"; exit 2; }
[ -f "${FLA_PATH:-.fla}/fla/__init__.py" ] || { echo "bench_vs_fla: ${FLA_PATH:-.fla}/fla/__init__.py missing (FLA_PATH is a folder holding FLA's fla/ package)"; exit 2; }
if [ -d .deps ]; then MK=(CUDA=1 BLAS=0 DEPS=.deps); else MK=(CUDA=1); fi
make -j"$(nproc)" "${MK[@]}" gdn > "$O/build.log" 2>&1 || { tail -30 "$O/build.log"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee "$O/gpu.txt"

gdn_bench() { # gdn_bench TAG CONFIG B
  local tag=$1 cfg=$2 b=$3
  ./gdn bench --config "$cfg" --micro_batch_size "$b" --seq_length 2048 --device cuda --steps "$STEPS" --warmup 2 \
      > "$O/gdn_${tag}_b$b.log" 2>&1
  grep -h "^bench:" "$O/gdn_${tag}_b$b.log" || tail -5 "$O/gdn_${tag}_b$b.log"
}
plan=""; for b in $BS; do plan="$plan,$b"; done; plan=${plan#,}
for b in $BS; do gdn_bench 300m_a configs/gdn-300m.yaml "$b"; done
timeout "${FLA_TIMEOUT:-420}" python3 .flabench/fla_bench.py --out "$O" --sections env,train \
    --train-plan "${FLA_PLAN:-bf16-fce:$plan;amp-fce:$plan}" --steps "${FLA_STEPS:-12}" > "$O/fla_300m.log" 2>&1
cp "$O/fla_results.json" "$O/fla_results_300m.json" 2>/dev/null
grep "train\[" "$O/fla_300m.log" | grep "ms/step" || tail -5 "$O/fla_300m.log"
for b in $BS; do gdn_bench 300m_b configs/gdn-300m.yaml "$b"; done
if [ "${BENCH_1B:-0}" = 1 ]; then
  gdn_bench 1b_a configs/gdn-1b.yaml 16
  FLA_BENCH_SHAPE=2048,16,8,16,64,8192 timeout "${FLA_TIMEOUT:-420}" python3 .flabench/fla_bench.py --out "$O" --sections env,train \
      --train-plan "bf16-fce:16;amp-fce:16" --steps 6 > "$O/fla_1b.log" 2>&1
  cp "$O/fla_results.json" "$O/fla_results_1b.json" 2>/dev/null
  gdn_bench 1b_b configs/gdn-1b.yaml 16
fi

# ratio table: gdn's best of the two alternating runs against each FLA variant
python3 - "$O" "$BS" "${BENCH_1B:-0}" <<'PY' | tee "$O/table.txt"
import json, re, sys, os
O, BS, with1b = sys.argv[1], sys.argv[2].split(), sys.argv[3] == '1'
def gdn(tag, b):
    best = None
    for ab in 'ab':
        try: txt = open(f'{O}/gdn_{tag}_{ab}_b{b}.log').read()
        except OSError: continue
        m = re.search(r'([0-9.]+) ms/step, ([0-9]+) tokens/s', txt)
        mem = re.search(r'memory in use ([0-9.]+) GiB, peak allocated ([0-9.]+) GiB', txt)
        if m and (best is None or float(m.group(1)) < best[0]):
            best = (float(m.group(1)), float(m.group(2)), float(mem.group(2)) if mem else float('nan'),
                    float(mem.group(1)) if mem else float('nan'))
    return best
def fla(name, b):
    try: r = json.load(open(f'{O}/fla_results_{name}.json'))['train']
    except (OSError, KeyError): return {}
    return {v: r[v].get(str(b), r[v].get(b, {})) for v in r}
# memory: gdn's peak allocated against FLA's (both what the model's tensors held at most; the device's in-use
# figure, context and pool included, in brackets)
print('\nmodel  B   gdn ms  gdn tok/s  gdn GiB (in use) | FLA variant  ms      tok/s     GiB   | gdn/FLA')
rows = [('300m', int(b)) for b in BS] + ([('1b', 16)] if with1b else [])
for name, b in rows:
    g = gdn(name, b)
    for v, r in sorted(fla(name, b).items()):
        if not g or 'tok_per_s' not in r: print(f'{name:5s} {b:3d}  {g}  | {v} {r}'); continue
        print(f'{name:5s} {b:3d} {g[0]:7.1f} {g[1]:10,.0f} {g[2]:7.2f} ({g[3]:5.2f}) | {v:11s} {r["ms_median"]:7.1f} {r["tok_per_s"]:9,.0f} '
              f'{r.get("peak_alloc_GiB", float("nan")):5.1f} | {g[1] / r["tok_per_s"]:.3f}x')
PY
if [ "${BENCH_DECODE:-0}" = 1 ]; then
  python3 scripts/fla_ref.py init build/bench_hf > /dev/null 2>&1 && ./gdn convert --from-hf build/bench_hf --save build/bench_ckpt > /dev/null 2>&1
  for b in 1 16 64; do
    ./gdn generate --load build/bench_ckpt --tokenizer .assets/llama3/tokenizer.json --prompt "The capital of France is" --batch "$b" \
        --max-new-tokens 300 --greedy --device cuda --quiet > "$O/decode_b$b.log" 2>&1; grep -h "^generate:" "$O/decode_b$b.log" | sed "s/^/gdn batch $b: /"
  done
  timeout 300 python3 .flabench/fla_decode.py > "$O/fla_decode.log" 2>&1; tail -6 "$O/fla_decode.log"
fi
[ -n "$RESULTS_DIR" ] && tar czf "$RESULTS_DIR/bench_logs.tgz" -C "$O" . 2>/dev/null
exit 0
