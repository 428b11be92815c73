// RawEventReader: the binary side of a tracing instance. Reads every CPU's
// per_cpu/cpuN/trace_pipe_raw pages (no text formatting in the kernel),
// decodes them with libtraceevent (kbuffer for the pages, the events'
// format files through libtracefs for the field offsets), merges the CPUs
// in timestamp order and hands each event to the correlator as a
// TraceRecord. The hot events (block_rq_issue/complete/requeue,
// irq_handler_entry/exit, sched_waking/wakeup, sched_switch) carry their
// decoded fields (TraceRecord::typed, no text); the others a payload with
// the fields the correlator reads in the kernel's own print layout
// ("mmc0: start struct mmc_request[...]: cmd_opcode=25 ...", "k=v" for
// user-defined pairs).
//
// Timestamps are the instance clock's nanoseconds (no µs truncation as in
// trace_pipe text). Events of a round are held back until every CPU has been
// read past them (a watermark 1 ms behind the time the round began), so a
// slow CPU buffer never reorders them.
//
// Thread-compatible: one thread polls.
#ifndef SPINTUNE_AGENT_CAPTURE_RAW_RAW_EVENT_READER_H_
#define SPINTUNE_AGENT_CAPTURE_RAW_RAW_EVENT_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/trace/trace_line.h"

struct tep_handle;
struct kbuffer;

namespace spintune {

class RawEventReader {
 public:
  // `instance_path`: the instance directory; `tracing_root`: where the event
  // formats are (the tracefs mount point). `events`: "system/event" names
  // enabled on the instance (others are skipped when decoding).
  static absl::StatusOr<std::unique_ptr<RawEventReader>> Open(
      const std::string& tracing_root, const std::string& instance_path,
      const std::vector<std::string>& events);
  ~RawEventReader();

  // Reads what the CPUs' buffers hold and calls `each` for every event up to
  // the watermark, in timestamp order. Returns the bytes read.
  absl::StatusOr<size_t> Poll(const std::function<void(const TraceRecord&)>& each);

  uint64_t lost_events() const { return lost_events_; }
  uint64_t events() const { return events_; }

 private:
  struct Field {
    int offset = -1;
    int size = 0;
    bool dynamic = false;  // __data_loc: offset and length of a string
  };
  enum class Kind {
    kBlockIssue, kBlockComplete, kBlockRequeue, kIrqEntry, kIrqExit, kWaking, kSwitch,
    kMmcStart, kMmcDone, kSpiXferStart, kSpiXferStop, kSpiMsgStart, kSpiMsgDone, kOther,
  };
  // The fields the correlator's payloads carry, resolved once per event.
  enum FieldId {
    kDev, kRwbs, kBytes, kSector, kNrSector, kError, kIrq, kName, kRet, kPid,
    kPrevPid, kPrevState, kNextPid, kMrq, kCmdOpcode, kBlocks, kBlksz, kBlkAddr, kDataFlags,
    kTag, kCmdErr, kStopErr, kSbcErr, kDataErr, kBusNum, kChipSelect, kXfer, kLen, kMsg,
    kActual, kFrame, kFieldCount,
  };
  struct EventInfo {
    Kind kind = Kind::kOther;
    std::string name;  // the event name without its system
    std::vector<std::pair<std::string, Field>> fields;  // all, for kOther
    Field by_id[kFieldCount];
  };
  struct Held {  // an event's bytes in arena_
    uint64_t ts_ns;
    int cpu;
    size_t offset;
    size_t size;
  };

  RawEventReader() = default;
  void Decode(const Held& h, const std::function<void(const TraceRecord&)>& each);
  // Puts held_ in time order, events of one time in the order they were
  // read (a stable sort by time). held_ is run_ends_'s runs, each normally in
  // time order already (the events kept from the last poll, then each
  // CPU's buffer): they are merged.
  void SortHeld();
  const std::string& TaskOf(int pid);

  tep_handle* tep_ = nullptr;
  kbuffer* kbuf_ = nullptr;
  int common_type_offset_ = 0;
  Field common_flags_, common_pid_;
  std::vector<int> fds_;  // per CPU
  std::unordered_map<int, EventInfo> events_by_id_;
  std::vector<unsigned char> page_;
  std::vector<unsigned char> arena_;
  std::vector<unsigned char> spare_arena_;  // the next arena_, reused
  std::vector<Held> held_;  // events not handed out yet
  std::vector<size_t> run_ends_;  // where each run of held_ ends
  std::vector<Held> merged_;  // SortHeld's, reused
  std::string payload_;
  TypedEvent typed_;  // the hot events' fields, for the record handed out
  std::unordered_map<int, std::string> comm_;  // pid -> task name (threaded IRQs)
  uint64_t lost_events_ = 0;
  uint64_t events_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_CAPTURE_RAW_RAW_EVENT_READER_H_
