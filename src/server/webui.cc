// GET /: the web page (chat, completions, dashboard), one self-contained HTML document: its CSS
// and scripts are inlined, it loads nothing from elsewhere, and it talks to this server only.
//
// Each response gets a fresh CSP nonce: only the page's own <script>/<style> elements (which
// carry it) run. The page escapes everything it shows from the model; the policy is the second
// line of defence (an injected inline script or javascript: URL would not run either).
#include <random>
#include <string>

#include "server/handlers.h"
#include "server/webui_assets.h"

namespace nanovllm::server {

namespace {

const char* asset(const std::string& name) {
  for (size_t i = 0; i < kNumWebuiAssets; ++i)
    if (name == kWebuiAssets[i].name) return kWebuiAssets[i].text;
  return "";
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// The page with its CSS and scripts inlined and NONCE placeholders still in it (built once).
const std::string& page_template() {
  static const std::string page = [] {
    std::string html = asset("index.html");
    std::string js;
    for (size_t i = 0; i < kNumWebuiAssets; ++i) {
      const std::string name = kWebuiAssets[i].name;
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".js") == 0)
        js += "// ---- " + name + "\n" + kWebuiAssets[i].text + "\n";
    }
    replace_all(html, "/*@CSS@*/", asset("style.css"));
    replace_all(html, "/*@JS@*/", js);
    return html;
  }();
  return page;
}

std::string new_nonce() {
  static const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string n;
  for (int i = 0; i < 22; ++i) n += kB64[rng() % 64];  // 132 random bits
  return n;
}

}  // namespace

void handle_webui(httplib::Response& res) {
  const std::string nonce = new_nonce();
  std::string html = page_template();
  replace_all(html, "@NONCE@", nonce);
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce +
                     "'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                     "frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-store");
  res.set_content(html, "text/html; charset=utf-8");
}

}  // namespace nanovllm::server
