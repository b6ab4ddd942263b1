// Documents of the knowledge base: the model of one parsed document and its
// strict parser. A document is a Markdown file with a small YAML-like front
// matter (id, title, bottlenecks, operators, arch, tags, and optionally kind
// and config; one key per line, flow lists only) and fixed sections. Two
// kinds: a technique (the default) has six sections (When it helps, When it
// hurts, How to see it in the counters, How, Example, Pitfalls) and its
// Example carries one ```cuda candidate and one ```json launch plan; a
// reference describes a complete, measured kernel whose code lives in an
// operator config beside it (`config:`, checked on the GPU by `kopt eval`),
// with the sections What it computes, Techniques, When to use it, How to see
// it in the counters, Measured.
// The parser never throws on bad content: every problem is a diagnostic with
// file:line, so `kopt kb lint` can list all of them at once, and a document
// is returned only when it has no errors. The vocabularies (bottleneck and
// operator classes, architectures) live here because the diagnosis, the
// prompts and the retrieval query all name them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kopt::kb {

struct diagnostic {
  enum class severity { error, warning };
  severity level = severity::error;
  std::string file;
  int line = 0;  // 1-based; 0 when the problem is not on one line
  std::string message;
  // "file:line: error: message"
  std::string to_string() const;
};

bool has_errors(const std::vector<diagnostic>& diagnostics) noexcept;

// Classes a diagnosis can name; a document lists those it addresses.
const std::vector<std::string_view>& bottleneck_classes() noexcept;
// Operator classes (config op_type maps onto one of these); "any" matches all.
const std::vector<std::string_view>& operator_classes() noexcept;
// Architectures a document may name as its lowest target.
const std::vector<std::string_view>& arch_names() noexcept;
// Section headings, in the order a technique must have them.
const std::vector<std::string_view>& section_names() noexcept;
// Section headings, in the order a reference must have them.
const std::vector<std::string_view>& reference_section_names() noexcept;

enum class document_kind { technique, reference };
std::string_view kind_name(document_kind k) noexcept;

bool is_bottleneck_class(std::string_view name) noexcept;
bool is_operator_class(std::string_view name) noexcept;

// An architecture such as sm_80, sm_90a, sm_100a. `specific` is the `a`
// suffix: features that exist only on that exact architecture.
struct arch_version {
  int number = 0;  // 80, 89, 90, 100 ...
  bool specific = false;
  static std::optional<arch_version> parse(std::string_view name) noexcept;
};

// Whether a document whose lowest architectures are `doc_arch` applies to a
// GPU of architecture `target`: a generic entry (sm_80) applies to it and
// everything newer; a specific one (sm_90a) only to exactly that target.
bool arch_applies(const std::vector<std::string>& doc_arch, const arch_version& target) noexcept;

struct section {
  std::string name;  // heading text without "## "
  std::string text;  // body, without leading and trailing blank lines
  int line = 0;      // line of the heading
};

// Another document named in the body: "see `other-id`" or "](other-id.md)".
struct cross_reference {
  std::string target;
  int line = 0;
};

struct example {
  std::string source;                  // the ```cuda block
  nlohmann::json plan;                 // the ```json block: launches, parameters, ...
  std::map<std::string, std::int64_t> defaults;  // parameter -> default value
  std::vector<std::string> kernels;    // kernel names of the launches, in order
  std::vector<std::string> compile_options;
  int source_line = 0;                 // line of the ```cuda fence
  int plan_line = 0;                   // line of the ```json fence
};

struct document {
  document_kind kind = document_kind::technique;
  std::string id;
  std::string title;
  std::vector<std::string> bottlenecks;
  std::vector<std::string> operators;
  std::vector<std::string> arch;
  std::vector<std::string> tags;
  // References only: the operator config holding the kernel, as written
  // (relative to the document's directory); config_path is it resolved by
  // the loader (empty when parsed without a directory).
  std::string config;
  std::string config_path;
  std::string file;                 // path as given to the parser
  std::map<std::string, int> key_lines;  // front-matter key -> line
  std::vector<section> sections;    // in file order
  std::vector<cross_reference> references;
  std::optional<example> ex;        // set for every technique without errors; never for a reference
  std::string body;                 // everything after the front matter
  std::string content_hash;         // SHA-256 of the file's bytes

  const section* find_section(std::string_view name) const noexcept;
  bool is_reference() const noexcept { return kind == document_kind::reference; }
  int line_of(std::string_view key) const noexcept;
};

struct parse_result {
  std::optional<document> doc;  // set only when there are no errors
  std::vector<diagnostic> diagnostics;
  bool ok() const noexcept { return doc.has_value(); }
};

// `file` labels diagnostics; when `expected_id` is non-empty the id must
// equal it (the loader passes the file name without .md).
parse_result parse_document(std::string_view text, const std::string& file,
                            std::string_view expected_id = {});

// Kernel names declared `extern "C" __global__` in a CUDA source.
std::vector<std::string> extern_c_kernels(std::string_view source);

}  // namespace kopt::kb
