#include "llm/wire.hpp"

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

json messages_json(const request& r) {
  json msgs = json::array();
  for (const message& m : r.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  return msgs;
}

}  // namespace

json openai_request_body(const request& r, const std::string& model, bool stream) {
  json msgs = json::array();
  if (!r.system.empty()) msgs.push_back({{"role", "system"}, {"content", r.system}});
  for (const message& m : r.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", model}, {"messages", msgs}, {"max_tokens", r.max_tokens}};
  if (r.temperature) body["temperature"] = *r.temperature;
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

json anthropic_request_body(const request& r, const std::string& model, bool stream) {
  json body = {{"model", model}, {"messages", messages_json(r)}, {"max_tokens", r.max_tokens}};
  if (!r.system.empty()) body["system"] = r.system;
  if (r.temperature) body["temperature"] = *r.temperature;
  if (stream) body["stream"] = true;
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
  r.answer.model = str(j, "model");
  if (const json* u = member(j, "usage"); u != nullptr) r.answer.tokens = openai_usage(*u);
  r.ok = true;
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
      if (const json* d = member(c, "delta"); d != nullptr && d->is_object()) {
        if (const json* t = member(*d, "content")) answer_.text += openai_content(*t);
        answer_.reasoning += openai_reasoning(*d);
      }
      if (const std::string fr = str(c, "finish_reason"); !fr.empty()) answer_.stop_reason = fr;
    }
  }
  if (const json* u = member(j, "usage"); u != nullptr && u->is_object()) {
    answer_.tokens = openai_usage(*u);
    usage_seen_ = true;
  }
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
