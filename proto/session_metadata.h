// Metadata of the Session stream that both ends read (docs/protocol.md).
#ifndef SPINTUNE_PROTO_SESSION_METADATA_H_
#define SPINTUNE_PROTO_SESSION_METADATA_H_

namespace spintune {

// Trailing metadata key the tuner sets when it ends a session with
// UNAVAILABLE itself (its storage fails or is full: "retry later"). gRPC's
// own UNAVAILABLE (no connection, tuner gone) never carries it, so an agent
// can tell a live tuner that defers from one it cannot reach: the first is
// contact (it backs off in full and never gives up on it), the second counts
// towards --give-up-after.
inline constexpr char kRetryLaterTrailer[] = "spintune-retry-later";

} // namespace spintune

#endif // SPINTUNE_PROTO_SESSION_METADATA_H_
