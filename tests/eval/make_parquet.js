#!/usr/bin/env node
// make_parquet.js: rewrites JSON Lines task files whose columns are all strings as Parquet with a real writer
// (parquet-wasm = arrow-rs's Parquet writer), for tests/t_eval_real.sh to check that `gdn eval` reads the same
// rows from either. Snappy, dictionary pages, 2-row row groups and small pages, so the reader crosses row
// group and page boundaries.
//   NODE_PATH=.assets/parquet_npm/node_modules node make_parquet.js IN.jsonl OUT.parquet [IN OUT ...]
'use strict';
const fs = require('fs');
const path = require('path');
const arrow = require('apache-arrow');
const pw = require('parquet-wasm/node');

const args = process.argv.slice(2);
if (args.length === 0 || args.length % 2) {
  console.error('usage: make_parquet.js IN.jsonl OUT.parquet [IN OUT ...]');
  process.exit(2);
}
for (let i = 0; i < args.length; i += 2) {
  const rows = fs.readFileSync(args[i], 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
  const cols = Object.keys(rows[0]);
  for (const r of rows)
    for (const c of cols)
      if (typeof r[c] !== 'string') throw new Error(`${args[i]}: column ${c} is not a string in every row`);
  const schema = new arrow.Schema(cols.map((c) => new arrow.Field(c, new arrow.Utf8(), true)));
  const data = {};
  for (const c of cols) data[c] = arrow.vectorFromArray(rows.map((r) => r[c]), new arrow.Utf8());
  const table = new arrow.Table(schema, data);
  const props = new pw.WriterPropertiesBuilder()
    .setCompression(pw.Compression.SNAPPY)
    .setDictionaryEnabled(true)
    .setMaxRowGroupSize(2)
    .setDataPageSizeLimit(64)
    .setWriteBatchSize(1)
    .build();
  const bytes = pw.writeParquet(pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream')), props);
  fs.mkdirSync(path.dirname(args[i + 1]), { recursive: true });
  fs.writeFileSync(args[i + 1], bytes);
}
