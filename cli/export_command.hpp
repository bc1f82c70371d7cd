// `ptxevo export (--db FILE [--campaign ID] | --candidate ID | SPEC [--knobs K] [--edits E])
//  --format cuda|torch|ptx --out DIR`: what a user takes home from a campaign (docs/export.md).
#pragma once

#include <ostream>

#include "exporter/export_files.hpp"

namespace CLI {
class App;
}

namespace ptxevo::cli {

// Exit codes: 0 written (and, for cuda and torch with nvcc present, verified); 1 the candidate,
// the spec or the export failed (the reason on `err`).
int run_export(const exporter::ExportRequest& r, std::ostream& out, std::ostream& err);

// Adds the `export` subcommand; when it is given, the command runs from CLI11's callback and the
// parse ends with its exit code (CLI::Success or CLI::RuntimeError).
void register_export_command(CLI::App& app);

}  // namespace ptxevo::cli
