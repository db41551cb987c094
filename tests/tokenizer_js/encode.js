// Reference encoder for the tokenizer corpus test and benchmark: the JavaScript implementation
// of HF tokenizers (@lenml/tokenizers, a transformers.js fork) from third_party/npm.
//   node encode.js NODE_MODULES TOKENIZER_DIR INPUT.json OUTPUT.json
//       INPUT: JSON list of strings; OUTPUT: JSON list of id lists (add_special_tokens false)
//   node encode.js NODE_MODULES TOKENIZER_DIR --bench TEXT_FILE
//       prints {"bytes": N, "seconds": S, "mb_per_s": R, "tokens": T}
"use strict";
const fs = require("fs");
const path = require("path");

const [nodeModules, tokDir, a, b] = process.argv.slice(2);
const { TokenizerLoader } = require(path.join(nodeModules, "@lenml/tokenizers"));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(path.join(tokDir, "tokenizer_config.json"), "utf8")),
});
const encode = (t) => tokenizer.encode(t, { add_special_tokens: false });

if (a === "--bench") {
  const text = fs.readFileSync(b, "utf8");
  const lines = text.split(/(?<=\n)/);  // same chunking as the C++ benchmark
  encode(lines.slice(0, 200).join(""));  // warm-up
  const t0 = process.hrtime.bigint();
  let n = 0;
  for (const l of lines) n += encode(l).length;
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const bytes = Buffer.byteLength(text, "utf8");
  console.log(JSON.stringify({ bytes, seconds: s, mb_per_s: bytes / 1e6 / s, tokens: n }));
} else {
  const items = JSON.parse(fs.readFileSync(a, "utf8"));
  fs.writeFileSync(b, JSON.stringify(items.map(encode)));
}
