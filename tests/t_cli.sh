#!/usr/bin/env bash
# The binary's surface: parameter counts of the recipe configs, --help on every subcommand, and one clear
# error line (with the file/key) for bad configs and flags.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "FAIL: $*"; exit 1; }
out=$(./gdn params --config configs/gdn-300m.yaml); [[ "$out" == "parameters: 307,767,232 "* ]] || fail "300M count: $out"
out=$(./gdn params --config configs/gdn-1b.yaml);   [[ "$out" == "parameters: 1,203,441,152 "* ]] || fail "1B count: $out"
# FLA-style alias: num_hidden_layers counts blocks; spec §1.2: 131,334,144 + 1,024 + 6 x 14,702,672
out=$(./gdn params --config configs/gdn-300m.yaml --num_hidden_layers 6); [[ "$out" == *"parameters: 219,551,200 "* ]] || fail "alias: $out"
for c in prepare tokenize dataset train score convert verify generate eval params; do
  ./gdn $c --help > /tmp/gdn_help_$$ 2>&1 || fail "gdn $c --help exited non-zero"
  grep -qi "usage" /tmp/gdn_help_$$ || fail "gdn $c --help prints no usage"
done
rm -f /tmp/gdn_help_$$
expect_err() { # expect_err PATTERN CMD...: fails unless CMD exits non-zero with PATTERN on stderr
  local pat=$1; shift
  if "$@" > /dev/null 2> /tmp/gdn_err_$$; then fail "$* succeeded"; fi
  grep -q -- "$pat" /tmp/gdn_err_$$ || fail "$*: expected '$pat', got: $(cat /tmp/gdn_err_$$)"
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp" /tmp/gdn_err_$$' EXIT
expect_err "cannot open config $tmp/none.yaml" ./gdn params --config "$tmp/none.yaml"
printf 'hidden_size: 64\nnum_layers: 4\nbogus_key: 3\n' > "$tmp/a.yaml"
expect_err "$tmp/a.yaml:3: unknown key 'bogus_key'" ./gdn params --config "$tmp/a.yaml"
printf 'hidden_size: [1, 2]\n' > "$tmp/b.yaml"
expect_err "lists are not supported" ./gdn params --config "$tmp/b.yaml"
printf 'hidden_size: 64\n  oops: : :\n' > "$tmp/c.yaml"
expect_err "$tmp/c.yaml:" ./gdn params --config "$tmp/c.yaml"
expect_err "key 'lr': expected a number, got 'fast'" ./gdn train --config configs/tiny.yaml --lr fast
expect_err "must be a multiple of linear_num_key_heads" ./gdn params --config configs/tiny.yaml --linear_num_value_heads 3
expect_err "unknown argument '--nope'" ./gdn train --config configs/tiny.yaml --nope 1
expect_err "train_data_path is not set" ./gdn train --config configs/tiny.yaml
expect_err "$tmp/missing" ./gdn train --config configs/tiny.yaml --train_data_path "$tmp/missing"
echo "cli: ok"
