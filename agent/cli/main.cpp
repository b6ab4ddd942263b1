// `kopt`: the control-plane executable. Everything lives in kopt_cli_lib
// (agent/cli/app.cpp); see commands.hpp for how to add a command group.
#include "cli/app.hpp"

int main(int argc, char** argv) {
  return kopt::cli::run(argc, argv);
}
