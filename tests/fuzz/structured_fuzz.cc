// libFuzzer target for constrained decoding (src/structured) and the output parsers (src/chat),
// built by `make fuzz`:
//   build-fuzz/fuzz_structured -max_total_time=300
// Input: one mode byte, a spec, a NUL byte, then driver bytes.
//   mode % 5 == 0: spec is a JSON schema; 1: a regex; 2: the driver bytes are model output for
//   the tool-call and reasoning parsers (spec unused); 3: a GBNF grammar; 4: a Lark grammar;
//   5: a structural tag ({"structures", "triggers"} JSON).
// Invariants: compiling either succeeds or throws nanovllm::Error; while generating with the
// driver bytes choosing among the allowed tokens, the mask is never empty before termination,
// chosen tokens are accepted, and mask bits agree with is_allowed; a parser's result does not
// depend on where the stream is split. Anything else (crash, other exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "chat/reasoning_parser.h"
#include "chat/tool_parser.h"
#include "structured/constraints.h"
#include "structured/grammar_text.h"
#include "structured/structural_tag.h"
#include "structured/matcher.h"

using namespace nanovllm::structured;
using namespace nanovllm::chat;

namespace {

std::shared_ptr<const TokenIndex> fuzz_vocab() {
  static std::shared_ptr<const TokenIndex> v = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t : {"{\"", "\":", "\",", "\"}", "}]", "[{", "true", "null", "12", "é", "\\n", "  ", "\xE2\x82",
                          "\xAC\"", "ab", "\":\"", ",\"a\":"})
      bytes.push_back(t);
    bytes.push_back("");  // EOS
    int32_t eos = static_cast<int32_t>(bytes.size()) - 1;
    return std::make_shared<const TokenIndex>(bytes, std::vector<int32_t>{eos}, std::vector<int32_t>{}, eos + 3);
  }();
  return v;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

void drive(const Grammar& g, std::string_view driver) {
  auto cg = compile(g, fuzz_vocab());
  GrammarMatcher m(cg);
  const TokenIndex& v = cg->vocab();
  for (size_t step = 0; step < driver.size() && step < 48; ++step) {
    std::vector<uint32_t> mask = m.next_token_bitmask();
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < v.mask_words() * 32; ++id)
      if ((mask[id >> 5] >> (id & 31)) & 1u) ids.push_back(id);
    check(!ids.empty(), "empty mask");
    // Spot-check a few ids against the automaton.
    for (int k = 0; k < 4; ++k) {
      int32_t id = static_cast<int32_t>((static_cast<uint8_t>(driver[step]) * 37 + k * 101) % v.vocab_size());
      check(m.is_allowed(id) == static_cast<bool>((mask[id >> 5] >> (id & 31)) & 1u), "mask != is_allowed");
    }
    int32_t pick = ids[static_cast<uint8_t>(driver[step]) % ids.size()];
    check(m.accept_token(pick), "allowed token rejected");
    if (m.is_terminated()) break;
  }
}

void parsers(std::string_view text, size_t cut) {
  cut = text.empty() ? 0 : cut % (text.size() + 1);
  for (ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json}) {
    ParsedToolCalls one = parse_tool_calls(text, f), two;
    ToolCallStreamParser p(f);
    accumulate(p.push(text.substr(0, cut)), two);
    accumulate(p.push(text.substr(cut)), two);
    accumulate(p.finish(), two);
    check(one.content == two.content && one.calls.size() == two.calls.size(), "tool parser split");
    for (size_t i = 0; i < one.calls.size(); ++i)
      check(one.calls[i].name == two.calls[i].name && one.calls[i].arguments == two.calls[i].arguments, "tool args split");
  }
  for (bool opened : {false, true}) {
    ReasoningDelta one = parse_reasoning(text, ReasoningOptions{opened});
    ReasoningStreamParser p(ReasoningOptions{opened});
    ReasoningDelta a = p.push(text.substr(0, cut)), b = p.push(text.substr(cut)), c = p.finish();
    check(one.reasoning == a.reasoning + b.reasoning + c.reasoning, "reasoning split");
    check(one.content == a.content + b.content + c.content, "content split");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  int mode = data[0] % 6;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  size_t nul = rest.find('\0');
  std::string_view spec = rest.substr(0, nul), driver = nul == std::string_view::npos ? "" : rest.substr(nul + 1);
  if (mode == 2) {
    parsers(rest, size);
    return 0;
  }
  Grammar g;
  try {  // only compilation may reject the input
    if (mode == 0) {
      JsonSchemaOptions opt;
      opt.max_states = 5000;
      g = json_schema_grammar(parse_json_schema(spec), opt);
    } else if (mode == 1) {
      g = regex_grammar(spec, 5000);
    } else if (mode == 3) {
      g = gbnf_grammar(spec, 5000);
    } else if (mode == 4) {
      g = lark_grammar(spec, 5000);
    } else {
      JsonSchemaOptions opt;
      opt.max_states = 5000;
      g = structural_tag_grammar(parse_json_schema(spec), opt);
    }
  } catch (const nanovllm::Error&) {
    return 0;
  }
  drive(g, driver);
  return 0;
}
