// Renderings of verifications (tuner/verifier.h) for `spintune policy` and
// the report: per key and version, predicted against measured cost J, the
// verdict and any rollback.
#ifndef SPINTUNE_CLI_VERIFICATION_FORMAT_H_
#define SPINTUNE_CLI_VERIFICATION_FORMAT_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "storage/store.h"

namespace spintune {

std::string RenderVerifications(const std::vector<VerificationRecord>& verifications);
nlohmann::json VerificationsToJson(const std::vector<VerificationRecord>& verifications);

}  // namespace spintune

#endif  // SPINTUNE_CLI_VERIFICATION_FORMAT_H_
