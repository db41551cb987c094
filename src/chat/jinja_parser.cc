// Jinja parser (see jinja_parser.h).
#include "chat/jinja_parser.h"

#include <algorithm>
#include <set>

#include "chat/jinja_filters.h"
#include "chat/jinja_lexer.h"
#include "util/check.h"

namespace nanovllm::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_all() {
    Body b = parse_body({});
    if (cur().type != Tok::Eof) fail("unexpected '" + cur().text + "'");
    return b;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;  // nesting of blocks/expressions: bounded so hostile input cannot overflow the stack

  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* pp) : p(pp) {
      if (++p->depth_ > 200) p->fail("template nested too deeply");
    }
    ~DepthGuard() { --p->depth_; }
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  [[noreturn]] void fail(const std::string& msg, int line = -1) const {
    throw Error("chat template syntax error at line " + std::to_string(line < 0 ? cur().line : line) + ": " + msg);
  }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::Eof: return "end of template";
      case Tok::BlockEnd: return "end of statement block";
      case Tok::VarEnd: return "end of print statement";
      case Tok::String: return "string";
      default: return "'" + t.text + "'";
    }
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail("expected a name, got " + describe(cur()));
    return t_[i_++].text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail("expected end of statement block, got " + describe(cur()));
    ++i_;
  }

  ExprPtr node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- statements ----

  // Parses until EOF or a `{% name` whose name is in `ends` (left unconsumed at the BlockBegin).
  Body parse_body(const std::set<std::string>& ends) {
    Body body;
    for (;;) {
      const Token& tk = cur();
      if (tk.type == Tok::Eof) {
        if (!ends.empty()) {
          std::string names;
          for (auto& n : ends) names += (names.empty() ? "'" : ", '") + n + "'";
          fail("unexpected end of template, expected one of " + names);
        }
        return body;
      }
      if (tk.type == Tok::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = tk.line;
        s->text = tk.text;
        body.push_back(std::move(s));
        ++i_;
      } else if (tk.type == Tok::VarBegin) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->line = tk.line;
        s->expr = parse_tuple(true);
        if (cur().type != Tok::VarEnd) fail("expected end of print statement, got " + describe(cur()));
        ++i_;
        body.push_back(std::move(s));
      } else if (tk.type == Tok::BlockBegin) {
        const Token& nm = peek();
        if (nm.type != Tok::Name) fail("expected statement name, got " + describe(nm));
        if (ends.count(nm.text)) return body;
        ++i_;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(tk));
      }
    }
  }

  // At `{% name`, consumes `{% name %}` where name must be `end`.
  void expect_end_tag(const char* end) {
    ++i_;  // BlockBegin
    if (!accept_name(end)) fail(std::string("expected '") + end + "'");
    expect_block_end();
  }

  StmtPtr parse_statement() {
    DepthGuard guard(this);
    const Token& nm = cur();
    int line = nm.line;
    std::string name = nm.text;
    ++i_;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (name == "if") {
      s->kind = Stmt::Kind::If;
      for (;;) {
        ExprPtr c = parse_tuple(true);
        expect_block_end();
        Body b = parse_body({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(c), std::move(b));
        ++i_;  // BlockBegin
        std::string t = t_[i_++].text;
        if (t == "elif") continue;
        if (t == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"});
          expect_end_tag("endif");
        } else {
          expect_block_end();
        }
        break;
      }
    } else if (name == "for") {
      s->kind = Stmt::Kind::For;
      parse_targets(s->targets);
      if (!accept_name("in")) fail("expected 'in', got " + describe(cur()));
      s->expr = parse_tuple(false);
      if (accept_name("if")) s->cond = parse_tuple(true);
      if (is_name("recursive")) fail("recursive for loops are not supported");
      expect_block_end();
      s->body = parse_body({"endfor", "else"});
      ++i_;
      if (t_[i_++].text == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"});
        expect_end_tag("endfor");
      } else {
        expect_block_end();
      }
    } else if (name == "set") {
      std::string first = expect_name();
      if (accept_op(".")) {
        s->kind = Stmt::Kind::Set;
        s->targets.push_back(first);
        s->text = expect_name();
        expect_op("=");
        s->expr = parse_tuple(true);
        expect_block_end();
      } else {
        s->targets.push_back(first);
        while (accept_op(",")) s->targets.push_back(expect_name());
        if (accept_op("=")) {
          s->kind = Stmt::Kind::Set;
          s->expr = parse_tuple(true);
          expect_block_end();
        } else {
          s->kind = Stmt::Kind::SetBlock;
          if (s->targets.size() != 1) fail("block set needs a single name");
          if (is_op("|")) s->expr = parse_filters(placeholder(line));
          expect_block_end();
          s->body = parse_body({"endset"});
          expect_end_tag("endset");
        }
      }
    } else if (name == "macro") {
      s->kind = Stmt::Kind::Macro;
      s->text = expect_name();
      parse_params(s->params);
      expect_block_end();
      s->body = parse_body({"endmacro"});
      expect_end_tag("endmacro");
    } else if (name == "call") {
      s->kind = Stmt::Kind::CallBlock;
      if (is_op("(")) parse_params(s->params);
      s->expr = parse_expression(true);
      if (s->expr->kind != Expr::Kind::Call) fail("expected a call after {% call %}", line);
      expect_block_end();
      s->body = parse_body({"endcall"});
      expect_end_tag("endcall");
    } else if (name == "filter") {
      s->kind = Stmt::Kind::FilterBlock;
      s->expr = parse_filter_chain(placeholder(line));
      expect_block_end();
      s->body = parse_body({"endfilter"});
      expect_end_tag("endfilter");
    } else if (name == "with") {
      s->kind = Stmt::Kind::With;
      while (cur().type != Tok::BlockEnd) {
        if (!s->targets.empty()) expect_op(",");
        s->targets.push_back(expect_name());
        expect_op("=");
        s->values.push_back(parse_expression(true));
      }
      expect_block_end();
      s->body = parse_body({"endwith"});
      expect_end_tag("endwith");
    } else if (name == "generation") {
      s->kind = Stmt::Kind::Scope;
      expect_block_end();
      s->body = parse_body({"endgeneration"});
      expect_end_tag("endgeneration");
    } else if (name == "break" || name == "continue") {
      s->kind = name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect_block_end();
    } else {
      fail("unsupported or unexpected tag '" + name + "'", line);
    }
    return s;
  }

  void parse_targets(std::vector<std::string>& targets) {
    bool paren = accept_op("(");
    targets.push_back(expect_name());
    while (accept_op(",")) {
      if (cur().type != Tok::Name) break;
      targets.push_back(expect_name());
    }
    if (paren) expect_op(")");
  }

  void parse_params(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!accept_op(")")) {
      if (!params.empty()) expect_op(",");
      if (accept_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (accept_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
  }

  // Stands for the rendered body of {% filter %} / {% set x | f %} blocks (a name no template can spell).
  ExprPtr placeholder(int line) {
    auto e = node(Expr::Kind::Name, line);
    e->name = kBodyVar;
    return e;
  }

  // `name(args) | name2 ...` applied to `subject` (filter blocks / set blocks).
  ExprPtr parse_filter_chain(ExprPtr subject) {
    ExprPtr e = parse_one_filter(std::move(subject));
    while (accept_op("|")) e = parse_one_filter(std::move(e));
    return e;
  }
  ExprPtr parse_filters(ExprPtr subject) {
    expect_op("|");
    return parse_filter_chain(std::move(subject));
  }

  // ---- expressions ----

  ExprPtr parse_tuple(bool with_condexpr) {
    int line = cur().line;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = node(Expr::Kind::Tuple, line);
    t->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (cur().type == Tok::BlockEnd || cur().type == Tok::VarEnd || is_op(")") || is_name("if")) break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      int line = cur().line;
      ++i_;
      auto c = node(Expr::Kind::CondExpr, line);
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (accept_name("else")) other = parse_condexpr();
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(Expr::Kind k, ExprPtr a, ExprPtr b, const std::string& op, int line) {
    auto e = node(k, line);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      ++i_;
      e = binary(Expr::Kind::Or, std::move(e), parse_and(), "or", line);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      ++i_;
      e = binary(Expr::Kind::And, std::move(e), parse_not(), "and", line);
    }
    return e;
  }
  ExprPtr parse_not() {
    DepthGuard guard(this);
    if (is_name("not")) {
      auto e = node(Expr::Kind::Not, cur().line);
      ++i_;
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (cur().type == Tok::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
           cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        op = "not in";
        i_ += 2;
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::Kind::Compare, line);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      int line = cur().line;
      ++i_;
      e = binary(Expr::Kind::Binary, std::move(e), parse_concat(), op, line);
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      int line = cur().line;
      ++i_;
      e = binary(Expr::Kind::Binary, std::move(e), parse_math2(), "~", line);
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      int line = cur().line;
      ++i_;
      e = binary(Expr::Kind::Binary, std::move(e), parse_pow(), op, line);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line;
      ++i_;
      e = binary(Expr::Kind::Binary, std::move(e), parse_unary(true), "**", line);
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = node(is_op("-") ? Expr::Kind::Neg : Expr::Kind::Pos, cur().line);
      ++i_;
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& tk = cur();
    int line = tk.line;
    if (tk.type == Tok::Name) {
      ++i_;
      const std::string& n = tk.text;
      auto lit = [&](Value v) {
        auto e = node(Expr::Kind::Literal, line);
        e->value = std::move(v);
        return e;
      };
      if (n == "true" || n == "True") return lit(Value(true));
      if (n == "false" || n == "False") return lit(Value(false));
      if (n == "none" || n == "None") return lit(Value(None{}));
      auto e = node(Expr::Kind::Name, line);
      e->name = n;
      return e;
    }
    if (tk.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) s += t_[i_++].text;  // "a" "b" concatenates
      auto e = node(Expr::Kind::Literal, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (tk.type == Tok::Int || tk.type == Tok::Float) {
      ++i_;
      auto e = node(Expr::Kind::Literal, line);
      e->value = tk.type == Tok::Int ? Value(tk.ival) : Value(tk.fval);
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) return node(Expr::Kind::Tuple, line);
      ExprPtr e = parse_expression(true);
      if (is_op(",")) {
        auto t = node(Expr::Kind::Tuple, line);
        t->args.push_back(std::move(e));
        while (accept_op(",")) {
          if (is_op(")")) break;
          t->args.push_back(parse_expression(true));
        }
        e = std::move(t);
      }
      expect_op(")");
      return e;
    }
    if (accept_op("[")) {
      auto e = node(Expr::Kind::List, line);
      while (!accept_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (accept_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      return e;
    }
    if (accept_op("{")) {
      auto e = node(Expr::Kind::DictLit, line);
      while (!accept_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (accept_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      return e;
    }
    fail("unexpected " + describe(tk));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      int line = cur().line;
      if (accept_op(".")) {
        auto g = node(Expr::Kind::GetAttr, line);
        if (cur().type == Tok::Name) {
          g->name = t_[i_++].text;
        } else if (cur().type == Tok::Int) {  // x.0 is x[0]
          g->kind = Expr::Kind::GetItem;
          g->args.push_back(std::move(e));
          auto idx = node(Expr::Kind::Literal, line);
          idx->value = Value(t_[i_++].ival);
          g->args.push_back(std::move(idx));
          e = std::move(g);
          continue;
        } else {
          fail("expected attribute name after '.', got " + describe(cur()));
        }
        g->args.push_back(std::move(e));
        e = std::move(g);
      } else if (accept_op("[")) {
        e = parse_subscript(std::move(e), line);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, int line) {
    ExprPtr parts[3];
    int n = 0;
    bool is_slice = false;
    for (;;) {
      if (is_op(":")) {
        is_slice = true;
        ++i_;
        if (++n > 2) fail("too many ':' in slice");
        continue;
      }
      if (is_op("]")) break;
      if (parts[n]) fail("expected ']' got " + describe(cur()));
      parts[n] = parse_expression(true);
    }
    expect_op("]");
    if (!is_slice) {
      if (!parts[0]) fail("empty subscript", line);
      auto g = node(Expr::Kind::GetItem, line);
      g->args.push_back(std::move(obj));
      g->args.push_back(std::move(parts[0]));
      return g;
    }
    auto s = node(Expr::Kind::Slice, line);
    s->args.push_back(std::move(obj));
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  // `(` args `)` into e->args (after any existing) and e->kwargs.
  void parse_call_args(Expr* e) {
    expect_op("(");
    bool first = true;
    while (!accept_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (accept_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args / **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string k = t_[i_].text;
        i_ += 2;
        e->kwargs.emplace_back(k, parse_expression(true));
      } else {
        if (!e->kwargs.empty()) fail("positional argument follows keyword argument");
        e->args.push_back(parse_expression(true));
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = node(Expr::Kind::Call, cur().line);
    c->args.push_back(std::move(callee));
    parse_call_args(c.get());
    return c;
  }

  ExprPtr parse_one_filter(ExprPtr subject) {
    auto f = node(Expr::Kind::Filter, cur().line);
    f->name = expect_name();
    while (accept_op(".")) f->name += "." + expect_name();
    if (!is_known_filter(f->name)) fail("no filter named '" + f->name + "'", f->line);
    f->args.push_back(std::move(subject));
    if (is_op("(")) parse_call_args(f.get());
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    for (;;) {
      if (accept_op("|")) {
        e = parse_filter_chain(std::move(e));
      } else if (is_name("is")) {
        int line = cur().line;
        ++i_;
        auto t = node(Expr::Kind::Test, line);
        t->negated = accept_name("not");
        t->name = expect_name();
        while (accept_op(".")) t->name += "." + expect_name();
        if (!is_known_test(t->name)) fail("no test named '" + t->name + "'", line);
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          parse_call_args(t.get());
        } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                    cur().type == Tok::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail("You cannot chain multiple tests with is");
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }
};

}  // namespace

Body parse_template(const std::string& source) {
  Parser p(tokenize(source));
  return p.parse_all();
}

}  // namespace nanovllm::jinja
