#!/usr/bin/env node
// hf_tasks.js: Parquet files with the schemas of the lm-eval task datasets on the HF hub, written by real Parquet
// writers, each next to the JSON Lines of the rows the writer was given.
//   node hf_tasks.js matrix OUTDIR [--corpus DIR]   tests/t_parquet_table.sh: every schema (allenai/ai2_arc,
//       Rowan/hellaswag, allenai/openbookqa main + additional, baber/piqa, cais/mmlu, allenai/winogrande,
//       ehovy/race, EleutherAI/race, EleutherAI/lambada_openai, wikitext, plus a table of the other types the
//       reader renders) with nulls at every nullable level and empty lists, through arrow-rs (parquet-wasm) in a
//       codec x dictionary x page-version matrix with several row groups and many pages, and rewritten by DuckDB
//       (its own list layout and v2 encodings) and by parquetjs (lists as bare REPEATED fields, the legacy
//       layout). OUTDIR/manifest.txt: "FILE SIDECAR" per file to check.
//   node hf_tasks.js eval OUTDIR [--corpus DIR]     tests/t_eval_parquet.sh: valid rows for every `gdn eval`
//       task in the hub layout, as OUTDIR/jsonl/... (JSON Lines), OUTDIR/arrow/... (arrow-rs, some splits in two
//       shards) and OUTDIR/duck/... (DuckDB rewrites of the arrow files).
// Needs NODE_PATH with parquet-wasm, apache-arrow and @duckdb/node-api (installed by t_parquet.sh), and for
// matrix parquetjs (installed by t_parquet_table.sh).
'use strict';
const fs = require('fs');
const path = require('path');
const arrow = require('apache-arrow');
const pw = require('parquet-wasm/node');

const args = process.argv.slice(2);
const mode = args[0], out = args[1];
if (!['matrix', 'eval'].includes(mode) || !out) {
  console.error('usage: hf_tasks.js matrix|eval OUTDIR [--corpus DIR]');
  process.exit(2);
}
const opt = (name) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
fs.mkdirSync(out, { recursive: true });

// Deterministic PRNG (mulberry32), so every run writes the same files.
function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.int = (n) => Math.floor(next() * n);
  next.pick = (xs) => xs[Math.floor(next() * xs.length)];
  return next;
}

let sentences = [];
const corpus = opt('--corpus');
if (corpus && fs.existsSync(corpus)) {
  for (const f of fs.readdirSync(corpus).filter((f) => /^doc-\d+\.json$/.test(f)).sort().slice(0, 3))
    sentences = sentences.concat(JSON.parse(fs.readFileSync(path.join(corpus, f), 'utf8')));
}
const WORDS = 'the of and to in is was for on that with as by at from this it an be are or which have has not but were'
  .split(' ');
// Non-ASCII and control characters. No NUL: the reader cuts a string at NUL exactly as cJSON cuts "\u0000" in
// a JSON file, so a NUL would make both sides agree on a shortened string (test_parquet_table covers it).
const ODD = ['héllo', 'naïve', 'Straße', 'Ελληνικά', 'русский', '中文字符', '日本語のテキスト', '한국어', 'עברית',
  'العربية', 'emoji😀', '🚀🌍🎉', 'e\u0301', 'ﬁ', 'zero\u200bwidth', 'tab\there', 'line\nbreak', '\u0001ctl\u007f',
  'quote"back\\slash', "it's", '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', ' lead and trail ', '  ', '[title] x [step]'];

// small_vocab: words from WORDS and ODD only (the eval test's toy tokenizer hashes every distinct word to an id
// and stops at a collision, so its vocabulary must stay in the hundreds).
function makeGen(seed, nulls, small_vocab) {
  const r = makeRng(seed);
  const g = {
    r,
    // v, or null in a few rows when this data set has nulls
    n: (v) => (nulls && r() < 0.08 ? null : v),
    sentence: () => {
      const s = sentences.length && !small_vocab ? r.pick(sentences)
        : Array.from({ length: 3 + r.int(12) }, () => r.pick(WORDS)).join(' ') + '.';
      return r.int(10) === 0 ? r.pick(ODD) + ' ' + s : s;
    },
    text: (max) => Array.from({ length: 1 + r.int(max) }, () => g.sentence()).join(r.int(4) === 0 ? '\n' : ' '),
    word: () => (r.int(12) === 0 ? r.pick(ODD) : r.pick(WORDS)),
    list: (f, min, max) => (nulls && r() < 0.1 ? [] : Array.from({ length: min + r.int(max - min + 1) }, (_, i) => f(i))),
    long: () => { // > 64 KiB
      const parts = [];
      let bytes = 0;
      while (bytes < 70000) { const s = g.text(30); parts.push(s); bytes += Buffer.byteLength(s) + 1; }
      return parts.join('\n');
    },
  };
  return g;
}

const U = () => new arrow.Utf8();
const I32 = () => new arrow.Int32();
const I64 = () => new arrow.Int64();
const F64 = () => new arrow.Float64();
const L = (t) => new arrow.List(new arrow.Field('item', t, true));
const S = (fields) => new arrow.Struct(fields.map(([n, t]) => new arrow.Field(n, t, true)));
const CHOICES = () => S([['text', L(U())], ['label', L(U())]]);
const big = (x) => (x === null ? null : BigInt(x));

// The hub schemas (datasets' Parquet conversion: ClassLabel and int columns as int64, Sequence as list).
function arcRow(g) {
  const k = 3 + g.r.int(3), numeric = g.r.int(6) === 0;
  const labels = Array.from({ length: k }, (_, i) => (numeric ? String(i + 1) : 'ABCDE'[i]));
  return { id: g.n(`Mercury_${g.r.int(1e6)}`), question: g.n(g.text(2) + '?'),
    choices: g.n({ text: g.n(g.list(() => g.n(g.sentence()), k, k)), label: g.n(labels.map((l) => g.n(l))) }),
    answerKey: g.n(g.r.pick(labels)) };
}
function obqaRow(g) {
  return { id: g.n(`${g.r.int(9000)}-${g.r.int(900)}`), question_stem: g.n(g.text(2)),
    choices: g.n({ text: g.n(g.list(() => g.n(g.sentence()), 4, 4)), label: g.n(g.list((i) => g.n('ABCD'[i]), 4, 4)) }),
    answerKey: g.n(g.r.pick(['A', 'B', 'C', 'D'])) };
}
const DATASETS = [
  { name: 'ai2_arc', fields: [['id', U()], ['question', U()], ['choices', CHOICES()], ['answerKey', U()]], row: arcRow },
  { name: 'hellaswag', fields: [['ind', I32()], ['activity_label', U()], ['ctx_a', U()], ['ctx_b', U()], ['ctx', U()],
    ['endings', L(U())], ['source_id', U()], ['split', U()], ['split_type', U()], ['label', U()]],
    row: (g) => ({ ind: g.n(g.r.int(60000) - 5), activity_label: g.n(g.r.pick(['Removing ice from car', 'Baking cookies', 'Home and Garden'])),
      ctx_a: g.n(g.text(2)), ctx_b: g.n(g.sentence().toLowerCase()), ctx: g.n(g.text(3)),
      endings: g.n(g.list(() => g.n(g.sentence()), 4, 4)), source_id: g.n(`activitynet~v_${g.r.int(1e5)}`),
      split: g.n('val'), split_type: g.n(g.r.pick(['indomain', 'zeroshot'])), label: g.n(String(g.r.int(4))) }) },
  { name: 'openbookqa_main', fields: [['id', U()], ['question_stem', U()], ['choices', CHOICES()], ['answerKey', U()]], row: obqaRow },
  { name: 'openbookqa_additional', fields: [['id', U()], ['question_stem', U()], ['choices', CHOICES()], ['answerKey', U()],
    ['fact1', U()], ['humanScore', F64()], ['clarity', F64()], ['turkIdAnonymized', U()]],
    row: (g) => Object.assign(obqaRow(g), { fact1: g.n(g.sentence()), humanScore: g.n(g.r.int(101) / 100),
      clarity: g.n(1 + g.r() * 1.5), turkIdAnonymized: g.n(`b356d338b7_${g.r.int(1e4)}`) }) },
  { name: 'piqa', fields: [['goal', U()], ['sol1', U()], ['sol2', U()], ['label', I64()]],
    row: (g) => ({ goal: g.n(g.text(2)), sol1: g.n(g.text(2)), sol2: g.n(g.text(2)), label: g.n(big(g.r.int(2))) }) },
  { name: 'mmlu', fields: [['question', U()], ['subject', U()], ['choices', L(U())], ['answer', I64()]],
    row: (g) => ({ question: g.n(g.text(3)), subject: g.n(g.r.pick(['abstract_algebra', 'anatomy', 'virology'])),
      choices: g.n(g.list(() => g.n(g.sentence()), 4, 4)), answer: g.n(big(g.r.int(4))) }) },
  { name: 'winogrande', fields: [['sentence', U()], ['option1', U()], ['option2', U()], ['answer', U()]],
    row: (g) => ({ sentence: g.n(g.sentence().replace(/ (\w+) /, ' _ ')), option1: g.n(g.word()), option2: g.n(g.word()),
      answer: g.n(g.r.pick(['1', '2', ''])) }) },
  { name: 'race_ehovy', fields: [['example_id', U()], ['article', U()], ['answer', U()], ['question', U()], ['options', L(U())]],
    row: (g) => ({ example_id: g.n(`high${g.r.int(2e4)}.txt`), article: g.n(g.text(12)), answer: g.n(g.r.pick(['A', 'B', 'C', 'D'])),
      question: g.n(g.sentence()), options: g.n(g.list(() => g.n(g.sentence()), 4, 4)) }) },
  { name: 'race_eleuther', fields: [['article', U()], ['problems', U()]],
    row: (g) => ({ article: g.n(g.text(12)), problems: g.n(raceProblems(g)) }) },
  { name: 'lambada', fields: [['text', U()]], row: (g) => ({ text: g.n(g.text(6)) }) },
  { name: 'wikitext_document', rows: 40, fields: [['page', U()]],
    row: (g, i) => ({ page: g.n(i % 13 === 3 ? g.long() : ' = ' + g.sentence() + ' = \n' + g.text(40)) }) },
  { name: 'wikitext', fields: [['text', U()]], row: (g) => ({ text: g.n(g.r.int(3) === 0 ? '' : ' ' + g.text(3) + ' \n') }) },
  // Beyond the hub schemas: the other types and shapes the reader renders.
  { name: 'types', fields: [['b', new arrow.Bool()], ['i8', new arrow.Int8()], ['u32', new arrow.Uint32()],
    ['u64', new arrow.Uint64()], ['i64', I64()], ['f32', new arrow.Float32()], ['f64', F64()],
    ['nested', L(L(I32()))], ['points', L(S([['x', I64()], ['name', U()]]))],
    ['deep', S([['inner', S([['v', U()], ['ws', L(U())]])], ['k', I32()]])]],
    row: (g) => ({ b: g.n(g.r() < 0.5), i8: g.n(g.r.int(256) - 128), u32: g.n(g.r.pick([0, 1, 2147483648, 4294967295, g.r.int(1e9)])),
      u64: g.n(g.r.pick([0n, 18446744073709551615n, 9007199254740993n, BigInt(g.r.int(1e9))])),
      i64: g.n(g.r.pick([-9223372036854775808n, 9223372036854775807n, -1n, BigInt(g.r.int(1e9) - 5e8)])),
      f32: g.n(Math.fround(g.r.pick([1.5, -0.1, 3.4e38, 1e-30, g.r() * 100]))),
      f64: g.n(g.r.pick([0.1, -2.5e-300, 1.7976931348623157e308, g.r() - 0.5])),
      nested: g.n(g.list(() => g.n(g.list(() => g.n(g.r.int(1000) - 500), 0, 3)), 0, 4)),
      points: g.n(g.list(() => g.n({ x: g.n(BigInt(g.r.int(100))), name: g.n(g.word()) }), 0, 3)),
      deep: g.n({ inner: g.n({ v: g.n(g.sentence()), ws: g.n(g.list(() => g.n(g.word()), 0, 3)) }), k: g.n(g.r.int(10)) }) }) },
];

// RACE's `problems`: the Python repr of a list of dicts, strings in single or double quotes as repr picks.
function pyStr(s) {
  if (s.includes("'") && !s.includes('"')) return JSON.stringify(s); // repr switches to double quotes
  return "'" + s.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n').replace(/\t/g, '\\t') + "'";
}
function raceProblems(g, k) {
  const n = k || 1 + g.r.int(4);
  const ps = [];
  for (let i = 0; i < n; i++) {
    const q = g.r.int(3) === 0 ? g.sentence().replace(/\.$/, '') + '  _  .' : g.sentence();
    const options = Array.from({ length: 4 }, () => g.sentence());
    ps.push(`{'answer': ${pyStr(g.r.pick(['A', 'B', 'C', 'D']))}, 'options': [${options.map(pyStr).join(', ')}], 'question': ${pyStr(q)}}`);
  }
  return '[' + ps.join(', ') + ']';
}

// Arrow wants bigint for 64-bit integers; JSON gets numbers (as datasets' to_json writes them).
const jsonLine = (row) => JSON.stringify(row, (k, v) => (typeof v === 'bigint' ? Number(v) : v));
function makeTable(fields, rows) {
  const schema = new arrow.Schema(fields.map(([n, t]) => new arrow.Field(n, t, true)));
  const data = {};
  for (const [n, t] of fields) data[n] = arrow.vectorFromArray(rows.map((r) => r[n]), t);
  return new arrow.Table(schema, data);
}
function writeArrow(file, table, o) {
  let b = new pw.WriterPropertiesBuilder()
    .setCompression(pw.Compression[o.codec || 'UNCOMPRESSED'])
    .setWriterVersion(o.v2 ? pw.WriterVersion.V2 : pw.WriterVersion.V1)
    .setDictionaryEnabled(o.dict !== false)
    .setMaxRowGroupSize(o.rowGroup || 100)
    .setDataPageSizeLimit(o.pageSize || 600)
    .setWriteBatchSize(o.batch || 16);
  for (const [col, enc] of Object.entries(o.encodings || {})) b = b.setColumnEncoding(col, pw.Encoding[enc]);
  const bytes = pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream')), b.build());
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, bytes);
}
const sql = (s) => s.replace(/'/g, "''");

async function duck() {
  const { DuckDBInstance } = require('@duckdb/node-api');
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  await con.run('SET threads = 1'); // keeps the rows in order (and the load on a shared machine low)
  await con.run('SET preserve_insertion_order = true');
  return con;
}
async function duckRewrite(con, src, dst, options) {
  fs.mkdirSync(path.dirname(dst), { recursive: true });
  await con.run(`COPY (SELECT * FROM read_parquet('${sql(src)}')) TO '${sql(dst)}' (FORMAT parquet, ${options})`);
}

// parquetjs (the original pure-JS writer): lists as bare REPEATED fields without a LIST annotation (the legacy
// layout), v1 pages uncompressed, one page per column chunk. A repeated field can be neither null nor hold a null
// element, so its rows are adapted (null lists become empty, null elements are dropped) and get their own sidecar.
function pqjsField(t) {
  if (t instanceof arrow.Utf8) return { type: 'UTF8', optional: true };
  if (t instanceof arrow.Int32) return { type: 'INT32', optional: true };
  if (t instanceof arrow.Int64) return { type: 'INT64', optional: true };
  if (t instanceof arrow.Float64) return { type: 'DOUBLE', optional: true };
  if (t instanceof arrow.Bool) return { type: 'BOOLEAN', optional: true };
  if (t instanceof arrow.Struct) {
    const fields = {};
    for (const c of t.children) if (!(fields[c.name] = pqjsField(c.type))) return null;
    return { optional: true, fields };
  }
  if (t instanceof arrow.List && !(t.children[0].type instanceof arrow.List)) {
    const e = pqjsField(t.children[0].type);
    if (!e) return null;
    delete e.optional;
    return Object.assign(e, { repeated: true });
  }
  return null;
}
function pqjsValue(t, v) {
  if (t instanceof arrow.List) return (v || []).filter((x) => x !== null).map((x) => pqjsValue(t.children[0].type, x));
  if (v === null) return null;
  if (t instanceof arrow.Struct) {
    const o = {};
    for (const c of t.children) o[c.name] = pqjsValue(c.type, v[c.name]);
    return o;
  }
  return typeof v === 'bigint' ? Number(v) : v;
}
async function writePqjs(file, fields, rows, o) {
  const parquet = require('parquetjs');
  const spec = {};
  for (const [n, t] of fields) spec[n] = pqjsField(t);
  const w = await parquet.ParquetWriter.openFile(new parquet.ParquetSchema(spec), file,
    { useDataPageV2: o.v2, compression: o.codec, rowGroupSize: o.rowGroup });
  for (const r of rows) await w.appendRow(r);
  await w.close();
}

async function matrix() {
  const manifest = [];
  const con = await duck();
  const CODECS = ['UNCOMPRESSED', 'SNAPPY', 'GZIP', 'ZSTD'];
  for (let d = 0; d < DATASETS.length; d++) {
    const ds = DATASETS[d];
    const g = makeGen(1000 + d, true);
    const rows = Array.from({ length: ds.rows || 240 }, (_, i) => ds.row(g, i));
    const side = path.join(out, `${ds.name}.jsonl`);
    fs.writeFileSync(side, rows.map(jsonLine).join('\n') + '\n');
    const table = makeTable(ds.fields, rows);
    // Half of the codec x dictionary x version matrix per data set (alternating), all of it over the sets.
    for (let ci = 0; ci < CODECS.length; ci++)
      for (const dict of [true, false])
        for (const v2 of [false, true]) {
          if ((ci + dict + v2 + d) % 2) continue;
          const codec = CODECS[ci];
          const name = `${ds.name}_${codec.toLowerCase()}_${dict ? 'dict' : 'plain'}_v${v2 ? 2 : 1}.parquet`;
          const encodings = {};
          // Without a dictionary, v1 pages are PLAIN by default: ask for the other encodings on some columns.
          if (!dict && !v2) for (const [n, t] of ds.fields) {
            if (t instanceof arrow.Float64 || t instanceof arrow.Float32) encodings[n] = 'BYTE_STREAM_SPLIT';
            if (t instanceof arrow.Int64 || t instanceof arrow.Int32) encodings[n] = 'DELTA_BINARY_PACKED';
            if (t instanceof arrow.Utf8) encodings[n] = codec === 'GZIP' ? 'DELTA_BYTE_ARRAY' : 'DELTA_LENGTH_BYTE_ARRAY';
          }
          writeArrow(path.join(out, name), table, { codec, dict, v2, encodings });
          manifest.push([name, side]);
        }
    // Defaults of a bulk writer: one row group, big pages.
    writeArrow(path.join(out, `${ds.name}_one_group.parquet`), table, { codec: 'SNAPPY', rowGroup: 1 << 20, pageSize: 1 << 20, batch: 1024 });
    manifest.push([`${ds.name}_one_group.parquet`, side]);
    // DuckDB's writer: its own list layout ("element"), v1 and v2 pages, its encodings.
    const src = path.join(out, `${ds.name}_one_group.parquet`);
    for (const [suffix, o] of [['duck_snappy_v1', "COMPRESSION 'snappy', ROW_GROUP_SIZE 2048"],
                               ['duck_zstd_v2', "COMPRESSION 'zstd', PARQUET_VERSION 'v2'"],
                               ['duck_gzip_v2', "COMPRESSION 'gzip', PARQUET_VERSION 'v2', DICTIONARY_SIZE_LIMIT 1"]]) {
      if (suffix === 'duck_gzip_v2' && d % 3) continue;
      const name = `${ds.name}_${suffix}.parquet`;
      await duckRewrite(con, src, path.join(out, name), o);
      manifest.push([name, side]);
    }
    // parquetjs: the legacy layout (not for the types table, whose lists of lists it cannot write).
    if (ds.fields.every(([, t]) => pqjsField(t))) {
      const adapted = rows.map((r) => Object.fromEntries(ds.fields.map(([n, t]) => [n, pqjsValue(t, r[n])])));
      const pside = path.join(out, `${ds.name}_pqjs.jsonl`);
      fs.writeFileSync(pside, adapted.map(jsonLine).join('\n') + '\n');
      for (const [suffix, o] of [['pqjs_v1', { v2: false, codec: 'UNCOMPRESSED', rowGroup: 64 }],
                                 ['pqjs_snappy_v2', { v2: true, codec: 'SNAPPY', rowGroup: 100 }],
                                 ['pqjs_gzip_v2', { v2: true, codec: 'GZIP', rowGroup: 1000 }]]) {
        const name = `${ds.name}_${suffix}.parquet`;
        await writePqjs(path.join(out, name), ds.fields, adapted, o);
        manifest.push([name, pside]);
      }
    }
  }
  // Shapes the reader refuses (DuckDB writes them), next to a column it reads.
  await con.run(`COPY (SELECT 1 AS ok, MAP {'k': 1} AS m) TO '${sql(path.join(out, 'map.parquet'))}' (FORMAT parquet)`);
  await con.run(`COPY (SELECT 1 AS ok, TIMESTAMP '2024-01-02 03:04:05' AS ts) TO '${sql(path.join(out, 'timestamp.parquet'))}' (FORMAT parquet)`);
  await con.run(`COPY (SELECT 1 AS ok, 1.25::DECIMAL(10,2) AS price) TO '${sql(path.join(out, 'decimal.parquet'))}' (FORMAT parquet)`);
  // Codecs the reader does not do.
  const small = makeTable(DATASETS[0].fields, Array.from({ length: 20 }, () => arcRow(makeGen(7, false))));
  for (const codec of ['LZ4_RAW', 'BROTLI']) writeArrow(path.join(out, `arc_${codec.toLowerCase()}.parquet`), small, { codec });
  fs.writeFileSync(path.join(out, 'manifest.txt'), manifest.map(([f, s]) => `${path.join(out, f)} ${s}`).join('\n') + '\n');
  console.log(`hf_tasks.js: ${manifest.length} files to check in ${out}`);
}

// ---------------------------------------------------------------------------------------------------------
// eval: valid rows for each task, in the hub layout

async function evalData() {
  const g = makeGen(77, false, true);
  const maybeNull = (v) => (g.r() < 0.15 ? null : v); // unused columns may be null: rows must still match
  const tasks = [];
  const add = (rel, fields, rows, shards, o) => tasks.push({ rel, fields, rows, shards: shards || 1, o: o || {} });
  const arc = () => {
    const row = arcRow(g);
    row.id = maybeNull(row.id);
    return row;
  };
  const arcFields = DATASETS[0].fields;
  add('allenai/ai2_arc/ARC-Easy/test', arcFields, Array.from({ length: 40 }, arc), 2, { codec: 'ZSTD', v2: true });
  add('allenai/ai2_arc/ARC-Challenge/test', arcFields, Array.from({ length: 25 }, arc), 1, { codec: 'SNAPPY', dict: false });
  add('Rowan/hellaswag/data/validation', DATASETS[1].fields, Array.from({ length: 60 }, () => {
    const row = DATASETS[1].row(g);
    row.source_id = maybeNull(row.source_id);
    if (g.r() < 0.2) row.ctx_b = '';
    return row;
  }), 2, { codec: 'GZIP' });
  add('allenai/openbookqa/main/test', DATASETS[2].fields, Array.from({ length: 30 }, () => obqaRow(g)), 1, { v2: true, dict: false });
  add('baber/piqa/data/validation', DATASETS[4].fields, Array.from({ length: 40 }, () => DATASETS[4].row(g)), 1, { codec: 'SNAPPY', v2: true });
  add('allenai/winogrande/winogrande_xl/validation', DATASETS[6].fields, Array.from({ length: 40 }, () => {
    const s = g.sentence();
    const at = s.indexOf(' ', 1 + g.r.int(Math.max(1, s.length - 2)));
    return { sentence: at > 0 ? s.slice(0, at) + ' _' + s.slice(at) : '_ ' + s, option1: g.word(), option2: g.word(),
      answer: g.r.pick(['1', '2']) };
  }), 1, {});
  add('EleutherAI/race/high/test', DATASETS[8].fields, Array.from({ length: 12 }, () => ({ article: g.text(10),
    problems: raceProblems(g, 1 + g.r.int(4)) })), 1, { codec: 'ZSTD', dict: false, v2: true });
  add('EleutherAI/lambada_openai/default/test', DATASETS[9].fields, Array.from({ length: 50 }, () => ({ text: g.text(4) })), 2,
    { codec: 'GZIP', v2: true });
  add('EleutherAI/wikitext_document_level/wikitext-2-raw-v1/test', DATASETS[10].fields, Array.from({ length: 6 }, (_, i) => ({
    page: i === 2 ? g.long() : ' = ' + g.sentence() + ' = \n \n ' + g.text(30).replace(/-/g, ' @-@ ') + ' \n' })), 1, { codec: 'SNAPPY' });
  for (const subject of ['abstract_algebra', 'anatomy', 'world_religions'])
    for (const [split, n] of [['test', 12], ['dev', 5]])
      add(`cais/mmlu/${subject}/${split}`, DATASETS[5].fields, Array.from({ length: n }, () => ({ question: g.text(2) + (g.r() < 0.3 ? '\n' : ''),
        subject, choices: Array.from({ length: 4 }, () => g.sentence()), answer: big(g.r.int(4)) })), split === 'test' ? 2 : 1, { codec: 'ZSTD' });

  const con = await duck();
  for (const t of tasks) {
    const j = path.join(out, 'jsonl', `${t.rel}-00000-of-00001.jsonl`);
    fs.mkdirSync(path.dirname(j), { recursive: true });
    fs.writeFileSync(j, t.rows.map(jsonLine).join('\n') + '\n');
    const per = Math.ceil(t.rows.length / t.shards);
    for (let s = 0; s < t.shards; s++) {
      const shard = `${t.rel}-${String(s).padStart(5, '0')}-of-${String(t.shards).padStart(5, '0')}.parquet`;
      const a = path.join(out, 'arrow', shard);
      writeArrow(a, makeTable(t.fields, t.rows.slice(s * per, (s + 1) * per)), Object.assign({ rowGroup: 7, pageSize: 300, batch: 4 }, t.o));
      await duckRewrite(con, a, path.join(out, 'duck', shard), s % 2 ? "COMPRESSION 'snappy'" : "COMPRESSION 'zstd', PARQUET_VERSION 'v2'");
    }
  }
  console.log(`hf_tasks.js: ${tasks.length} splits in ${out}/{jsonl,arrow,duck}`);
}

(mode === 'matrix' ? matrix() : evalData()).catch((e) => { console.error('hf_tasks.js:', e && e.stack || e); process.exit(1); });
