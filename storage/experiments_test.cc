#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "storage/backend_test.h"
#include "storage/migrations.h"
#include "storage/store.h"

namespace spintune {
namespace {

TargetRecord Board() {
  TargetRecord r;
  r.agent_id = "bpi-r1";
  r.board = "ahci-sunxi-a20";
  r.cpu_classes = {{"default", 1'000'000, {}, 0}};
  r.devices = {{"ata1", "ahci_sunxi", "", {}}};
  return r;
}

ExperimentRecord Dma(int64_t target_id) {
  ExperimentRecord e;
  e.target_id = target_id;
  e.name = "ahci0-dma";
  e.fingerprint = 42;
  for (const char* f : {"P0DMACR.TXTS", "P0DMACR.RXTS"}) {
    KnobCoordinate c;
    c.name = f;
    c.register_name = "P0DMACR";
    c.shift = e.space.coordinates.empty() ? 0 : 4;
    c.width = 4;
    for (int v = 0; v < 16; ++v) c.values.push_back(v);
    e.space.coordinates.push_back(c);
  }
  e.start = {5, 6};
  e.metric = "write_mbps";
  e.metric_unit = "MB/s";
  e.constraints = "dma_errors <= 0";
  e.workload = "dd";
  e.max_trials = 120;
  e.seed = 3;
  return e;
}

std::vector<KnobSettingRecord> Winner(int64_t experiment) {
  return {{"ahci0-dma", "P0DMACR.TXTS", 3, "3", "P0DMACR", 0, 4, experiment, "beats", ""},
          {"ahci0-dma", "P0DMACR.RXTS", 3, "3", "P0DMACR", 4, 4, experiment, "beats", ""}};
}

class StoreExperiments : public BackendTest {};
INSTANTIATE_SPINTUNE_BACKENDS(StoreExperiments);

TEST_P(StoreExperiments, KeepsExperimentsTrialsAndConclusions) {
  auto store = Store::Open(NewDb());
  ASSERT_TRUE(store.ok()) << store.status();
  auto target = (*store)->UpsertTarget(Board());
  ASSERT_TRUE(target.ok());
  ExperimentRecord e = Dma(*target);
  ASSERT_TRUE((*store)->CreateExperiment(&e).ok());
  EXPECT_GT(e.id, 0);
  for (uint32_t n = 1; n <= 3; ++n) {
    KnobTrialRecord t;
    t.trial = n;
    t.phase = "search";
    t.setting = {static_cast<int64_t>(n), 6};
    t.metric = 40.0 + n;
    t.metrics = {{"write_mbps", 40.0 + n}, {"dma_errors", 0}};
    ASSERT_TRUE((*store)->AppendKnobTrial(e.id, t).ok());
  }
  KnobTrialRecord again;
  again.trial = 2;
  EXPECT_TRUE(absl::IsAlreadyExists((*store)->AppendKnobTrial(e.id, again)));
  auto trials = (*store)->LoadKnobTrials(e.id);
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 3u);
  EXPECT_EQ((*trials)[2].setting, (KnobSetting{3, 6}));
  EXPECT_EQ((*trials)[2].metrics.at("write_mbps"), 43);

  auto latest = (*store)->LatestExperiment(*target, "ahci0-dma");
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->state, "running");
  EXPECT_EQ((*latest)->trials, 3u);
  EXPECT_EQ((*latest)->agent_id, "bpi-r1");
  EXPECT_EQ((*latest)->space.Format((*latest)->start), "TXTS=5,RXTS=6");
  EXPECT_FALSE((*store)->LatestExperiment(*target, "other")->has_value());

  e.state = "finished";
  e.verdict = "better";
  e.best = e.applied = {3, 3};
  e.ratio = 2.9;
  e.ci_low = 2.8;
  e.ci_high = 3.0;
  e.statement = "TXTS=3,RXTS=3 beats the start";
  ASSERT_TRUE((*store)->FinishExperiment(e, Winner(e.id)).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition((*store)->FinishExperiment(e, {})));
  auto done = (*store)->LoadExperiment(e.id);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->verdict, "better");
  EXPECT_EQ(done->applied, (KnobSetting{3, 3}));
  EXPECT_DOUBLE_EQ(done->ci_low, 2.8);
  EXPECT_FALSE(done->finished_at.empty());
  auto settings = (*store)->LoadKnobSettings(*target);
  ASSERT_TRUE(settings.ok());
  ASSERT_EQ(settings->size(), 2u);
  EXPECT_EQ((*settings)[0].coordinate, "P0DMACR.TXTS");  // declaration order kept
  EXPECT_EQ((*settings)[1].shift, 4u);
  EXPECT_TRUE(absl::IsFailedPrecondition((*store)->RequestAbort(e.id)));
  EXPECT_TRUE(absl::IsNotFound((*store)->LoadExperiment(999).status()));
}

// Migrations 1-8 are main's, unchanged; 9 adds the knob tables (10: A/B
// outcome arms; 14: keys.changed_through). A version 8 database (this one with migrations 9 and 10
// undone) upgrades in place and keeps its rows; a newer one is refused.
TEST_P(StoreExperiments, UpgradesAVersion8DatabaseAndRefusesNewer) {
  // (Migration 13 runs again as it is: it copies pending_deltas.)
  ASSERT_EQ(LatestSchemaVersion(), 14);
  const std::string path = NewDb(/*file=*/true);
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->UpsertTarget(Board()).ok());
  }
  {
    auto db = OpenSqlDb(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("DROP TABLE knob_settings; DROP TABLE knob_trials; "
                            "DROP TABLE experiments; ALTER TABLE verifications DROP COLUMN method; "
                            "ALTER TABLE targets DROP COLUMN max_blob_format; "
                            "ALTER TABLE ingested DROP COLUMN fingerprint_version; "
                            "ALTER TABLE keys DROP COLUMN changed_through; "
                            "DELETE FROM schema_version WHERE version >= 9")
                    .ok());
    EXPECT_EQ(*SchemaVersion(db->get()), 8);
  }
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto target = (*store)->FindTarget("bpi-r1");
    ASSERT_TRUE(target.ok() && target->has_value());
    ExperimentRecord e = Dma((*target)->id);
    EXPECT_TRUE((*store)->CreateExperiment(&e).ok());
  }
  {
    auto db = OpenSqlDb(path);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*SchemaVersion(db->get()), 14);
    ASSERT_TRUE((*db)->Exec("INSERT INTO schema_version VALUES (15)").ok());
  }
  auto newer = Store::Open(path);
  EXPECT_TRUE(absl::IsFailedPrecondition(newer.status())) << newer.status();
}

TEST_P(StoreExperiments, AbortIsRequestedOnlyForRunningExperiments) {
  auto store = Store::Open(NewDb());
  ASSERT_TRUE(store.ok());
  auto target = (*store)->UpsertTarget(Board());
  ExperimentRecord e = Dma(*target);
  ASSERT_TRUE((*store)->CreateExperiment(&e).ok());
  ASSERT_TRUE((*store)->RequestAbort(e.id).ok());
  auto list = (*store)->ListExperiments(0);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_TRUE((*list)[0].abort_requested);
  auto aborts = (*store)->AbortRequests();
  ASSERT_TRUE(aborts.ok());
  ASSERT_EQ(aborts->size(), 1u);
  EXPECT_EQ((*aborts)[0].id, e.id);
  EXPECT_TRUE(absl::IsNotFound((*store)->RequestAbort(77)));
}

TEST_P(StoreExperiments, ProfilesCarryKnobSettingsAlsoWithoutAPolicy) {
  auto store = Store::Open(NewDb());
  ASSERT_TRUE(store.ok());
  auto target = (*store)->UpsertTarget(Board());
  EXPECT_TRUE(absl::IsNotFound((*store)->SnapshotProfile(*target, 0, "p").status()));
  ASSERT_TRUE((*store)->ReplaceKnobSettings(*target, Winner(7)).ok());
  auto p = (*store)->SnapshotProfile(*target, 0, "dma-v1");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->knobs.size(), 2u);
  EXPECT_TRUE(p->table.devices.empty());
  ASSERT_TRUE((*store)->SaveProfile(*p).ok());
  auto loaded = (*store)->LoadProfile("dma-v1");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->knobs.size(), 2u);
  EXPECT_EQ(loaded->knobs[1].coordinate, "P0DMACR.RXTS");
  EXPECT_EQ(loaded->knobs[1].register_name, "P0DMACR");
  EXPECT_EQ(loaded->knobs[1].experiment_id, 7);
  // The file names a bad field.
  nlohmann::json j = ProfileToJson(*loaded);
  j["knobs"][0]["value"] = "three";
  auto bad = ProfileFromJson(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("profile.knobs[0].value"), std::string::npos);
  // A later rollback replaces the declaration's settings.
  ASSERT_TRUE((*store)->ReplaceKnobSettings(*target, {Winner(8)[0]}).ok());
  EXPECT_EQ((*store)->LoadKnobSettings(*target)->size(), 1u);
}

}  // namespace
}  // namespace spintune
