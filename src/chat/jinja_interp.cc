// Jinja interpreter (see jinja_interp.h). Scoping follows jinja2: `for`, macros, `with` and
// call blocks open a new frame (so `set` inside a loop does not leak out, which is why templates
// use namespace()), `if` does not. Errors from anywhere below an expression get that
// expression's template line.
#include "chat/jinja_interp.h"

#include <cmath>

#include "chat/jinja_filters.h"
#include "chat/jinja_methods.h"
#include "chat/jinja_parser.h"
#include "chat/jinja_strings.h"

namespace nanovllm::jinja {
namespace {

enum class Flow { Normal, Break, Continue };

struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  Value* find(const std::string& n) {
    for (auto& kv : vars)
      if (kv.first == n) return &kv.second;
    return nullptr;
  }
  void set(const std::string& n, Value v) {
    if (Value* p = find(n)) *p = std::move(v);
    else vars.emplace_back(n, std::move(v));
  }
};
using Scope = std::vector<std::shared_ptr<Frame>>;
// Macros keep weak references to their defining scope: the macro itself lives in one of those
// frames, and a strong reference would be a cycle (a leak per render).
using Closure = std::vector<std::weak_ptr<Frame>>;

constexpr int kMaxDepth = 256;  // macro recursion limit (keeps hostile templates off the C++ stack)

[[noreturn]] void rethrow_with_line(int line) {
  try {
    throw;
  } catch (const RaiseError&) {
    throw;
  } catch (const TemplateError&) {
    throw;
  } catch (const std::exception& e) {
    throw TemplateError("chat template error at line " + std::to_string(line) + ": " + e.what());
  }
}

Value arith(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(to_str(a) + to_str(b));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  auto bad = [&]() -> Value {
    fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  bool nums = a.is_number() && b.is_number();
  bool flt = a.is_float() || b.is_float();
  if (op == "+") {
    if (nums) {
      if (flt) return Value(a.as_double() + b.as_double());
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value(r);
    }
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_list() && b.is_list()) {
      List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return Value(std::move(l));
    }
    return bad();
  }
  if (op == "-") {
    if (!nums) return bad();
    if (flt) return Value(a.as_double() - b.as_double());
    int64_t r;
    if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
    return Value(r);
  }
  if (op == "*") {
    if (nums) {
      if (flt) return Value(a.as_double() * b.as_double());
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value(r);
    }
    const Value* seq = a.is_number() ? &b : &a;
    const Value* n = a.is_number() ? &a : &b;
    if (!n->is_int() && !n->is_bool()) return bad();
    int64_t times = std::max<int64_t>(0, n->as_int());
    if (seq->is_string()) {
      if (times * int64_t(seq->str().size()) > (int64_t(1) << 28)) fail("string repetition too large");
      std::string r;
      for (int64_t i = 0; i < times; ++i) r += seq->str();
      return Value(std::move(r));
    }
    if (seq->is_list()) {
      if (times * int64_t(seq->list().size()) > (int64_t(1) << 24)) fail("list repetition too large");
      List r;
      for (int64_t i = 0; i < times; ++i) r.insert(r.end(), seq->list().begin(), seq->list().end());
      return Value(std::move(r));
    }
    return bad();
  }
  if (op == "%" && a.is_string()) return Value(py_percent_format(a.str(), b));
  if (!nums) return bad();
  if (op == "/") {
    if (b.as_double() == 0) fail("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0) fail(op == "%" ? "integer modulo by zero" : "integer division or modulo by zero");
    if (flt) {
      double x = a.as_double(), y = b.as_double();
      double q = std::floor(x / y);
      return op == "//" ? Value(q) : Value(x - q * y);
    }
    int64_t x = a.as_int(), y = b.as_int();
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {  // Python floors toward -inf
      q -= 1;
      r += y;
    }
    return op == "//" ? Value(q) : Value(r);
  }
  if (op == "**") {
    if (!flt && b.as_int() >= 0) {
      double p = std::pow(a.as_double(), b.as_double());
      if (std::fabs(p) > 9.2e18) fail("integer overflow");
      int64_t r = 1;
      for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
      return Value(r);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  return bad();
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  int c = compare(a, b);
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  return c >= 0;
}

Value call_value(const Value& fn, CallArgs& args) {
  if (fn.is_function()) return fn.func().fn(args);
  if (fn.is_undefined()) fail_undefined(fn);
  fail("'" + fn.type_name() + "' object is not callable");
}

class Interp {
 public:
  Scope scope;
  int depth = 0;

  Value lookup(const std::string& name) {
    for (auto it = scope.rbegin(); it != scope.rend(); ++it)
      if (Value* v = (*it)->find(name)) return *v;
    return get_global(name);
  }

  Flow exec(const Body& body, std::string& out) {
    for (auto& s : body) {
      Flow f;
      try {
        f = exec_stmt(*s, out);
      } catch (...) {
        rethrow_with_line(s->line);
      }
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Value eval(const Expr& e) {
    try {
      return eval_inner(e);
    } catch (...) {
      rethrow_with_line(e.line);
    }
  }

 private:
  struct ScopeGuard {
    Interp* in;
    size_t n;
    ~ScopeGuard() { in->scope.resize(n); }
  };
  std::shared_ptr<Frame> push_frame() {
    scope.push_back(std::make_shared<Frame>());
    return scope.back();
  }

  void assign(Frame& f, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      f.set(targets[0], v);
      return;
    }
    List items = iterate(v);
    if (items.size() != targets.size())
      fail("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) f.set(targets[i], items[i]);
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs a;
    a.pos.reserve(e.args.size() - first);
    for (size_t i = first; i < e.args.size(); ++i) a.pos.push_back(eval(*e.args[i]));
    for (auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x));
    return a;
  }

  std::string render_body(const Body& b) {
    std::string s;
    exec(b, s);
    return s;
  }

  Flow exec_stmt(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::Text: out += s.text; return Flow::Normal;
      case Stmt::Kind::Output: out += to_str(eval(*s.expr)); return Flow::Normal;
      case Stmt::Kind::If:
        for (auto& [cond, body] : s.branches)
          if (eval(*cond).truthy()) return exec(body, out);
        return exec(s.else_body, out);
      case Stmt::Kind::For: return exec_for(s, out);
      case Stmt::Kind::Set: {
        Value v = eval(*s.expr);
        if (!s.text.empty()) {
          Value ns = lookup(s.targets[0]);
          if (!ns.is_dict() || !ns.dict().is_namespace) fail("cannot assign attribute on non-namespace object");
          ns.dict_mut().set(s.text, std::move(v));
        } else {
          assign(*scope.back(), s.targets, v);
        }
        return Flow::Normal;
      }
      case Stmt::Kind::SetBlock: {
        Value v(render_body(s.body));
        if (s.expr) v = apply_body_filter(*s.expr, v);
        scope.back()->set(s.targets[0], std::move(v));
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: {
        Closure closure(scope.begin(), scope.end());
        const Stmt* st = &s;
        scope.back()->set(s.text, Value::function(s.text, [this, st, closure](CallArgs& a) {
          return call_macro(*st, closure, a);
        }));
        return Flow::Normal;
      }
      case Stmt::Kind::CallBlock: {
        Closure closure(scope.begin(), scope.end());
        const Stmt* st = &s;
        Value caller = Value::function("caller", [this, st, closure](CallArgs& a) { return call_macro(*st, closure, a); });
        const Expr& call = *s.expr;
        Value fn = eval(*call.args[0]);
        CallArgs args = eval_args(call, 1);
        args.kw.emplace_back("caller", caller);
        out += to_str(call_value(fn, args));
        return Flow::Normal;
      }
      case Stmt::Kind::FilterBlock: out += to_str(apply_body_filter(*s.expr, Value(render_body(s.body)))); return Flow::Normal;
      case Stmt::Kind::With: {
        ScopeGuard g{this, scope.size()};
        std::vector<Value> vals;
        for (auto& v : s.values) vals.push_back(eval(*v));
        auto f = push_frame();
        for (size_t i = 0; i < vals.size(); ++i) f->set(s.targets[i], vals[i]);
        return exec(s.body, out);
      }
      case Stmt::Kind::Scope: return exec(s.body, out);
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  Value apply_body_filter(const Expr& chain, Value body) {
    ScopeGuard g{this, scope.size()};
    push_frame()->set(kBodyVar, std::move(body));
    return eval(chain);
  }

  Flow exec_for(const Stmt& s, std::string& out) {
    Value seq = eval(*s.expr);
    if (!seq.is_undefined() && !seq.is_list() && !seq.is_dict() && !seq.is_string())
      fail("'" + seq.type_name() + "' object is not iterable");
    List items = iterate(seq);
    ScopeGuard g{this, scope.size()};
    auto frame = push_frame();
    if (s.cond) {
      List kept;
      for (auto& it : items) {
        assign(*frame, s.targets, it);
        if (eval(*s.cond).truthy()) kept.push_back(it);
      }
      items = std::move(kept);
    }
    size_t n = items.size();
    auto loop = std::make_shared<Dict>();
    Value loop_v(loop);
    for (const char* k : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem",
                          "nextitem", "depth", "depth0", "cycle"})
      loop->items.emplace_back(k, Value());
    Dict* L = loop.get();
    L->items[6].second = Value(int64_t(n));
    L->items[9].second = Value(int64_t(1));
    L->items[10].second = Value(int64_t(0));
    L->items[11].second = Value::function("cycle", [L](CallArgs& a) -> Value {
      if (a.pos.empty()) fail("no items for cycling given");
      return a.pos[size_t(L->items[1].second.as_int()) % a.pos.size()];
    });
    frame->set("loop", loop_v);
    for (size_t i = 0; i < n; ++i) {
      assign(*frame, s.targets, items[i]);
      L->items[0].second = Value(int64_t(i + 1));
      L->items[1].second = Value(int64_t(i));
      L->items[2].second = Value(int64_t(n - i));
      L->items[3].second = Value(int64_t(n - i - 1));
      L->items[4].second = Value(i == 0);
      L->items[5].second = Value(i + 1 == n);
      L->items[7].second = i > 0 ? items[i - 1] : Value::undefined("there is no previous item");
      L->items[8].second = i + 1 < n ? items[i + 1] : Value::undefined("there is no next item");
      if (exec(s.body, out) == Flow::Break) break;
    }
    if (n == 0) return exec(s.else_body, out);
    return Flow::Normal;
  }

  Value call_macro(const Stmt& m, const Closure& closure, CallArgs& a) {
    if (depth >= kMaxDepth) fail("maximum macro recursion depth exceeded");
    Scope saved = std::move(scope);
    scope.clear();
    for (auto& w : closure)
      if (auto f = w.lock()) scope.push_back(std::move(f));
    ++depth;
    struct Restore {
      Interp* in;
      Scope* saved;
      ~Restore() {
        in->scope = std::move(*saved);
        --in->depth;
      }
    } restore{this, &saved};
    auto f = push_frame();
    std::vector<bool> used(a.kw.size(), false);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const MacroParam& p = m.params[i];
      const Value* v = i < a.pos.size() ? &a.pos[i] : nullptr;
      for (size_t k = 0; !v && k < a.kw.size(); ++k)
        if (a.kw[k].first == p.name) {
          v = &a.kw[k].second;
          used[k] = true;
        }
      if (v) f->set(p.name, *v);
      else if (p.default_value) f->set(p.name, eval(*p.default_value));
      else f->set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
    }
    List varargs;
    for (size_t i = m.params.size(); i < a.pos.size(); ++i) varargs.push_back(a.pos[i]);
    f->set("varargs", Value::tuple(std::move(varargs)));
    auto kwargs = std::make_shared<Dict>();
    for (size_t k = 0; k < a.kw.size(); ++k) {
      if (used[k]) continue;
      if (a.kw[k].first == "caller") f->set("caller", a.kw[k].second);
      else kwargs->set(a.kw[k].first, a.kw[k].second);
    }
    f->set("kwargs", Value(kwargs));
    std::string out;
    exec(m.body, out);
    return Value(std::move(out));
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name);
      case Expr::Kind::GetAttr: return getattr(eval(*e.args[0]), e.name);
      case Expr::Kind::GetItem: return getitem(eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::Slice: {
        Value parts[3];
        for (int i = 0; i < 3; ++i)
          if (e.args[1 + i]) parts[i] = eval(*e.args[1 + i]);
        return python_slice(eval(*e.args[0]), parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::Call: {
        const Expr& callee = *e.args[0];
        if (callee.kind == Expr::Kind::GetAttr) {  // obj.method(...) without a bound-method object
          Value obj = eval(*callee.args[0]);
          if (obj.is_undefined()) fail_undefined(obj);
          CallArgs args = eval_args(e, 1);
          Value r;
          if (call_method(obj, callee.name, args, r)) return r;
          return call_value(getattr(obj, callee.name), args);
        }
        Value fn = eval(callee);
        CallArgs args = eval_args(e, 1);
        return call_value(fn, args);
      }
      case Expr::Kind::Filter: {
        Value subject = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return apply_filter(e.name, subject, args);
      }
      case Expr::Kind::Test: {
        Value subject = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return Value(apply_test(e.name, subject, args) != e.negated);
      }
      case Expr::Kind::Not: return Value(!eval(*e.args[0]).truthy());
      case Expr::Kind::Neg:
      case Expr::Kind::Pos: {
        Value v = eval(*e.args[0]);
        if (v.is_undefined()) fail_undefined(v);
        if (!v.is_number()) fail("bad operand type for unary " + std::string(e.kind == Expr::Kind::Neg ? "-" : "+") + ": '" + v.type_name() + "'");
        if (e.kind == Expr::Kind::Pos) return v.is_bool() ? Value(v.as_int()) : v;
        return v.is_float() ? Value(-v.as_double()) : Value(-v.as_int());
      }
      case Expr::Kind::Binary: return arith(e.name, eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::And: {
        Value l = eval(*e.args[0]);
        return l.truthy() ? eval(*e.args[1]) : l;
      }
      case Expr::Kind::Or: {
        Value l = eval(*e.args[0]);
        return l.truthy() ? l : eval(*e.args[1]);
      }
      case Expr::Kind::Compare: {
        Value l = eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value r = eval(*e.args[i + 1]);
          if (!compare_op(e.ops[i], l, r)) return Value(false);
          l = std::move(r);
        }
        return Value(true);
      }
      case Expr::Kind::CondExpr:
        if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
        if (e.args[2]) return eval(*e.args[2]);
        return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        List l;
        l.reserve(e.args.size());
        for (auto& x : e.args) l.push_back(eval(*x));
        l.is_tuple = e.kind == Expr::Kind::Tuple;
        return Value(std::move(l));
      }
      case Expr::Kind::DictLit: {
        auto d = std::make_shared<Dict>();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i]);
          if (!k.is_string()) fail("only string keys are supported in dict literals");
          d->set(k.str(), eval(*e.args[i + 1]));
        }
        return Value(d);
      }
    }
    fail("internal error: unknown expression");
  }
};

}  // namespace

Template::Template(const std::string& source) : body_(parse_template(source)) {}

std::string Template::render(const Value& context) const {
  Interp in;
  auto root = std::make_shared<Frame>();
  if (context.is_dict()) root->vars = context.dict().items;
  in.scope.push_back(root);
  std::string out;
  in.exec(body_, out);
  return out;
}

}  // namespace nanovllm::jinja
