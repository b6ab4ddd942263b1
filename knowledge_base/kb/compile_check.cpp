#include "kb/compile_check.hpp"

#include <algorithm>

namespace kopt::kb {

compile::request example_request(const document& d, const std::string& arch) {
  compile::request rq;
  rq.name = d.id + ".cu";
  rq.arch = arch;
  if (d.ex) {
    rq.source = d.ex->source;
    rq.defines = d.ex->defaults;
    rq.options = d.ex->compile_options;
  }
  return rq;
}

compile_outcome compile_example(const document& d, const std::string& arch,
                                const compile::compiler* comp) {
  compile_outcome o;
  o.id = d.id;
  if (!d.ex) {
    o.status = "no_example";
    o.problems.push_back("the document has no usable Example");
    return o;
  }
  const compile::request rq = example_request(d, arch);
  o.result = comp != nullptr ? comp->compile(rq) : compile::compile_in_process(rq);
  o.status = compile::status_name(o.result.st);
  o.log = o.result.log;
  if (!o.result.ok()) {
    o.problems.push_back("the example does not compile for " + arch + " (" + o.status + ")");
    return o;
  }
  o.compiled = true;
  for (const auto& p : o.result.integrity_problems) o.problems.push_back(p);
  if (!o.problems.empty()) o.status = "rejected_integrity";
  // ptxas -v names every kernel of the module; one the plan launches but the
  // module lacks would fail at load time.
  if (!o.result.kernels.empty()) {
    for (const auto& k : d.ex->kernels) {
      if (o.result.kernels.count(k) == 0) {
        o.problems.push_back("kernel '" + k + "' of the launch plan is not in the compiled module");
        o.status = "missing_kernel";
      }
    }
  }
  o.ok = o.problems.empty();
  return o;
}

}  // namespace kopt::kb
