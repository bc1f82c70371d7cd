// A seed template may be split over several files: a line `#include "part.cuh"` that names a file
// beside the including one (a relative path resolved against the including file's folder) is
// replaced by that file's text, recursively, when the template is read. Every later stage (the
// build cache's key, NVRTC, the screen, an LLM agent's prompt, the exporter) then sees one
// self-contained source, and a change to any part changes the text that is hashed.
//
// Parts are fragments, not headers: they carry no include guards, since a part may be included
// more than once (the host tests include a whole kernel once per namespace). Quoted includes of
// files that do not exist beside the includer, and every <...> include, are left for NVRTC.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ptxevo::evaluator {

struct TemplateSource {
  std::string text;                // the expanded source
  std::vector<std::string> parts;  // the files read besides the top one, in first-read order
};

// Reads and expands `path`. nullopt with `why` set ("FILE:LINE: include cycle: a.cu -> b.cuh ->
// a.cu", "cannot read FILE", or nesting deeper than 16) when it cannot.
std::optional<TemplateSource> read_template(const std::string& path, std::string* why);

}  // namespace ptxevo::evaluator
