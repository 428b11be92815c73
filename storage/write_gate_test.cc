#include "storage/write_gate.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/sql_db.h"
#include "storage/store.h"
#include "tests/testing/policy_fixtures.h"
#include "tests/testing/store_fixtures.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

constexpr WritePriority kUrgent = WritePriority::kUrgent;
constexpr WritePriority kBackground = WritePriority::kBackground;

// Waits (up to 10 s) until exactly `urgent` and `background` writers wait
// at `gate`; whether they do.
bool AwaitWaiters(const WriteGate& gate, int urgent, int background) {
  auto there = [&] {
    return gate.waiting(kUrgent) == urgent && gate.waiting(kBackground) == background;
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!there() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return there();
}

// Writers started on threads; each enters, records its name, leaves.
class Writers {
 public:
  explicit Writers(WriteGate* gate) : gate_(gate) {}
  ~Writers() { Join(); }
  void Start(std::string name, WritePriority priority) {
    threads_.emplace_back([this, name, priority] {
      gate_->Enter(priority);
      {
        absl::MutexLock lock(&mu_);
        order_.push_back(name);
      }
      gate_->Leave();
    });
  }
  // Waits until `urgent` and `background` writers wait at the gate.
  void AwaitWaiting(int urgent, int background) {
    ASSERT_TRUE(AwaitWaiters(*gate_, urgent, background))
        << gate_->waiting(kUrgent) << " urgent and " << gate_->waiting(kBackground)
        << " background writers wait";
  }
  std::vector<std::string> Join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
    absl::MutexLock lock(&mu_);
    return order_;
  }

 private:
  WriteGate* gate_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  std::vector<std::string> order_;
};

TEST(WriteGate, AWriterEntersAtOnceWhenNobodyIsInside) {
  WriteGate gate;
  for (int i = 0; i < 3; ++i) {
    gate.Enter(i % 2 ? kBackground : kUrgent);
    EXPECT_TRUE(gate.held());
    gate.Leave();
    EXPECT_FALSE(gate.held());
  }
  EXPECT_EQ(gate.counts().urgent, 2u);
  EXPECT_EQ(gate.counts().background, 1u);
  EXPECT_EQ(gate.counts().urgent_waited, 0u);
}

// With a writer of kind `holder` inside, a writer of the same kind asks
// first and one of the other kind second; the order they enter in once the
// holder leaves. `gate` is fresh.
std::vector<std::string> OrderAfter(WritePriority holder, WriteGate* gate) {
  const WritePriority other = holder == kUrgent ? kBackground : kUrgent;
  auto name = [](WritePriority p) { return p == kUrgent ? "urgent" : "background"; };
  gate->Enter(holder);
  Writers writers(gate);
  writers.Start(name(holder), holder);
  writers.AwaitWaiting(holder == kUrgent ? 1 : 0, holder == kUrgent ? 0 : 1);
  writers.Start(name(other), other);
  writers.AwaitWaiting(1, 1);
  gate->Leave();
  return writers.Join();
}

// The compactor's case: after a background transaction, a waiting ingest
// worker goes before the next background one, whichever asked first.
TEST(WriteGate, AfterABackgroundWriterAWaitingUrgentOneGoesFirst) {
  WriteGate gate;
  EXPECT_EQ(OrderAfter(kBackground, &gate), (std::vector<std::string>{"urgent", "background"}));
  EXPECT_EQ(gate.counts().urgent_waited, 1u);
}

// Under continuous ingest background writers still get every other turn.
TEST(WriteGate, AfterAnUrgentWriterAWaitingBackgroundOneGoesFirst) {
  WriteGate gate;
  EXPECT_EQ(OrderAfter(kUrgent, &gate), (std::vector<std::string>{"background", "urgent"}));
}

// Only one writer is ever inside, whatever the mix.
TEST(WriteGate, OneWriterInsideAtATime) {
  WriteGate gate;
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        gate.Enter(t % 2 ? kBackground : kUrgent);
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        --inside;
        gate.Leave();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(gate.counts().urgent + gate.counts().background, 2000u);
}

// One fresh SQLite file with one target, opened by a store on the gate (a
// background writer) and by one without (SQLite's lock only).
class GatedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("gate.db");
    StoreOptions options;
    options.write_gate = gate_;
    auto a = Store::Open(path_, options);
    auto b = Store::Open(path_);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    first = std::move(*a);
    second = std::move(*b);
    auto target = second->UpsertTarget(testing::RocketBoard("agent-1"));
    ASSERT_TRUE(target.ok()) << target.status();
    id = *target;
  }
  const testing::TempDir dir_;
  std::string path_;
  std::shared_ptr<WriteGate> gate_ = std::make_shared<WriteGate>();
  WriteGate* gate = gate_.get();
  std::unique_ptr<Store> first;   // on the gate
  std::unique_ptr<Store> second;  // not
  int64_t id = 0;
};

// A gated SQLite store is inside the gate from Begin() to the end of its
// transaction: it leaves after a commit, after a rollback (a refused
// batch), and when Begin() itself fails.
TEST(WriteGate, ASqliteStoreLeavesTheGateHoweverItsTransactionEnds) {
  const testing::TempDir dir;
  const std::string path = dir.File("gate.db");
  auto gate = std::make_shared<WriteGate>();
  StoreOptions options;
  options.write_gate = gate;
  options.write_priority = kUrgent;
  auto store = Store::Open(path, options);
  ASSERT_TRUE(store.ok()) << store.status();
  const TargetRecord board = testing::RocketBoard("agent-1");
  auto id = (*store)->UpsertTarget(board);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_FALSE(gate->held());
  BatchDelta batch;
  batch.seq = 1;
  KeyEvidence k;
  k.key = {"rocket", "mmc0", 17, 10};
  k.histogram.Record(50'000, 4);
  batch.keys.push_back(k);
  batch.completion_samples = 4;
  ASSERT_TRUE((*store)->IngestBatch(*id, batch).ok());
  EXPECT_FALSE(gate->held()) << "after a commit";
  // A batch for a target that does not exist: the transaction rolls back.
  EXPECT_FALSE((*store)->IngestBatch(*id + 100, batch).ok());
  EXPECT_FALSE(gate->held()) << "after a rollback";
  // A read-only connection's Begin() fails (SQLite refuses the write
  // lock): it leaves the gate too.
  StoreOptions background = options;
  background.write_priority = kBackground;
  auto reader = Store::Open(path, background, OpenMode::kReadOnly);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_FALSE((*reader)->UpsertTarget(board).ok());
  EXPECT_FALSE(gate->held()) << "after a failed Begin()";
  // And a second store on the gate enters it at once.
  auto other = Store::Open(path, background);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*(*other)->Compact(*id), 1u);
  EXPECT_FALSE(gate->held());
  EXPECT_EQ(gate->counts().urgent_waited, 0u);
}

// Store::Compact sums the staged rows before it takes the write turn. If
// another compaction folds them meanwhile (here a second store without the
// gate, while the first waits at it), the first sums again inside its
// transaction: nothing is counted twice.
TEST_F(GatedStoreTest, ACompactionWhoseRowsWereFoldedMeanwhileSumsThemAgain) {
  auto batch = [](uint64_t seq, uint64_t count) {
    BatchDelta b;
    b.seq = seq;
    KeyEvidence k;
    k.key = {"rocket", "mmc0", 17, 10};
    k.histogram.Record(50'000, count);
    b.keys.push_back(k);
    b.completion_samples = count;
    return b;
  };
  ASSERT_TRUE(*second->IngestBatch(id, batch(1, 3)));
  ASSERT_TRUE(*second->IngestBatch(id, batch(2, 4)));
  gate->Enter(kBackground);  // the first store's Compact() waits at the gate
  absl::StatusOr<uint64_t> folded;
  std::thread compacting([&] { folded = first->Compact(id); });
  ASSERT_TRUE(AwaitWaiters(*gate, 0, 1));
  // Meanwhile: seqs 1 and 2 are folded by the other store, 3 is staged.
  EXPECT_EQ(*second->Compact(id), 2u);
  ASSERT_TRUE(*second->IngestBatch(id, batch(3, 5)));
  gate->Leave();
  compacting.join();
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_EQ(*folded, 1u) << "only seq 3 was left to fold";
  auto keys = second->LoadKeys(id);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].histogram.total_count(), 12u) << "3 + 4 + 5, each once";
}

// A write statement outside a transaction (Unpin: one UPDATE) is a
// transaction of its own: it waits for its turn like Begin() does, and
// leaves the gate once it has run.
TEST_F(GatedStoreTest, AWriteOutsideATransactionTakesATurn) {
  const uint64_t turns = gate->counts().background;
  gate->Enter(kUrgent);
  std::atomic<bool> done{false};
  absl::Status unpinned;
  std::thread writer([&] {
    unpinned = first->Unpin(id);
    done = true;
  });
  ASSERT_TRUE(AwaitWaiters(*gate, 0, 1));
  EXPECT_FALSE(done.load()) << "wrote while another writer had the turn";
  gate->Leave();
  writer.join();
  EXPECT_TRUE(unpinned.ok()) << unpinned;
  EXPECT_FALSE(gate->held());
  EXPECT_EQ(gate->counts().background, turns + 1);
  // Reads outside a transaction take no turn.
  ASSERT_TRUE(first->LoadPolicy(id, 0).ok());
  EXPECT_EQ(gate->counts().background, turns + 1);
}

// An INSERT ... RETURNING outside a transaction keeps SQLite's write lock
// from its first step, which returns the row, until it is reset: it keeps
// its turn at the gate as long (another writer meanwhile would wait in
// SQLite's busy handler instead, not in the gate's order).
TEST(WriteGate, AWriteThatReturnsARowKeepsItsTurnUntilItIsReset) {
  const testing::TempDir dir;
  auto db = OpenSqlDb(dir.File("returning.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  auto gate = std::make_shared<WriteGate>();
  (*db)->SetWriteGate(gate, kBackground);
  ASSERT_TRUE((*db)->Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, x INTEGER)").ok());
  auto insert = (*db)->Prepare("INSERT INTO t (x) VALUES (?1) RETURNING id");
  ASSERT_TRUE(insert.ok()) << insert.status();
  for (int64_t x = 1; x <= 2; ++x) {
    (*insert)->Bind(1, x);
    auto row = (*insert)->Step();
    ASSERT_TRUE(row.ok() && *row) << row.status();
    EXPECT_EQ((*insert)->ColumnInt(0), x);
    EXPECT_TRUE(gate->held()) << "between the row and the reset";
    if (x == 1) {
      (*insert)->Reset();
    } else {
      ASSERT_TRUE((*insert)->Step().ok());  // stepped to its end
    }
    EXPECT_FALSE(gate->held()) << x;
  }
  EXPECT_EQ(gate->counts().background, 2u);
}

// A policy table is serialized before its write transaction, numbered as
// the next version. If another store appends that version while the first
// waits for its turn, a fitted table (built on no version) is refused: it
// would undo what the other decided. An operator's rollback is stored as
// the version after, serialized again (the stored JSON says the number it
// is stored under).
TEST_F(GatedStoreTest, AVersionAppendedMeanwhileIsNotOverwritten) {
  PolicyTable mine = testing::SampleTable(), theirs = testing::SampleTable();
  mine.origin = "fitted";
  theirs.origin = "predicted";
  gate->Enter(kUrgent);
  absl::StatusOr<uint64_t> appended;
  std::thread appending([&] { appended = first->AppendPolicyVersion(id, &mine, 0); });
  ASSERT_TRUE(AwaitWaiters(*gate, 0, 1));
  EXPECT_EQ(*second->AppendPolicyVersion(id, &theirs, 0), 1u);
  gate->Leave();
  appending.join();
  EXPECT_TRUE(absl::IsAborted(appended.status())) << appended.status();
  EXPECT_FALSE(second->LoadPolicy(id, 2)->has_value());

  PolicyTable rollback = testing::SampleTable();
  gate->Enter(kUrgent);
  std::thread pinning([&] { appended = first->AppendPinnedVersion(id, &rollback); });
  ASSERT_TRUE(AwaitWaiters(*gate, 0, 1));
  EXPECT_EQ(*second->AppendPolicyVersion(id, &theirs, 1), 2u);
  gate->Leave();
  pinning.join();
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(*appended, 3u);
  EXPECT_EQ(rollback.version, 3u);
  for (uint64_t version : {1u, 2u, 3u}) {
    auto stored = second->LoadPolicy(id, version);
    ASSERT_TRUE(stored.ok() && stored->has_value()) << version;
    EXPECT_EQ((*stored)->version, version);
    EXPECT_EQ((*stored)->origin, version == 3 ? "rollback" : "predicted");
  }
}

}  // namespace
}  // namespace spintune
