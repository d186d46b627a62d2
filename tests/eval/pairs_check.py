#!/usr/bin/python3
"""Checks gdn eval's (context, continuation) token ids against lm-eval's rule computed with the reference
tokenizer (HF tokenizers via scripts/tok_oracle.js), for tests/t_eval_real.sh.

  pairs_check.py texts PAIRS TEXTS        the strings the oracle must encode (JSON string per line)
  pairs_check.py check PAIRS TEXTS BOS NOBOS   compare; BOS / NOBOS: oracle ids with / without the BOS

lm-eval (spec eval.md §1.2-1.3, HFLM.tok_encode / TemplateLM._encode_pair): n = len(ctx) - len(ctx.rstrip());
move ctx[-n:] to the front of the continuation; whole = enc(ctx + cont); ctx_ids = enc(ctx);
cont_ids = whole[len(ctx_ids):]. enc adds BOS in the "new" mode unless the string starts with the BOS text;
never in the "old" mode. An empty context conditions on [BOS] with the continuation encoded without BOS.
"""
import json
import sys

BOS_ID, BOS_TEXT = 128000, "<|begin_of_text|>"


def moved(ctx, cont):
    n = len(ctx) - len(ctx.rstrip())
    return (ctx[:-n], ctx[-n:] + cont) if n else (ctx, cont)


def texts(pairs):
    out = []
    for p in pairs:
        if p["ctx"] == "":
            out.append(p["cont"])
        else:
            c, k = moved(p["ctx"], p["cont"])
            out += [c + k, c]
    return out


def main():
    pairs = [json.loads(l) for l in open(sys.argv[2])]
    if sys.argv[1] == "texts":
        with open(sys.argv[3], "w") as f:
            for s in dict.fromkeys(texts(pairs)):
                f.write(json.dumps(s) + "\n")
        return 0
    uniq = [json.loads(l) for l in open(sys.argv[3])]
    bos = {s: json.loads(l)["ids"] for s, l in zip(uniq, open(sys.argv[4]))}
    nobos = {s: json.loads(l)["ids"] for s, l in zip(uniq, open(sys.argv[5]))}

    def enc(s, mode):
        return bos[s] if mode == "new" and not s.startswith(BOS_TEXT) else nobos[s]

    bad = 0
    for p in pairs:
        if p["ctx"] == "":
            k = nobos[p["cont"]]
            want_c, want_k = ([BOS_ID], k) if k[0] != BOS_ID else (k[:1], k[1:])
        else:
            c, k = moved(p["ctx"], p["cont"])
            want_c = enc(c, p["mode"])
            want_k = enc(c + k, p["mode"])[len(want_c):]
        if p["ctx_ids"] != want_c or p["cont_ids"] != want_k:
            bad += 1
            if bad <= 10:
                print(f"MISMATCH {p['task']} {p['mode']} ctx={p['ctx'][-40:]!r} cont={p['cont']!r}:\n"
                      f"  gdn    {p['ctx_ids'][-6:]} | {p['cont_ids']}\n  lm-eval {want_c[-6:]} | {want_k}")
    print(f"{len(pairs)} pair encodings, {bad} mismatches")
    return 1 if bad or not pairs else 0


if __name__ == "__main__":
    sys.exit(main())
