// `kopt validate FILE...`: load and validate operator configs without
// touching the database.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/render.hpp"
#include "cli/shared.hpp"
#include "common/text.hpp"
#include "config/operator.hpp"

namespace kopt::cli {

namespace {

std::string plural(std::size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

struct validate_options {
  std::vector<std::string> files;
  bool json = false;
};

}  // namespace

nlohmann::json diagnostic_json(const config::diagnostic& d) {
  return nlohmann::json{
      {"level", d.level == config::diagnostic::severity::error ? "error" : "warning"},
      {"file", d.file},
      {"line", d.line},
      {"column", d.column},
      {"path", d.path},
      {"message", d.message},
      {"text", d.to_string()},
  };
}

nlohmann::json validation_json(const std::string& file, const config::load_result& r) {
  std::size_t errors = 0, warnings = 0;
  nlohmann::json diags = nlohmann::json::array();
  for (const auto& d : r.diagnostics) {
    (d.level == config::diagnostic::severity::error ? errors : warnings) += 1;
    diags.push_back(diagnostic_json(d));
  }
  nlohmann::json entry{{"file", printable_utf8(file)},
                       {"valid", r.ok()},
                       {"errors", errors},
                       {"warnings", warnings},
                       {"diagnostics", diags}};
  if (r.ok()) {
    entry["operator"] = r.op->name;
    entry["op_type"] = r.op->op_type;
    entry["workloads"] = r.op->workloads.size();
    entry["content_hash"] = r.op->content_hash();
  }
  return entry;
}

void register_validate(CLI::App& app, context& /*ctx*/, exit_status& status) {
  auto opts = std::make_shared<validate_options>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Check operator config files; print every problem with file:line:column");
  cmd->add_option("files", opts->files, "operator config files (JSON)")->required();
  cmd->add_flag("--json", opts->json, "print the diagnostics as JSON on stdout");
  cmd->footer(
      "Exit code 0 when every file is valid (warnings allowed), 1 when any is invalid.\n"
      "Example: kopt validate configs/examples/*.json --json");
  cmd->callback([opts, &status] {
    nlohmann::json report = nlohmann::json::array();
    int invalid = 0;
    for (const std::string& file : opts->files) {
      const config::load_result r = config::load_operator_file(file);
      std::size_t errors = 0, warnings = 0;
      for (const auto& d : r.diagnostics) {
        (d.level == config::diagnostic::severity::error ? errors : warnings) += 1;
        if (!opts->json) std::cerr << d.to_string() << '\n';
      }
      const bool ok = r.ok();
      if (!ok) ++invalid;
      if (opts->json) {
        report.push_back(validation_json(file, r));
      } else if (ok) {
        std::cout << file << ": valid (operator " << r.op->name << ", " << r.op->workloads.size()
                  << " workloads" << (warnings != 0 ? ", " + plural(warnings, "warning") : "")
                  << ")\n";
      } else {
        std::cout << file << ": invalid (" << plural(errors, "error") << ", "
                  << plural(warnings, "warning") << ")\n";
      }
    }
    if (opts->json) {
      print_json(nlohmann::json{{"valid", invalid == 0}, {"files", report}});
    }
    status.code = invalid == 0 ? exit_ok : exit_invalid;
  });
}

}  // namespace kopt::cli
