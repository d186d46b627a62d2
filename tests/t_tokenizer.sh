#!/usr/bin/env bash
# Bulk comparison of `gdn tokenize` with HF tokenizers' Rust core (npm tokenizers@0.23.2, tests/tokenizer/oracle.js):
#  1. >1 MB of generated text (tests/tokenizer/make_corpus.py: prose, code, numbers, whitespace, CJK, Arabic,
#     Devanagari, emoji/ZWJ, special tokens in text, contractions, random code points, long pieces):
#     Llama-3 ids with and without BOS, line by line.
#  2. decode(encode(x)) == x on all of it; decoding (with and without special tokens) equal to HF's, also on
#     random id sequences full of partial UTF-8.
#  3. Plain mode (all of stdin = one text) and thread-count independence.
#  4. The Llama-3 file with the real Llama-3.2 post-processor form; five GPT-2-style tokenizer.json variants (ByteLevel regex, prefix space, Split+ByteLevel, Roberta and
#     template post-processors, lstrip/rstrip/single_word added tokens, ignore_merges, unk, missing bytes).
#  5. Pre-tokenizer pieces equal HF's (Llama-3 and GPT-2 regex); the class of every code point equals the reference's.
#  6. CLI errors name the line.
# Needs ./gdn and build/tests/test_tokenizer (make), node, python3; fetches assets if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
for f in ./gdn build/tests/test_tokenizer; do [ -x "$f" ] || { echo "t_tokenizer: $f is missing (run make)"; exit 1; }; done
bash scripts/fetch_assets.sh >/dev/null
export NODE_PATH="$PWD/.assets/oracle/node_modules"
TOK=.assets/llama3/tokenizer.json
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
oracle() { node tests/tokenizer/oracle.js "$@"; }
compare() { python3 tests/tokenizer/compare.py "$@"; }

python3 tests/tokenizer/make_corpus.py .assets "$W/corpus.jsonl" 1200000
echo "corpus: $(wc -l < "$W/corpus.jsonl") texts"

# 1. Llama-3 ids.
oracle "$TOK" encode < "$W/corpus.jsonl" > "$W/ref_bos.jsonl"
./gdn tokenize --tokenizer "$TOK" --jsonl --stats < "$W/corpus.jsonl" > "$W/got_bos.jsonl"
compare "llama3 ids with BOS" "$W/corpus.jsonl" "$W/ref_bos.jsonl" "$W/got_bos.jsonl" --tokenizer "$TOK"
oracle "$TOK" encode --no-bos < "$W/corpus.jsonl" > "$W/ref_nobos.jsonl"
./gdn tokenize --tokenizer "$TOK" --jsonl --no-bos < "$W/corpus.jsonl" > "$W/got_nobos.jsonl"
compare "llama3 ids without BOS" "$W/corpus.jsonl" "$W/ref_nobos.jsonl" "$W/got_nobos.jsonl" --tokenizer "$TOK"

# 2. Decoding.
./gdn tokenize --tokenizer "$TOK" --jsonl --decode < "$W/got_nobos.jsonl" > "$W/roundtrip.jsonl"
compare "decode(encode(x)) == x" "$W/corpus.jsonl" "$W/corpus.jsonl" "$W/roundtrip.jsonl"
python3 tests/tokenizer/random_ids.py 128000 128256 3000 "$W/random_ids.jsonl"
cat "$W/ref_bos.jsonl" >> "$W/random_ids.jsonl"
for skip in "" --skip-special; do
  oracle "$TOK" decode $skip < "$W/random_ids.jsonl" > "$W/ref_dec.jsonl"
  ./gdn tokenize --tokenizer "$TOK" --jsonl --decode $skip < "$W/random_ids.jsonl" > "$W/got_dec.jsonl"
  compare "decode ${skip:-keeping specials} (random ids + corpus ids)" "$W/random_ids.jsonl" "$W/ref_dec.jsonl" "$W/got_dec.jsonl"
done

# 3. Plain mode: 400 texts joined by newlines are one text; and threads do not change anything.
python3 - "$W/corpus.jsonl" "$W/plain.txt" "$W/plain.jsonl" <<'PY'
import json, sys
texts = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")][:400]
whole = "\n".join(texts)
open(sys.argv[2], "w", encoding="utf-8", newline="").write(whole)
open(sys.argv[3], "w", encoding="utf-8").write(json.dumps(whole) + "\n")
PY
oracle "$TOK" encode < "$W/plain.jsonl" | python3 -c 'import json,sys; print(" ".join(map(str, json.loads(sys.stdin.readline()))))' > "$W/ref_plain.txt"
./gdn tokenize --tokenizer "$TOK" < "$W/plain.txt" > "$W/got_plain.txt"
cmp -s "$W/ref_plain.txt" "$W/got_plain.txt" || { echo "FAIL plain mode: ids differ from HF"; exit 1; }
echo "PASS plain mode: one text of $(wc -c < "$W/plain.txt") bytes, $(wc -w < "$W/got_plain.txt") ids equal HF's"
./gdn tokenize --tokenizer "$TOK" --decode < "$W/got_plain.txt" > "$W/plain_back.txt"
cmp -s "$W/plain.txt" <(tail -c +18 "$W/plain_back.txt") || { echo "FAIL plain decode: text differs"; exit 1; }
echo "PASS plain decode: <|begin_of_text|> + the text"
./gdn tokenize --tokenizer "$TOK" --jsonl --threads 1 < "$W/corpus.jsonl" > "$W/got_t1.jsonl"
cmp -s "$W/got_bos.jsonl" "$W/got_t1.jsonl" || { echo "FAIL --threads 1 output differs from the default"; exit 1; }
echo "PASS threads: --threads 1 output equals the multi-threaded output"

# 4. GPT-2-style variants.
python3 tests/tokenizer/make_variant_tokenizers.py "$TOK" "$W/var"
for v in gpt2 roberta split unk dropbytes; do
  for bos in "" --no-bos; do
    oracle "$W/var/$v.json" encode $bos < "$W/corpus.jsonl" > "$W/ref_v.jsonl"
    ./gdn tokenize --tokenizer "$W/var/$v.json" --jsonl $bos < "$W/corpus.jsonl" > "$W/got_v.jsonl"
    compare "variant $v ${bos:-with post-processor}" "$W/corpus.jsonl" "$W/ref_v.jsonl" "$W/got_v.jsonl" --tokenizer "$W/var/$v.json"
  done
  oracle "$W/var/$v.json" decode < "$W/got_v.jsonl" > "$W/ref_vd.jsonl"
  ./gdn tokenize --tokenizer "$W/var/$v.json" --jsonl --decode < "$W/got_v.jsonl" > "$W/got_vd.jsonl"
  compare "variant $v decode" "$W/corpus.jsonl" "$W/ref_vd.jsonl" "$W/got_vd.jsonl"
done
head -n 300 "$W/corpus.jsonl" > "$W/corpus300.jsonl"
oracle "$W/var/llama_seqpost.json" encode < "$W/corpus300.jsonl" > "$W/ref_v.jsonl"
./gdn tokenize --tokenizer "$W/var/llama_seqpost.json" --jsonl < "$W/corpus300.jsonl" > "$W/got_v.jsonl"
compare "llama3 with Sequence[ByteLevel, TemplateProcessing] post-processor" "$W/corpus300.jsonl" "$W/ref_v.jsonl" "$W/got_v.jsonl"

# 5. The pre-tokenizer on its own: pieces (not only ids, which can hide a wrong boundary) equal HF's, for the
#    Llama-3 and the GPT-2 regex; and the class of every code point. (Texts with U+0000 are left out: the
#    test binary reads them with cJSON, which stops at NUL.)
grep -v '\\u0000' "$W/corpus.jsonl" > "$W/corpus_nonul.jsonl"
oracle "$TOK" pieces < "$W/corpus_nonul.jsonl" > "$W/ref_pieces.jsonl"
build/tests/test_tokenizer --pieces llama3 < "$W/corpus_nonul.jsonl" > "$W/got_pieces.jsonl"
compare "llama3 pre-tokenizer pieces" "$W/corpus_nonul.jsonl" "$W/ref_pieces.jsonl" "$W/got_pieces.jsonl" --pieces
oracle "$W/var/gpt2.json" pieces < "$W/corpus_nonul.jsonl" > "$W/ref_pieces.jsonl"
build/tests/test_tokenizer --pieces gpt2 < "$W/corpus_nonul.jsonl" > "$W/got_pieces.jsonl"
compare "gpt2 pre-tokenizer pieces" "$W/corpus_nonul.jsonl" "$W/ref_pieces.jsonl" "$W/got_pieces.jsonl" --pieces
oracle "$TOK" classes "$W/classes_ref.bin"
build/tests/test_tokenizer --dump-classes "$W/classes_got.bin"
python3 - "$W/classes_ref.bin" "$W/classes_got.bin" <<'PY'
import sys
ref, got = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
names = {0: "other", 1: "letter", 2: "number", 3: "space", 4: "CR/LF", 255: "surrogate"}
bad = [c for c in range(0x110000) if ref[c] != got[c]]
for c in bad[:10]:
    print(f"  U+{c:04X}: reference {names[ref[c]]}, ours {names[got[c]]}")
if bad:
    sys.exit(f"FAIL unicode classes: {len(bad)} code points differ")
print("PASS unicode classes: all 1,114,112 code points classed as the reference pre-tokenizer does")
PY

# 6. CLI errors.
expect_error() { # expect_error WHAT SUBSTRING CMD... (stdin from $W/in)
  local what=$1 want=$2; shift 2
  if "$@" < "$W/in" > /dev/null 2> "$W/err"; then echo "FAIL $what: succeeded"; exit 1; fi
  grep -qF -- "$want" "$W/err" || { echo "FAIL $what: error '$(cat "$W/err")' lacks '$want'"; exit 1; }
}
printf '"ok"\n{"text": "fine"}\n{"txt": 1}\n' > "$W/in"
expect_error "jsonl without text" 'stdin line 3: the object has no "text" member' ./gdn tokenize --tokenizer "$TOK" --jsonl
printf '[1, 2]\n[3, 999999]\n' > "$W/in"
expect_error "decode out of range" "stdin line 2: token id 999999 is not in the vocabulary" ./gdn tokenize --tokenizer "$TOK" --jsonl --decode
printf '9906\n1917 x12\n' > "$W/in"
expect_error "decode bad id" 'stdin line 2: expected a token id, found "x12"' ./gdn tokenize --tokenizer "$TOK" --decode
printf 'hi' > "$W/in"
expect_error "missing tokenizer" "/no/such/tokenizer.json" ./gdn tokenize --tokenizer /no/such/tokenizer.json
expect_error "unknown option" "tokenize: unknown option '--bos'" ./gdn tokenize --tokenizer "$TOK" --bos
printf 'a\xffb' > "$W/in"
./gdn tokenize --tokenizer "$TOK" --no-bos < "$W/in" > "$W/out" 2> "$W/err"
grep -q "1 invalid UTF-8 sequence" "$W/err" || { echo "FAIL invalid UTF-8 is not reported"; exit 1; }
[ "$(cat "$W/out")" = "$(printf 'a\xef\xbf\xbdb' | ./gdn tokenize --tokenizer "$TOK" --no-bos 2>/dev/null)" ] ||
  { echo "FAIL invalid UTF-8 is not encoded as U+FFFD"; exit 1; }
./gdn tokenize --help | grep -- "--jsonl" > /dev/null || { echo "FAIL --help"; exit 1; }
echo "PASS CLI: errors name the line, invalid UTF-8 is reported and replaced, --help"
echo "t_tokenizer: all passed"
