// `nanovllm tokenize` and `nanovllm detokenize`: the tokenizer from the command line.
//   tokenize --tokenizer DIR [--text T | --file F | stdin] [--add-special-tokens] [--json]
//   tokenize --tokenizer DIR --batch [--file F | stdin] [--check-incremental]
//       (input: a JSON list of strings; output: a JSON list of id lists)
//   detokenize --tokenizer DIR --ids 1,2,3 [--skip-special-tokens] [--incremental]
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "tokenizer/incremental.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace {

using nanovllm::IncrementalDetokenizer;
using nanovllm::Tokenizer;

std::string read_input(const std::string& file) {
  std::ostringstream ss;
  if (file.empty() || file == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream f(file, std::ios::binary);
    NV_CHECK(f.good(), "cannot open ", file);
    ss << f.rdbuf();
  }
  return ss.str();
}

std::string incremental_decode(const Tokenizer& tok, const std::vector<int>& ids, bool skip) {
  IncrementalDetokenizer inc(tok, skip);
  std::string out;
  for (int id : ids) out += inc.push(id);
  out += inc.finish();
  return out;
}

int run_tokenize(int argc, char** argv) {
  CLI::App app{"Tokenize text with a Hugging Face tokenizer.json"};
  std::string dir, text, file;
  bool add_special = false, as_json = false, batch = false, check_inc = false;
  app.add_option("--tokenizer", dir, "folder with tokenizer.json")->required();
  auto* text_opt = app.add_option("--text", text, "text to encode (default: stdin)");
  app.add_option("--file", file, "read the text (or the --batch JSON) from this file");
  app.add_flag("--add-special-tokens", add_special, "apply the post-processor (BOS etc.)");
  app.add_flag("--json", as_json, "print {\"ids\": [...], \"tokens\": [...]}");
  app.add_flag("--batch", batch, "input is a JSON list of strings; print a JSON list of id lists");
  app.add_flag("--check-incremental", check_inc,
               "with --batch: also check streaming decode == decode for every item (exit 1 if not)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);  // prints help (rc 0) or the usage error
    return rc == 0 ? 0 : 2;
  }
  auto tok = Tokenizer::from_dir(dir);
  if (batch) {
    auto items = nanovllm::parse_json(read_input(file), file.empty() ? "stdin" : file);
    NV_CHECK(items.is_array(), "--batch input must be a JSON list of strings");
    nlohmann::json out = nlohmann::json::array();
    size_t bad = 0;
    for (auto& it : items) {
      NV_CHECK(it.is_string(), "--batch input must be a JSON list of strings");
      auto ids = tok->encode(it.get_ref<const std::string&>(), add_special);
      if (check_inc && incremental_decode(*tok, ids, false) != tok->decode(ids)) {
        if (bad++ < 5) std::fprintf(stderr, "incremental decode differs for item %zu\n", out.size());
      }
      out.push_back(ids);
    }
    std::printf("%s\n", out.dump().c_str());
    if (bad) {
      std::fprintf(stderr, "%zu items: incremental decode != decode\n", bad);
      return 1;
    }
    return 0;
  }
  if (!*text_opt) text = read_input(file);
  auto ids = tok->encode(text, add_special);
  if (as_json) {
    nlohmann::json j;
    j["ids"] = ids;
    nlohmann::json toks = nlohmann::json::array();
    for (int id : ids) toks.push_back(tok->id_to_token(id));
    j["tokens"] = toks;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::string line;
    for (size_t k = 0; k < ids.size(); ++k) {
      if (k) line.push_back(' ');
      line += std::to_string(ids[k]);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

int run_detokenize(int argc, char** argv) {
  CLI::App app{"Decode token ids with a Hugging Face tokenizer.json"};
  std::string dir, ids_csv;
  bool skip = false, incremental = false;
  app.add_option("--tokenizer", dir, "folder with tokenizer.json")->required();
  app.add_option("--ids", ids_csv, "comma-separated ids, e.g. 1,2,3")->required();
  app.add_flag("--skip-special-tokens", skip, "drop special tokens");
  app.add_flag("--incremental", incremental, "decode through the streaming detokenizer");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);  // prints help (rc 0) or the usage error
    return rc == 0 ? 0 : 2;
  }
  std::vector<int> ids;
  std::stringstream ss(ids_csv);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      NV_CHECK(item.find_first_not_of(" \t", used) == std::string::npos, "bad id '", item, "'");
      NV_CHECK(v >= INT32_MIN && v <= INT32_MAX, "id out of range: ", item);
      ids.push_back(static_cast<int>(v));
    } catch (const std::logic_error&) {
      NV_THROW("bad id '", item, "' in --ids");
    }
  }
  auto tok = Tokenizer::from_dir(dir);
  for (int id : ids)
    NV_CHECK(id >= 0 && id < tok->vocab_size(), "token id ", id, " in --ids is outside the vocabulary [0, ",
             tok->vocab_size(), ")");
  std::string text = incremental ? incremental_decode(*tok, ids, skip) : tok->decode(ids, skip);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

NANOVLLM_COMMAND("tokenize", "Encode text to token ids with a tokenizer.json", run_tokenize);
NANOVLLM_COMMAND("detokenize", "Decode token ids to text with a tokenizer.json", run_detokenize);
