// The web page's files, embedded at build time (cmake/embed_webui.cmake writes the definitions
// from src/server/webui/). webui.cc assembles them into one page.
#pragma once
#include <cstddef>

namespace nanovllm::server {

struct WebuiAsset {
  const char* name;  // file name in src/server/webui/
  const char* text;
};
extern const WebuiAsset kWebuiAssets[];
extern const size_t kNumWebuiAssets;

}  // namespace nanovllm::server
