// Reference documents (kind: reference): the parser's rules for them, the
// loader's check of their `config`, retrieval by kind with the reference
// snippet sections, and kopt's own references in knowledge_base/references:
// every document valid, every config a valid operator config whose optimized
// kernel (the baseline) carries the measured-on-H200 header line, and, in
// worker builds, every reference and baseline compiling for sm_90a with NVRTC
// and passing kopt's integrity check (no GPU needed).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "config/operator.hpp"
#include "kb/document.hpp"
#include "kb/index.hpp"
#include "kb/library.hpp"

#ifdef KOPT_KB_HAVE_COMPILE
#include "compile/compiler.hpp"
#endif

namespace kb = kopt::kb;
namespace fs = std::filesystem;

namespace {

struct ref_spec {
  std::vector<std::string> front = {
      "id: row-sum-ref",
      "title: Row sum reference kernel",
      "bottlenecks: [memory-bound-far-from-peak]",
      "operators: [reduction]",
      "arch: [sm_80]",
      "tags: [row sum, __shfl_xor_sync]",
      "kind: reference",
      "config: row-sum-ref/operator.json",
  };
  std::vector<std::string> sections = {"What it computes", "Techniques", "When to use it",
                                       "How to see it in the counters", "Measured"};
  std::string render() const {
    std::string s = "---\n";
    for (const auto& l : front) s += l + "\n";
    s += "---\n\n";
    for (const auto& name : sections) s += "## " + name + "\nText of " + name + ".\n\n";
    return s;
  }
};

std::vector<std::string> errors_of(const std::vector<kb::diagnostic>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds)
    if (d.level == kb::diagnostic::severity::error) out.push_back(d.to_string());
  return out;
}

struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "kopt-kbref-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const {
    fs::create_directories((path / name).parent_path());
    std::ofstream(path / name) << text;
  }
};

fs::path source_dir() { return fs::path(KOPT_SOURCE_DIR); }

}  // namespace

TEST(KbReferenceDocument, ParsesAValidReference) {
  const kb::parse_result r = kb::parse_document(ref_spec{}.render(), "r.md", "row-sum-ref");
  ASSERT_TRUE(r.ok()) << [&] {
    std::string s;
    for (const auto& d : r.diagnostics) s += d.to_string() + "\n";
    return s;
  }();
  EXPECT_TRUE(r.doc->is_reference());
  EXPECT_EQ(kb::kind_name(r.doc->kind), "reference");
  EXPECT_EQ(r.doc->config, "row-sum-ref/operator.json");
  EXPECT_FALSE(r.doc->ex.has_value());
  ASSERT_EQ(r.doc->sections.size(), 5u);
  EXPECT_EQ(r.doc->sections[4].name, "Measured");
  EXPECT_TRUE(r.diagnostics.empty()) << "a short reference gets no length warning";
}

TEST(KbReferenceDocument, KindDefaultsToTechniqueAndIsChecked) {
  ref_spec s;
  s.front[6] = "kind: recipe";
  const auto r = kb::parse_document(s.render(), "r.md", "row-sum-ref");
  EXPECT_FALSE(r.ok());
  // The document is then read as a technique, so its sections are reported too.
  const auto errs = errors_of(r.diagnostics);
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.front(), "r.md:8: error: unknown kind 'recipe' (known: technique, reference)");

  ref_spec plain;  // without a kind line: a technique, which needs the technique sections
  plain.front.erase(plain.front.begin() + 6, plain.front.end());
  plain.sections = {"When it helps", "When it hurts", "How to see it in the counters", "How",
                    "Example", "Pitfalls"};
  const auto t = kb::parse_document(plain.render(), "t.md", "row-sum-ref");
  EXPECT_EQ(t.diagnostics.empty() ? std::string() : t.diagnostics[0].to_string(),
            "t.md:22: error: the Example has no ```cuda block");
}

TEST(KbReferenceDocument, ConfigIsRequiredForAReferenceAndOnlyThere) {
  ref_spec s;
  s.front.pop_back();  // no config
  auto r = kb::parse_document(s.render(), "r.md", "row-sum-ref");
  EXPECT_EQ(errors_of(r.diagnostics),
            std::vector<std::string>{"r.md:9: error: missing front-matter key 'config': a reference "
                                     "names the operator config that holds its kernel"});
  ref_spec t;
  t.front.erase(t.front.begin() + 6);  // config without kind: a technique with a config
  t.sections = {"When it helps", "When it hurts", "How to see it in the counters", "How",
                "Example", "Pitfalls"};
  r = kb::parse_document(t.render(), "r.md", "row-sum-ref");
  const auto errs = errors_of(r.diagnostics);
  EXPECT_NE(std::find(errs.begin(), errs.end(),
                      "r.md:8: error: 'config' is only allowed with 'kind: reference'"),
            errs.end());
}

TEST(KbReferenceDocument, ReferenceSectionsAreRequiredInOrder) {
  ref_spec s;
  s.sections = {"What it computes", "When to use it", "Techniques", "How to see it in the counters"};
  const auto r = kb::parse_document(s.render(), "r.md", "row-sum-ref");
  const auto errs = errors_of(r.diagnostics);
  EXPECT_NE(std::find(errs.begin(), errs.end(),
                      "r.md:18: error: section '## Techniques' is out of order (order: What it "
                      "computes, Techniques, When to use it, How to see it in the counters, Measured)"),
            errs.end());
  EXPECT_NE(std::find(errs.begin(), errs.end(), "r.md:23: error: missing section '## Measured'"),
            errs.end());
}

TEST(KbReferenceLibrary, ConfigMustExistBesideTheDocument) {
  temp_dir t;
  t.write("refs/row-sum-ref.md", ref_spec{}.render());
  kb::load_result r = kb::load_directories({t.path / "refs"});
  ASSERT_TRUE(r.documents.empty());
  ASSERT_EQ(errors_of(r.diagnostics).size(), 1u);
  EXPECT_NE(errors_of(r.diagnostics)[0].find(":9: error: config 'row-sum-ref/operator.json' does not exist"),
            std::string::npos)
      << errors_of(r.diagnostics)[0];

  t.write("refs/row-sum-ref/operator.json", "{}");
  r = kb::load_directories({t.path / "refs"});
  ASSERT_EQ(r.documents.size(), 1u);
  EXPECT_EQ(fs::path(r.documents[0].config_path),
            (t.path / "refs/row-sum-ref/operator.json").lexically_normal());
}

TEST(KbReferenceIndex, RetrievalFiltersByKindAndUsesReferenceSections) {
  temp_dir t;
  t.write("refs/row-sum-ref.md", ref_spec{}.render());
  t.write("refs/row-sum-ref/operator.json", "{}");
  kb::load_result r = kb::load_directories({t.path / "refs", source_dir() / "knowledge_base/techniques"});
  ASSERT_TRUE(r.ok());
  const kb::index idx(r.documents);
  kb::query q;
  q.bottlenecks = {"memory-bound-far-from-peak"};
  q.operator_class = "reduction";
  q.kind = "reference";
  q.budget_tokens = 4000;
  const kb::retrieval got = idx.retrieve(q);
  ASSERT_EQ(got.snippets.size(), 1u);
  const kb::snippet& s = got.snippets[0];
  EXPECT_EQ(s.id, "row-sum-ref");
  EXPECT_EQ(s.kind, "reference");
  EXPECT_EQ(s.text.rfind("### Reference kernel: Row sum reference kernel [kb:row-sum-ref]\n", 0), 0u) << s.text;
  EXPECT_EQ(s.sections, kb::default_reference_snippet_sections());

  q.kind = "technique";
  for (const auto& sn : idx.retrieve(q).snippets) EXPECT_EQ(sn.kind, "technique") << sn.id;
  q.kind = "";
  bool both = false;
  q.max_documents = 50;
  q.budget_tokens = 100000;
  for (const auto& sn : idx.retrieve(q).snippets) both = both || sn.id == "row-sum-ref";
  EXPECT_TRUE(both) << "without a kind, references rank among techniques";
  q.kind = "recipe";
  EXPECT_THROW(idx.retrieve(q), std::exception);
}

// --- kopt's own references ----------------------------------------------

namespace {

const kb::load_result& builtin() {
  static const kb::load_result r = kb::load_directories(
      {source_dir() / "knowledge_base/techniques", source_dir() / "knowledge_base/references"});
  return r;
}

std::vector<const kb::document*> references() {
  std::vector<const kb::document*> out;
  for (const auto& d : builtin().documents)
    if (d.is_reference()) out.push_back(&d);
  return out;
}

}  // namespace

TEST(KbReferences, BuiltinReferencesLintClean) {
  for (const auto& e : errors_of(builtin().diagnostics)) ADD_FAILURE() << e;
  EXPECT_EQ(builtin().documents.size(), builtin().files);
  EXPECT_GE(references().size(), 10u);
  EXPECT_FALSE(kb::builtin_reference_directory().empty());
  const auto dirs = kb::directories({});
  EXPECT_NE(std::find(dirs.begin(), dirs.end(), kb::builtin_reference_directory()), dirs.end());
}

TEST(KbReferences, ConfigsAreValidAndCarryTheMeasuredLine) {
  for (const kb::document* d : references()) {
    SCOPED_TRACE(d->id);
    const auto lr = kopt::config::load_operator_file(d->config_path);
    for (const auto& diag : lr.diagnostics)
      if (diag.level == kopt::config::diagnostic::severity::error) ADD_FAILURE() << diag.to_string();
    ASSERT_TRUE(lr.ok());
    ASSERT_TRUE(lr.op->baseline.has_value()) << "the optimized kernel is the config's baseline";
    EXPECT_NE(lr.op->baseline->source.find("// Measured on H200"), std::string::npos)
        << "the kernel header names its measured fraction of speed of light (or PENDING)";
    EXPECT_GE(lr.op->workloads.size(), 3u) << "small to production-like shapes";
    const kb::section* m = d->find_section("Measured");
    ASSERT_NE(m, nullptr);
  }
}

#ifdef KOPT_KB_HAVE_COMPILE
TEST(KbReferences, KernelsCompileForSm90aAndPassTheIntegrityCheck) {
  for (const kb::document* d : references()) {
    const auto lr = kopt::config::load_operator_file(d->config_path);
    ASSERT_TRUE(lr.ok()) << d->id;
    std::vector<std::pair<std::string, const kopt::config::candidate*>> subjects = {
        {"reference", &lr.op->reference}};
    if (lr.op->baseline) subjects.emplace_back("baseline", &*lr.op->baseline);
    if (lr.op->seed) subjects.emplace_back("seed", &*lr.op->seed);
    for (const auto& [role, c] : subjects) {
      SCOPED_TRACE(d->id + " " + role);
      kopt::compile::request rq;
      rq.name = d->id + "_" + role + ".cu";
      rq.source = c->source;
      for (const auto& [k, v] : c->default_parameters()) rq.defines[k] = v;
      rq.options = c->compile_options;
      const kopt::compile::result res = kopt::compile::compile_in_process(rq);
      ASSERT_TRUE(res.ok()) << res.log;
      for (const auto& p : res.integrity_problems) ADD_FAILURE() << p;
      for (const auto& l : c->launches) EXPECT_EQ(res.kernels.count(l.kernel), 1u) << l.kernel;
      for (const auto& [k, info] : res.kernels)
        EXPECT_EQ(info.spill_store_bytes, 0) << k << " spills registers";
    }
  }
}
#endif
