#pragma once
// Reads a database's write-ahead logs before RocksDB replays them, so that damage in a log is never
// dropped in silence (docs/STORE.md, "Corruption").
//
// RocksDB recovers its logs in point-in-time mode: at the first record it cannot read it stops,
// and everything after it, in that log and in later ones, is discarded without an error (only its
// own LOG file says so). That is right for a torn tail, the record a crash cut short, which was
// never acknowledged when writes are synced; it is silent data loss when intact records follow
// the damage (a flipped byte in the middle of a log). CheckWal tells the two apart by reading the
// logs itself (the format: 32 KiB blocks of records with a 7-byte header, masked crc32c, length,
// type; RocksDB's "Write Ahead Log File Format"), before the store opens the database:
//   - no damage: nothing to say;
//   - a torn tail (no intact record after the damage): the open goes on; the note says which
//     file, offset and how many bytes RocksDB drops;
//   - damage before the tail: DataLoss naming the file and offset, unless `accept_loss`, in which
//     case the open goes on and the note says what is dropped (bytes, records, the column
//     families written, the ids in them).
// Internal to store/.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "rocksdb/env.h"

namespace ripplekv::store {

// What the intact records after the damage held: the writes point-in-time recovery drops.
struct DroppedWrites {
  uint64_t records = 0;  // whole, checksummed log records (one each per store change)
  // Per column family name: the number of puts and deletes.
  std::map<std::string, uint64_t> writes_per_family;
  // Per column family name: the largest 8-byte big-endian key prefix written (a job id in jobs,
  // tasks, results, job_data, active_jobs; a rollout id in rollouts, rollout_nodes).
  std::map<std::string, uint64_t> max_id_prefix;
  uint64_t max_next_job_id = 0;      // the largest meta next_job_id value written; 0: none
  uint64_t max_next_rollout_id = 0;  // the largest meta next_rollout_id value written; 0: none
  bool unparsed = false;             // some record did not parse as a write batch
};

// The first damage found in the logs RocksDB will replay.
struct WalDamage {
  std::string file;            // the damaged log, a path
  uint64_t offset = 0;         // where its first unreadable record starts, bytes into `file`
  std::string reason;          // e.g. "checksum mismatch", "record runs past the end of the file"
  uint64_t bytes_dropped = 0;  // what RocksDB discards: `offset` to the end of `file`, plus every
                               // later log, bytes
  uint64_t later_logs = 0;     // logs after `file` (discarded whole)
  DroppedWrites dropped;       // the intact records in what is discarded
  // No intact record follows the damage: a torn tail, the write a crash interrupted.
  bool tail() const { return dropped.records == 0; }
};

// The outcome of CheckWal when the open may go on.
struct WalCheck {
  std::optional<WalDamage> damage;  // none: every log reads to its end
  std::vector<std::string> notes;   // for the operator's log: what is dropped, and why allowed
};

// Scans the logs (`*.log`) of the database at `db_path` through `env` (the database is not open;
// nothing is written). On damage, a read-only open of the database learns which logs RocksDB
// replays, the column families' names, the log each still needs and the size of its table
// files. Errors: DataLoss "write-ahead log FILE is damaged at offset N (...)" for damage before
// the tail without `accept_loss`, and with it too when a column family holds table data flushed
// from a log after the damaged one (no consistent point in time before the damage exists;
// RocksDB would refuse it as "SST file is ahead of WALs"); whatever that read-only open returns
// when it fails (e.g. a damaged MANIFEST); Internal or DataLoss for a log that cannot be read.
// Not thread-safe against a process writing the database (the store's open runs it before
// taking RocksDB's lock; a held database then fails that open with Unavailable).
[[nodiscard]] StatusOr<WalCheck> CheckWal(rocksdb::Env* env, const std::string& db_path,
                                          bool accept_loss);

// The damage of one log file read alone, for tests and tools: the offset and reason of its first
// unreadable record and the intact records after it in the same file; nullopt when it reads to
// its end. Family names are not known here: DroppedWrites keys them "cf<id>".
[[nodiscard]] StatusOr<std::optional<WalDamage>> CheckLogFile(rocksdb::Env* env,
                                                              const std::string& file);

}  // namespace ripplekv::store
