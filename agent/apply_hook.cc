#include "agent/apply_hook.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace ripplekv::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Length of the valid UTF-8 sequence at the start of `s` (1..4), or 0 when it is not one
// (a stray continuation byte, an overlong form, a surrogate, a code point above U+10FFFF, or a
// sequence cut short).
size_t Utf8SequenceLength(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
    cp = b0 & 0x1f;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    cp = b0 & 0x0f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i) & 0x3f);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  const bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
  if (overlong || surrogate || cp > 0x10ffff) return 0;
  return n;
}

// The last non-empty line of a byte stream fed in pieces, in bounded memory: each line keeps at
// most kMaxHookLineBytes bytes, the rest of it is dropped.
class LastLine {
 public:
  void Feed(std::string_view data) {
    for (char c : data) {
      if (c == '\n') {
        EndLine();
      } else if (current_.size() < kMaxHookLineBytes) {
        current_.push_back(c);
      }
    }
  }
  // Ends the stream (a last line without a newline counts) and returns its last non-empty line.
  std::string Finish() {
    EndLine();
    return last_;
  }

 private:
  void EndLine() {
    std::string line = OneCleanLine(current_, kMaxHookLineBytes);
    if (!line.empty()) last_ = std::move(line);
    current_.clear();
  }

  std::string current_;
  std::string last_;
};

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

Status ErrnoError(std::string_view what, int error_number) {
  return absl::InternalError(
      absl::StrCat("apply hook: ", std::string(what), ": ", std::strerror(error_number)));
}

// Reads what `fd` has now into `tail`; false at end of file or on an error other than EAGAIN.
bool ReadAvailable(int fd, LastLine& tail) {
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      tail.Feed(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

}  // namespace

std::string OneCleanLine(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  while (!text.empty()) {
    const size_t n = Utf8SequenceLength(text);
    const unsigned char c = static_cast<unsigned char>(text[0]);
    std::string_view piece = "?";
    if (n == 1 && (c == '\t' || c == '\n' || c == '\r')) {
      piece = " ";
    } else if (n > 1 || (n == 1 && c >= 0x20 && c != 0x7f)) {
      piece = text.substr(0, n);
    }
    text.remove_prefix(n == 0 ? 1 : n);
    if (out.size() + piece.size() > max_bytes) break;
    out.append(piece);
  }
  const size_t first = out.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return out.substr(first, out.find_last_not_of(' ') - first + 1);
}

std::string DescribeApplyHookFailure(const ApplyHookResult& result,
                                     std::chrono::milliseconds timeout) {
  if (result.ok()) return "";
  if (result.cancelled) return "apply hook cancelled";
  if (result.timed_out) {
    return absl::StrCat("apply hook timed out after ",
                        static_cast<double>(timeout.count()) / 1000.0, " s");
  }
  std::string text = result.signal != 0
                         ? absl::StrCat("apply hook killed by signal ", result.signal)
                         : absl::StrCat("apply hook exited ", result.exit_code);
  if (!result.last_stderr_line.empty()) absl::StrAppend(&text, ": ", result.last_stderr_line);
  return text;
}

StatusOr<ApplyHookResult> RunApplyHook(const ApplyHookOptions& options) {
  if (options.command.empty()) return absl::InvalidArgumentError("apply hook: empty command");
  if (options.timeout.count() <= 0) {
    return absl::InvalidArgumentError("apply hook: the timeout must be positive");
  }

  // The environment: the agent's, less the names `env` sets, then `env`.
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(options.env.begin(), options.env.end(),
                                      [&](const auto& kv) { return kv.first == name; });
    if (!replaced) env_strings.emplace_back(entry);
  }
  for (const auto& [name, value] : options.env)
    env_strings.push_back(absl::StrCat(name, "=", value));
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", command = options.command;
  char* argv[] = {sh.data(), dash_c.data(), command.data(), nullptr};

  int stderr_pipe[2];
  if (::pipe2(stderr_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  Fd stderr_read(stderr_pipe[0]);
  Fd stderr_write(stderr_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stderr_write.get(), 2);  // clears close-on-exec
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A process group of its own (so the timeout kills everything it started), no blocked signals,
  // and default dispositions for the signals a daemon may ignore or handle.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  stderr_write.Reset();  // the child's copy is the only writer now
  if (spawned != 0) return ErrnoError("posix_spawn /bin/sh", spawned);

  // A thread waits for the child and says so through a pipe, so one poll() sees both the child's
  // stderr and its exit without polling waitpid.
  int exit_pipe[2];
  if (::pipe2(exit_pipe, O_CLOEXEC) != 0) {
    const int saved = errno;
    ::kill(-pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return ErrnoError("pipe", saved);
  }
  Fd exit_read(exit_pipe[0]);
  Fd exit_write(exit_pipe[1]);
  int wait_status = 0;
  bool reaped = false;
  std::thread waiter([&] {
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    wait_status = status;
    reaped = r == pid;
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(exit_write.get(), &byte, 1);
  });

  ApplyHookResult result;
  LastLine tail;
  ::fcntl(stderr_read.get(), F_SETFL, ::fcntl(stderr_read.get(), F_GETFL) | O_NONBLOCK);
  const Clock::time_point deadline = Clock::now() + options.timeout;
  bool stderr_open = true;
  bool exited = false;
  while (!exited) {
    const Clock::duration left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
      result.timed_out = true;
      break;
    }
    if (options.cancel != nullptr && options.cancel->load()) {
      result.cancelled = true;
      break;
    }
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(left);
    if (options.cancel != nullptr) wait = std::min(wait, std::chrono::milliseconds(100));
    pollfd fds[2] = {{exit_read.get(), POLLIN, 0}, {stderr_read.get(), POLLIN, 0}};
    const int n = ::poll(fds, stderr_open ? 2 : 1, static_cast<int>(wait.count()));
    if (n < 0 && errno != EINTR) break;  // cannot happen with valid fds: kill, not wait blind
    if (n <= 0) continue;
    if (stderr_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      stderr_open = ReadAvailable(stderr_read.get(), tail);
    }
    if ((fds[0].revents & (POLLIN | POLLHUP)) != 0) exited = true;
  }
  if (!exited) {
    // Timed out, cancelled, or poll failed: the whole group goes, then the waiter reaps the shell.
    ::kill(-pid, SIGKILL);
  }
  waiter.join();
  // What the hook wrote before it exited is in the pipe now; anything a process it left behind
  // writes later is not waited for.
  if (stderr_open) ReadAvailable(stderr_read.get(), tail);
  result.last_stderr_line = tail.Finish();
  if (result.timed_out || result.cancelled || !reaped) {
    result.exit_code = -1;
  } else if (WIFEXITED(wait_status)) {
    result.exit_code = WEXITSTATUS(wait_status);
  } else {
    result.exit_code = -1;
    result.signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  }
  return result;
}

}  // namespace ripplekv::agent
