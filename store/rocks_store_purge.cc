// RocksStore: retention, PurgeFinishedJobs (see store/store.h for the contract).

#include <algorithm>

#include "base/strings.h"
#include "rocksdb/options.h"
#include "store/codec.h"
#include "store/keys.h"
#include "store/rocks_store.h"

namespace ripplekv::store {
namespace {

rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }

// Key of the first job after `id`: the end of job `id`'s tasks and results.
std::string NextJobKey(JobId id) {
  return id == UINT64_MAX ? std::string(9, '\xff') : JobKey(id + 1);
}

}  // namespace

StatusOr<PurgeOutcome> RocksStore::PurgeFinishedJobs(TimeMs finished_before_ms, size_t max_jobs) {
  if (max_jobs == 0) return absl::InvalidArgumentError("PurgeFinishedJobs: max_jobs is 0");
  PurgeOutcome outcome;
  JobId first = UINT64_MAX;
  JobId last = 0;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    rocksdb::WriteBatch batch;
    const TimeMs now = Now();
    // finished_jobs keys sort by finish time: every key below this one finished before the
    // cutoff.
    const std::string upper = FinishedJobKey(finished_before_ms, 0);
    const rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions read_options;
    read_options.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options, cf_[kFinishedJobs]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (outcome.purged == max_jobs) {
        outcome.more = true;
        break;
      }
      const std::string_view key(it->key().data(), it->key().size());
      std::optional<FinishedJobKeyParts> parts = ParseFinishedJobKey(key);
      if (!parts) return Damaged(kFinishedJobs, key, absl::DataLossError("malformed key"));
      StatusOr<Job> job = ReadJob(parts->id);
      if (absl::IsNotFound(job.status())) {
        return Damaged(kFinishedJobs, key, absl::DataLossError("names a missing job"));
      }
      if (!job.ok()) return job.status();
      if (!IsTerminal(job->state) || job->purged_at_ms != 0) {
        return Damaged(kFinishedJobs, key,
                       absl::DataLossError(Cat("names a ", JobStateName(job->state),
                                               job->purged_at_ms != 0 ? ", purged" : "", " job")));
      }
      const std::string begin = JobKey(job->id);
      const std::string end = NextJobKey(job->id);
      RETURN_IF_ERROR(FromRocks(batch.DeleteRange(cf_[kTasks], begin, end), "adding to a batch"));
      RETURN_IF_ERROR(FromRocks(batch.DeleteRange(cf_[kResults], begin, end), "adding to a batch"));
      RETURN_IF_ERROR(Delete(&batch, kJobData, begin));
      RETURN_IF_ERROR(Delete(&batch, kFinishedJobs, key));
      if (!job->spec.idempotency_key.empty()) {
        // Deleted only while it still names this job (it always should; a damaged database
        // must not lose another job's key).
        const std::string idempotency_key = Cat(kIdempotencyPrefix, job->spec.idempotency_key);
        ASSIGN_OR_RETURN(std::optional<std::string> named, Get(kMeta, idempotency_key));
        if (named && ParseJobKey(*named) == job->id) {
          RETURN_IF_ERROR(Delete(&batch, kMeta, idempotency_key));
        }
      }
      job->purged_at_ms = now;
      RETURN_IF_ERROR(PutJob(&batch, *job));
      first = std::min(first, job->id);
      last = std::max(last, job->id);
      ++outcome.purged;
    }
    RETURN_IF_ERROR(FromRocks(it->status(), "scanning column family 'finished_jobs'"));
    if (outcome.purged == 0) return outcome;
    RETURN_IF_ERROR(Write(&batch));
  }
  // Outside the lock: other writes may proceed while the space is reclaimed.
  RETURN_IF_ERROR(CompactPurged(JobKey(first), NextJobKey(last)));
  return outcome;
}

Status RocksStore::CompactPurged(std::string_view begin, std::string_view end) {
  RETURN_IF_ERROR(CheckWritable());
  // Flushing every column family lets RocksDB delete the WAL files that still hold the purged
  // data; compacting the range then drops the deleted keys (and the range tombstones) from the
  // SST files. Ranges of jobs that were not purged hold no deleted data and are only rewritten.
  rocksdb::FlushOptions flush_options;
  RETURN_IF_ERROR(FromRocks(
      db_->Flush(flush_options, std::vector<rocksdb::ColumnFamilyHandle*>(cf_.begin(), cf_.end())),
      "flushing after a purge"));
  rocksdb::CompactRangeOptions compact_options;
  compact_options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
  const rocksdb::Slice begin_slice = ToSlice(begin);
  const rocksdb::Slice end_slice = ToSlice(end);
  for (Cf cf : {kTasks, kResults, kJobData}) {
    RETURN_IF_ERROR(FromRocks(db_->CompactRange(compact_options, cf_[cf], &begin_slice, &end_slice),
                              Cat("compacting column family '", CfName(cf), "' after a purge")));
  }
  // The purged jobs' keys in finished_jobs are the oldest: drop their tombstones too.
  return FromRocks(db_->CompactRange(compact_options, cf_[kFinishedJobs], nullptr, nullptr),
                   "compacting column family 'finished_jobs' after a purge");
}

}  // namespace ripplekv::store
