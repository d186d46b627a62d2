#!/usr/bin/env node
// write_parquet.js: writes a Parquet file for tests/t_prepare.sh with a real writer (parquet-wasm, the Rust
// arrow-rs writer): columns id (int32) and text (nullable string) from a JSONL file of strings or nulls.
//   NODE_PATH=... node write_parquet.js TEXTS.jsonl OUT.parquet
// Small row groups and SNAPPY pages, so the reader crosses row-group boundaries.
'use strict';
const fs = require('fs');
const arrow = require('apache-arrow');
const pw = require('parquet-wasm/node');

const [src, out] = process.argv.slice(2);
if (!src || !out) {
  console.error('usage: write_parquet.js TEXTS.jsonl OUT.parquet');
  process.exit(2);
}
const texts = fs.readFileSync(src, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
const schema = new arrow.Schema([new arrow.Field('id', new arrow.Int32(), false),
  new arrow.Field('text', new arrow.Utf8(), true)]);
const table = new arrow.Table(schema, {
  id: arrow.vectorFromArray(texts.map((_, i) => i), new arrow.Int32()),
  text: arrow.vectorFromArray(texts, new arrow.Utf8()),
});
const props = new pw.WriterPropertiesBuilder().setCompression(pw.Compression.SNAPPY).setMaxRowGroupSize(5).build();
fs.writeFileSync(out, pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream')), props));
