# writers.sh (sourced by the Parquet tests from the repo root): the npm Parquet writers they use
# (parquet-wasm = arrow-rs's writer, apache-arrow, @duckdb/node-api), installed once into .assets/parquet_npm.
#   parquet_writers NAME   installs them when absent (NAME: the test, for the message); sets NPM_DIR
PARQUET_NPM_PKGS="parquet-wasm@0.8.0 apache-arrow@21.2.0 @duckdb/node-api@1.5.6-r.1"
parquet_writers() {
  NPM_DIR=.assets/parquet_npm
  [ -f "$NPM_DIR/.done" ] && return 0
  echo "$1: npm install $PARQUET_NPM_PKGS"
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/parquet_npm.XXXXXX")
  # shellcheck disable=SC2086
  (cd "$tmp" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund $PARQUET_NPM_PKGS >/dev/null)
  touch "$tmp/.done"
  mkdir -p .assets
  rm -rf "$NPM_DIR"
  mv "$tmp" "$NPM_DIR" # whole or not at all: a concurrent test sees no half-installed directory
}
