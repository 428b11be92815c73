// Conversions between the wire messages of proto/spintune/v1 and the policy
// types. The only place that knows both.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_POLICY_POLICY_PROTO_H_
#define SPINTUNE_POLICY_POLICY_PROTO_H_

#include <vector>

#include "absl/status/statusor.h"
#include "policy/policy_table.h"
#include "spintune/v1/spintune.pb.h"

namespace spintune {

// Wire table -> PolicyTable. Device and CPU class details (costs, rules) are
// taken from `hello`, whose names the entries must use.
absl::StatusOr<PolicyTable> PolicyTableFromProto(const v1::PolicyTable& wire,
                                                 const v1::Hello& hello);
void PolicyTableToProto(const PolicyTable& table, v1::PolicyTable* wire);

PlatformCosts CostsFromProto(const v1::PlatformCosts& wire);
void CostsToProto(const PlatformCosts& costs, v1::PlatformCosts* wire);

// Validated conversions of the hello's devices and CPU classes.
absl::StatusOr<std::vector<DeviceInfo>> DevicesFromHello(const v1::Hello& hello);
std::vector<CpuClassInfo> CpuClassesFromHello(const v1::Hello& hello);
// The other way, for agents building their hello.
void DeviceToProto(const DeviceInfo& device, v1::Device* wire);
void CpuClassToProto(const CpuClassInfo& cpu, v1::CpuClass* wire);

absl::StatusOr<WaitParams> WaitFromProto(v1::Strategy strategy, uint64_t spin_ns,
                                         uint64_t sleep_ns, uint64_t poll_interval_ns);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_POLICY_PROTO_H_
