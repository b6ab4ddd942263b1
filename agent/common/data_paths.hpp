// Where kopt's data files are: the prompt templates, the knowledge base's
// technique and reference documents, the hardware (GPU peak) tables and the
// benchmark suite. This is the ONE lookup every command, the daemon and the
// knowledge base use, so that an installed kopt, a relocated one and one run
// from its build tree all agree, and `kopt doctor` can say which directory
// was chosen and why.
//
// Order, first existing directory wins:
//   1. environment: $KOPT_PROMPTS_DIR (templates only; must exist when set),
//      then $KOPT_DATA_DIR/<installed layout> (as share/kopt below);
//   2. beside the binary: <dir of the running executable>/../share/kopt/...
//      (any prefix: /usr, /opt/kopt, a DESTDIR staging tree);
//   3. the build tree: the source tree's directories, but only when the
//      running executable lives in the build tree it was built in, so an
//      installed binary never reads the source tree;
//   4. the install prefix compiled in (CMAKE_INSTALL_FULL_DATADIR/kopt).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kopt::data {

enum class kind { prompts, techniques, references, hardware, bench, examples };
enum class origin { environment, beside_binary, build_tree, install_prefix };

std::string_view name(kind k);    // "prompts", "knowledge_base/techniques", ...
std::string_view name(origin o);  // "environment", "beside the binary", ...

struct candidate_dir {
  std::filesystem::path dir;
  origin how;
  std::string detail;  // "$KOPT_DATA_DIR", the executable, the build or install directory
};

struct lookup {
  kind what;
  std::optional<candidate_dir> found;
  std::vector<candidate_dir> tried;  // in order, including the found one
  // A setting that points nowhere (KOPT_PROMPTS_DIR=missing): callers that
  // need the directory must fail with this rather than fall back.
  std::string problem;
  std::string looked_in() const;  // "a, b, c" for error messages
};

// The lookup for one kind of data, with every place tried.
lookup find(kind k);

// The directory, or empty when none was found (or `problem` is set).
std::filesystem::path find_dir(kind k);

// The GPU peak table: `flag` when given, else hardware/gpus.json from the
// lookup, else empty.
std::string peaks_file(const std::string& flag = {});

}  // namespace kopt::data
