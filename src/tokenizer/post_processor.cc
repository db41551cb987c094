#include "tokenizer/post_processor.h"

#include <string>

#include "util/check.h"

namespace nanovllm {
namespace {

// "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}] with the ids of each
// special token in "special_tokens".
class TemplatePP : public PostProcessor {
 public:
  explicit TemplatePP(const nlohmann::json& j) {
    const auto& specials = j.contains("special_tokens") ? j["special_tokens"] : nlohmann::json::object();
    const auto& single = j.at("single");
    NV_CHECK(single.is_array(), "tokenizer: TemplateProcessing 'single' must be a list");
    for (auto& item : single) {
      if (item.contains("Sequence")) {
        NV_CHECK(item["Sequence"].value("id", "A") == "A",
                 "tokenizer: TemplateProcessing single template may only use sequence $A");
        pieces_.push_back({});
        seq_index_.push_back(pieces_.size() - 1);
      } else if (item.contains("SpecialToken")) {
        std::string name = item["SpecialToken"].at("id").get<std::string>();
        NV_CHECK(specials.contains(name), "tokenizer: TemplateProcessing special token '", name,
                 "' has no entry in special_tokens");
        pieces_.push_back(specials[name].at("ids").get<std::vector<int>>());
        seq_index_.push_back(static_cast<size_t>(-1));
      } else {
        NV_THROW("tokenizer: bad TemplateProcessing item: ", item.dump());
      }
    }
  }
  std::vector<int> process(std::vector<int> ids) const override {
    std::vector<int> out;
    out.reserve(ids.size() + 4);
    for (size_t k = 0; k < pieces_.size(); ++k) {
      if (seq_index_[k] != static_cast<size_t>(-1)) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), pieces_[k].begin(), pieces_[k].end());
    }
    return out;
  }

 private:
  std::vector<std::vector<int>> pieces_;
  std::vector<size_t> seq_index_;
};

class ByteLevelPP : public PostProcessor {
 public:
  std::vector<int> process(std::vector<int> ids) const override { return ids; }
  bool adds_special_tokens() const override { return false; }
};

// Bert/Roberta: [cls] A [sep], with "cls": ["<s>", 0] and "sep": ["</s>", 2].
class ClsSepPP : public PostProcessor {
 public:
  explicit ClsSepPP(const nlohmann::json& j)
      : cls_(j.at("cls").at(1).get<int>()), sep_(j.at("sep").at(1).get<int>()) {}
  std::vector<int> process(std::vector<int> ids) const override {
    ids.insert(ids.begin(), cls_);
    ids.push_back(sep_);
    return ids;
  }

 private:
  int cls_, sep_;
};

class SequencePP : public PostProcessor {
 public:
  explicit SequencePP(std::vector<std::unique_ptr<PostProcessor>> v) : items_(std::move(v)) {}
  std::vector<int> process(std::vector<int> ids) const override {
    for (auto& p : items_) ids = p->process(std::move(ids));
    return ids;
  }
  bool adds_special_tokens() const override {
    for (auto& p : items_)
      if (p->adds_special_tokens()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> items_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  NV_CHECK(j.is_object() && j.contains("type"), "tokenizer: post_processor without a type: ", j.dump());
  std::string type = j["type"].get<std::string>();
  if (type == "TemplateProcessing") return std::make_unique<TemplatePP>(j);
  if (type == "ByteLevel") return std::make_unique<ByteLevelPP>();
  if (type == "BertProcessing" || type == "RobertaProcessing") return std::make_unique<ClsSepPP>(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> v;
    for (auto& p : j.at("processors"))
      if (auto q = make_post_processor(p)) v.push_back(std::move(q));
    return std::make_unique<SequencePP>(std::move(v));
  }
  NV_THROW("tokenizer: unsupported post_processor type '", type, "'");
}

}  // namespace nanovllm
