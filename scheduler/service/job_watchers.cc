#include "scheduler/service/job_watchers.h"

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/service/convert.h"

namespace ripplekv::scheduler::service {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Looks at the watched jobs at most this often, however fast the scheduler changes.
constexpr auto kMinLookInterval = std::chrono::milliseconds(20);

void StampNow(v1::JobEvent* event) {
  TimeMsToProto(std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count(),
                event->mutable_event_time());
}

// A stream refused before it started.
class Refused final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  explicit Refused(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

// One WatchJob stream. Its events wait in a short queue; at most one write is in flight, and
// gRPC calls (StartWrite, Finish) are made without holding mu_. Deletes itself in OnDone.
class JobWatchers::Stream final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  Stream(JobWatchers* owner, grpc::CallbackServerContext* context, store::JobId job,
         const JobProgress& first)
      : owner_(owner), context_(context), job_(job), job_id_(FormatJobId(job)) {
    v1::JobEvent event;
    *event.mutable_snapshot() = JobToProto(first);
    last_progress_ = event.snapshot().progress().SerializeAsString();
    last_progress_time_ = SteadyClock::now();
    state_ = first.job.state;
    Enqueue(std::move(event));
  }

  // Starts the first write; called once the stream is registered with its owner.
  void Start() { Pump(); }

  store::JobId job() const { return job_; }

  // The job as it is now. Queues a state change at once and a progress change at most once per
  // progress_min_ms (replacing one that waits); true when a progress change is held back.
  bool Offer(const v1::Job& job, store::JobState state) {
    bool held_back = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finishing_) return false;
      const auto now = SteadyClock::now();
      const std::string progress = job.progress().SerializeAsString();
      const bool progressed = progress != last_progress_;
      const bool state_changed = state != state_;
      // Progress goes first, so the last counters precede a terminal state change.
      if (progressed &&
          (state_changed || now - last_progress_time_ >=
                                std::chrono::milliseconds(owner_->options_.progress_min_ms))) {
        DropWaitingProgress();
        v1::JobEvent event;
        *event.mutable_progress() = job.progress();
        Enqueue(std::move(event));
        last_progress_ = progress;
        last_progress_time_ = now;
      } else if (progressed) {
        held_back = true;
      }
      if (state_changed) {
        v1::JobEvent event;
        v1::JobStateChange* change = event.mutable_state_change();
        change->set_previous(JobStateToProto(state_));
        change->set_current(job.state());
        if (job.has_error()) *change->mutable_error() = job.error();
        Enqueue(std::move(event));
        state_ = state;
      }
    }
    Pump();
    return held_back;
  }

  // Ends the stream with `status` once the write in flight (if any) completes.
  void Close(const grpc::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!close_status_) close_status_ = status;
      while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
    }
    Pump();
  }

  // Drops the stream when its client has not taken a write for stall_ms: the write in flight
  // is cancelled so that the stream can finish.
  void DropIfStalled(SteadyClock::time_point now) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!writing_ || cancel_requested_ ||
          now - write_started_ < std::chrono::milliseconds(owner_->options_.stall_ms)) {
        return;
      }
      cancel_requested_ = true;
      if (!close_status_) {
        close_status_ = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                     absl::StrCat("watch dropped: the client took no event for ",
                                                  owner_->options_.stall_ms, " ms"));
      }
    }
    context_->TryCancel();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      queue_.pop_front();
      if (!ok) cancelled_ = true;
    }
    Pump();
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    Pump();
  }

  void OnDone() override {
    owner_->Remove(this);
    delete this;
  }

 private:
  // Requires mu_.
  void Enqueue(v1::JobEvent event) {
    event.set_job_id(job_id_);
    StampNow(&event);
    queue_.push_back(std::move(event));
  }

  // Requires mu_. Removes progress events not yet being written.
  void DropWaitingProgress() {
    const size_t first = writing_ ? 1 : 0;
    for (size_t i = queue_.size(); i-- > first;) {
      if (queue_[i].has_progress()) queue_.erase(queue_.begin() + static_cast<ptrdiff_t>(i));
    }
  }

  // Starts the next write, or the Finish when nothing is left to write.
  void Pump() {
    const v1::JobEvent* next = nullptr;
    std::optional<grpc::Status> finish;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finishing_ || writing_) return;
      if (cancelled_) {
        finish = close_status_.value_or(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      } else if (!queue_.empty()) {
        writing_ = true;
        write_started_ = SteadyClock::now();
        next = &queue_.front();  // deque: stays valid while later events are pushed
      } else if (close_status_) {
        finish = *close_status_;
      } else if (IsTerminal(state_)) {
        finish = grpc::Status::OK;
      }
      if (finish) finishing_ = true;
    }
    if (next != nullptr) {
      StartWrite(next);
    } else if (finish) {
      Finish(*finish);  // may run OnDone (and delete this) inline: nothing may follow
    }
  }

  JobWatchers* const owner_;
  grpc::CallbackServerContext* const context_;
  const store::JobId job_;
  const std::string job_id_;

  std::mutex mu_;
  std::deque<v1::JobEvent> queue_;  // front is being written when writing_
  store::JobState state_ = store::JobState::kPending;
  std::string last_progress_;  // serialized JobProgress last queued
  SteadyClock::time_point last_progress_time_;
  SteadyClock::time_point write_started_;
  bool writing_ = false;
  bool cancelled_ = false;         // the client cancelled or went away
  bool cancel_requested_ = false;  // DropIfStalled cancelled the call
  bool finishing_ = false;         // Finish called (or about to be)
  std::optional<grpc::Status> close_status_;
};

JobWatchers::JobWatchers(Scheduler* scheduler, JobWatchersOptions options)
    : scheduler_(scheduler), options_(options), thread_([this] { Loop(); }) {}

JobWatchers::~JobWatchers() { Shutdown(); }

grpc::ServerWriteReactor<v1::JobEvent>* JobWatchers::Watch(grpc::CallbackServerContext* context,
                                                           store::JobId job,
                                                           const JobProgress& first) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (stopping_) {
    return new Refused(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler is shutting down"));
  }
  if (streams_.size() >= options_.max_streams) {
    return new Refused(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("WatchJob: ", options_.max_streams,
                     " watch streams are open, the limit (--max-watchers); retry later")));
  }
  auto* stream = new Stream(this, context, job, first);
  streams_.insert(stream);
  stream->Start();
  return stream;
}

void JobWatchers::Remove(Stream* stream) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  streams_.erase(stream);
  cv_.notify_all();
}

size_t JobWatchers::open_streams() const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return streams_.size();
}

void JobWatchers::Loop() {
  uint64_t seen = 0;
  bool look = true;  // the first pass looks whatever the counter says
  bool held_back = false;
  while (true) {
    const uint64_t now_seen = scheduler_->WaitForChange(seen, options_.poll_ms);
    std::unique_lock<std::recursive_mutex> lock(mu_);
    if (stopping_) return;
    look = look || now_seen != seen || held_back;
    seen = now_seen;
    const auto now = SteadyClock::now();
    // Streams that exist now stay alive while mu_ is held (their OnDone waits for it).
    const std::vector<Stream*> streams(streams_.begin(), streams_.end());
    if (look && !streams.empty()) {
      std::map<store::JobId, StatusOr<JobProgress>> progress;
      for (Stream* stream : streams) {
        if (!progress.contains(stream->job())) {
          progress.emplace(stream->job(), scheduler_->Progress(stream->job()));
        }
      }
      std::map<store::JobId, v1::Job> protos;
      for (const auto& [job, p] : progress) {
        if (p.ok()) protos.emplace(job, JobToProto(*p));
      }
      held_back = false;
      for (Stream* stream : streams) {
        if (!streams_.contains(stream)) continue;  // ended inline by an earlier Finish
        const StatusOr<JobProgress>& p = progress.at(stream->job());
        if (!p.ok()) {
          stream->Close(ToGrpcStatus(p.status()));
        } else {
          held_back = stream->Offer(protos.at(stream->job()), p->job.state) || held_back;
        }
      }
    }
    look = false;
    for (Stream* stream : streams) {
      // A Finish above may have ended a stream inline (its OnDone removed it, under mu_).
      if (streams_.contains(stream)) stream->DropIfStalled(now);
    }
    cv_.wait_for(lock, kMinLookInterval, [this] { return stopping_; });
  }
}

void JobWatchers::Shutdown() {
  std::unique_lock<std::recursive_mutex> lock(mu_);
  if (!stopping_) {
    stopping_ = true;
    cv_.notify_all();
    lock.unlock();
    if (thread_.joinable()) thread_.join();
    lock.lock();
  }
  const std::vector<Stream*> streams(streams_.begin(), streams_.end());
  for (Stream* stream : streams) {
    stream->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler is shutting down"));
  }
  const auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  for (Stream* stream : streams) {
    if (streams_.contains(stream))
      stream->DropIfStalled(SteadyClock::now() + std::chrono::hours(1));
  }
  cv_.wait_until(lock, deadline, [this] { return streams_.empty(); });
}

}  // namespace ripplekv::scheduler::service
