// The Responses API's in-memory store (`serve --max-stored-responses`, default 256): finished
// responses (GET /v1/responses/{id}, previous_response_id) and background ones still running
// (their `live` callback drains the request's output and returns the response so far; `cancel`
// aborts it). Bounded: beyond the capacity the oldest entry goes (a running one is cancelled
// first), so memory stays capped however many clients store responses. Thread-safe; callbacks
// run outside the lock.
#pragma once
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace nanovllm::server {

class ResponseStore {
 public:
  struct Live {
    std::function<nlohmann::json()> poll;  // the response so far (finishing it stores it whole)
    std::function<void()> cancel;          // aborts the request (its next poll ends it)
  };

  explicit ResponseStore(size_t capacity) : capacity_(capacity) {}
  size_t capacity() const { return capacity_; }

  // A finished response and the chat conversation that led to it (messages without the
  // instructions, its own assistant message last). Replaces a live entry of the same id.
  void put(const std::string& id, nlohmann::json response, nlohmann::json conversation);
  // A background response still generating.
  void put_live(const std::string& id, Live live);
  // The response (polled when live); nullopt when unknown or evicted.
  std::optional<nlohmann::json> response(const std::string& id);
  // The conversation for previous_response_id (finished responses only).
  std::optional<nlohmann::json> conversation(const std::string& id) const;
  // Cancels a live response; false when unknown. `was_live` tells whether it was still running.
  bool cancel(const std::string& id, bool* was_live);
  bool erase(const std::string& id);
  size_t size() const;

 private:
  struct Entry {
    nlohmann::json response;
    nlohmann::json conversation;
    std::optional<Live> live;
  };
  void insert(const std::string& id, Entry e);  // under mu_; may hand back an evicted live entry

  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::deque<std::string> order_;  // insertion order (oldest first); may hold erased ids
  std::vector<Live> evicted_;      // cancelled outside the lock by the caller of insert
};

}  // namespace nanovllm::server
