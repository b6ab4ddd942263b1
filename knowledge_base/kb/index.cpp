#include "kb/index.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "common/error.hpp"
#include "store/sqlite.hpp"

namespace kopt::kb {

namespace {

using json = nlohmann::json;

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i != 0) out += sep;
    out += v[i];
  }
  return out;
}

// Inline code spans and fenced blocks of a Markdown body: what the trigram
// table indexes besides names and tags.
void split_code(const std::string& body, std::string& spans, std::string& blocks) {
  bool in_fence = false;
  std::size_t start = 0;
  while (start < body.size()) {
    std::size_t nl = body.find('\n', start);
    if (nl == std::string::npos) nl = body.size();
    const std::string_view line(body.data() + start, nl - start);
    start = nl + 1;
    const std::size_t first = line.find_first_not_of(' ');
    if (first != std::string_view::npos && line.substr(first, 3) == "```") {
      in_fence = !in_fence;
      continue;
    }
    if (in_fence) {
      blocks += line;
      blocks += '\n';
      continue;
    }
    std::size_t p = 0;
    while ((p = line.find('`', p)) != std::string_view::npos) {
      const std::size_t e = line.find('`', p + 1);
      if (e == std::string_view::npos) break;
      spans += line.substr(p + 1, e - p - 1);
      spans += '\n';
      p = e + 1;
    }
  }
}

std::string fts_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

// Prose query: every word (letters, digits, non-ASCII bytes) as its own
// quoted term, OR-ed, so no user text can be FTS5 syntax.
std::string prose_query(const std::string& text) {
  std::vector<std::string> words;
  std::set<std::string> seen;
  std::string w;
  auto flush = [&] {
    if (w.size() >= 2 && seen.insert(w).second) words.push_back(fts_string(w));
    w.clear();
  };
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || u >= 0x80) w += static_cast<char>(std::tolower(u));
    else flush();
  }
  flush();
  return join(words, " OR ");
}

// Trigram query: whitespace-separated terms stripped of Markdown/quote
// punctuation around them; the trigram tokenizer needs at least 3 characters.
std::string ident_query(const std::string& text) {
  std::vector<std::string> terms;
  std::set<std::string> seen;
  std::size_t p = 0;
  while (p < text.size()) {
    while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p])) != 0) ++p;
    std::size_t e = p;
    while (e < text.size() && std::isspace(static_cast<unsigned char>(text[e])) == 0) ++e;
    std::string t = text.substr(p, e - p);
    p = e;
    const std::string strip = "`'\",;:()[]{}";
    while (!t.empty() && strip.find(t.front()) != std::string::npos) t.erase(0, 1);
    while (!t.empty() && strip.find(t.back()) != std::string::npos) t.pop_back();
    if (t.size() >= 3 && seen.insert(t).second) terms.push_back(fts_string(t));
  }
  return join(terms, " OR ");
}

// Cuts `text` to at most `max_bytes` at a line boundary outside code fences,
// preferring the start of a list item or paragraph. Empty when nothing fits.
std::string cut_text(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t best_line = 0, best_item = 0;
  bool in_fence = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + start, nl - start);
    // Cutting before this line keeps text[0, start).
    if (start > max_bytes) break;
    if (!in_fence && start > 0) {
      best_line = start;
      const std::size_t f = line.find_first_not_of(' ');
      const bool item = f == std::string_view::npos || line.substr(f, 2) == "- " ||
                        (f < line.size() && std::isdigit(static_cast<unsigned char>(line[f])) != 0);
      if (item) best_item = start;
    }
    const std::size_t f = line.find_first_not_of(' ');
    if (f != std::string_view::npos && line.substr(f, 3) == "```") in_fence = !in_fence;
    start = nl + 1;
  }
  // A cut at an item boundary is worth losing up to a third of the room.
  const std::size_t cut = best_item * 3 >= best_line * 2 ? best_item : best_line;
  std::string out = text.substr(0, cut);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (!out.empty()) out += '\n';
  return out;
}

}  // namespace

std::size_t estimate_tokens(std::string_view text) noexcept { return (text.size() + 3) / 4; }

const std::vector<std::string>& default_snippet_sections() {
  static const std::vector<std::string> v = {"How",           "Pitfalls", "When it helps",
                                             "When it hurts", "Example",
                                             "How to see it in the counters"};
  return v;
}

const std::vector<std::string>& default_reference_snippet_sections() {
  static const std::vector<std::string> v = {"What it computes", "Techniques", "When to use it",
                                             "Measured", "How to see it in the counters"};
  return v;
}

json snippet::to_json() const {
  return json{{"id", id},
              {"kind", kind},
              {"title", title},
              {"tokens", tokens},
              {"sections", sections},
              {"truncated", truncated},
              {"matched_bottlenecks", matched_bottlenecks},
              {"operator_exact", operator_exact},
              {"bottleneck_score", bottleneck_score},
              {"text_score", text_score},
              {"text", text}};
}

json retrieval::to_json() const {
  json s = json::array();
  for (const auto& sn : snippets) s.push_back(sn.to_json());
  return json{{"budget_tokens", budget_tokens},
              {"tokens", tokens},
              {"candidates", candidates},
              {"snippets", std::move(s)}};
}

std::optional<snippet> make_snippet(const document& d, const std::vector<std::string>& sections,
                                    std::size_t max_tokens) {
  // The id in the heading is what a prompt (and dropout records) refer to.
  snippet s;
  s.id = d.id;
  s.kind = std::string(kind_name(d.kind));
  s.title = d.title;
  // A reference says it is one, so the model reads it as a worked kernel
  // rather than a recipe.
  s.text = "### " + std::string(d.is_reference() ? "Reference kernel: " : "") + d.title + " [kb:" +
           d.id + "]\n";
  const std::size_t max_bytes = max_tokens * 4;
  if (s.text.size() >= max_bytes) return std::nullopt;
  const std::string marker = "[...]\n";
  for (const auto& name : sections) {
    const section* sec = d.find_section(name);
    if (sec == nullptr || sec->text.empty()) continue;
    const std::string head = "#### " + name + "\n";
    const std::size_t room = max_bytes - s.text.size();
    if (head.size() + sec->text.size() <= room) {
      s.text += head + sec->text;
      s.sections.push_back(name);
      continue;
    }
    // A cut code example is useless; other sections are cut at a line
    // boundary when a useful part (at least 160 bytes) fits.
    if (name == "Example" || room < head.size() + marker.size() + 160) continue;
    std::string part = cut_text(sec->text, room - head.size() - marker.size());
    if (part.size() < 160) continue;
    s.text += head + part + marker;
    s.sections.push_back(name);
    s.truncated = true;
    break;
  }
  if (s.sections.empty()) return std::nullopt;
  s.tokens = estimate_tokens(s.text);
  return s;
}

index::index(std::vector<document> documents) : docs_(std::move(documents)) {
  db_ = std::make_unique<store::database>(":memory:", store::database::open_mode::read_write_create);
  db_->exec(
      "CREATE VIRTUAL TABLE prose USING fts5(id UNINDEXED, title, tags, body, "
      "tokenize = 'porter unicode61');"
      "CREATE VIRTUAL TABLE idents USING fts5(id UNINDEXED, names, spans, code, "
      "tokenize = 'trigram');");
  store::transaction tx(*db_);
  store::statement ins_prose =
      db_->prepare("INSERT INTO prose(id, title, tags, body) VALUES (?, ?, ?, ?)");
  store::statement ins_idents =
      db_->prepare("INSERT INTO idents(id, names, spans, code) VALUES (?, ?, ?, ?)");
  for (const auto& d : docs_) {
    ins_prose.bind_all(d.id, d.title, join(d.tags, ", "), d.body).run();
    ins_prose.reset();
    std::string spans, blocks;
    split_code(d.body, spans, blocks);
    const std::string names = d.id + "\n" + join(d.tags, "\n") + "\n" + join(d.bottlenecks, "\n") +
                              "\n" + join(d.operators, "\n");
    ins_idents.bind_all(d.id, names, spans, blocks).run();
    ins_idents.reset();
  }
  tx.commit();
}

index::~index() = default;
index::index(index&&) noexcept = default;
index& index::operator=(index&&) noexcept = default;

const document* index::find(std::string_view id) const noexcept {
  for (const auto& d : docs_)
    if (d.id == id) return &d;
  return nullptr;
}

std::vector<text_hit> index::search_text(const std::string& text) const {
  std::map<std::string, text_hit> hits;
  // Title matches weigh 5x the body and tags 3x; for identifiers, names and
  // tags 4x, inline code 2x, code blocks 1x.
  if (const std::string q = prose_query(text); !q.empty()) {
    store::statement st =
        db_->prepare("SELECT id, bm25(prose, 0.0, 5.0, 3.0, 1.0) FROM prose WHERE prose MATCH ?");
    st.bind(1, q);
    while (st.step()) {
      auto& h = hits[st.get_text(0)];
      h.id = st.get_text(0);
      h.prose_score = -st.get_double(1);
    }
  }
  if (const std::string q = ident_query(text); !q.empty()) {
    store::statement st = db_->prepare(
        "SELECT id, bm25(idents, 0.0, 4.0, 2.0, 1.0) FROM idents WHERE idents MATCH ?");
    st.bind(1, q);
    while (st.step()) {
      auto& h = hits[st.get_text(0)];
      h.id = st.get_text(0);
      h.ident_score = -st.get_double(1);
    }
  }
  std::vector<text_hit> out;
  for (auto& [id, h] : hits) out.push_back(h);
  std::stable_sort(out.begin(), out.end(), [](const text_hit& a, const text_hit& b) {
    return a.prose_score + a.ident_score > b.prose_score + b.ident_score;
  });
  return out;
}

retrieval index::retrieve(const query& q) const {
  for (const auto& b : q.bottlenecks)
    if (!is_bottleneck_class(b)) throw kopt::error("unknown bottleneck class '" + b + "'");
  if (!q.operator_class.empty() && !is_operator_class(q.operator_class))
    throw kopt::error("unknown operator class '" + q.operator_class + "' (classes: " + [] {
      std::string all;
      for (auto c : operator_classes()) all += (all.empty() ? "" : ", ") + std::string(c);
      return all;
    }() + ")");
  std::optional<arch_version> target;
  if (!q.arch.empty()) {
    target = arch_version::parse(q.arch);
    if (!target) throw kopt::error("malformed architecture '" + q.arch + "' (expected sm_90a, sm_80, ...)");
  }
  if (!q.kind.empty() && q.kind != "technique" && q.kind != "reference")
    throw kopt::error("unknown document kind '" + q.kind + "' (known: technique, reference)");

  std::map<std::string, double> text_scores;
  const bool has_text = !prose_query(q.text).empty() || !ident_query(q.text).empty();
  if (has_text)
    for (const auto& h : search_text(q.text)) text_scores[h.id] = h.prose_score + h.ident_score;

  struct ranked {
    const document* doc;
    double bottleneck_score;
    bool operator_exact;
    double text_score;
    std::vector<std::string> matched;
  };
  std::vector<ranked> cands;
  const auto n = static_cast<double>(q.bottlenecks.size());
  for (const auto& d : docs_) {
    if (target && !arch_applies(d.arch, *target)) continue;
    if (!q.kind.empty() && kind_name(d.kind) != q.kind) continue;
    const auto has_op = [&](std::string_view o) {
      return std::find(d.operators.begin(), d.operators.end(), o) != d.operators.end();
    };
    const bool op_exact = !q.operator_class.empty() && has_op(q.operator_class);
    if (!q.operator_class.empty() && !op_exact && !has_op("any")) continue;
    ranked r{&d, 0.0, op_exact, 0.0, {}};
    // The first-named bottleneck weighs n, the next n-1, ...: a document for
    // the primary diagnosis beats one for a secondary symptom.
    for (std::size_t i = 0; i < q.bottlenecks.size(); ++i) {
      if (std::find(d.bottlenecks.begin(), d.bottlenecks.end(), q.bottlenecks[i]) !=
          d.bottlenecks.end()) {
        r.bottleneck_score += n - static_cast<double>(i);
        r.matched.push_back(q.bottlenecks[i]);
      }
    }
    if (const auto it = text_scores.find(d.id); it != text_scores.end()) r.text_score = it->second;
    const bool wanted = (q.bottlenecks.empty() && !has_text) || r.bottleneck_score > 0.0 ||
                        r.text_score > 0.0;
    if (wanted) cands.push_back(std::move(r));
  }
  std::sort(cands.begin(), cands.end(), [](const ranked& a, const ranked& b) {
    if (a.bottleneck_score != b.bottleneck_score) return a.bottleneck_score > b.bottleneck_score;
    if (a.operator_exact != b.operator_exact) return a.operator_exact;
    if (a.text_score != b.text_score) return a.text_score > b.text_score;
    return a.doc->id < b.doc->id;
  });

  retrieval out;
  out.budget_tokens = q.budget_tokens;
  out.candidates = cands.size();
  const std::vector<std::string>& order = q.sections.empty() ? default_snippet_sections() : q.sections;
  std::size_t remaining = q.budget_tokens;
  const std::size_t per_doc = std::max<std::size_t>(1, q.min_tokens_per_document);
  const std::size_t slots = std::min(
      {q.max_documents, cands.size(), std::max<std::size_t>(1, q.budget_tokens / per_doc)});
  // Each document gets a fair share of what is left, so the best one cannot
  // crowd out the rest; what it does not use passes on to the next.
  std::size_t taken = 0;
  for (std::size_t i = 0; i < cands.size() && taken < slots; ++i) {
    const std::size_t share = remaining / (slots - taken);
    auto sn = make_snippet(*cands[i].doc,
                           cands[i].doc->is_reference() ? default_reference_snippet_sections() : order,
                           share);
    if (!sn) continue;
    sn->matched_bottlenecks = cands[i].matched;
    sn->operator_exact = cands[i].operator_exact;
    sn->bottleneck_score = cands[i].bottleneck_score;
    sn->text_score = cands[i].text_score;
    remaining -= sn->tokens;
    out.tokens += sn->tokens;
    out.snippets.push_back(std::move(*sn));
    ++taken;
  }
  return out;
}

}  // namespace kopt::kb
