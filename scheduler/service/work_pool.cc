#include "scheduler/service/work_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/service/convert.h"

namespace ripplekv::scheduler::service {

WorkPool::WorkPool(size_t threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(threads);
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) {
    threads_.emplace_back([this] { Loop(); });
  }
}

WorkPool::~WorkPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool WorkPool::TrySubmit(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (refusable_ >= max_queued_) return false;
    ++refusable_;
    queue_.push_back({std::move(work), true});
  }
  cv_.notify_one();
  return true;
}

void WorkPool::Submit(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(work), false});
  }
  cv_.notify_one();
}

void WorkPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    Item item = std::move(queue_.front());
    queue_.pop_front();
    if (item.refusable) --refusable_;
    lock.unlock();
    item.work();
    lock.lock();
  }
}

grpc::ServerUnaryReactor* AnswerOnPool(WorkPool* pool, grpc::CallbackServerContext* context,
                                       std::function<absl::Status()> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto answer = [reactor, work = std::move(work)] { reactor->Finish(ToGrpcStatus(work())); };
  if (pool == nullptr) {
    answer();
  } else if (!pool->TrySubmit(answer)) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 absl::StrCat("the scheduler is busy: ", pool->max_queued(),
                                              " requests wait; retry later")));
  }
  return reactor;
}

}  // namespace ripplekv::scheduler::service
