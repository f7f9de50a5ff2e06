// DecodedJobs: a job record's decoded form is reused only for the exact bytes it came from.
#include "store/decoded_jobs.h"

#include <string>

#include "gtest/gtest.h"
#include "store/codec.h"

namespace ripplekv::store {
namespace {

Job MakeJob(JobId id, uint64_t tasks_done) {
  Job job;
  job.id = id;
  job.spec.model_path = "/models/m.gguf";
  job.spec.model_hash = std::string(64, 'a');
  job.spec.params.trials = 2;
  job.spec.params.samples = 4;
  job.state = JobState::kRunning;
  job.created_at_ms = 1'700'000'000'000;
  job.updated_at_ms = job.created_at_ms + static_cast<int64_t>(tasks_done);
  job.tasks_total = 120;
  job.tasks_done = tasks_done;
  return job;
}

std::string Encoded(const Job& job) {
  StatusOr<std::string> bytes = EncodeJob(job);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

TEST(DecodedJobsTest, EveryChangeOfTheRecordIsDecodedAgain) {
  DecodedJobs cache;
  for (uint64_t done = 0; done < 5; ++done) {
    const Job job = MakeJob(7, done);
    for (int read = 0; read < 3; ++read) {  // the first read parses, the others reuse it
      StatusOr<Job> got = cache.Decode(7, Encoded(job));
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, job);
    }
  }
}

TEST(DecodedJobsTest, ARememberedWriteIsReadWithoutParsingAndOtherBytesAreParsed) {
  DecodedJobs cache;
  Job job = MakeJob(3, 1);
  job.spec.data_inline = "inline text";  // never in the record: not in what is remembered
  // Bytes no parser accepts prove the second read came from the cache.
  cache.Remember(job, "remembered bytes");
  StatusOr<Job> got = cache.Decode(3, "remembered bytes");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tasks_done, 1u);
  EXPECT_TRUE(got->spec.data_inline.empty());
  // A write that failed left the store with other bytes: those are parsed, not the cache's.
  EXPECT_FALSE(cache.Decode(3, "other bytes").ok());
  StatusOr<Job> fresh = cache.Decode(3, Encoded(MakeJob(3, 2)));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->tasks_done, 2u);
  // Another job's bytes never answer for this one.
  EXPECT_FALSE(cache.Decode(4, "remembered bytes").ok());
}

TEST(DecodedJobsTest, StaysCorrectPastItsBound) {
  DecodedJobs cache;
  const JobId jobs = DecodedJobs::kMaxEntries * 2 + 3;
  for (int pass = 0; pass < 2; ++pass) {
    for (JobId id = 1; id <= jobs; ++id) {
      const Job job = MakeJob(id, id % 7);
      StatusOr<Job> got = cache.Decode(id, Encoded(job));
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, job);
    }
  }
}

}  // namespace
}  // namespace ripplekv::store
