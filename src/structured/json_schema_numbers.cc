// JSON Schema integers and numbers with bounds (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum in both the draft-4 boolean and the draft-6+ numeric forms).
#include <cmath>

#include "structured/json_exprs.h"
#include "structured/json_schema_compiler.h"

namespace nanovllm::structured {

namespace {

struct Bound {
  bool present = false;
  long double v = 0;
  bool exclusive = false;
};

// Reads the lower (is_min) or upper bound; the tighter of minimum / exclusiveMinimum wins.
Bound read_bound(const ojson& s, bool is_min, const SchemaCompiler& c, const std::string& path) {
  const char* inc = is_min ? "minimum" : "maximum";
  const char* exc = is_min ? "exclusiveMinimum" : "exclusiveMaximum";
  Bound b;
  if (s.contains(inc)) {
    if (!s[inc].is_number()) c.fail(path, std::string("'") + inc + "' must be a number");
    b = {true, s[inc].get<long double>(), false};
  }
  if (s.contains(exc)) {
    const ojson& x = s[exc];
    if (x.is_boolean()) {  // draft 4: a modifier of minimum / maximum
      if (x.get<bool>()) {
        if (!b.present) c.fail(path, std::string("'") + exc + "': true without '" + inc + "'");
        b.exclusive = true;
      }
    } else if (x.is_number()) {
      long double v = x.get<long double>();
      bool tighter = !b.present || (is_min ? v >= b.v : v <= b.v);
      if (tighter) b = {true, v, true};
    } else {
      c.fail(path, std::string("'") + exc + "' must be a number");
    }
  }
  return b;
}

std::optional<int64_t> to_int64(long double v, const SchemaCompiler& c, const std::string& path) {
  if (!(v >= -9223372036854775807.0L && v <= 9223372036854775807.0L))  // exact in long double
    c.fail(path, "a bound beyond the 64-bit integer range is not supported");
  return static_cast<int64_t>(v);
}

// The integer bounds implied by real bounds: the least integer above / the greatest below.
std::optional<int64_t> int_lo(const Bound& b, const SchemaCompiler& c, const std::string& path) {
  if (!b.present) return std::nullopt;
  return to_int64(b.exclusive ? std::floor(b.v) + 1 : std::ceil(b.v), c, path);
}
std::optional<int64_t> int_hi(const Bound& b, const SchemaCompiler& c, const std::string& path) {
  if (!b.present) return std::nullopt;
  return to_int64(b.exclusive ? std::ceil(b.v) - 1 : std::floor(b.v), c, path);
}

ExprPtr digit_run(int lo, int hi) { return repeat(chars(CodepointSet::range('0', '9')), lo, hi); }

}  // namespace

int64_t SchemaCompiler::count_keyword(const ojson& s, const char* key, int64_t dflt, const std::string& path) const {
  if (!s.contains(key)) return dflt;
  const ojson& v = s[key];
  bool integral = v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (!integral || v.get<double>() < 0) fail(path, std::string("'") + key + "' must be a non-negative integer");
  if (v.get<double>() > 1e9) fail(path, std::string("'") + key + "' is too large");
  return static_cast<int64_t>(v.get<double>());
}

ExprPtr SchemaCompiler::integer_value(const ojson& s, const std::string& path) {
  Bound lo = read_bound(s, true, *this, path), hi = read_bound(s, false, *this, path);
  return json_integer_range(int_lo(lo, *this, path), int_hi(hi, *this, path));
}

// Bounded numbers are generated without exponent as sign, integer part k and at most 6
// fraction digits, choosing k so that every such number lies within the bounds: "+k.f" lies in
// [k, k+1), "-k.f" in (-(k+1), -k]. Bounds are limited to +-1e9 so that, with <= 6 fraction
// digits, parsing the text as a double cannot round it across a bound. A subset of the valid
// numbers (e.g. for minimum 0.5 only 1 and above, and 0.5 itself is not generated).
ExprPtr SchemaCompiler::number_value(const ojson& s, const std::string& path) {
  Bound lo = read_bound(s, true, *this, path), hi = read_bound(s, false, *this, path);
  if (!lo.present && !hi.present) return json_number();
  for (const Bound* b : {&lo, &hi})
    if (b->present && std::fabs(b->v) > 1e9L) fail(path, "number bounds beyond +-1e9 are not supported");
  ExprPtr frac = seq({lit("."), digit_run(1, 6)});
  ExprPtr nonzero_frac = seq({lit("."), digit_run(0, 5), chars(CodepointSet::range('1', '9'))});
  auto is_int = [](const Bound& b) { return std::floor(b.v) == b.v; };
  std::vector<ExprPtr> kids;
  // Exact integers, also as "k.0".
  kids.push_back(seq({json_integer_range(int_lo(lo, *this, path), int_hi(hi, *this, path)),
                      opt(seq({lit("."), repeat(lit("0"), 1, 6)}))}));

  // "+k.f" with [k, k+1) inside: k >= lo (> lo when exclusive), k + 1 <= hi.
  int64_t kmin = lo.present ? std::max<int64_t>(0, *int_lo(lo, *this, path)) : 0;
  std::optional<int64_t> kmax;
  if (hi.present) kmax = static_cast<int64_t>(std::floor(hi.v)) - 1;
  kids.push_back(seq({json_integer_range(kmin, kmax), frac}));
  if (lo.present && lo.exclusive && is_int(lo) && lo.v >= 0 && (!hi.present || lo.v + 1 <= hi.v))
    kids.push_back(seq({lit(std::to_string(static_cast<int64_t>(lo.v))), nonzero_frac}));  // (lo, lo+1)

  // "-k.f" with (-(k+1), -k] inside: -(k+1) >= lo, -k <= hi (< hi when exclusive).
  int64_t nmin = 0;
  if (hi.present) nmin = std::max<int64_t>(0, static_cast<int64_t>(hi.exclusive ? std::floor(-hi.v) + 1 : std::ceil(-hi.v)));
  std::optional<int64_t> nmax;
  if (lo.present) nmax = static_cast<int64_t>(std::floor(-lo.v)) - 1;
  kids.push_back(seq({lit("-"), json_integer_range(nmin, nmax), frac}));
  if (hi.present && hi.exclusive && is_int(hi) && hi.v <= 0 && (!lo.present || -hi.v + 1 <= -lo.v))
    kids.push_back(seq({lit("-" + std::to_string(static_cast<int64_t>(-hi.v))), nonzero_frac}));  // (hi-1, hi)
  return alt(std::move(kids));
}

}  // namespace nanovllm::structured
