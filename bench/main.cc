// spintune-bench: spintune against every peer on the same request streams.
#include <unistd.h>

#include <iostream>

#include "CLI/CLI.hpp"
#include "bench/bench_report.h"
#include "bench/bench_runner.h"
#include "bench/cold_start_eval.h"
#include "bench/context_eval.h"
#include "bench/knob_bench.h"
#include "bench/seed_replay.h"
#include "common/logging.h"
#include "common/version.h"

int main(int argc, char** argv) {
  spintune::ScenarioOptions scenarios;
  spintune::RunOptions run;
  std::string format = "table";
  bool no_boards = false, no_synthetic = false, cold_start = false, replay = false, knobs = false;
  bool context = false;
  uint64_t seed = 1;
  spintune::ContextSuiteOptions context_options;
  context_options.replay_dir = SPINTUNE_CONTEXT_FIXTURE_DIR;
  CLI::App app{"spintune-bench: J of spintune and of every peer's mechanism on the same "
               "streams, as ratios to the best static policy in hindsight and to the "
               "clairvoyant."};
  app.footer(
      "Examples:\n"
      "  spintune-bench                       # the whole suite, a table\n"
      "  spintune-bench --filter microwatt    # scenarios whose name contains 'microwatt'\n"
      "  spintune-bench --format json > bench.json\n"
      "  spintune-bench --knobs --seed 3 --format json\n"
      "  spintune-bench --context              # context leaves vs fixed fit and clairvoyant\n"
      "Exit codes: 0 ok (also with violations, which are listed), 2 usage.");
  app.set_version_flag("--version", spintune::Version());
  app.add_option("--filter", scenarios.filter, "Only scenarios whose name contains this");
  app.add_option("--format", format, "table | json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.add_option("--train", run.train_samples, "Training samples per stationary stream")
      ->capture_default_str();
  app.add_option("--test", scenarios.test_samples, "Evaluated samples per stationary stream")
      ->capture_default_str();
  app.add_flag("--no-boards", no_boards, "Skip the simulated-board scenarios");
  app.add_flag("--cold-start", cold_start,
               "Instead: predicted vs fitted tables on held-back boards");
  app.add_flag("--replay-seeds", replay,
               "Instead: the seed reports' throughput tables, simulated");
  app.add_flag("--no-synthetic", no_synthetic, "Skip the synthetic families");
  app.add_flag("--knobs", knobs,
               "Instead: the ahci_sunxi knob experiment (TXTS/RXTS) from every leftover start "
               "value of field report 003");
  app.add_option("--seed", seed, "--knobs: seed of the boards' noise and the trial order")
      ->capture_default_str();
  app.add_flag("--context", context,
               "Instead: tables with context leaves against the fixed fit, on Markov-modulated "
               "boards, a replayed disk stream and the i.i.d. suite (share of the best static -> "
               "clairvoyant gap closed, and its in-sample upper bounds: ORACLE over the same "
               "features, STATE ORACLE knowing the simulator's hidden busy state)");
  app.add_option("--replay-dir", context_options.replay_dir,
                 "--context: directory of the replayed stream (vda-fsync.csv and its platform)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (cold_start) {
    std::cout << spintune::RenderColdStart(spintune::EvaluateColdStart(20000));
    return 0;
  }
  if (knobs) {
    (void)spintune::InitLogging("bench", "warn");
    auto runs = spintune::RunKnobBench(seed);
    if (!runs.ok()) {
      std::cerr << "spintune-bench: " << runs.status().message() << "\n";
      return 1;
    }
    std::cout << (format == "json" ? spintune::KnobBenchToJson(seed, *runs).dump(2) + "\n"
                                   : spintune::RenderKnobBench(*runs));
    return 0;
  }
  if (replay) {
    std::cout << spintune::RenderSeedReplay();
    return 0;
  }
  if (context) {
    context_options.filter = scenarios.filter;
    context_options.iid = !no_boards || !no_synthetic;
    auto suite = spintune::BuildContextScenarios(context_options);
    if (!suite.ok()) {
      std::cerr << "spintune-bench: " << suite.status().message() << "\n";
      return 1;
    }
    std::vector<spintune::ContextResult> results;
    for (const auto& s : *suite) results.push_back(spintune::RunContextScenario(s));
    if (format == "json") {
      std::cout << spintune::ContextResultsToJson(results).dump(2) << "\n";
    } else {
      std::cout << spintune::RenderContextResults(results);
    }
    return 0;
  }
  scenarios.train_samples = run.train_samples;
  scenarios.boards = !no_boards;
  scenarios.synthetic = !no_synthetic;
  const auto suite = spintune::BuildScenarios(scenarios);
  std::vector<spintune::ScenarioResult> results;
  const bool progress = isatty(2) && std::getenv("NO_COLOR") == nullptr;
  for (size_t i = 0; i < suite.size(); ++i) {
    if (progress) std::cerr << "\r[" << i + 1 << "/" << suite.size() << "] " << suite[i].name << "\033[K";
    results.push_back(spintune::RunScenario(suite[i], run));
  }
  if (progress) std::cerr << "\r\033[K";
  if (format == "json") {
    std::cout << spintune::ResultsToJson(results).dump(2) << "\n";
  } else {
    std::cout << spintune::RenderResults(results);
  }
  return 0;
}
