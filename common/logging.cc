#include "common/logging.h"

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace spintune {
namespace {

std::shared_ptr<spdlog::logger>& LoggerSlot() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>(
        "spintune", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %n: %v");
    l->set_level(spdlog::level::info);
    return l;
  }();
  return logger;
}

}  // namespace

absl::Status InitLogging(absl::string_view component, absl::string_view level) {
  const auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown log level '", level, "' (expected trace, debug, info, warn, error or off)"));
  }
  auto logger = std::make_shared<spdlog::logger>(
      std::string(component), std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %n: %v");
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::info);
  LoggerSlot() = logger;
  return absl::OkStatus();
}

spdlog::logger& Logger() { return *LoggerSlot(); }

}  // namespace spintune
