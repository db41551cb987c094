// Config::validate (include/nanovllm/config.h): every row of the field table checks its value.
#include "nanovllm/config.h"

#include "util/check.h"

namespace nanovllm {

void Config::validate() const {
  const std::string p = fields_problem(*this, [](const auto& f) { return f.name; });
  if (!p.empty()) NV_THROW(p);
  if (ngram_min > ngram_max)
    NV_THROW("ngram_min (", ngram_min, ") must be <= ngram_max (", ngram_max, ")");
  if (speculative == "draft" && draft_model.empty())
    NV_THROW("speculative 'draft' needs draft_model (--draft-model DIR)");
  if (speculative != "draft" && !draft_model.empty())
    NV_THROW("draft_model is set but speculative is '", speculative, "' (use --speculative draft)");
  NV_CHECK(!trace_requests || !trace_path.empty(),
           "trace_requests needs trace_path (--trace-requests records into the --trace FILE)");
}

}  // namespace nanovllm
