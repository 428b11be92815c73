// `spintune profiles save|list|show|diff|export|import|rollback|delete`:
// named snapshots of a target's policy table with their evidence
// (storage/profile.h), kept in the tuner database (--db). A rollback stores
// the chosen table as the target's newest version and pins the target to
// it; a tuner running on the same database pushes it to the live agent
// within a second and stops refitting the target until `--unpin`.
#ifndef SPINTUNE_CLI_PROFILES_COMMAND_H_
#define SPINTUNE_CLI_PROFILES_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace spintune {

struct ProfilesFlags {
  std::string action;
  std::string name;     // save, show, export, delete: the profile; rollback: the target;
                        // diff: profile A; import: the file
  std::string other;    // diff: profile B
  std::string target;   // save: the agent id
  uint64_t version = 0; // save: the policy version (0: latest)
  std::string note;     // save
  std::string output;   // export: file ("-": stdout)
  std::string rename;   // import: store under this name
  std::string to;       // rollback: a version number or a profile name
  bool unpin = false;   // rollback: resume fitting instead
  std::string format = "table";
};

absl::Status RunProfiles(const std::string& db, const ProfilesFlags& flags, std::ostream& out);

}  // namespace spintune

#endif  // SPINTUNE_CLI_PROFILES_COMMAND_H_
