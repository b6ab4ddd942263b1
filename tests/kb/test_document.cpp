// The technique-document parser: a valid document and every kind of error,
// each with its file:line message; the directory loader's whole-set checks
// (duplicate ids, broken cross-references).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "kb/document.hpp"
#include "kb/library.hpp"
#include "kb_test_util.hpp"

namespace kb = kopt::kb;
using kb::test::doc_spec;

namespace {

kb::parse_result parse(const doc_spec& s, std::string_view expected_id = "warp-reduce-demo") {
  return kb::parse_document(s.render(), "demo.md", expected_id);
}

// The one error diagnostic (fails the test when there is not exactly one).
kb::diagnostic only_error(const kb::parse_result& r) {
  std::vector<kb::diagnostic> errors;
  for (const auto& d : r.diagnostics)
    if (d.level == kb::diagnostic::severity::error) errors.push_back(d);
  EXPECT_EQ(errors.size(), 1u);
  return errors.empty() ? kb::diagnostic{} : errors.front();
}

kb::diagnostic expect_error(const doc_spec& s, int line, const std::string& fragment) {
  const kb::parse_result r = parse(s);
  EXPECT_FALSE(r.ok());
  kb::diagnostic found;
  bool ok = false;
  for (const auto& d : r.diagnostics) {
    if (d.level == kb::diagnostic::severity::error && d.message.find(fragment) != std::string::npos) {
      found = d;
      ok = true;
    }
  }
  EXPECT_TRUE(ok) << "no error containing '" << fragment << "'; got:\n" << [&] {
    std::string all;
    for (const auto& d : r.diagnostics) all += d.to_string() + "\n";
    return all;
  }();
  if (ok) {
    EXPECT_EQ(found.line, line) << found.to_string();
    EXPECT_EQ(found.file, "demo.md");
    EXPECT_EQ(found.to_string().rfind("demo.md:" + std::to_string(line) + ": error: ", 0), 0u)
        << found.to_string();
  }
  return found;
}

}  // namespace

TEST(KbDocument, ParsesAValidDocument) {
  const kb::parse_result r = parse(doc_spec{});
  for (const auto& d : r.diagnostics)
    EXPECT_NE(d.level, kb::diagnostic::severity::error) << d.to_string();
  ASSERT_TRUE(r.ok());
  const kb::document& d = *r.doc;
  EXPECT_EQ(d.id, "warp-reduce-demo");
  EXPECT_EQ(d.title, "Warp shuffle reduction demo");
  EXPECT_EQ(d.bottlenecks, (std::vector<std::string>{"synchronization-overhead", "latency-bound"}));
  EXPECT_EQ(d.operators, (std::vector<std::string>{"reduction", "normalization"}));
  EXPECT_EQ(d.arch, (std::vector<std::string>{"sm_80", "sm_90"}));
  EXPECT_EQ(d.tags, (std::vector<std::string>{"__shfl_xor_sync", "butterfly", "warp reduce"}));
  EXPECT_EQ(d.line_of("bottlenecks"), 4);
  ASSERT_EQ(d.sections.size(), 6u);
  EXPECT_EQ(d.sections[3].name, "How");
  EXPECT_EQ(d.find_section("How")->text.rfind("1. Reduce in registers", 0), 0u);
  ASSERT_TRUE(d.ex.has_value());
  EXPECT_EQ(d.ex->kernels, (std::vector<std::string>{"row_sum"}));
  EXPECT_EQ(d.ex->defaults.at("BLOCK"), 32);
  EXPECT_NE(d.ex->source.find("__shfl_xor_sync"), std::string::npos);
  EXPECT_EQ(d.ex->plan["launches"][0]["grid"][0], "rows");
  ASSERT_EQ(d.references.size(), 1u);
  EXPECT_EQ(d.references[0].target, "other-doc");
  EXPECT_EQ(d.content_hash.size(), 64u);
}

TEST(KbDocument, UnknownKey) {
  doc_spec s;
  s.front.insert(s.front.begin() + 2, "owner: me");  // line 4
  expect_error(s, 4, "unknown front-matter key 'owner'");
}

TEST(KbDocument, UnknownBottleneckClass) {
  doc_spec s;
  s.front[2] = "bottlenecks: [latency-bound, slowness]";
  const auto d = expect_error(s, 4, "unknown bottleneck class 'slowness'");
  EXPECT_NE(d.message.find("memory-bound-near-peak"), std::string::npos) << "lists the known classes";
}

TEST(KbDocument, UnknownOperatorClass) {
  doc_spec s;
  s.front[3] = "operators: [reduction, matmul]";
  expect_error(s, 5, "unknown operator class 'matmul'");
}

TEST(KbDocument, UnknownArchitecture) {
  doc_spec s;
  s.front[4] = "arch: [sm_75]";
  expect_error(s, 6, "unknown architecture 'sm_75'");
}

TEST(KbDocument, MissingKey) {
  doc_spec s;
  s.front.pop_back();  // tags; closing --- is now line 7
  expect_error(s, 7, "missing front-matter key 'tags'");
}

TEST(KbDocument, DuplicateKey) {
  doc_spec s;
  s.front.push_back("tags: [again]");
  expect_error(s, 8, "duplicate front-matter key 'tags' (first on line 7)");
}

TEST(KbDocument, KeyOutOfOrder) {
  doc_spec s;
  std::swap(s.front[0], s.front[1]);  // title before id
  expect_error(s, 3, "front-matter key 'id' is out of order");
}

TEST(KbDocument, ListValueRequired) {
  doc_spec s;
  s.front[5] = "tags: float4, uint4";
  expect_error(s, 7, "'tags' must be a flow list on one line");
}

TEST(KbDocument, DuplicateListItem) {
  doc_spec s;
  s.front[3] = "operators: [gemm, gemm]";
  expect_error(s, 5, "'operators' lists 'gemm' twice");
}

TEST(KbDocument, LineWithoutColon) {
  doc_spec s;
  s.front.push_back("just words");
  expect_error(s, 8, "front matter line is not 'key: value'");
}

TEST(KbDocument, IdMustBeKebabCaseAndMatchTheFileName) {
  doc_spec s;
  s.front[0] = "id: Warp_Reduce";
  expect_error(s, 2, "is not kebab-case");
  const kb::parse_result r = kb::parse_document(doc_spec{}.render(), "demo.md", "other-name");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(only_error(r).message, "id 'warp-reduce-demo' does not match the file name 'other-name.md'");
}

TEST(KbDocument, FrontMatterMustOpenAndClose) {
  const kb::parse_result a = kb::parse_document("# Title\n\n## How\n", "demo.md");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(only_error(a).to_string(),
            "demo.md:1: error: a document must open with front matter: '---' on the first line");
  const kb::parse_result b = kb::parse_document("---\nid: x-y\ntitle: t\n", "demo.md");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(only_error(b).message, "front matter is not closed: no second '---' line");
}

TEST(KbDocument, MissingSection) {
  doc_spec s;
  s.section_order.pop_back();  // no Pitfalls
  const kb::parse_result r = parse(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(only_error(r).message.find("missing section '## Pitfalls'"), std::string::npos);
}

TEST(KbDocument, SectionsOutOfOrderAndDuplicate) {
  doc_spec s;
  std::swap(s.section_order[0], s.section_order[1]);  // hurts (line 10) before helps (line 13)
  expect_error(s, 13, "section '## When it helps' is out of order");
  doc_spec t;
  t.section_order.push_back("How");
  const kb::parse_result r = parse(t);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(only_error(r).message.find("duplicate section '## How'"), std::string::npos);
}

TEST(KbDocument, UnknownSectionIsOnlyAWarning) {
  doc_spec s;
  s.section_order.push_back("References");
  const kb::parse_result r = parse(s);
  ASSERT_TRUE(r.ok());
  bool warned = false;
  for (const auto& d : r.diagnostics)
    if (d.message.find("unknown section '## References'") != std::string::npos) warned = true;
  EXPECT_TRUE(warned);
}

TEST(KbDocument, ExampleNeedsBothBlocks) {
  doc_spec s;
  s.plan.clear();
  const kb::parse_result r = kb::parse_document(
      [&] {
        std::string t = s.render();
        const auto p = t.find("```json");
        return t.erase(p, t.find("```", p + 3) + 3 - p);
      }(),
      "demo.md", "warp-reduce-demo");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(only_error(r).message.find("no ```json launch plan"), std::string::npos);
}

TEST(KbDocument, InvalidPlanJsonPointsAtItsLine) {
  doc_spec s;
  s.plan = "{\"launches\": [\n  {\"kernel\": \"row_sum\",, }\n]}\n";
  // Example heading is line 23, text 24, blank, cuda fence 26, 6 source lines,
  // closing 33, blank, json fence 35; the bad line is 37.
  expect_error(s, 37, "the launch plan is not valid JSON");
}

TEST(KbDocument, PlanKernelMustBeDeclaredExternC) {
  doc_spec s;
  s.plan.replace(s.plan.find("\"row_sum\""), 9, "\"row_mean\"");
  expect_error(s, 35, "kernel 'row_mean' is not declared extern \"C\" __global__");
}

TEST(KbDocument, PlanParameterDefaultMustBeAValue) {
  doc_spec s;
  s.plan.replace(s.plan.find("\"default\": 32"), 13, "\"default\": 64");
  expect_error(s, 35, "parameters.BLOCK.default is not one of its values");
}

TEST(KbDocument, PlanArgumentForms) {
  doc_spec s;
  const std::string arg = "{\"int\": \"cols\", \"type\": \"int32\"}";
  s.plan.replace(s.plan.find(arg), arg.size(),
                 "{\"int\": \"cols\", \"type\": \"float32\"}");
  expect_error(s, 35, "launches[0].args[2]: \"type\" must be one of int32, int64");
}

TEST(KbDocument, UnclosedFence) {
  doc_spec s;
  s.pitfalls += "\n```cuda\nint x;";
  const kb::parse_result r = parse(s);
  ASSERT_FALSE(r.ok());
  bool found = false;
  for (const auto& d : r.diagnostics)
    if (d.message == "code fence opened here is never closed") found = true;
  EXPECT_TRUE(found);
}

TEST(KbDocument, ExternCKernelNames) {
  const std::string src =
      "__device__ int helper(int x) { return x; }\n"
      "__global__ void not_extern(int* p) {}\n"
      "extern \"C\" __global__ void __launch_bounds__(256, 2) first(float* a) {}\n"
      "extern \"C\" __global__ __launch_bounds__(128) void second(const float* __restrict__ a) {}\n"
      "extern \"C\" __global__ void __cluster_dims__(2, 1, 1) third() {}\n";
  EXPECT_EQ(kb::extern_c_kernels(src), (std::vector<std::string>{"first", "second", "third"}));
}

TEST(KbDocument, ArchitectureApplicability) {
  const auto sm80 = *kb::arch_version::parse("sm_80");
  const auto sm90 = *kb::arch_version::parse("sm_90");
  const auto sm90a = *kb::arch_version::parse("sm_90a");
  const auto sm100a = *kb::arch_version::parse("sm_100a");
  EXPECT_FALSE(kb::arch_version::parse("ampere").has_value());
  EXPECT_EQ(sm100a.number, 100);
  EXPECT_TRUE(kb::arch_applies({"sm_80", "sm_90"}, sm80));
  EXPECT_TRUE(kb::arch_applies({"sm_80"}, sm100a));
  EXPECT_FALSE(kb::arch_applies({"sm_90"}, sm80));
  EXPECT_TRUE(kb::arch_applies({"sm_90a"}, sm90a));
  EXPECT_FALSE(kb::arch_applies({"sm_90a"}, sm90));
  EXPECT_FALSE(kb::arch_applies({"sm_90a"}, sm100a));
}

// --- whole-set checks ---------------------------------------------------

namespace {

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kopt-kb-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories((path / name).parent_path());
    std::ofstream(path / name) << text;
  }
};

doc_spec named(const std::string& id) {
  doc_spec s;
  s.front[0] = "id: " + id;
  s.pitfalls = "- Nothing here.";
  return s;
}

}  // namespace

TEST(KbLibrary, LoadsDirectoriesAndChecksCrossReferences) {
  temp_dir t;
  doc_spec a = named("alpha-doc");
  a.pitfalls = "- Wrong masks (see `beta-doc`); also see\n  `gamma-doc` and [delta](delta-doc.md).";
  t.write("one/alpha-doc.md", a.render());
  t.write("one/README.md", "not a document");
  t.write("two/beta-doc.md", named("beta-doc").render());
  const kb::load_result r = kb::load_directories({t.path / "one", t.path / "two"});
  EXPECT_EQ(r.files, 2u);
  ASSERT_EQ(r.documents.size(), 1u);  // alpha is dropped for its broken references
  EXPECT_EQ(r.documents[0].id, "beta-doc");
  std::vector<std::string> errors;
  for (const auto& d : r.diagnostics)
    if (d.level == kb::diagnostic::severity::error) errors.push_back(d.to_string());
  const std::string file = (t.path / "one/alpha-doc.md").string();
  const int pit = 42;  // the Pitfalls text starts on line 42
  EXPECT_EQ(errors, (std::vector<std::string>{
                        file + ":" + std::to_string(pit + 1) +
                            ": error: broken cross-reference: no document with id 'gamma-doc'",
                        file + ":" + std::to_string(pit + 1) +
                            ": error: broken cross-reference: no document with id 'delta-doc'"}));
}

TEST(KbLibrary, DuplicateIdsAcrossDirectories) {
  temp_dir t;
  t.write("one/alpha-doc.md", named("alpha-doc").render());
  t.write("two/alpha-doc.md", named("alpha-doc").render());
  const kb::load_result r = kb::load_directories({t.path / "one", t.path / "two"});
  ASSERT_EQ(r.documents.size(), 1u);
  EXPECT_FALSE(r.ok());
  bool found = false;
  for (const auto& d : r.diagnostics)
    if (d.to_string() == (t.path / "two/alpha-doc.md").string() +
                             ":2: error: duplicate id 'alpha-doc' (also in " +
                             (t.path / "one/alpha-doc.md").string() + ":2)")
      found = true;
  EXPECT_TRUE(found);
}

TEST(KbLibrary, MissingDirectoryIsADiagnostic) {
  const kb::load_result r = kb::load_directories({"/nonexistent/kopt-kb"});
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].to_string(),
            "/nonexistent/kopt-kb: error: knowledge-base directory does not exist or is not a directory");
}
