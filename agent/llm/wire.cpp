#include "llm/wire.hpp"

#include <algorithm>
#include <limits>

namespace kopt::llm {
namespace {

using nlohmann::json;

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string str(const json& j, const char* key) {
  const json* m = member(j, key);
  return m != nullptr && m->is_string() ? m->get<std::string>() : std::string{};
}

// Token counts: non-negative integers; anything else (a string, a float, a
// negative number from a buggy gateway) counts as zero rather than failing.
std::int64_t count(const json& j, const char* key) {
  const json* m = member(j, key);
  if (m == nullptr) return 0;
  if (m->is_number_unsigned()) {
    const auto v = m->get<std::uint64_t>();
    return v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() / 4)
               ? std::numeric_limits<std::int64_t>::max() / 4
               : static_cast<std::int64_t>(v);
  }
  if (m->is_number_integer()) return std::max<std::int64_t>(0, m->get<std::int64_t>());
  return 0;
}

api_error error_from(const json& e) {
  api_error out;
  if (e.is_string()) {
    out.message = e.get<std::string>();
    return out;
  }
  out.type = str(e, "type");
  out.message = str(e, "message");
  if (const json* c = member(e, "code"); c != nullptr) {
    if (c->is_string())
      out.code = c->get<std::string>();
    else if (c->is_number_integer())
      out.code = std::to_string(c->get<std::int64_t>());
  }
  if (out.empty()) out.message = "error object without type or message";
  return out;
}

usage openai_usage(const json& u) {
  usage t;
  t.reported = u.is_object();
  t.prompt = count(u, "prompt_tokens");
  t.completion = count(u, "completion_tokens");
  if (const json* d = member(u, "prompt_tokens_details")) t.cached = count(*d, "cached_tokens");
  if (const json* d = member(u, "completion_tokens_details"))
    t.reasoning = count(*d, "reasoning_tokens");
  return t;
}

// Anthropic reports uncached input, cache reads and cache writes apart; kopt's
// `prompt` is their sum so that both APIs mean the same thing by it.
void anthropic_usage_into(const json& u, usage& t) {
  if (!u.is_object()) return;
  t.reported = true;
  const std::int64_t in = count(u, "input_tokens");
  const std::int64_t read = count(u, "cache_read_input_tokens");
  const std::int64_t write = count(u, "cache_creation_input_tokens");
  if (member(u, "input_tokens") != nullptr || read != 0 || write != 0) {
    t.prompt = in + read + write;
    t.cached = read;
    t.cache_write = write;
  }
  if (member(u, "output_tokens") != nullptr) t.completion = count(u, "output_tokens");
}

// Content may be a string or (some gateways) an array of {type:text,text}.
std::string openai_content(const json& c) {
  if (c.is_string()) return c.get<std::string>();
  std::string out;
  if (c.is_array()) {
    for (const json& part : c) out += str(part, "text");
  }
  return out;
}

std::string openai_reasoning(const json& msg) {
  std::string r = str(msg, "reasoning_content");  // vLLM, DeepSeek
  if (r.empty()) r = str(msg, "reasoning");       // Ollama, OpenRouter
  return r;
}

}  // namespace

bool is_openai_reasoning_model(std::string_view model) noexcept {
  // Gateways spell "openai/o3" or "azure/gpt-5"; the family is what counts.
  if (const auto slash = model.rfind('/'); slash != std::string_view::npos)
    model.remove_prefix(slash + 1);
  auto starts = [&](std::string_view p) { return model.substr(0, p.size()) == p; };
  // "o1", "o3-mini", "o4-mini-2025-04-16": the letter o, then a digit.
  if (model.size() >= 2 && model[0] == 'o' && model[1] >= '1' && model[1] <= '9') return true;
  // gpt-5 and later are reasoning models; gpt-5-chat-latest is not.
  if (starts("gpt-5") || starts("gpt-6") || starts("gpt-7"))
    return model.find("-chat") == std::string_view::npos;
  return false;
}

json openai_request_body(const request& r, const std::string& model, bool stream,
                         const openai_options& o) {
  json msgs = json::array();
  if (!r.system.empty()) msgs.push_back({{"role", "system"}, {"content", r.system}});
  for (const message& m : r.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", model}, {"messages", msgs}};
  body[o.max_tokens_field == "max_completion_tokens" ? "max_completion_tokens" : "max_tokens"] =
      r.max_tokens;
  if (r.temperature && o.send_temperature) body["temperature"] = *r.temperature;
  if (!o.reasoning_effort.empty()) body["reasoning_effort"] = o.reasoning_effort;
  if (r.n > 1) body["n"] = r.n;  // (the provider resolved 0 to its configured n)
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  if (o.extra_body.is_object() && !o.extra_body.empty()) body.merge_patch(o.extra_body);
  return body;
}

json responses_request_body(const request& r, const std::string& model, bool stream,
                            const openai_options& o) {
  json input = json::array();
  for (const message& m : r.messages) input.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", model}, {"input", input}, {"max_output_tokens", r.max_tokens}};
  if (!r.system.empty()) body["instructions"] = r.system;
  if (r.temperature && o.send_temperature) body["temperature"] = *r.temperature;
  if (!o.reasoning_effort.empty()) body["reasoning"] = {{"effort", o.reasoning_effort}};
  // kopt never chains responses (previous_response_id); do not ask the
  // vendor to keep each prompt and answer.
  body["store"] = false;
  if (stream) body["stream"] = true;
  if (o.extra_body.is_object() && !o.extra_body.empty()) body.merge_patch(o.extra_body);
  return body;
}

namespace {

json cache_control(const anthropic_options& o) {
  json c = {{"type", "ephemeral"}};
  if (!o.cache_ttl.empty()) c["ttl"] = o.cache_ttl;
  return c;
}

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// The message's content as text blocks cut at its cache breaks, the block
// before each break carrying a breakpoint. The API refuses empty text
// blocks, so a break that would make a blank block is dropped.
json content_blocks(const message& m, const anthropic_options& o, std::size_t max_breaks) {
  std::vector<std::size_t> cuts;
  for (const std::size_t b : m.cache_breaks)
    if (b > 0 && b <= m.content.size()) cuts.push_back(b);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<std::size_t> kept;
  std::size_t from = 0;
  for (const std::size_t c : cuts) {
    if (blank(std::string_view(m.content).substr(from, c - from))) continue;
    kept.push_back(c);
    from = c;
  }
  // What follows the last cut must not be blank either: then the last cut
  // moves to the end of the content (same cached prefix, one block less).
  if (!kept.empty() && blank(std::string_view(m.content).substr(kept.back())))
    kept.back() = m.content.size();
  // The latest breaks cover the longest stable prefixes: keep those.
  if (kept.size() > max_breaks)
    kept.erase(kept.begin(), kept.end() - static_cast<long>(max_breaks));
  if (kept.empty()) return m.content;
  json blocks = json::array();
  from = 0;
  for (const std::size_t c : kept) {
    blocks.push_back({{"type", "text"},
                      {"text", m.content.substr(from, c - from)},
                      {"cache_control", cache_control(o)}});
    from = c;
  }
  if (from < m.content.size())
    blocks.push_back({{"type", "text"}, {"text", m.content.substr(from)}});
  return blocks;
}

}  // namespace

json anthropic_request_body(const request& r, const std::string& model, bool stream,
                            const anthropic_options& o) {
  json msgs = json::array();
  std::size_t last_user = r.messages.size();
  for (std::size_t i = 0; i < r.messages.size(); ++i)
    if (r.messages[i].role == "user") last_user = i;
  const bool cache_system = o.prompt_cache && !r.system.empty();
  for (std::size_t i = 0; i < r.messages.size(); ++i) {
    const message& m = r.messages[i];
    if (o.prompt_cache && i == last_user)
      msgs.push_back({{"role", m.role}, {"content", content_blocks(m, o, cache_system ? 3 : 4)}});
    else
      msgs.push_back({{"role", m.role}, {"content", m.content}});
  }
  // With thinking, max_tokens covers thinking and answer: the answer keeps
  // its own cap on top of the thinking budget (the API wants budget < max).
  const std::int64_t max_tokens =
      o.thinking_budget_tokens > 0 ? r.max_tokens + o.thinking_budget_tokens : r.max_tokens;
  json body = {{"model", model}, {"messages", msgs}, {"max_tokens", max_tokens}};
  if (cache_system) {
    body["system"] =
        json::array({{{"type", "text"}, {"text", r.system}, {"cache_control", cache_control(o)}}});
  } else if (!r.system.empty()) {
    body["system"] = r.system;
  }
  if (o.thinking_budget_tokens > 0) {
    body["thinking"] = {{"type", "enabled"}, {"budget_tokens", o.thinking_budget_tokens}};
  } else if (r.temperature) {
    // Extended thinking does not accept a changed temperature.
    body["temperature"] = *r.temperature;
  }
  if (stream) body["stream"] = true;
  if (o.extra_body.is_object() && !o.extra_body.empty()) body.merge_patch(o.extra_body);
  return body;
}

api_error parse_api_error(std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return {};
  const json* e = member(j, "error");
  if (e == nullptr || e->is_null()) return {};
  return error_from(*e);
}

parse_result parse_openai_response(std::string_view body) {
  parse_result r;
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    r.problem = "response body is not valid JSON";
    return r;
  }
  if (!j.is_object()) {
    r.problem = "response body is not a JSON object";
    return r;
  }
  if (const json* e = member(j, "error"); e != nullptr && !e->is_null()) {
    r.error = error_from(*e);
    r.problem = "response carries an error";
    return r;
  }
  const json* choices = member(j, "choices");
  if (choices == nullptr || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object()) {
    r.problem = "response has no choices";
    return r;
  }
  const json& c0 = (*choices)[0];
  const json* msg = member(c0, "message");
  if (msg == nullptr || !msg->is_object()) {
    r.problem = "choices[0] has no message";
    return r;
  }
  if (const json* c = member(*msg, "content")) r.answer.text = openai_content(*c);
  r.answer.reasoning = openai_reasoning(*msg);
  r.answer.stop_reason = str(c0, "finish_reason");
  if (choices->size() > 1) {
    // n > 1: every choice in index order (servers send them in order, but
    // the index is what says which is which).
    std::vector<std::pair<std::int64_t, std::string>> all;
    for (std::size_t i = 0; i < choices->size(); ++i) {
      const json& c = (*choices)[i];
      const json* m = member(c, "message");
      const json* t = m != nullptr ? member(*m, "content") : nullptr;
      const json* idx = member(c, "index");
      const std::int64_t at = idx != nullptr && idx->is_number_integer()
                                  ? idx->get<std::int64_t>()
                                  : static_cast<std::int64_t>(i);
      all.emplace_back(at, t != nullptr ? openai_content(*t) : std::string{});
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    for (auto& [i, t] : all) r.answer.texts.push_back(std::move(t));
    r.answer.text = r.answer.texts.front();
  }
  r.answer.model = str(j, "model");
  if (const json* u = member(j, "usage"); u != nullptr) r.answer.tokens = openai_usage(*u);
  r.ok = true;
  return r;
}

namespace {

usage responses_usage(const json& u) {
  usage t;
  t.reported = u.is_object();
  t.prompt = count(u, "input_tokens");
  t.completion = count(u, "output_tokens");
  if (const json* d = member(u, "input_tokens_details")) t.cached = count(*d, "cached_tokens");
  if (const json* d = member(u, "output_tokens_details"))
    t.reasoning = count(*d, "reasoning_tokens");
  return t;
}

// A Responses API response object: output items (message, reasoning, tool
// calls kopt never asks for), status, usage. Returns the problem, if any.
std::string read_response_object(const json& j, parsed_answer& a, api_error& err) {
  if (const json* e = member(j, "error"); e != nullptr && !e->is_null()) {
    err = error_from(*e);
    return "response carries an error";
  }
  const std::string status = str(j, "status");
  if (status == "failed") {
    err = {"response_failed", "", "the response failed without an error object"};
    return "response failed";
  }
  const json* output = member(j, "output");
  if (output == nullptr || !output->is_array()) return "response has no output array";
  std::string text, reasoning;
  for (const json& item : *output) {
    const std::string type = str(item, "type");
    if (type == "message") {
      if (const json* content = member(item, "content");
          content != nullptr && content->is_array()) {
        for (const json& part : *content) {
          const std::string pt = str(part, "type");
          if (pt == "output_text") text += str(part, "text");
          if (pt == "refusal") text += str(part, "refusal");
        }
      }
    } else if (type == "reasoning") {
      // OpenAI returns summaries (when asked for); open models served
      // through the Responses API may return the reasoning text itself.
      for (const char* field : {"summary", "content"}) {
        if (const json* parts = member(item, field); parts != nullptr && parts->is_array()) {
          for (const json& part : *parts) {
            const std::string t = str(part, "text");
            if (!t.empty()) reasoning += (reasoning.empty() ? "" : "\n") + t;
          }
        }
      }
    }
  }
  a.text = std::move(text);
  a.reasoning = std::move(reasoning);
  if (status == "incomplete") {
    const json* d = member(j, "incomplete_details");
    a.stop_reason = d != nullptr ? str(*d, "reason") : std::string{};
    if (a.stop_reason.empty()) a.stop_reason = "incomplete";
  } else {
    a.stop_reason = status.empty() ? "completed" : status;
  }
  a.model = str(j, "model");
  if (const json* u = member(j, "usage"); u != nullptr && u->is_object())
    a.tokens = responses_usage(*u);
  return {};
}

}  // namespace

parse_result parse_responses_response(std::string_view body) {
  parse_result r;
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    r.problem = "response body is not valid JSON";
    return r;
  }
  if (!j.is_object()) {
    r.problem = "response body is not a JSON object";
    return r;
  }
  r.problem = read_response_object(j, r.answer, r.error);
  r.ok = r.problem.empty();
  return r;
}

parse_result parse_anthropic_response(std::string_view body) {
  parse_result r;
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    r.problem = "response body is not valid JSON";
    return r;
  }
  if (!j.is_object()) {
    r.problem = "response body is not a JSON object";
    return r;
  }
  if (str(j, "type") == "error" || member(j, "error") != nullptr) {
    const json* e = member(j, "error");
    r.error = e != nullptr ? error_from(*e) : api_error{"error", "", "error without details"};
    r.problem = "response carries an error";
    return r;
  }
  const json* content = member(j, "content");
  if (content == nullptr || !content->is_array()) {
    r.problem = "response has no content array";
    return r;
  }
  for (const json& block : *content) {
    const std::string type = str(block, "type");
    if (type == "text")
      r.answer.text += str(block, "text");
    else if (type == "thinking")
      r.answer.reasoning += str(block, "thinking");
  }
  r.answer.stop_reason = str(j, "stop_reason");
  r.answer.model = str(j, "model");
  if (const json* u = member(j, "usage")) anthropic_usage_into(*u, r.answer.tokens);
  r.ok = true;
  return r;
}

void openai_stream_accumulator::on_event(const sse_event& e) {
  if (done_ || failed()) return;
  if (e.data == "[DONE]") {
    done_ = true;
    // texts[0] is kept in `text` while streaming; the others apart.
    if (answer_.texts.size() > 1) answer_.texts[0] = answer_.text;
    return;
  }
  const json j = json::parse(e.data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    problem_ = "stream event is not a JSON object";
    return;
  }
  if (const json* err = member(j, "error"); err != nullptr && !err->is_null()) {
    error_ = error_from(*err);
    return;
  }
  if (answer_.model.empty()) answer_.model = str(j, "model");
  if (const json* choices = member(j, "choices"); choices != nullptr && choices->is_array()) {
    for (const json& c : *choices) {
      // With n > 1 each chunk's choices say which answer they continue.
      const json* idx = member(c, "index");
      const std::int64_t at =
          idx != nullptr && idx->is_number_integer() ? idx->get<std::int64_t>() : 0;
      if (at < 0 || at >= 128) {
        problem_ = "stream chunk with choice index " + std::to_string(at);
        return;
      }
      if (const json* d = member(c, "delta"); d != nullptr && d->is_object()) {
        if (const json* t = member(*d, "content")) {
          if (at == 0) {
            answer_.text += openai_content(*t);
          } else {
            if (answer_.texts.size() <= static_cast<std::size_t>(at))
              answer_.texts.resize(static_cast<std::size_t>(at) + 1);
            answer_.texts[static_cast<std::size_t>(at)] += openai_content(*t);
          }
        }
        if (at == 0) answer_.reasoning += openai_reasoning(*d);
      }
      if (const std::string fr = str(c, "finish_reason"); !fr.empty() && at == 0)
        answer_.stop_reason = fr;
    }
  }

  if (const json* u = member(j, "usage"); u != nullptr && u->is_object()) {
    answer_.tokens = openai_usage(*u);
    usage_seen_ = true;
  }
}

void responses_stream_accumulator::on_event(const sse_event& e) {
  if (done_ || failed()) return;
  const json j = json::parse(e.data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    problem_ = "stream event '" + e.event.substr(0, 64) + "' is not a JSON object";
    return;
  }
  std::string type = str(j, "type");
  if (type.empty()) type = e.event;
  if (type == "error") {
    // {"type":"error","code":...,"message":...}; some servers nest "error".
    const json* nested = member(j, "error");
    error_ = error_from(nested != nullptr && nested->is_object() ? *nested : j);
    if (error_.type == "error") error_.type.clear();
    if (error_.empty()) error_.message = "error event without details";
  } else if (type == "response.created" || type == "response.in_progress") {
    if (const json* r = member(j, "response"); r != nullptr && answer_.model.empty())
      answer_.model = str(*r, "model");
  } else if (type == "response.output_text.delta" || type == "response.refusal.delta") {
    answer_.text += str(j, "delta");
  } else if (type == "response.reasoning_summary_text.delta" ||
             type == "response.reasoning_text.delta") {
    answer_.reasoning += str(j, "delta");
  } else if (type == "response.completed" || type == "response.incomplete" ||
             type == "response.failed") {
    const json* r = member(j, "response");
    if (r == nullptr || !r->is_object()) {
      problem_ = "'" + type + "' event without a response object";
      return;
    }
    parsed_answer final_answer;
    api_error err;
    const std::string problem = read_response_object(*r, final_answer, err);
    if (!err.empty()) {
      error_ = err;
      return;
    }
    if (!problem.empty()) {
      problem_ = problem;
      return;
    }
    // The deltas are the answer; the final object has the same text, and
    // is what counts when a server sent no deltas.
    if (answer_.text.empty()) answer_.text = final_answer.text;
    if (answer_.reasoning.empty()) answer_.reasoning = final_answer.reasoning;
    answer_.stop_reason = final_answer.stop_reason;
    if (!final_answer.model.empty()) answer_.model = final_answer.model;
    if (final_answer.tokens.reported) {
      answer_.tokens = final_answer.tokens;
      usage_seen_ = true;
    }
    done_ = true;
  }
  // output_item.added/done, content_part.*, *.done and future events need nothing.
}

void anthropic_stream_accumulator::on_event(const sse_event& e) {
  if (done_ || failed()) return;
  const json j = json::parse(e.data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    problem_ = "stream event '" + e.event.substr(0, 64) + "' is not a JSON object";
    return;
  }
  // The event name and the `type` field agree on Anthropic; trust `type` and
  // fall back to the event name for proxies that drop one of them.
  std::string type = str(j, "type");
  if (type.empty()) type = e.event;
  if (type == "error") {
    const json* err = member(j, "error");
    error_ =
        err != nullptr ? error_from(*err) : api_error{"error", "", "error event without details"};
  } else if (type == "message_start") {
    if (const json* m = member(j, "message")) {
      answer_.model = str(*m, "model");
      if (const json* u = member(*m, "usage")) {
        anthropic_usage_into(*u, answer_.tokens);
        usage_seen_ = true;
      }
    }
  } else if (type == "content_block_start") {
    if (const json* b = member(j, "content_block")) {
      answer_.text += str(*b, "text");
      answer_.reasoning += str(*b, "thinking");
    }
  } else if (type == "content_block_delta") {
    if (const json* d = member(j, "delta")) {
      const std::string dt = str(*d, "type");
      if (dt == "text_delta")
        answer_.text += str(*d, "text");
      else if (dt == "thinking_delta")
        answer_.reasoning += str(*d, "thinking");
    }
  } else if (type == "message_delta") {
    if (const json* d = member(j, "delta"); d != nullptr) {
      if (const std::string sr = str(*d, "stop_reason"); !sr.empty()) answer_.stop_reason = sr;
    }
    // message_delta's usage is cumulative; it may restate input counts.
    if (const json* u = member(j, "usage")) {
      anthropic_usage_into(*u, answer_.tokens);
      usage_seen_ = true;
    }
  } else if (type == "message_stop") {
    done_ = true;
  }
  // ping, content_block_stop and unknown future events need nothing.
}

usage& usage::operator+=(const usage& o) noexcept {
  prompt += o.prompt;
  completion += o.completion;
  cached += o.cached;
  cache_write += o.cache_write;
  reasoning += o.reasoning;
  reported = reported || o.reported;
  return *this;
}

const char* call_status_name(call_status s) noexcept {
  switch (s) {
    case call_status::ok:
      return "ok";
    case call_status::transient:
      return "transient";
    case call_status::permanent:
      return "permanent";
    case call_status::invalid_request:
      return "invalid_request";
    case call_status::timeout:
      return "timeout";
    case call_status::budget_exceeded:
      return "budget_exceeded";
    case call_status::disabled:
      return "disabled";
    case call_status::no_llm:
      return "no_llm";
    case call_status::bad_response:
      return "bad_response";
  }
  return "unknown";
}

}  // namespace kopt::llm
