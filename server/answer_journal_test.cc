// The answer journal on a real directory: answers written and read back bit
// for bit, only the newest `kept` per (group, round kind) kept, leftovers of
// a cut-short write removed, and every kind of bad file refused by name
// (corrupt, truncated, misnamed, another round's, another run's).
#include "server/answer_journal.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/kept_answer.pb.h"

namespace sketchfuse {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

KeptAnswer Answer(uint32_t group, uint64_t step, uint32_t round, float scale) {
  Update u;
  u.dim = 1000;
  u.indices = {3, 70, 999};
  u.values = {scale, -2 * scale, 1e-7f * scale};
  return KeptAnswer{group, step, round, RoundResult{std::make_shared<const Update>(u), 4}};
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(AnswerJournalTest, KeepsTheNewestAnswersAndReadsThemBackExactly) {
  const std::string dir = FreshDir("journal_roundtrip");
  {
    auto journal = *AnswerJournal::Open(dir, "job 'j', shard 0 of 1", 2);
    for (uint64_t step = 0; step < 5; ++step) {
      ASSERT_TRUE(journal->Record(Answer(1, step, 0, 1.5f * step)).ok());
    }
    ASSERT_TRUE(journal->Record(Answer(1, 3, 1, 7)).ok());
    ASSERT_TRUE(journal->Record(Answer(4, 0, 0, 9)).ok());
  }
  EXPECT_EQ(Files(dir), std::vector<std::string>({"g1-r0-s3.answer", "g1-r0-s4.answer",
                                                   "g1-r1-s3.answer", "g4-r0-s0.answer"}));
  WriteFile(dir + "/g1-r0-s5.answer.tmp", "half a wri");  // a write cut short by the crash

  auto successor = *AnswerJournal::Open(dir, "job 'j', shard 0 of 1", 2);
  absl::StatusOr<std::vector<KeptAnswer>> loaded = successor->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 4u);
  const std::vector<KeptAnswer> expected = {Answer(1, 3, 0, 4.5f), Answer(1, 4, 0, 6.0f),
                                            Answer(1, 3, 1, 7), Answer(4, 0, 0, 9)};
  for (size_t i = 0; i < expected.size(); ++i) {
    const KeptAnswer& got = (*loaded)[i];
    EXPECT_EQ(got.group, expected[i].group) << i;
    EXPECT_EQ(got.step, expected[i].step) << i;
    EXPECT_EQ(got.round, expected[i].round) << i;
    EXPECT_EQ(got.result.contributors, 4u);
    EXPECT_EQ(got.result.update->dim, 1000u);
    EXPECT_EQ(got.result.update->indices, expected[i].result.update->indices) << i;
    EXPECT_EQ(got.result.update->values, expected[i].result.update->values) << i;  // bit for bit
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/g1-r0-s5.answer.tmp"));
  // The successor goes on trimming the files its predecessor wrote.
  ASSERT_TRUE(successor->Record(Answer(1, 5, 0, 1)).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/g1-r0-s3.answer"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/g1-r0-s5.answer"));
}

// A FetchSGD group's state travels with its answer, bit for bit; answers
// of other groups carry none.
TEST(AnswerJournalTest, GroupStateIsReadBackWithItsAnswer) {
  const std::string dir = FreshDir("journal_state");
  KeptAnswer with_state = Answer(2, 7, 0, 3);
  with_state.group_state = std::make_shared<const std::vector<float>>(std::vector<float>{0.5f, -1e-30f, 3e30f, 0});
  {
    auto journal = *AnswerJournal::Open(dir, "job 'j', shard 0 of 1", 2);
    ASSERT_TRUE(journal->Record(with_state).ok());
    ASSERT_TRUE(journal->Record(Answer(1, 7, 0, 3)).ok());
  }
  auto successor = *AnswerJournal::Open(dir, "job 'j', shard 0 of 1", 2);
  absl::StatusOr<std::vector<KeptAnswer>> loaded = successor->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 2u);
  EXPECT_EQ((*loaded)[0].group_state, nullptr);
  ASSERT_NE((*loaded)[1].group_state, nullptr);
  EXPECT_EQ(*(*loaded)[1].group_state, *with_state.group_state);
}

TEST(AnswerJournalTest, LoadTrimsBeyondTheKeptCount) {
  const std::string dir = FreshDir("journal_trim");
  {
    auto journal = *AnswerJournal::Open(dir, "id", 4);
    for (uint64_t step = 10; step < 14; ++step) ASSERT_TRUE(journal->Record(Answer(0, step, 0, 1)).ok());
  }
  auto fewer = *AnswerJournal::Open(dir, "id", 2);
  absl::StatusOr<std::vector<KeptAnswer>> loaded = fewer->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 2u);
  EXPECT_EQ((*loaded)[0].step, 12u);
  EXPECT_EQ((*loaded)[1].step, 13u);
  EXPECT_EQ(Files(dir), std::vector<std::string>({"g0-r0-s12.answer", "g0-r0-s13.answer"}));
}

// Each bad file is refused with a status naming it; the journal's directory
// is left as it was (nothing served, nothing deleted but temporary files).
TEST(AnswerJournalTest, RefusesBadFilesByName) {
  const std::string dir = FreshDir("journal_bad");
  std::string good;
  {
    auto journal = *AnswerJournal::Open(dir, "mine", 4);
    ASSERT_TRUE(journal->Record(Answer(2, 8, 0, 1)).ok());
    good = ReadFile(dir + "/g2-r0-s8.answer");
  }
  v1::KeptAnswer other_run;
  ASSERT_TRUE(other_run.ParseFromString(good));
  other_run.set_identity("theirs");
  v1::KeptAnswer bad_update = other_run;
  bad_update.set_identity("mine");
  bad_update.mutable_round()->set_step(9);
  bad_update.mutable_update()->set_dim(10);  // indices up to 999 do not fit
  struct Case {
    std::string name, content;
    absl::StatusCode code;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"g2-r0-s9.answer", "\xff\xff\xff garbage", absl::StatusCode::kInvalidArgument, "truncated or corrupt"},
      {"g2-r0-s9.answer", good.substr(0, good.size() - 3) /* into the update */, absl::StatusCode::kInvalidArgument,
       "truncated or corrupt"},
      {"g2-r0-s9.answer", good, absl::StatusCode::kInvalidArgument, "answer of another round (step 8, group 2)"},
      {"g2-r0-s09.answer", good, absl::StatusCode::kInvalidArgument, "is not named like a kept answer"},
      {"g2-third-s9.answer", good, absl::StatusCode::kInvalidArgument, "is not named like a kept answer"},
      // A journal from before rounds were numbered is refused by its name.
      {"g2-first-s9.answer", good, absl::StatusCode::kInvalidArgument, "g<group>-r<round>-s<step>.answer"},
      {"g2-r01-s9.answer", good, absl::StatusCode::kInvalidArgument, "is not named like a kept answer"},
      {"g2-r0-s9.answer", other_run.SerializeAsString(), absl::StatusCode::kFailedPrecondition,
       "belongs to theirs; this shard is mine"},
      {"g2-r0-s9.answer", bad_update.SerializeAsString(), absl::StatusCode::kInvalidArgument,
       "malformed update"},
  };
  for (const Case& c : cases) {
    WriteFile(dir + "/" + c.name, c.content);
    auto journal = *AnswerJournal::Open(dir, "mine", 4);
    absl::StatusOr<std::vector<KeptAnswer>> loaded = journal->Load();
    EXPECT_EQ(loaded.status().code(), c.code) << c.name << ": " << loaded.status();
    EXPECT_NE(loaded.status().message().find(c.needle), std::string::npos) << c.name << " [" << loaded.status().message() << "]";
    EXPECT_NE(loaded.status().message().find(c.name), std::string::npos) << "the message names no file";
    EXPECT_TRUE(std::filesystem::exists(dir + "/g2-r0-s8.answer"));
    std::filesystem::remove(dir + "/" + c.name);
  }
  // With the bad files gone, the good answer loads.
  auto journal = *AnswerJournal::Open(dir, "mine", 4);
  absl::StatusOr<std::vector<KeptAnswer>> loaded = journal->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->size(), 1u);
}

TEST(AnswerJournalTest, OpenRefusesWhatIsNotADirectory) {
  const std::string dir = FreshDir("journal_file");
  WriteFile(dir, "a file");
  absl::StatusOr<std::unique_ptr<AnswerJournal>> journal = AnswerJournal::Open(dir, "id", 4);
  EXPECT_EQ(journal.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(journal.status().message().find("is not a directory"), std::string::npos) << journal.status();
  EXPECT_EQ(AnswerJournal::Open("", "id", 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AnswerJournal::Open(dir + "-d", "id", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AnswerJournalTest, IdentityNamesTheJobAndShardAndIgnoresOperationalKnobs) {
  v1::JobConfig job;
  job.set_job("demo");
  job.set_world_size(4);
  job.set_hash_seed(11);
  job.set_round_deadline_ms(1000);
  const std::string id = ShardIdentity(job, 1, 2);
  EXPECT_EQ(id.rfind("job 'demo', config ", 0), 0u) << id;
  EXPECT_NE(id.find("shard 1 of 2"), std::string::npos) << id;
  v1::JobConfig slower = job;
  slower.set_round_deadline_ms(60000);
  slower.set_finished_rounds_kept(8);
  EXPECT_EQ(ShardIdentity(slower, 1, 2), id);
  v1::JobConfig other = job;
  other.set_hash_seed(12);
  EXPECT_NE(ShardIdentity(other, 1, 2), id);
  EXPECT_NE(ShardIdentity(job, 0, 2), id);
}

}  // namespace
}  // namespace sketchfuse
