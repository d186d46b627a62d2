#!/usr/bin/env node
// gen.js: writes the Parquet test files for tests/t_parquet.sh with real Parquet writers, and next to each data
// set a JSONL sidecar holding what the writer was given (one JSON string or null per row).
//   node gen.js OUTDIR [--corpus DIR] [--bench MB] [--no-duckdb]
// Writers: parquet-wasm (Rust arrow-rs Parquet writer, compiled to wasm) for the codec x dictionary x page-version
// matrix and the special cases; DuckDB (C++ writer) rewrites some of them so a second implementation is covered.
// OUTDIR/manifest.txt lists "FILE COLUMN SIDECAR" lines, one per file to check.
// Needs NODE_PATH with parquet-wasm, apache-arrow (and @duckdb/node-api unless --no-duckdb).
'use strict';
const fs = require('fs');
const path = require('path');
const arrow = require('apache-arrow');
const pw = require('parquet-wasm/node');

const args = process.argv.slice(2);
const out = args[0];
if (!out || out.startsWith('-')) {
  console.error('usage: gen.js OUTDIR [--corpus DIR] [--bench MB] [--no-duckdb]');
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

// Real English sentences when the corpus is there, else made-up words.
let sentences = [];
const corpus = opt('--corpus');
if (corpus && fs.existsSync(corpus)) {
  for (const f of fs.readdirSync(corpus).filter((f) => /^doc-\d+\.json$/.test(f)).sort())
    sentences = sentences.concat(JSON.parse(fs.readFileSync(path.join(corpus, f), 'utf8')));
}
const WORDS = 'the of and to in is was for on that with as by at from this it an be are or which have has not but were'
  .split(' ');
// Non-ASCII (2-, 3- and 4-byte UTF-8, combining marks, right-to-left) and control characters, NUL included.
const ODD = ['héllo', 'naïve', 'Straße', 'Ελληνικά', 'русский', '中文字符', '日本語のテキスト', '한국어', 'עברית',
  'العربية', 'emoji😀', '🚀🌍🎉', 'e\u0301', 'ﬁ', 'zero\u200bwidth', 'tab\there', 'line\nbreak', 'nul\u0000byte',
  '\u0001ctl\u007f', 'quote"back\\slash', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢'];

function sentence(r) {
  if (sentences.length) return r.pick(sentences);
  const n = 3 + r.int(15);
  const w = [];
  for (let i = 0; i < n; i++) w.push(r.pick(WORDS));
  return w.join(' ') + '.';
}
function doc(r, maxSentences) {
  const n = 1 + r.int(maxSentences);
  const parts = [];
  for (let i = 0; i < n; i++) parts.push(r.int(8) === 0 ? r.pick(ODD) + ' ' + sentence(r) : sentence(r));
  return parts.join(r.int(5) === 0 ? '\n' : ' ');
}
function longDoc(r) { // > 64 KiB of UTF-8
  const want = 65536 + 1 + r.int(120000);
  const parts = [];
  let bytes = 0;
  while (bytes < want) {
    const s = doc(r, 20);
    parts.push(s);
    bytes += Buffer.byteLength(s) + 1;
  }
  return parts.join('\n');
}

// A text column of `n` rows: fresh documents, repeats from a small pool (so dictionaries get used), empty
// strings, long strings (at fixed rows too, so every file has some), and, when nullable, nulls (scattered and
// one long run).
function textColumn(seed, n, nullable) {
  const r = makeRng(seed);
  const pool = [];
  for (let i = 0; i < 40; i++) pool.push(doc(r, 6));
  const forcedLong = new Set([7, Math.floor(n / 2), n - 1]);
  const v = [];
  for (let i = 0; i < n; i++) {
    const u = r();
    if (forcedLong.has(i) || u < 0.002) v.push(longDoc(r));
    else if (nullable && ((i >= 100 && i < 160) || u < 0.05)) v.push(null);
    else if (u < 0.08) v.push('');
    else if (u < 0.35) v.push(r.pick(pool));
    else v.push(doc(r, 12));
  }
  return v;
}

function writeSidecar(name, values) {
  const f = path.join(out, name + '.jsonl');
  fs.writeFileSync(f, values.map((v) => JSON.stringify(v)).join('\n') + (values.length ? '\n' : ''));
  return f;
}

const manifest = [];
function writeParquet(file, table, o) {
  let b = new pw.WriterPropertiesBuilder()
    .setCompression(pw.Compression[o.codec || 'UNCOMPRESSED'])
    .setWriterVersion(o.v2 ? pw.WriterVersion.V2 : pw.WriterVersion.V1)
    .setDictionaryEnabled(o.dict !== false)
    .setMaxRowGroupSize(o.rowGroup || 1000)
    .setDataPageSizeLimit(o.pageSize || 1024)
    .setWriteBatchSize(o.batch || 32);
  if (o.encoding) b = b.setEncoding(pw.Encoding[o.encoding]);
  if (o.dictPageLimit) b = b.setDictionaryPageSizeLimit(o.dictPageLimit);
  const wt = pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream'));
  const bytes = pw.writeParquet(wt, b.build());
  fs.writeFileSync(path.join(out, file), bytes);
  return path.join(out, file);
}
function textTable(values, nullable) {
  const schema = new arrow.Schema([new arrow.Field('text', new arrow.Utf8(), nullable)]);
  return new arrow.Table(schema, { text: arrow.vectorFromArray(values, new arrow.Utf8()) });
}

// FineWeb-Edu-like rows (spec data.md §5), plus a struct and a list column in front of "text" so that finding
// the column's leaf index has to walk nested schema elements.
function finewebTable(seed, n) {
  const r = makeRng(seed);
  const text = textColumn(seed + 1, n, false);
  const cols = { id: [], meta: [], tags: [], text, dump: [], url: [], file_path: [], language: [],
    language_score: [], token_count: [], score: [], int_score: [] };
  for (let i = 0; i < n; i++) {
    const hex = () => r.int(0x10000).toString(16).padStart(4, '0');
    cols.id.push(`<urn:uuid:${hex()}${hex()}-${hex()}-${hex()}-${hex()}-${hex()}${hex()}${hex()}>`);
    cols.meta.push({ source: r.pick(['cc', 'wiki', 'books']), year: 2013 + r.int(12) });
    cols.tags.push(Array.from({ length: r.int(4) }, () => r.pick(WORDS)));
    cols.dump.push(`CC-MAIN-${2013 + r.int(12)}-${String(1 + r.int(50)).padStart(2, '0')}`);
    cols.url.push(`https://example.org/${hex()}/${r.pick(WORDS)}.html`);
    cols.file_path.push(`s3://commoncrawl/crawl-data/${cols.dump[i]}/segments/${hex()}.warc.gz`);
    cols.language.push(r.pick(['en', 'en', 'en', 'de', 'fr', 'es']));
    cols.language_score.push(0.5 + r() / 2);
    cols.token_count.push(BigInt(Math.max(1, Math.round(Buffer.byteLength(text[i]) / 4.3))));
    cols.score.push(2.5 + r() * 2.5);
    cols.int_score.push(BigInt(3 + r.int(3)));
  }
  const U = () => new arrow.Utf8();
  const metaType = new arrow.Struct([new arrow.Field('source', U(), true), new arrow.Field('year', new arrow.Int32(), true)]);
  const tagsType = new arrow.List(new arrow.Field('item', U(), true));
  const types = { id: U(), meta: metaType, tags: tagsType, text: U(), dump: U(), url: U(), file_path: U(),
    language: U(), language_score: new arrow.Float64(), token_count: new arrow.Int64(), score: new arrow.Float64(),
    int_score: new arrow.Int64() };
  const fields = Object.keys(types).map((k) => new arrow.Field(k, types[k], true));
  const vecs = {};
  for (const k of Object.keys(types)) vecs[k] = arrow.vectorFromArray(cols[k], types[k]);
  return { table: new arrow.Table(new arrow.Schema(fields), vecs), text };
}

async function main() {
  const benchMB = opt('--bench');
  if (benchMB) { // one FineWeb-like text file of about benchMB MB of text, written as FineWeb's pyarrow would
    const r = makeRng(99);
    const values = [];
    let bytes = 0;
    while (bytes < Number(benchMB) * 1e6) {
      const s = doc(r, 60);
      values.push(s);
      bytes += Buffer.byteLength(s);
    }
    const f = writeParquet('bench.parquet', textTable(values, true),
      { codec: 'SNAPPY', rowGroup: 1000, pageSize: 1 << 20, batch: 1024 });
    console.log(`gen.js: ${f}: ${values.length} rows, ${(bytes / 1e6).toFixed(1)} MB of text, ` +
      `${(fs.statSync(f).size / 1e6).toFixed(1)} MB file`);
    return;
  }

  const N = 3000;
  const mixed = textColumn(1, N, true);
  const mixedSide = writeSidecar('mixed', mixed);
  const mixedTable = textTable(mixed, true);
  // The matrix: every codec x dictionary on/off x data page v1/v2; 3 row groups, many pages each.
  for (const codec of ['UNCOMPRESSED', 'SNAPPY', 'GZIP', 'ZSTD'])
    for (const dict of [true, false])
      for (const v2 of [false, true]) {
        const name = `mixed_${codec.toLowerCase()}_${dict ? 'dict' : 'plain'}_v${v2 ? 2 : 1}.parquet`;
        // Without dictionary, arrow-rs picks DELTA_BYTE_ARRAY for v2 pages unless told PLAIN.
        writeParquet(name, mixedTable, { codec, dict, v2, encoding: dict ? undefined : 'PLAIN' });
        manifest.push([name, 'text', mixedSide]);
      }
  // Dictionary that outgrows its page limit: the chunk switches to PLAIN (v1) / DELTA_BYTE_ARRAY (v2) pages.
  for (const v2 of [false, true]) {
    const name = `mixed_dict_fallback_v${v2 ? 2 : 1}.parquet`;
    writeParquet(name, mixedTable, { codec: 'SNAPPY', v2, dictPageLimit: 4096 });
    manifest.push([name, 'text', mixedSide]);
  }
  // The DELTA string encodings.
  for (const enc of ['DELTA_LENGTH_BYTE_ARRAY', 'DELTA_BYTE_ARRAY'])
    for (const v2 of [false, true]) {
      const name = `mixed_${enc.toLowerCase()}_v${v2 ? 2 : 1}.parquet`;
      writeParquet(name, mixedTable, { codec: 'ZSTD', dict: false, v2, encoding: enc });
      manifest.push([name, 'text', mixedSide]);
    }
  // One big row group with big pages (a single page may hold many long values).
  writeParquet('mixed_one_group.parquet', mixedTable, { codec: 'SNAPPY', rowGroup: 1 << 20, pageSize: 1 << 20, batch: 1024 });
  manifest.push(['mixed_one_group.parquet', 'text', mixedSide]);

  // REQUIRED column (no definition levels).
  const req = textColumn(2, 2000, false);
  const reqSide = writeSidecar('required', req);
  for (const [dict, v2] of [[true, false], [false, false], [true, true], [false, true]]) {
    const name = `required_${dict ? 'dict' : 'plain'}_v${v2 ? 2 : 1}.parquet`;
    writeParquet(name, textTable(req, false), { codec: 'SNAPPY', dict, v2, encoding: dict ? undefined : 'PLAIN', rowGroup: 600 });
    manifest.push([name, 'text', reqSide]);
  }

  // Only nulls; no rows at all.
  const nulls = new Array(500).fill(null);
  const nullSide = writeSidecar('all_null', nulls);
  for (const v2 of [false, true]) {
    const name = `all_null_v${v2 ? 2 : 1}.parquet`;
    writeParquet(name, textTable(nulls, true), { codec: 'ZSTD', v2, rowGroup: 200 });
    manifest.push([name, 'text', nullSide]);
  }
  writeParquet('empty.parquet', textTable([], true), { codec: 'SNAPPY' });
  manifest.push(['empty.parquet', 'text', writeSidecar('empty', [])]);

  // FineWeb-like schema, reading only "text".
  const fw = finewebTable(3, 2500);
  const fwSide = writeSidecar('fineweb', fw.text);
  for (const v2 of [false, true]) {
    const name = `fineweb_snappy_v${v2 ? 2 : 1}.parquet`;
    writeParquet(name, fw.table, { codec: 'SNAPPY', v2, rowGroup: 700, pageSize: 1 << 16, batch: 256 });
    manifest.push([name, 'text', fwSide]);
  }
  // Also a text column that is not the first leaf: "dump" (many repeats, dictionary-encoded) and "url".
  const fwDumpSide = writeSidecar('fineweb_dump', fw.table.getChild('dump').toArray());
  manifest.push(['fineweb_snappy_v1.parquet', 'dump', fwDumpSide]);
  const fwLangSide = writeSidecar('fineweb_language', fw.table.getChild('language').toArray());
  manifest.push(['fineweb_snappy_v2.parquet', 'url', writeSidecar('fineweb_url', fw.table.getChild('url').toArray())]);

  // Codecs the reader does not support: it must say which.
  const small = textTable(mixed.slice(0, 300), true);
  for (const codec of ['LZ4_RAW', 'LZ4', 'BROTLI']) writeParquet(`codec_${codec.toLowerCase()}.parquet`, small, { codec });

  // A second, independent writer: DuckDB rewrites some files with its own page layout and encodings (it
  // writes v1 data pages even with PARQUET_VERSION 'v2', then with DELTA_LENGTH_BYTE_ARRAY strings).
  if (!args.includes('--no-duckdb')) {
    const { DuckDBInstance } = require('@duckdb/node-api');
    const db = await DuckDBInstance.create(':memory:');
    const con = await db.connect();
    const q = (s) => s.replace(/'/g, "''");
    const rewrites = [
      ['mixed_uncompressed_plain_v1.parquet', 'duck_mixed_snappy_v1.parquet', "COMPRESSION 'snappy', ROW_GROUP_SIZE 1024", mixedSide],
      ['mixed_uncompressed_plain_v1.parquet', 'duck_mixed_zstd_v2.parquet', "COMPRESSION 'zstd', ROW_GROUP_SIZE 1024, PARQUET_VERSION 'v2'", mixedSide],
      ['mixed_uncompressed_plain_v1.parquet', 'duck_mixed_gzip_v1.parquet', "COMPRESSION 'gzip', ROW_GROUP_SIZE 2048", mixedSide],
      ['mixed_uncompressed_plain_v1.parquet', 'duck_mixed_uncompressed_v2.parquet', "COMPRESSION 'uncompressed', PARQUET_VERSION 'v2'", mixedSide],
      ['required_plain_v1.parquet', 'duck_required_snappy_v1.parquet', "COMPRESSION 'snappy', ROW_GROUP_SIZE 1024", reqSide],
      ['fineweb_snappy_v1.parquet', 'duck_fineweb_snappy_v1.parquet', "COMPRESSION 'snappy', ROW_GROUP_SIZE 1024", fwSide],
      ['fineweb_snappy_v1.parquet', 'duck_fineweb_zstd_v2.parquet', "COMPRESSION 'zstd', ROW_GROUP_SIZE 1024, PARQUET_VERSION 'v2'", fwSide],
    ];
    // One thread keeps the rows in their order (and the load on a shared 2-core machine low).
    await con.run('SET threads = 1');
    await con.run('SET preserve_insertion_order = true');
    for (const [src, dst, o, side] of rewrites) {
      await con.run(`COPY (SELECT * FROM read_parquet('${q(path.join(out, src))}')) TO '${q(path.join(out, dst))}' (FORMAT parquet, ${o})`);
      manifest.push([dst, 'text', side]);
    }
    // DuckDB dictionary-encodes a column with few distinct values (PLAIN_DICTIONARY in v1 files).
    manifest.push(['duck_fineweb_snappy_v1.parquet', 'language', fwLangSide]);
    manifest.push(['duck_fineweb_zstd_v2.parquet', 'language', fwLangSide]);
    con.closeSync?.();
  }

  fs.writeFileSync(path.join(out, 'manifest.txt'),
    manifest.map(([f, c, s]) => `${path.join(out, f)} ${c} ${s}`).join('\n') + '\n');
  console.log(`gen.js: ${manifest.length} files to check in ${out}`);
}

main().catch((e) => { console.error('gen.js:', e && e.stack || e); process.exit(1); });
