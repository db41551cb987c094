// Jinja syntax tree. Expressions and statements are plain tagged structs interpreted by
// jinja_interp.cc; every node keeps its template line for error messages.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace nanovllm::jinja {

// Variable holding a filter block's rendered body (see Stmt::Kind::FilterBlock).
inline constexpr const char* kBodyVar = "\x01body";

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    GetAttr,   // args[0].name
    GetItem,   // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]] (null entries = omitted)
    Call,      // args[0](args[1..], kwargs)
    Filter,    // args[0] | name(args[1..], kwargs)
    Test,      // args[0] is [not] name(args[1..])   (negated)
    Not,       // not args[0]
    Neg,       // -args[0]
    Pos,       // +args[0]
    Binary,    // args[0] name args[1]: + - * / // % ** ~
    And,       // args[0] and args[1]
    Or,        // args[0] or args[1]
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ... (chained, ops in `ops`)
    CondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
    List,      // [args...]
    Tuple,     // (args...)
    DictLit,   // {args[0]: args[1], args[2]: args[3], ...}
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value value;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches: (cond, body)...; else_body
    For,          // for targets in expr [if cond]: body; else_body
    Set,          // set targets = expr  |  set target.attr = expr (attr non-empty)
    SetBlock,     // set target %}body{% endset   (optional filter chain in `expr` applied to body)
    Macro,        // macro name(params) body
    CallBlock,    // call(params) expr: body is the caller
    FilterBlock,  // filter expr(with Literal placeholder as args[0]): body
    With,         // with targets=values: body
    Break,
    Continue,
    Scope,        // body only ({% generation %} blocks render transparently)
  };
  Kind kind;
  int line = 0;
  std::string text;                  // Text; Macro name; Set attribute
  ExprPtr expr;                      // Output/For iterable/Set value/CallBlock call/FilterBlock filter
  ExprPtr cond;                      // For filter
  std::vector<std::string> targets;  // For/Set/SetBlock/With names
  std::vector<ExprPtr> values;       // With values
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<MacroParam> params;    // Macro / CallBlock caller params
};

}  // namespace nanovllm::jinja
