#!/usr/bin/python3
"""CPython as the oracle for eval/text.c and eval/metrics.c (run by tests/t_eval_oracle.sh).

  oracle.py cases OUT          write JSON Lines cases {"fn", "in"} for `test_eval_text --oracle`
  oracle.py check CASES GOT    compare the C answers (GOT) with CPython's; exit 1 on any mismatch
  oracle.py bootstrap N SEED   print N floats (one per line) then lm-eval's bootstrap stderr of perplexity

The string functions are the operations lm-eval's templates apply (spec eval.md §1.2, §2.4, §2.10), written
here from the spec with CPython's own str / re / ast doing the work, so any difference in Unicode whitespace,
case mapping, regex laziness or literal parsing between C and Python shows up. Cases are random strings over
an alphabet of troublesome pieces (seeded, so reruns are identical) plus every code point of a few scripts.
"""
import ast
import json
import math
import random
import re
import sys

PIECES = ["a", "B", "s", "N", "x", " ", "  ", "   ", "\n", "\t", "\r", "\x0b", "\x1c", "\u00a0", "\u3000",
          "\u2028", "\u200b", "\ufeff", "[", "]", "(", ")", "{", "}", '"', "'", "@", "-", ",", ".", ":", ";", "!",
          "?", "=", "\u00b0", "_", "/", "0", "7", "\u00df", "\u0130", "\u03a3", "\u03b1", "\u01c6", "\u00e9",
          "\u0301", "\ufb01", "title", " [title]", "[step]", " @-@ ", " @,@ ", " @.@ ", " : ", " , ", " . ",
          " 's", "s '", " N ", "= = =", " \u00b0 ", "/' 3/", "\u4e2d", "\U0001f600", "A", "Hello", "WORLD"]


def hellaswag(t):
    t = t.strip()
    t = t.replace(" [title]", ". ")
    t = re.sub("\\[.*?\\]", "", t)
    return t.replace("  ", " ")


def wikitext(s):
    s = s.replace("s '", "s'")
    s = re.sub(r"/' [0-9]/", r"/'[0-9]/", s)
    for a, b in [(" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" : ", ": "), (" ; ", "; "), (" . ", ". "),
                 (" ! ", "! "), (" ? ", "? "), (" , ", ", ")]:
        s = s.replace(a, b)
    s = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", s)
    s = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", s)
    s = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", s)
    s = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', s)
    s = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", s)
    for a, b in [("= = = =", "===="), ("= = =", "==="), ("= =", "=="), (" \u00b0 ", "\u00b0"), (" \n", "\n"),
                 ("\n ", "\n"), (" N ", " 1 "), (" 's", "'s")]:
        s = s.replace(a, b)
    return s


def pylit_value(s):
    def conv(v):
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        return float(v)
    return conv(ast.literal_eval(s))


FNS = {
    "rstrip": lambda s: s.rstrip(),
    "strip": lambda s: s.strip(),
    "capitalize": lambda s: s.capitalize(),
    "hellaswag": hellaswag,
    "wikitext": wikitext,
    "words": lambda s: len(re.split(r"\s+", s)),
    "len": len,
}


def cases():
    rnd = random.Random(20261130)
    out = []
    for fn in FNS:
        for _ in range(600):
            out.append((fn, "".join(rnd.choice(PIECES) for _ in range(rnd.randrange(0, 24)))))
    # every code point of Latin, Greek, Cyrillic, Armenian, Georgian: first position and inside a word
    for cp in list(range(0x20, 0x250)) + list(range(0x370, 0x530)) + list(range(0x10A0, 0x1100)) + \
            list(range(0x1E00, 0x2000)) + list(range(0xFB00, 0xFB18)):
        c = chr(cp)
        if 0xD800 <= cp < 0xE000:
            continue
        out.append(("capitalize", c + "Ab" + c + c))
        out.append(("capitalize", "x\u03a3" + c))
    out.append(("capitalize", "\u03a3\u0391\u03a3"))
    out.append(("capitalize", "\u03a3'\u03a3 \u03a3"))
    # RACE-like literals with every escape Python's repr produces, plus hand-made oddities
    for _ in range(300):
        probs = []
        for _ in range(rnd.randrange(1, 4)):
            q = "".join(rnd.choice(PIECES) for _ in range(rnd.randrange(0, 8)))
            opts = ["".join(rnd.choice(PIECES) for _ in range(rnd.randrange(0, 5))) for _ in range(4)]
            probs.append({"question": q, "options": opts, "answer": rnd.choice("ABCD")})
        out.append(("pylit", repr(probs)))
    for s in ["[1, 2.5, -3, True, False, None]", "('a', ('b',), [])", "{'k': 'v', 'k': 'w'}", "'a' \"b\" 'c'",
              "u'\\u00e9'", "r'a\\nb'", "'\\x41\\101\\n\\t\\\\\\''", "'''tri'ple'''", "[1_000, 0x10, 1e3]"]:
        out.append(("pylit", s))
    return out


def main():
    if sys.argv[1] == "cases":
        with open(sys.argv[2], "w") as f:
            for fn, s in cases():
                f.write(json.dumps({"fn": fn, "in": s}) + "\n")
        return 0
    if sys.argv[1] == "check":
        bad = 0
        total = 0
        with open(sys.argv[2]) as fc, open(sys.argv[3]) as fg:
            for lc, lg in zip(fc, fg):
                c, g = json.loads(lc), json.loads(lg)
                total += 1
                want = pylit_value(c["in"]) if c["fn"] == "pylit" else FNS[c["fn"]](c["in"])
                got = g.get("out", "ERROR: " + g.get("error", "?"))
                if got != want:
                    bad += 1
                    if bad <= 20:
                        print(f"MISMATCH {c['fn']}({c['in']!r}): C {got!r} != Python {want!r}")
        print(f"{total} cases, {bad} mismatches")
        return 1 if bad or total == 0 else 0
    if sys.argv[1] == "bootstrap":
        n, seed = int(sys.argv[2]), int(sys.argv[3])
        rnd = random.Random(seed)
        xs = [-rnd.uniform(0.5, 9.0) for _ in range(n)]
        for x in xs:
            print(repr(x))
        # lm-eval bootstrap_stderr(perplexity, xs, iters=100000): 100 chunks of 1000, chunk i seeded with i
        res = []
        for i in range(100):
            r = random.Random()
            r.seed(i)
            for _ in range(1000):
                sample = r.choices(xs, k=len(xs))
                res.append(math.exp(-(sum(sample) / len(sample))))
        mu = sum(res) / len(res)
        print(repr(math.sqrt(sum((x - mu) ** 2 for x in res) / (len(res) - 1))))
        return 0
    raise SystemExit("usage: oracle.py cases OUT | check CASES GOT | bootstrap N SEED")


if __name__ == "__main__":
    sys.exit(main())
