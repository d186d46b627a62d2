#!/usr/bin/env bash
# The pure-GDN 300M recipe end to end on one GPU, against FLA, in one command (about 9 minutes on one H200):
#   1 prepare   the embedded English corpus both ways: Option A (documents + EOD, trained with a validation
#               split) and Option B (FLA chunks; 5% of the documents held out as FLA chunks for validation)
#   2 init      FLA's 300M init saved by FLA, `gdn convert --from-hf`
#   3 train     `gdn train` from it on Option B in FLA's sample order, the recipe's schedule scaled to STEPS
#               (warmup 200/4768 of the run, cosine to min_lr), validation every EVAL_INTERVAL, TensorBoard
#   4 fla_train FLA trains the same steps on the same batches with the same learning rates (scripts/fla_ref.py)
#   5 report    `gdn report RUN --vs FLA_LOG --out DIR`: the step-6 table and plots
#   6 export    `gdn convert --to-hf`; FLA loads the export; logits compared (cosine, top-5 overlap; step 8)
#   7 verify    `gdn verify` on the export
#   8 eval      `gdn eval` on local task files (made from held-out corpus text), the same requests scored
#               with FLA's trained model lm-eval style: the delta table
# Every stage is timed and bounded, logs to build/recipe/logs/<stage>.log, and the run goes on past a failed
# stage; the summary table comes last and, with $OUT set (the device tool), lands in $OUT with recipe.tgz.
#
# GPU machine: FLA's fla/ package in .fla (FLA_PATH), .assets/corpus and .assets/llama3 carried; no registry.
# RECIPE_CPU=1: the CPU-only parts (1, 3, 5, 6 export, 7, 8) on configs/tiny.yaml, FLA stages skipped (CI:
# tests/t_recipe_cpu.sh). Knobs: STEPS, EVAL_INTERVAL, EVAL_ITERS, LR, MIN_LR, ARC_DOCS, HELLA_DOCS,
# RECIPE_DEADLINE (seconds; later stages are skipped past it so the summary is always written), RECIPE_BUILD=0.
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS_DIR=${OUT:-}
CPU=${RECIPE_CPU:-0}
W=${RECIPE_DIR:-build/recipe}
rm -rf "$W"; mkdir -p "$W/logs" "$W/tables" "$W/data" "$W/eval" "$W/ids"
LOGS=$W/logs FLA_LOG=$W/fla/fla_log.jsonl
TOK=.assets/llama3/tokenizer.json
T_START=$(date +%s)
if [ "$CPU" = 1 ]; then
  # small enough for a loaded 2-core CI machine: the 128k-vocabulary head costs ~4 ms per token there
  PY=${RECIPE_PY:-/usr/bin/python3}; CONFIG=configs/tiny.yaml; DEV=cpu; SEQ=64; MBS=2; GBS=4
  STEPS=${STEPS:-16}; EVAL_INTERVAL=${EVAL_INTERVAL:-8}; EVAL_ITERS=${EVAL_ITERS:-1}; LR=${LR:-3e-3}; MIN_LR=${MIN_LR:-3e-4}
  ARC_DOCS=${ARC_DOCS:-8}; HELLA_DOCS=${HELLA_DOCS:-6}; EXPORT_DTYPE=fp32; A_STEPS=${A_STEPS:-4}; VERIFY_TOKENS=8
  DEADLINE=${RECIPE_DEADLINE:-600}
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} # a shared 2-core machine: spinning OpenMP teams cost 10x there
else
  PY=${RECIPE_PY:-python3}; CONFIG=configs/gdn-300m.yaml; DEV=cuda; SEQ=2048; MBS=16; GBS=16
  STEPS=${STEPS:-300}; EVAL_INTERVAL=${EVAL_INTERVAL:-50}; EVAL_ITERS=${EVAL_ITERS:-2}; LR=${LR:-2e-4}; MIN_LR=${MIN_LR:-2e-5}
  ARC_DOCS=${ARC_DOCS:-400}; HELLA_DOCS=${HELLA_DOCS:-400}; EXPORT_DTYPE=bf16; A_STEPS=${A_STEPS:-20}
  DEADLINE=${RECIPE_DEADLINE:-570}; VERIFY_TOKENS=40
fi
# a log line (and its JSONL row) every iteration: gdn report's table then holds each step's loss, as FLA's does
LOG_INTERVAL=1
# the recipe's warmup (200 of 4768 iterations) scaled to this run
WARMUP=$(( (STEPS * 200 + 2384) / 4768 )); [ "$WARMUP" -ge 1 ] || WARMUP=1
VALID_SAMPLES=$(( EVAL_ITERS * GBS ))
export FLA_PATH=${FLA_PATH:-.fla} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
# FLA's Triton autotuning results kept on disk, so the later FLA processes do not tune again
export TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$PWD/build/triton_cache}

declare -A RESULT NOTE
ORDER=() MISSING=()
elapsed() { echo $(( $(date +%s) - T_START )); }
# stage NAME LIMIT CMD...: runs CMD (at most LIMIT s, and never past the deadline), logs, records the result
stage() {
  local name=$1 limit=$2; shift 2; ORDER+=("$name")
  local left=$(( DEADLINE - $(elapsed) ))
  if [ "$left" -lt 10 ]; then RESULT[$name]="SKIP"; NOTE[$name]="deadline (${DEADLINE}s) reached"; return 1; fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "=== $name ($(elapsed)s): $*"
  local t0=$(date +%s) rc=0
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1 || rc=$?
  local dt=$(( $(date +%s) - t0 ))
  if [ "$rc" = 0 ]; then RESULT[$name]="PASS ${dt}s"
  elif [ "$rc" = 124 ]; then RESULT[$name]="FAIL ${dt}s"; NOTE[$name]="timed out after ${limit}s"
  else RESULT[$name]="FAIL ${dt}s"; NOTE[$name]="exit $rc"; fi
  tail -n 15 "$LOGS/$name.log"
  return "$rc"
}
skip() { ORDER+=("$1"); RESULT[$1]="SKIP"; NOTE[$1]=$2; echo "=== $1: skipped: $2"; }
ok() { [[ "${RESULT[$1]:-}" == PASS* ]]; }

# the summary table (printed last), $W/summary.txt, and with $OUT set the summary and recipe.tgz there
finish() {
  {
    echo; echo "==================== recipe summary ($(elapsed)s) ===================="
    echo "$( [ "$CPU" = 1 ] && echo "CPU mode (RECIPE_CPU=1): $CONFIG" || echo "GPU: $(cat "$LOGS/gpu.txt" 2>/dev/null)" ); $STEPS steps of $GBS x $SEQ tokens, lr $LR -> $MIN_LR cosine, warmup $WARMUP; $(./gdn --version 2>/dev/null | head -1)"
    printf "%-16s %-12s %s\n" stage result note
    for k in "${ORDER[@]}"; do printf "%-16s %-12s %s\n" "$k" "${RESULT[$k]}" "${NOTE[$k]:-}"; done
    if [ ${#MISSING[@]} -gt 0 ]; then echo; echo "features missing in this build:"; printf '  MISSING: %s\n' "${MISSING[@]}"; fi
    for f in "$W"/tables/*.md; do [ -f "$f" ] && { echo; cat "$f"; }; done
    grep -h "^bench\|fla_ms_per_step" "$FLA_LOG" 2>/dev/null | tail -1
    [ -f "$LOGS/verify.log" ] && { echo; echo "### gdn verify on the export"; grep -v "^verify exit" "$LOGS/verify.log" | tail -n 20; }
    [ -d "$W/report" ] && { echo; echo "gdn report: $(ls "$W/report" | tr '\n' ' ')"; }
    [ -d "$W/tensorboard" ] && echo "TensorBoard: $(find "$W/tensorboard" -type f | wc -l) event file(s) in $W/tensorboard"
  } | tee "$W/summary.txt"
  if [ -n "$RESULTS_DIR" ]; then
    mkdir -p "$RESULTS_DIR"
    tar czf "$RESULTS_DIR/recipe.tgz" -C "$W" --exclude=ckpt --exclude=ckpt_init --exclude=hf_init --exclude=hf_export \
        --exclude=fla/model --exclude=data --exclude=logits --exclude='corpus_*.jsonl' . 2>/dev/null
    cp "$W/summary.txt" "$RESULTS_DIR/"
  fi
  for k in "${ORDER[@]}"; do [[ "${RESULT[$k]}" == FAIL* ]] && exit 1; done
  exit "${1:-0}"
}

# ---- 0: FLA's init (saved by FLA), then its Triton autotuning in the background while gdn builds and
# prepares the data (the GPU is idle then); the build; feature probes
HAVE_FLA=0 WARM_PID=
if [ "$CPU" != 1 ]; then
  if [ -f "$FLA_PATH/fla/__init__.py" ]; then HAVE_FLA=1
  else MISSING+=("FLA: no fla/ package in FLA_PATH=$FLA_PATH: the FLA stages are skipped"); fi
fi
fla() { [ "$HAVE_FLA" = 1 ]; }
why_no_fla() { [ "$CPU" = 1 ] && echo "RECIPE_CPU=1 (no FLA, no GPU)" || echo "no FLA in $FLA_PATH"; }
if fla; then
  if stage fla_init 180 "$PY" scripts/fla_ref.py init "$W/hf_init"; then
    WARM_LIMIT=$(( DEADLINE - $(elapsed) - 240 )); [ "$WARM_LIMIT" -le 420 ] || WARM_LIMIT=420
    ( timeout "$WARM_LIMIT" "$PY" scripts/fla_ref.py warmup "$W/hf_init" "$MBS" "$SEQ" > "$LOGS/fla_warmup.log" 2>&1
      echo $? > "$W/fla_warmup.rc" ) &
    WARM_PID=$!
  fi
else skip fla_init "$(why_no_fla)"; fi
if [ "$CPU" != 1 ] && [ "${RECIPE_BUILD:-1}" = 1 ]; then
  if [ -d .deps ]; then MK=(CUDA=1 BLAS=0 DEPS=.deps); else MK=(CUDA=1); fi
  stage build 300 make -j"$(nproc)" "${MK[@]}" gdn
fi
[ "$CPU" = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$LOGS/gpu.txt" 2>&1
if [ ! -x ./gdn ]; then
  MISSING+=("./gdn: not built (see logs/build.log): nothing else can run"); [ -n "$WARM_PID" ] && wait "$WARM_PID"; finish 2
fi
HELP=$(./gdn train --help 2>&1)
has_key() { grep -qE "^  $1 " <<< "$HELP"; }
VALID_B=() VALID_A=() TB=()
if has_key eval_interval && has_key eval_iters && has_key valid_data_path; then
  # the same held-out items at every evaluation (FLA's side scores those): one epoch of FLA chunks must hold them
  if has_key eval_same_samples; then VALID_B=(--valid_data_path "$W/data/optB_valid" --eval_interval "$EVAL_INTERVAL"
      --eval_iters "$EVAL_ITERS" --eval_same_samples true)
  else VALID_B=(--valid_data_path "$W/data/optB_valid" --eval_interval "$STEPS" --eval_iters "$EVAL_ITERS")
    MISSING+=("eval_same_samples: validation only at the end (issue 18)"); fi
else MISSING+=("validation during training: gdn train has no eval_interval/eval_iters/valid_data_path (issue 18, branch i18-train)"); fi
if has_key eval_interval && has_key split && has_key data_path; then
  VALID_A=(--split 95,5,0 --eval_interval "$A_STEPS" --eval_iters 1)
else MISSING+=("the train/valid split of Option A: gdn train has no split key (issue 18, branch i18-train)"); fi
if has_key tensorboard_dir; then TB=(--tensorboard_dir "$W/tensorboard")
else MISSING+=("TensorBoard: gdn train has no tensorboard_dir key (issue 15, branch i15-report)"); fi
HAVE_REPORT=0
if ./gdn report --help > /dev/null 2>&1; then HAVE_REPORT=1
else MISSING+=("gdn report: no such subcommand (issue 15, branch i15-report)"); fi
echo "recipe: $( [ "$CPU" = 1 ] && echo "CPU mode, $CONFIG" || echo "GPU, $CONFIG" ), $STEPS steps of $GBS x $SEQ, lr $LR -> $MIN_LR, warmup $WARMUP"

# ---- 1: prepare both ways
stage corpus 60 bash -c "bash scripts/setup_corpus.sh --jsonl-only && $PY scripts/recipe_tools.py split-corpus .assets/corpus.jsonl $W/corpus_train.jsonl $W/corpus_valid.jsonl 0.05"
stage prepare_a 120 ./gdn prepare --input .assets/corpus.jsonl --tokenizer "$TOK" --output-prefix "$W/data/optA_text_document" --append-eod --quiet
stage prepare_b 120 bash -c "./gdn prepare --input $W/corpus_train.jsonl --tokenizer $TOK --output-prefix $W/data/optB_train --fla-chunks --seq-length $SEQ --quiet &&
  ./gdn prepare --input $W/corpus_valid.jsonl --tokenizer $TOK --output-prefix $W/data/optB_valid --fla-chunks --seq-length $SEQ --shards 1 --quiet"
stage dataset_info 60 bash -c "for p in optA_text_document optB_train optB_valid; do ./gdn dataset info $W/data/\$p || exit 1; done"

# ---- 2: FLA's init, converted (FLA saved it before the build, above)
INIT=()
if fla && ok fla_init; then
  stage convert_from_hf 120 ./gdn convert --from-hf "$W/hf_init" --save "$W/ckpt_init"
  ok convert_from_hf && INIT=(--load "$W/ckpt_init" --finetune)
else skip convert_from_hf "$(why_no_fla)"; fi
# gdn's timed runs must have the GPU to themselves: wait for FLA's autotuning first
if [ -n "$WARM_PID" ]; then
  t0=$(date +%s); wait "$WARM_PID"; rc=$(cat "$W/fla_warmup.rc" 2>/dev/null || echo 1); ORDER+=(fla_warmup)
  if [ "$rc" = 0 ]; then RESULT[fla_warmup]="PASS"; else RESULT[fla_warmup]="FAIL"; fi
  NOTE[fla_warmup]="background since the build: $(grep -ho '"fla_warmup_s": [0-9.]*' "$LOGS/fla_warmup.log" | cut -d' ' -f2)s tuning, waited $(( $(date +%s) - t0 ))s here"
fi

# ---- 3: gdn train (Option A briefly with its split, then Option B in FLA's order)
COMMON=(--config "$CONFIG" --micro_batch_size "$MBS" --global_batch_size "$GBS" --seq_length "$SEQ"
        --lr "$LR" --min_lr "$MIN_LR" --lr_decay_style cosine --device "$DEV")
if [ ${#VALID_A[@]} -gt 0 ]; then
  stage train_a 120 ./gdn train "${COMMON[@]}" "${INIT[@]}" --data_path "$W/data/optA_text_document" \
      "${VALID_A[@]}" --train_iters "$A_STEPS" --lr_warmup_iters 1 --log_interval 1 \
      --metrics_file "$W/gdn_a_metrics.jsonl" --save ""
else skip train_a "gdn train has no split/eval_interval (issue 18)"; fi
t0=$(date +%s)
stage train 300 ./gdn train "${COMMON[@]}" "${INIT[@]}" --train_data_path "$W/data/optB_train" --data_order fla \
    --train_iters "$STEPS" --lr_warmup_iters "$WARMUP" --log_interval "$LOG_INTERVAL" "${VALID_B[@]}" "${TB[@]}" \
    --metrics_file "$W/gdn_metrics.jsonl" --save "$W/ckpt"
GDN_WALL=$(( $(date +%s) - t0 ))
SCORE_ITEMS=()
if ok train; then # the final validation again, from the saved checkpoint: the run's valid items when it has them
  if [ ${#VALID_B[@]} -gt 0 ] && grep -q -- '--set' <<<"$(./gdn score --help 2>&1)"; then
    SCORE_ITEMS=(--score-items)
    stage score_valid 120 ./gdn score --load "$W/ckpt" --set valid --max-samples "$VALID_SAMPLES" --micro-batch-size "$MBS" --device "$DEV"
  else
    stage score_valid 120 ./gdn score --load "$W/ckpt" --data "$W/data/optB_valid" --seq-length "$SEQ" \
        --max-samples "$VALID_SAMPLES" --micro-batch-size "$MBS" --device "$DEV"
  fi
fi

# ---- 4: FLA trains the same steps
# leave ~110 s for the stages after it (export, logits, verify, eval): a cut-short FLA log still compares
FLA_LIMIT=$(( DEADLINE - $(elapsed) - 110 )); [ "$FLA_LIMIT" -le 420 ] || FLA_LIMIT=420
if fla && ok fla_init && [ "$FLA_LIMIT" -lt 30 ]; then skip fla_train "no time left before the deadline (${DEADLINE}s)"
elif fla && ok fla_init; then
  mkdir -p "$W/fla"
  stage fla_train "$FLA_LIMIT" "$PY" scripts/fla_ref.py train "$W/hf_init" "$W/data/optB_train" "$STEPS" --mbs "$MBS" \
      --lr "$LR" --min-lr "$MIN_LR" --warmup "$WARMUP" --valid "$W/data/optB_valid" --eval-interval "$EVAL_INTERVAL" \
      --valid-samples "$VALID_SAMPLES" --log "$FLA_LOG" --save "$W/fla/model" --warmup-step
else skip fla_train "$(why_no_fla)"; fi
if [ -f "$W/gdn_metrics.jsonl" ]; then
  FLA_ARG=(); [ -f "$FLA_LOG" ] && FLA_ARG=(--fla "$FLA_LOG")
  stage compare_train 60 "$PY" scripts/recipe_tools.py compare-train --gdn "$W/gdn_metrics.jsonl" "${FLA_ARG[@]}" \
      --gdn-score "$LOGS/score_valid.log" "${SCORE_ITEMS[@]}" --gdn-wall "$GDN_WALL" --steps "$STEPS" --out "$W/tables/1_train.md"
fi

# ---- 5: gdn report
if [ "$HAVE_REPORT" = 1 ] && [ -f "$W/gdn_metrics.jsonl" ]; then
  # FLA's log here is one process's mean token loss: no world-size divisor (--hf_loss_div 1)
  if [ -f "$FLA_LOG" ] && [ ! -f "$W/fla/trainer_state.json" ]; then # FLA cut short: its log so far
    "$PY" scripts/recipe_tools.py trainer-state "$FLA_LOG" "$W/fla/trainer_state.json" \
        "$(./gdn dataset info "$W/data/optB_train" | awk '/^sequences:/ {print $2}')" "$MBS"
  fi
  VS=(); [ -f "$W/fla/trainer_state.json" ] && VS=(--vs "$W/fla/trainer_state.json" --hf_loss_div 1)
  ITERS=$("$PY" -c "import sys; sys.path.insert(0, 'scripts'); import recipe_tools as r; print(','.join(map(str, r.table_iters($STEPS))))")
  stage report 120 ./gdn report "$W/gdn_metrics.jsonl" "${VS[@]}" --iters "$ITERS" --out "$W/report"
elif [ "$HAVE_REPORT" = 0 ]; then skip report "gdn report is missing (issue 15)"; fi

# ---- 6: export, FLA loads it, logits compared
PROMPTS=("The capital of France is" "Machine learning is a field of" "The largest planet in our solar system is")
if ok train; then
  stage to_hf 120 ./gdn convert --to-hf --load "$W/ckpt" --output-dir "$W/hf_export" --dtype "$EXPORT_DTYPE" --tokenizer "$TOK"
fi
if ok to_hf; then
  IDS=()
  for j in 0 1 2; do
    printf '%s' "${PROMPTS[$j]}" | ./gdn tokenize --tokenizer "$TOK" |
      "$PY" -c "import sys, numpy as np; np.array(sys.stdin.read().split(), dtype=np.int32).tofile('$W/ids/p$j.bin')"
    IDS+=("$W/ids/p$j.bin")
  done
  mkdir -p "$W/logits/gdn" "$W/logits/other"
  if [ "$CPU" = 1 ]; then # the export read back by gdn must give the checkpoint's logits exactly
    stage gdn_logits 120 bash -c "for j in 0 1 2; do ./gdn logits --load $W/ckpt --ids $W/ids/p\$j.bin --out $W/logits/gdn/p\$j.f32 --device cpu &&
      ./gdn logits --load $W/hf_export --ids $W/ids/p\$j.bin --out $W/logits/other/p\$j.f32 --device cpu || exit 1; done"
    ok gdn_logits && stage compare_export 60 "$PY" scripts/recipe_tools.py compare-logits --prompts 3 --self \
        --gdn "$W/logits/gdn" --fla "$W/logits/other" --out "$W/tables/2_export.md"
  else # the same export in both: gdn (CUDA fp32) and FLA (fp32, its recurrent path); FLA's own model beside it
    stage gdn_logits 120 bash -c "for j in 0 1 2; do ./gdn logits --load $W/hf_export --ids $W/ids/p\$j.bin --out $W/logits/gdn/p\$j.f32 --device cuda --precision fp32 || exit 1; done"
    if fla; then
      M=("$W/hf_export"); [ -f "$W/fla/model/config.json" ] && M+=("$W/fla/model")
      stage fla_logits 180 "$PY" scripts/fla_ref.py prompt-logits "$W/logits/other" "$(IFS=,; echo "${IDS[*]}")" "${M[@]}"
      ok gdn_logits && ok fla_logits && stage compare_export 60 "$PY" scripts/recipe_tools.py compare-logits \
          --prompts 3 --gdn "$W/logits/gdn" --fla "$W/logits/other" --out "$W/tables/2_export.md"
    else skip fla_logits "$(why_no_fla)"; fi
  fi
fi

# ---- 7: verify (exit 0 PASS, 1 FAIL verdict: the stage records the verdict; a crash is a failed stage)
if ok to_hf; then
  stage verify 120 bash -c "./gdn verify --load $W/hf_export --tokenizer $TOK --device $DEV --max-new-tokens $VERIFY_TOKENS; rc=\$?; echo \"verify exit \$rc\"; [ \$rc -le 1 ]"
  if ok verify; then
    if grep -q "verify exit 0" "$LOGS/verify.log"; then NOTE[verify]="verdict PASS (every prompt's loss < 6.0)"
    else NOTE[verify]="verdict FAIL (a prompt's loss >= 6.0$( [ "$CPU" = 1 ] && echo ": expected of a tiny model after $STEPS steps"))"; fi
  fi
fi

# ---- 8: eval, ours and FLA's model on the same requests
if ok to_hf; then
  stage make_tasks 60 "$PY" scripts/recipe_tools.py make-tasks "$W/corpus_valid.jsonl" "$W/tasks" "$ARC_DOCS" "$HELLA_DOCS"
  ok make_tasks && stage eval 240 ./gdn eval --load "$W/hf_export" --tasks arc_easy,hellaswag --data-dir "$W/tasks" \
      --device "$DEV" --tokenizer "$TOK" --batch-size auto --output-path "$W/eval/ours.json" --log-requests "$W/eval/requests.jsonl"
  if ok eval; then
    SCORES=()
    if fla; then
      M=("$W/hf_export"); [ -f "$W/fla/model/config.json" ] && M+=("$W/fla/model")
      stage fla_eval 240 "$PY" scripts/fla_ref.py score-requests "$W/eval/requests.jsonl" "$W/eval/fla_scores.jsonl" "${M[@]}"
      ok fla_eval && SCORES=(--fla "$W/eval/fla_scores.jsonl")
    else skip fla_eval "$(why_no_fla)"; fi
    stage eval_delta 60 "$PY" scripts/recipe_tools.py eval-delta --requests "$W/eval/requests.jsonl" \
        --ours "$W/eval/ours.json" "${SCORES[@]}" --out "$W/tables/3_eval.md"
  fi
fi
finish 0
