// The template engine: each construct, each error with its line and column,
// and the optional-item (dropout) reporting.
#include <gtest/gtest.h>

#include "prompts/context.hpp"
#include "prompts/engine.hpp"

namespace kopt::prompts {
namespace {

using nlohmann::json;

rendered run(std::string_view text, const json& ctx, const std::set<std::string>& dropped = {}) {
  template_set set;
  set.add("t", text);
  return set.render("t", ctx, dropped);
}

// The error a template raises, parsing or rendering.
template_error error_of(std::string_view text, const json& ctx = json::object()) {
  try {
    run(text, ctx);
  } catch (const template_error& e) {
    return e;
  }
  ADD_FAILURE() << "no template_error for: " << text;
  return template_error("none", 0, 0, "none");
}

TEST(engine, variables_and_dotted_paths) {
  const json ctx = {{"name", "rmsnorm"},
                    {"op", {{"gpu", {{"sms", 132}}}, {"ratio", 0.5}, {"ok", true}}},
                    {"list", {"a", "b", "c"}}};
  EXPECT_EQ(run("{{ name }}/{{op.gpu.sms}}/{{ op.ratio }}/{{ op.ok }}/{{ list.2 }}", ctx).text,
            "rmsnorm/132/0.5/true/c");
  // No HTML escaping: the prompt carries code.
  EXPECT_EQ(run("{{ s }}", json{{"s", "a < b && \"c\" > 'd'"}}).text, "a < b && \"c\" > 'd'");
  // Text without tags and lone braces pass through.
  EXPECT_EQ(run("int a[2] = {1, 2}; { }", json::object()).text, "int a[2] = {1, 2}; { }");
}

TEST(engine, unknown_variable_names_template_line_and_column) {
  const template_error e = error_of("line one\n  {{ operator.nme }}", json{{"operator", {{"name", "x"}}}});
  EXPECT_EQ(e.template_name(), "t");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 3);
  EXPECT_NE(std::string(e.what()).find("template 't' at 2:3: unknown variable 'operator.nme'"),
            std::string::npos)
      << e.what();

  const template_error top = error_of("{% if x %}\n{% endif %}\n\n   {{ missing }}", json{{"x", 1}});
  EXPECT_EQ(top.line(), 4);
  EXPECT_EQ(top.column(), 4);
  EXPECT_EQ(top.message(), "unknown variable 'missing'");

  const template_error idx = error_of("{{ l.5 }}", json{{"l", {1, 2}}});
  EXPECT_NE(idx.message().find("out of range"), std::string::npos) << idx.message();
}

TEST(engine, printing_a_list_or_object_is_an_error) {
  const template_error e = error_of("x {{ o }}", json{{"o", {{"a", 1}}}});
  EXPECT_EQ(e.column(), 3);
  EXPECT_NE(e.message().find("'o' is an object"), std::string::npos) << e.message();
  EXPECT_NE(error_of("{{ n }}", json{{"n", nullptr}}).message().find("is null"), std::string::npos);
}

TEST(engine, conditionals) {
  const std::string t = "{% if x %}yes{% else %}no{% endif %}|{% if not x %}N{% endif %}";
  EXPECT_EQ(run(t, json{{"x", true}}).text, "yes|");
  EXPECT_EQ(run(t, json{{"x", false}}).text, "no|N");
  // Truthiness: empty string, 0, empty list/object and null are false.
  for (const json& v : {json(""), json(0), json::array(), json::object(), json(nullptr), json(0.0)})
    EXPECT_EQ(run(t, json{{"x", v}}).text, "no|N") << v.dump();
  for (const json& v : {json("a"), json(2), json::array({1}), json{{"k", 1}}, json(0.5)})
    EXPECT_EQ(run(t, json{{"x", v}}).text, "yes|") << v.dump();
  // Only the taken branch is evaluated: an unknown name in the other is not reached.
  EXPECT_EQ(run("{% if x %}{{ x }}{% else %}{{ nope }}{% endif %}", json{{"x", 1}}).text, "1");
  // The condition itself must exist.
  const template_error e = error_of("\n\n  {% if typo %}a{% endif %}", json{{"x", 1}});
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 3);
}

TEST(engine, loops) {
  const json ctx = {{"rows", json::array({{{"id", "a"}, {"v", {1, 2}}}, {{"id", "b"}, {"v", {3}}}})}};
  EXPECT_EQ(run("{% for r in rows %}{{ loop.index }}:{{ r.id }}[{% for x in r.v %}{{ x }}"
                "{% if not loop.last %},{% endif %}{% endfor %}]{% if loop.first %}*{% endif %} "
                "{% endfor %}",
                ctx)
                .text,
            "1:a[1,2]* 2:b[3] ");
  EXPECT_EQ(run("{% for r in rows %}{{ loop.index0 }}/{{ loop.length }} {% endfor %}", ctx).text,
            "0/2 1/2 ");
  EXPECT_EQ(run("[{% for r in empty %}x{% endfor %}]", json{{"empty", json::array()}}).text, "[]");
  // The loop variable is gone after the loop.
  EXPECT_EQ(error_of("{% for r in rows %}{% endfor %}{{ r }}", ctx).message(), "unknown variable 'r'");
  const template_error e = error_of("ok\n{% for r in s %}{% endfor %}", json{{"s", "text"}});
  EXPECT_EQ(e.line(), 2);
  EXPECT_NE(e.message().find("not a list"), std::string::npos) << e.message();
}

TEST(engine, structural_errors_with_positions) {
  // Unclosed blocks point at the opener.
  template_error e = error_of("a\nb {% if x %}\n{% for y in z %}{% endfor %}\n");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 3);
  EXPECT_NE(e.message().find("'{% if %}' is never closed"), std::string::npos) << e.message();

  e = error_of("{% optional a %}\n  text\n");
  EXPECT_EQ(e.line(), 1);
  EXPECT_NE(e.message().find("'{% optional %}' is never closed"), std::string::npos);

  // A closer that does not match names the opener and where it is.
  e = error_of("{% for x in l %}\n\n {% endif %}");
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 2);
  EXPECT_NE(e.message().find("opened at 1:1"), std::string::npos) << e.message();

  e = error_of("x\n{% endfor %}");
  EXPECT_EQ(e.line(), 2);
  EXPECT_NE(e.message().find("without an open"), std::string::npos);

  e = error_of("{% else %}");
  EXPECT_NE(e.message().find("outside"), std::string::npos);
  e = error_of("{% if a %}{% else %}{% else %}{% endif %}");
  EXPECT_EQ(e.column(), 21);

  // Unterminated delimiters.
  e = error_of("abc\n  def {{ name ");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 7);
  EXPECT_NE(e.message().find("never closed"), std::string::npos);
  EXPECT_EQ(error_of("{% if x ").line(), 1);
  EXPECT_EQ(error_of("{# comment").line(), 1);

  // Unknown tags and malformed tags.
  e = error_of("\n {% elif x %}");
  EXPECT_EQ(e.line(), 2);
  EXPECT_NE(e.message().find("unknown tag 'elif'"), std::string::npos);
  EXPECT_NE(error_of("{% for x of l %}{% endfor %}").message().find("expected"), std::string::npos);
  EXPECT_NE(error_of("{% if %}{% endif %}").message().find("needs a condition"), std::string::npos);
  EXPECT_NE(error_of("{{ a | upper }}").message().find("not a variable name"), std::string::npos);
  EXPECT_NE(error_of("{{ }}").message().find("empty"), std::string::npos);
  EXPECT_NE(error_of("{% optional %}{% endoptional %}").message().find("needs an ID"),
            std::string::npos);
  EXPECT_NE(error_of("{% optional a b %}{% endoptional %}").message().find("cannot be part"),
            std::string::npos);
}

TEST(engine, standalone_tag_lines_leave_no_blank_lines) {
  const std::string t =
      "start\n"
      "{% if x %}\n"
      "  inside\n"
      "  {% for i in l %}\n"
      "  - {{ i }}\n"
      "  {% endfor %}\n"
      "{% endif %}\n"
      "{# a comment line #}\n"
      "end {% if x %}inline{% endif %}\n";
  EXPECT_EQ(run(t, json{{"x", true}, {"l", {1, 2}}}).text,
            "start\n  inside\n  - 1\n  - 2\nend inline\n");
  EXPECT_EQ(run(t, json{{"x", false}, {"l", {1, 2}}}).text, "start\nend \n");
  EXPECT_EQ(run("a {# inline comment #}b", json::object()).text, "a b");
}

TEST(engine, optional_items_are_reported_and_dropped) {
  const std::string t =
      "head\n"
      "{% optional measurements %}\n"
      "M\n"
      "{% endoptional %}\n"
      "{% for s in snippets %}\n"
      "{% optional snippet:{s.id} %}\n"
      "S {{ s.id }}\n"
      "{% endoptional %}\n"
      "{% endfor %}\n"
      "tail\n";
  const json ctx = {{"snippets", json::array({{{"id", "a"}}, {{"id", "b"}}, {{"id", "c"}}})}};

  rendered r = run(t, ctx);
  EXPECT_EQ(r.text, "head\nM\nS a\nS b\nS c\ntail\n");
  EXPECT_EQ(r.present_items, (std::vector<std::string>{"measurements", "snippet:a", "snippet:b", "snippet:c"}));
  EXPECT_TRUE(r.dropped_items.empty());

  r = run(t, ctx, {"measurements", "snippet:b", "unused-id"});
  EXPECT_EQ(r.text, "head\nS a\nS c\ntail\n");
  EXPECT_EQ(r.present_items, (std::vector<std::string>{"snippet:a", "snippet:c"}));
  EXPECT_EQ(r.dropped_items, (std::vector<std::string>{"measurements", "snippet:b"}));

  const json j = r.to_json();
  EXPECT_EQ(j["dropped_items"], json({"measurements", "snippet:b"}));
  EXPECT_EQ(j["text"], r.text);
}

TEST(engine, optional_items_inside_dropped_items_or_untaken_branches_are_not_listed) {
  const std::string t =
      "{% optional outer %}[{% optional inner %}i{% endoptional %}]{% endoptional %}"
      "{% if no %}{% optional hidden %}h{% endoptional %}{% endif %}"
      "{% optional twice %}1{% endoptional %}{% optional twice %}2{% endoptional %}";
  rendered r = run(t, json{{"no", false}});
  EXPECT_EQ(r.text, "[i]12");
  EXPECT_EQ(r.present_items, (std::vector<std::string>{"outer", "inner", "twice"}));

  r = run(t, json{{"no", false}}, {"outer", "twice"});
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.present_items.empty());
  EXPECT_EQ(r.dropped_items, (std::vector<std::string>{"outer", "twice"}));
}

TEST(engine, optional_id_values_are_checked) {
  const template_error e =
      error_of("\n{% optional snippet:{s} %}x{% endoptional %}", json{{"s", "has space"}});
  EXPECT_EQ(e.line(), 2);
  EXPECT_NE(e.message().find("cannot be part of an optional ID"), std::string::npos);
  EXPECT_EQ(error_of("{% optional a:{missing} %}x{% endoptional %}").message(),
            "unknown variable 'missing'");
  EXPECT_EQ(run("{% optional n{i}/x %}{% endoptional %}", json{{"i", 7}}).present_items,
            std::vector<std::string>{"n7/x"});
}

TEST(engine, include_renders_other_templates_of_the_set) {
  template_set set;
  set.add("_part", "part {{ v }}\n{% optional p %}P{% endoptional %}\n");
  set.add("main", "before\n{% include _part %}\nafter\n");
  const rendered r = set.render("main", json{{"v", 1}});
  EXPECT_EQ(r.text, "before\npart 1\nP\nafter\n");
  EXPECT_EQ(r.present_items, std::vector<std::string>{"p"});

  // Errors inside an include name the included template.
  set.add("_bad", "\n {{ nope }}");
  set.add("uses_bad", "{% include _bad %}");
  try {
    set.render("uses_bad", json::object());
    FAIL() << "expected an error";
  } catch (const template_error& e) {
    EXPECT_EQ(e.template_name(), "_bad");
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.column(), 2);
  }
  set.add("missing", "x\n{% include _none %}");
  try {
    set.render("missing", json::object());
    FAIL() << "expected an error";
  } catch (const template_error& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(e.message().find("no template named '_none'"), std::string::npos);
  }
  set.add("loop", "{% include loop %}");
  EXPECT_THROW(set.render("loop", json::object()), template_error);
  EXPECT_THROW(set.render("no_such_template", json::object()), kopt::not_found_error);
}

TEST(engine, directory_loading) {
  EXPECT_THROW(template_set::load_directory("/nonexistent/kopt/prompts"), kopt::config_error);
  const template_set set =
      template_set::load_directory(std::filesystem::path(KOPT_SOURCE_DIR) / "prompts" / "templates");
  for (const char* name : {"system", "first", "revise", "fix_compile", "fix_wrong", "broaden"})
    EXPECT_TRUE(set.contains(name)) << name;
  EXPECT_THROW(default_template_dir("/nonexistent/kopt/prompts"), kopt::config_error);
  EXPECT_EQ(default_template_dir(KOPT_SOURCE_DIR), std::filesystem::path(KOPT_SOURCE_DIR));
}

TEST(context, trim_to_budget_cuts_at_lines_and_says_so) {
  EXPECT_EQ(trim_to_budget("short", 100), "short");
  std::string log;
  for (int i = 0; i < 50; ++i) log += "error line " + std::to_string(i) + "\n";
  const std::string t = trim_to_budget(log, 100);
  const std::size_t kept = t.find("[...");
  ASSERT_NE(kept, std::string::npos);
  EXPECT_LE(kept, 100u);
  EXPECT_GE(kept, 50u);
  EXPECT_EQ(t.substr(0, kept), log.substr(0, kept));  // a prefix of whole lines
  EXPECT_EQ(t[kept - 1], '\n');
  EXPECT_EQ(t.substr(kept), "[... " + std::to_string(log.size() - kept) + " bytes trimmed]");
  // Never inside a UTF-8 sequence.
  const std::string utf = std::string(9, 'a') + "\xc3\xa9" + std::string(20, 'b');
  const std::string u = trim_to_budget(utf, 10);
  EXPECT_EQ(u.substr(0, 10), std::string(9, 'a') + "\n");
}

TEST(context, units) {
  EXPECT_EQ(format_bytes(62914560), "60 MiB");
  EXPECT_EQ(format_rate(4.8e12, "B/s"), "4.8 TB/s");
  EXPECT_EQ(format_rate(989.5e12, "FLOP/s"), "989.5 TFLOP/s");
  EXPECT_EQ(format_rate(1.979e15, "FLOP/s"), "1.979 PFLOP/s");
}

TEST(context, gpu_facts_lookup) {
  const json table = {{"gpus",
                       {{"H200",
                         {{"match", {"NVIDIA H200"}},
                          {"sm_count", 132},
                          {"l2_bytes", 62914560},
                          {"dram_bytes_per_s", 4.8e12},
                          {"flops_per_s", {{"fp32", 6.7e13}}}}}}}};
  const gpu_facts by_key = gpu_facts_from_table(table, "H200");
  EXPECT_EQ(by_key.name, "NVIDIA H200");
  EXPECT_EQ(by_key.sm_count, 132);
  EXPECT_EQ(by_key.arch, "sm_90a");
  const gpu_facts by_device = gpu_facts_from_table(table, "NVIDIA H200 NVL");
  EXPECT_EQ(by_device.name, "NVIDIA H200 NVL");
  EXPECT_DOUBLE_EQ(by_device.flops_per_s.at("fp32"), 6.7e13);
  EXPECT_THROW(gpu_facts_from_table(table, "NVIDIA A100"), kopt::config_error);
  EXPECT_THROW(gpu_facts_from_table(json::object(), "H200"), kopt::config_error);
  EXPECT_THROW(build_context(prompt_inputs{}), kopt::error);
}

TEST(engine, cache_breakpoint_records_the_offset_and_renders_nothing) {
  template_set set;
  set.add("inc", "B{% cache_breakpoint %}");
  set.add("t", "A\n{% cache_breakpoint %}\n{% include inc %}{% cache_breakpoint %}C");
  const rendered r = set.render("t", nlohmann::json::object());
  EXPECT_EQ(r.text, "A\nBC");
  EXPECT_EQ(r.cache_breaks, (std::vector<std::size_t>{2, 3}));  // the repeat at 3 is listed once
  EXPECT_THROW(set.add("bad", "{% cache_breakpoint now %}"), template_error);
}

}  // namespace
}  // namespace kopt::prompts
