#include "server/response_store.h"

namespace nanovllm::server {

using nlohmann::json;

void ResponseStore::insert(const std::string& id, Entry e) {
  auto it = entries_.find(id);
  if (it != entries_.end()) {
    it->second = std::move(e);
    return;
  }
  entries_.emplace(id, std::move(e));
  order_.push_back(id);
  while (entries_.size() > capacity_ && !order_.empty()) {
    auto old = entries_.find(order_.front());
    order_.pop_front();
    if (old == entries_.end()) continue;  // erased earlier
    if (old->second.live) evicted_.push_back(std::move(*old->second.live));
    entries_.erase(old);
  }
  // Erased ids leave stale names in order_: compact when they dominate.
  if (order_.size() > 2 * capacity_ + 16) {
    std::deque<std::string> kept;
    for (auto& k : order_)
      if (entries_.count(k)) kept.push_back(std::move(k));
    order_ = std::move(kept);
  }
}

void ResponseStore::put(const std::string& id, json response, json conversation) {
  if (capacity_ == 0) return;
  std::vector<Live> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    insert(id, Entry{std::move(response), std::move(conversation), std::nullopt});
    evicted.swap(evicted_);
  }
  for (auto& l : evicted) l.cancel();
}

void ResponseStore::put_live(const std::string& id, Live live) {
  std::vector<Live> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    insert(id, Entry{json(nullptr), json(nullptr), std::move(live)});
    evicted.swap(evicted_);
  }
  for (auto& l : evicted) l.cancel();
}

std::optional<json> ResponseStore::response(const std::string& id) {
  std::function<json()> poll;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    if (!it->second.live) return it->second.response;
    poll = it->second.live->poll;
  }
  return poll();
}

std::optional<json> ResponseStore::conversation(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.live) return std::nullopt;
  return it->second.conversation;
}

bool ResponseStore::cancel(const std::string& id, bool* was_live) {
  std::function<void()> cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    *was_live = it->second.live.has_value();
    if (*was_live) cancel = it->second.live->cancel;
  }
  if (cancel) cancel();
  return true;
}

bool ResponseStore::erase(const std::string& id) {
  std::optional<Live> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    live = std::move(it->second.live);
    entries_.erase(it);
  }
  if (live) live->cancel();
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace nanovllm::server
