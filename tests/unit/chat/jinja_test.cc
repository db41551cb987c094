// Unit tests of the Jinja interpreter behind chat templates. Expected strings are what Python's
// jinja2 (trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson) prints; the e2e test
// tests/e2e/test_chat_template.py checks whole templates against jinja2 itself.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_template.h"
#include "util/check.h"

namespace nanovllm {
namespace {

using ojson = nlohmann::ordered_json;

std::string R(const std::string& tmpl, const ojson& ctx = ojson::object()) {
  return render_chat_template(tmpl, ctx);
}

// Returns the nanovllm::Error message thrown by rendering, or "" if none.
std::string error_of(const std::string& tmpl, const ojson& ctx = ojson::object()) {
  try {
    R(tmpl, ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaExpr, Arithmetic) {
  EXPECT_EQ(R("{{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}"), "3.5 3 1 -4 2 1024");
  EXPECT_EQ(R("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2.5 * 2 }} {{ 0.1 + 0.2 }}"), "7 9 5.0 0.30000000000000004");
  EXPECT_EQ(R("{{ 1e20 }} {{ 1.0e-5 }} {{ 0.0001 }} {{ 123456789.0 }} {{ 1 / 3 }}"),
            "1e+20 1e-05 0.0001 123456789.0 0.3333333333333333");
  EXPECT_EQ(R("{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 2 }} {{ [1] + [2] }}"), "a1NoneTrue abab [1, 2]");
  // Filters bind tighter than binary operators: (xs|length) - 1.
  EXPECT_EQ(R("{{ xs|length - 1 }}", {{"xs", {1, 2, 3}}}), "2");
}

TEST(JinjaExpr, LogicAndComparisons) {
  EXPECT_EQ(R("{{ 1 < 2 < 3 }} {{ 3 < 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ not 0 }}"), "True False True True True");
  EXPECT_EQ(R("{{ 'ell' in 'hello' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }}"), "True True True");
  // and/or return an operand, as in Python.
  EXPECT_EQ(R("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }}|"), "x y |");
  EXPECT_EQ(R("{{ 'yes' if n > 1 else 'no' }} [{{ 'only' if n > 5 }}]", {{"n", 3}}), "yes []");
}

TEST(JinjaExpr, ValuesPrintLikePython) {
  EXPECT_EQ(R("{{ [1, 'a', none, true, 1.5] }}"), "[1, 'a', None, True, 1.5]");
  EXPECT_EQ(R("{{ {'a': 1, 'b': [2]} }} {{ (1, 2) }} {{ ('x',) }}"), "{'a': 1, 'b': [2]} (1, 2) ('x',)");
  EXPECT_EQ(R("{{ [\"it's\", 'q\"', 'n\\nl'] }}"), "[\"it's\", 'q\"', 'n\\nl']");
  EXPECT_EQ(R("[{{ missing }}] {{ none }}"), "[] None");
}

TEST(JinjaExpr, AttributeAndItemAccess) {
  ojson ctx = {{"m", {{"role", "user"}, {"content", "hi"}}}, {"xs", {10, 20, 30}}};
  EXPECT_EQ(R("{{ m.role }} {{ m['content'] }} {{ xs[0] }} {{ xs[-1] }} {{ xs.1 }}", ctx), "user hi 10 30 20");
  EXPECT_EQ(R("{{ m.missing is defined }} {{ m.missing is undefined }} {{ xs[7] is defined }}", ctx), "False True False");
  EXPECT_EQ(R("{{ xs[1:] }} {{ xs[::-1] }} {{ xs[:-1] }} {{ 'hello'[1:3] }} {{ 'héllo'[::-1] }}", ctx),
            "[20, 30] [30, 20, 10] [10, 20] el olléh");
  // dict methods win over keys for `.`, as Python getattr does.
  EXPECT_EQ(R("{% for k, v in m.items() %}{{ k }}={{ v }};{% endfor %}", ctx), "role=user;content=hi;");
}

TEST(JinjaExpr, StringMethods) {
  EXPECT_EQ(R("{{ '  x \\n'.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\na'.lstrip('\\n') }}|{{ 'a  '.rstrip() }}|"),
            "x|a|a|a|");
  EXPECT_EQ(R("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c']");
  EXPECT_EQ(R("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'bc')) }} {{ 'aXa'.replace('a', 'b') }}"),
            "True True bXb");
  EXPECT_EQ(R("{{ 'Hi'.upper() }} {{ 'Hi'.lower() }} {{ 'hello world'.title() }} {{ '-'.join(['a', 'b']) }}"),
            "HI hi Hello World a-b");
  EXPECT_EQ(R("{{ '{} + {x}'.format(1, x=2) }} {{ '%s=%d' % ('n', 3) }}"), "1 + 2 n=3");
  // The Qwen3 idiom for splitting reasoning from the answer.
  EXPECT_EQ(R("{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[0].split('<think>')[-1].strip() }}",
              {{"c", "<think>\nwhy\n</think>\n\nanswer"}}),
            "answer|why");
}

TEST(JinjaFilters, Common) {
  ojson ctx = {{"ms", {{{"role", "user"}}, {{"role", "assistant"}}, {{"role", "user"}}}}};
  EXPECT_EQ(R("{{ '  t  '|trim }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 42|string ~ '!' }}|{{ [3, 1, 2]|sort }}"),
            "t|AB|ab|42!|[1, 2, 3]");
  EXPECT_EQ(R("{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ [1, 2, 3]|reverse|list }} {{ [1, 2]|join(', ') }}"),
            "1 3 [3, 2, 1] 1, 2");
  EXPECT_EQ(R("{{ nope|default('d') }} {{ ''|default('d') }}|{{ ''|default('d', true) }} {{ none|default('d') }}"),
            "d |d None");
  EXPECT_EQ(R("{{ ms|selectattr('role', 'equalto', 'user')|list|length }} "
              "{{ ms|rejectattr('role', 'eq', 'user')|map(attribute='role')|join }}",
              ctx),
            "2 assistant");
  EXPECT_EQ(R("{{ {'a': 1}|items|list }} {{ '3'|int + 1 }} {{ 'x'|int }} {{ -2|abs }} {{ 'a\\nb'|indent(2) }}"),
            "[('a', 1)] 4 0 2 a\n  b");
  EXPECT_EQ(R("{{ range(3)|list }} {{ range(1, 8, 3)|list }} {{ [1, 2, 3]|sum }} {{ [4, 9, 1]|max }}"),
            "[0, 1, 2] [1, 4, 7] 6 9");
}

TEST(JinjaFilters, ToJsonMatchesTransformers) {
  // json.dumps(x, ensure_ascii=False): ", " and ": " separators, non-ASCII kept, key order kept.
  ojson ctx = ojson::parse(R"({"t": {"name": "f", "b": [1, 2.5, null, true], "s": "é\"\n<>&", "e": {}, "l": []}})");
  EXPECT_EQ(R("{{ t|tojson }}", ctx),
            R"({"name": "f", "b": [1, 2.5, null, true], "s": "é\"\n<>&", "e": {}, "l": []})");
  EXPECT_EQ(R("{{ {'a': [1, {'b': 2}]}|tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ]\n}");
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  EXPECT_EQ(R("{{ 'é😀'|tojson(ensure_ascii=true) }}"), "\"\\u00e9\\ud83d\\ude00\"");
  EXPECT_EQ(R("{{ {'b': [1, 2], 'a': 0}|tojson(separators=(',', ':'), sort_keys=true) }}"), "{\"a\":0,\"b\":[1,2]}");
  EXPECT_NE(error_of("{{ nope|tojson }}"), "");
}

TEST(JinjaTests, TypeTests) {
  EXPECT_EQ(R("{{ 'a' is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ none is none }}"),
            "True True True True True");
  EXPECT_EQ(R("{{ {} is mapping }} {{ [] is sequence }} {{ [] is iterable }} {{ 1 is iterable }}"), "True True True False");
  EXPECT_EQ(R("{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 'a' is not string }} {{ 6 is divisibleby 3 }}"),
            "True False True False True");
  EXPECT_EQ(R("{{ 3 is odd }} {{ 3 is even }} {{ x is defined }} {{ x is not defined }}"), "True False False True");
}

TEST(JinjaStatements, LoopVariables) {
  EXPECT_EQ(R("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
              "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}"),
            "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|");
  EXPECT_EQ(R("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}:{{ x }} {% endfor %}"), "1:2 2:4 ");
  EXPECT_EQ(R("{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}"
              "{{ i }}{% endfor %}"),
            "023");
  EXPECT_EQ(R("{% for x in [1, 2] %}{{ loop.previtem is defined }}{{ loop.nextitem }}{% endfor %}"), "False2True");
}

TEST(JinjaStatements, ScopingAndNamespace) {
  // `set` inside a loop does not leak; a namespace attribute does. `if` opens no scope.
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(R("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(R("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  EXPECT_EQ(R("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(R("{% set v %}in {{ 1 }}{% endset %}[{{ v }}]"), "[in 1]");
  EXPECT_NE(error_of("{% set x = 1 %}{% set x.y = 2 %}").find("non-namespace"), std::string::npos);
}

TEST(JinjaStatements, MacrosAndCall) {
  EXPECT_EQ(R("{% macro g(name, greet='Hi') %}{{ greet }} {{ name }}{% endmacro %}{{ g('a') }}|{{ g('b', 'Yo') }}|"
              "{{ g(greet='Hey', name='c') }}"),
            "Hi a|Yo b|Hey c");
  EXPECT_EQ(R("{% macro w(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call w('b') %}x{% endcall %}"),
            "<b>x</b>");
  EXPECT_EQ(R("{% filter upper %}ab{{ 'c' }}{% endfilter %}"), "ABC");
  EXPECT_EQ(R("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(JinjaWhitespace, TrimAndLstripBlocks) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  EXPECT_EQ(R("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  // Variable tags are not affected.
  EXPECT_EQ(R("  {{ 'x' }}\ny"), "  x\ny");
  // Manual control: {%- strips before, -%} after, {%+ keeps indentation.
  EXPECT_EQ(R("a  \n {%- if true -%} \n b {%- endif %}"), "ab");
  EXPECT_EQ(R("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(R("a {{- ' b ' -}} c"), "a b c");
  // Block tag not alone on its line: indentation kept.
  EXPECT_EQ(R("x  {% if true %}y{% endif %}"), "x  y");
  // Comments vanish and behave like blocks for whitespace.
  EXPECT_EQ(R("a\n  {# note #}\nb {# c #} d"), "a\nb  d");
  // One trailing newline of the template is dropped (keep_trailing_newline=False).
  EXPECT_EQ(R("x\n"), "x");
  EXPECT_EQ(R("x\n\n"), "x\n");
}

TEST(JinjaErrors, RaiseExceptionMessageIsExact) {
  std::string msg = error_of("{% if true %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}");
  EXPECT_EQ(msg, "Only user and assistant roles are supported!");
}

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  EXPECT_NE(error_of("line1\n{% if true %}\nx\n{% endfor %}").find("line 4"), std::string::npos);
  EXPECT_NE(error_of("a\nb\n{{ 1 + }}").find("line 3"), std::string::npos);
  EXPECT_NE(error_of("{% if x %}\nunclosed").find("line 2"), std::string::npos);
  std::string unk = error_of("\n\n{% frobnicate %}");
  EXPECT_NE(unk.find("line 3"), std::string::npos);
  EXPECT_NE(unk.find("frobnicate"), std::string::npos);
  EXPECT_NE(error_of("\n{{ x|nosuchfilter }}").find("line 2"), std::string::npos);
  EXPECT_NE(error_of("{{ 'unterminated }}").find("line 1"), std::string::npos);
  EXPECT_NE(error_of("{% for x in y recursive %}{% endfor %}").find("recursive"), std::string::npos);
}

TEST(JinjaErrors, RuntimeErrorsNameTheLine) {
  ojson ctx = {{"m", {{"role", "user"}}}};
  std::string e = error_of("ok\n\n{{ m.content.strip() }}", ctx);
  EXPECT_NE(e.find("line 3"), std::string::npos);
  EXPECT_NE(e.find("has no attribute 'content'"), std::string::npos);
  EXPECT_NE(error_of("\n{{ 1 + 'a' }}").find("line 2"), std::string::npos);
  EXPECT_NE(error_of("{{ foo() }}").find("'foo' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("recursion"), std::string::npos);
}

TEST(ChatTemplate, ApplyBuildsTransformersContext) {
  const std::string tmpl =
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}"
      "{% if tools is defined %}T{{ tools|length }}{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}"
      "{% if enable_thinking is defined and not enable_thinking %}/nothink{% endif %}";
  ojson msgs = ojson::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(apply_chat_template(tmpl, msgs, true, ojson::object(), "<s>", "</s>"), "<s><user>hi</s><assistant>");
  EXPECT_EQ(apply_chat_template(tmpl, msgs, false, ojson{{"enable_thinking", false}}, "", "", ojson::array({1, 2})),
            "<user>hiT2/nothink");
  // The plain nlohmann::json overload renders the same.
  nlohmann::json jm = nlohmann::json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(apply_chat_template(tmpl, jm, true, nlohmann::json::object(), "<s>", "</s>"), "<s><user>hi</s><assistant>");
}

TEST(ChatTemplate, CompiledTemplateIsReusable) {
  auto t = ChatTemplate::compile("{% for m in messages %}{{ m }}{% endfor %}");
  EXPECT_EQ(t->render(ojson{{"messages", {1, 2}}}), "12");
  EXPECT_EQ(t->render(ojson{{"messages", {"a"}}}), "a");
  EXPECT_EQ(ChatTemplate::cached("{{ 1 }}"), ChatTemplate::cached("{{ 1 }}"));
}

// JSON -> template values is depth-checked: nesting beyond kJsonMaxDepth (512) is an error,
// not a stack overflow, whichever way the json value was built.
TEST(ChatTemplate, DeeplyNestedInputIsAnErrorNotACrash) {
  // Built by moves only: a copy of such a value would itself recurse 100,000 levels.
  ojson deep = ojson::array();
  for (int i = 0; i < 100000; ++i) {
    ojson outer = ojson::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  ojson m = ojson::object();
  m["role"] = "user";
  m["content"] = "hi";
  m["x"] = std::move(deep);
  ojson msgs = ojson::array();
  msgs.push_back(std::move(m));
  const std::string tmpl = "{% for m in messages %}{{ m.content }}{% endfor %}";
  try {
    apply_chat_template(tmpl, msgs, false, ojson::object(), "", "");
    ADD_FAILURE() << "no error for 100,000 nested arrays";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 512 levels"), std::string::npos) << e.what();
  }
  // 500 levels (within the limit) render, tojson included.
  ojson ok = 1;
  for (int i = 0; i < 500; ++i) {
    ojson outer = ojson::array();
    outer.push_back(std::move(ok));
    ok = std::move(outer);
  }
  ojson ctx = ojson::object();
  ctx["v"] = std::move(ok);
  EXPECT_EQ(R("{{ v|tojson }}", ctx).size(), 1000u + 1u);
  // Unsigned values beyond int64 keep their sign.
  EXPECT_EQ(R("{{ v > 0 }}", ojson{{"v", 18446744073709551615ull}}), "True");
}

}  // namespace
}  // namespace nanovllm
