// Full-text index of the technique documents and the retrieval that feeds
// prompts. The index is an in-memory SQLite database with two FTS5 tables:
// `prose` (porter + unicode61 tokenizer over title, tags and body, so "pipelining"
// finds "pipeline") and `idents` (trigram tokenizer over the id, tags,
// inline code spans and code blocks, so `cp.async`, `__shfl_xor_sync` or
// `ldmatrix` match as substrings, punctuation included). The knowledge base
// is a few hundred KB, so it is rebuilt whenever kopt starts (a few ms).
//
// retrieve() answers a structured query built from a diagnosis: documents
// are filtered by architecture and operator class, ranked by how well their
// bottleneck classes match the diagnosis (the first-named bottleneck weighs
// most), then by exact operator match, then by BM25 of the free text; each
// hit becomes a snippet (title plus the sections most useful in a prompt)
// and all snippets together stay within a token budget (4 chars per token).
// Every snippet carries its document id, so the prompt can label it as an
// optional item that optimization dropout may remove.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kb/document.hpp"

namespace kopt::store {
class database;
}

namespace kopt::kb {

// Token estimate used for every budget: ceil(bytes / 4).
std::size_t estimate_tokens(std::string_view text) noexcept;

struct query {
  std::vector<std::string> bottlenecks;  // diagnosis classes, most important first
  std::string operator_class;            // empty: any
  std::string arch;                      // e.g. sm_90a; empty: any
  std::string kind;                      // "technique" or "reference"; empty: both
  std::string text;                      // free text (words, identifiers such as cp.async)
  std::size_t budget_tokens = 1500;      // for all snippets together
  std::size_t max_documents = 5;
  // A tight budget goes to fewer documents (budget / this, at least one)
  // rather than to a title and two lines of each.
  std::size_t min_tokens_per_document = 150;
  // Section order inside a technique's snippet; empty:
  // default_snippet_sections(). A reference's snippet always uses
  // default_reference_snippet_sections() (it has none of these sections).
  std::vector<std::string> sections;
};

// How, Pitfalls, When it helps, When it hurts, Example, counters: the recipe
// first, then what goes wrong, then the code, which is long.
const std::vector<std::string>& default_snippet_sections();

// What it computes, Techniques, When to use it, Measured, counters.
const std::vector<std::string>& default_reference_snippet_sections();

struct snippet {
  std::string id;
  std::string kind;                    // "technique" or "reference"
  std::string title;
  std::string text;                    // ready to paste into a prompt
  std::size_t tokens = 0;              // estimate_tokens(text)
  std::vector<std::string> sections;   // included, in order
  bool truncated = false;              // a section was cut to fit
  std::vector<std::string> matched_bottlenecks;
  bool operator_exact = false;         // lists the operator itself (not only "any")
  double bottleneck_score = 0.0;
  double text_score = 0.0;             // BM25, higher is better; 0 without text
  nlohmann::json to_json() const;
};

struct retrieval {
  std::vector<snippet> snippets;       // best first
  std::size_t budget_tokens = 0;
  std::size_t tokens = 0;              // sum over snippets
  std::size_t candidates = 0;          // documents that matched before the budget
  nlohmann::json to_json() const;
};

// One full-text hit, before any structured ranking.
struct text_hit {
  std::string id;
  double prose_score = 0.0;            // -bm25 on the prose table
  double ident_score = 0.0;            // -bm25 on the trigram table
};

class index {
 public:
  // Builds the in-memory FTS5 database. Throws kopt::store_error when SQLite
  // fails (no FTS5, no trigram tokenizer: SQLite older than 3.34).
  explicit index(std::vector<document> documents);
  ~index();
  index(index&&) noexcept;
  index& operator=(index&&) noexcept;
  index(const index&) = delete;
  index& operator=(const index&) = delete;

  // Throws kopt::error for an unknown bottleneck or operator class, a
  // malformed architecture or an unknown kind (bad input from a caller, not
  // a data outcome).
  retrieval retrieve(const query& q) const;

  // Full-text search alone, best first; empty for text with no usable word.
  std::vector<text_hit> search_text(const std::string& text) const;

  const document* find(std::string_view id) const noexcept;
  const std::vector<document>& documents() const noexcept { return docs_; }

 private:
  std::vector<document> docs_;
  std::unique_ptr<store::database> db_;
};

// Renders one document as a snippet within `max_tokens` (sections in the
// given order, a section cut at a line boundary when it does not fit, the
// Example only whole). nullopt when not even the title and one section fit.
std::optional<snippet> make_snippet(const document& d, const std::vector<std::string>& sections,
                                    std::size_t max_tokens);

}  // namespace kopt::kb
