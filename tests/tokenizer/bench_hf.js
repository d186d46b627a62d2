// Throughput of HF tokenizers (Rust core via npm tokenizers) on a JSONL file of texts, for
// scripts/bench_tokenizer.sh. Threads: set TOKENIZERS_PARALLELISM / RAYON_NUM_THREADS in the environment.
// Usage: NODE_PATH=... node bench_hf.js TOKENIZER_JSON TEXTS_JSONL THREADS_LABEL REPEATS [IDS_OUT]
// Times encodeBatch over all texts (BOS added), as a user of the library would call it.
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
const [path, textsPath, label, repeatsArg, idsOut] = process.argv.slice(2);
const tok = Tokenizer.fromString(fs.readFileSync(path, 'utf8'));
const texts = fs.readFileSync(textsPath, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
const bytes = texts.reduce((a, t) => a + Buffer.byteLength(t, 'utf8'), 0);
(async () => {
  const times = [];
  let encodings;
  for (let r = 0; r < Number(repeatsArg); r++) {
    const t0 = process.hrtime.bigint();
    encodings = await tok.encodeBatch(texts, { addSpecialTokens: true });
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const tokens = encodings.reduce((a, e) => a + e.getIds().length, 0);
  const best = Math.min(...times), median = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)];
  console.log(`HF     threads=${label}: ${texts.length} texts, ${(bytes / 1e6).toFixed(2)} MB, ${tokens} tokens; ` +
              `best ${best.toFixed(3)} s (median ${median.toFixed(3)} s of ${times.length}): ` +
              `${(bytes / 1e6 / best).toFixed(2)} MB/s, ${(tokens / 1e6 / best).toFixed(3)} M tokens/s`);
  if (idsOut) fs.writeFileSync(idsOut, encodings.map((e) => JSON.stringify(e.getIds())).join('\n') + '\n');
})();
