// Reference runner for the tokenizer tests: HF tokenizers' Rust core (npm tokenizers@0.23.2) on any
// tokenizer.json. Needs NODE_PATH=<repo>/.assets/oracle/node_modules (scripts/fetch_assets.sh installs it).
// Usage: node oracle.js TOKENIZER_JSON encode [--no-bos] < texts.jsonl > ids.jsonl   (JSON string per line)
//        node oracle.js TOKENIZER_JSON decode [--skip-special] < ids.jsonl > texts.jsonl
//        node oracle.js TOKENIZER_JSON pieces < texts.jsonl > pieces.jsonl   (pre-tokenizer output)
//        node oracle.js TOKENIZER_JSON classes OUT.bin   (class of every code point by the pre-tokenizer, see below)
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
const [path, mode] = process.argv.slice(2, 4);
const flag = (f) => process.argv.includes(f);
const tok = Tokenizer.fromString(fs.readFileSync(path, 'utf8'));
const readLines = () => fs.readFileSync(0, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));

(async () => {
  const out = [];
  if (mode === 'encode') {
    for (const s of readLines()) out.push(JSON.stringify((await tok.encode(s, null, { addSpecialTokens: !flag('--no-bos') })).getIds()));
  } else if (mode === 'decode') {
    for (const ids of readLines()) out.push(JSON.stringify(await tok.decode(ids, flag('--skip-special'))));
  } else if (mode === 'pieces') {
    const pt = tok.getPreTokenizer();
    for (const s of readLines()) out.push(JSON.stringify(pt.preTokenizeString(s).map((p) => p[0])));
  } else if (mode === 'classes') {
    // One probe per code point X: the pieces of "!" X "\n" tell its class under the Llama-3 regex:
    //   other: ["!X\n"]   white space: ["!", "X\n"]   letter: ["!X", "\n"]   number: ["!", "X", "\n"]
    // (CR and LF themselves are written as class 4.) Output byte per code point: 0 other, 1 letter, 2 number,
    // 3 white space, 4 CR/LF, 255 surrogate (not a scalar value).
    const pt = tok.getPreTokenizer();
    const cls = Buffer.alloc(0x110000, 255);
    const step = 4096;
    for (let base = 0; base < 0x110000; base += step) {
      const cps = [];
      for (let c = base; c < base + step; c++) if (!(c >= 0xD800 && c <= 0xDFFF) && c !== 10 && c !== 13) cps.push(c);
      const pieces = pt.preTokenizeString(cps.map((c) => '!' + String.fromCodePoint(c) + '\n').join('')).map((p) => p[0]);
      let i = 0;
      for (const c of cps) {
        const p0 = pieces[i];
        if (p0 === '!') {
          if (pieces[i + 1].endsWith('Ċ')) { cls[c] = 3; i += 2; } else { cls[c] = 2; i += 3; }
        } else if (p0.endsWith('Ċ')) { cls[c] = 0; i += 1; } else { cls[c] = 1; i += 2; }
      }
      if (i !== pieces.length) throw new Error(`classes: probe parse out of step at block ${base}`);
    }
    cls[10] = cls[13] = 4;
    fs.writeFileSync(process.argv[4], cls);
    return;
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
})().catch((e) => { console.error(`oracle.js: ${e.message}`); process.exit(1); });
