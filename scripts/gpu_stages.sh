# gpu_stages.sh: the stage runner the GPU check scripts share (sourced, not run). The caller sets OUT (the
# log folder) and STAGES (the stage names to run); STAGE_TIMEOUT overrides the caller's default
# STAGE_TIMEOUT_DEFAULT (seconds per stage).
declare -A RESULT
has() { [[ " $STAGES " == *" $1 "* ]]; }
stage() { # stage NAME CMD...: runs (at most STAGE_TIMEOUT s), logs, records PASS/FAIL and the seconds taken
  local name=$1; shift; local t0=$(date +%s)
  echo "=== $name: $*"
  if timeout "${STAGE_TIMEOUT:-${STAGE_TIMEOUT_DEFAULT:-400}}" "$@" > "$OUT/$name.log" 2>&1; then
    RESULT[$name]="PASS $(( $(date +%s) - t0 ))s"
  else
    RESULT[$name]="FAIL $(( $(date +%s) - t0 ))s"
  fi
  tail -n 30 "$OUT/$name.log"
}
stage_summary() { # every recorded stage and its result, by name
  echo "=== summary"
  for k in "${!RESULT[@]}"; do printf '%-24s %s\n' "$k" "${RESULT[$k]}"; done | sort
}
