// `ptxevo prior-study --universe FILE [--spec SPEC] [--seeds 10] [--budget B] ...`: the learned
// prior's replay proof on a measured closed universe (search/prior_study.hpp,
// docs/prior_study.md): cold against warm simulated campaigns at equal budgets, the ablations
// and the shuffled-label control, as a table. No GPU and no builds: everything comes from the
// universe file.
#pragma once

namespace CLI {
class App;
}

namespace ptxevo::cli {

// Adds the `prior-study` subcommand; it runs from CLI11's callback (see register_export_command).
// Exit codes: 0 the table was printed; 1 the universe or the spec could not be used (why on stderr).
void register_prior_study_command(CLI::App& app);

}  // namespace ptxevo::cli
