// What the other ranks do when one rank hangs or dies (label mpi): runs mpi_probe under mpirun
// as a real job and checks that it ends, with an error, within a bounded time.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

struct JobResult {
  int exit_code;
  double seconds;
  std::string output;
};

JobResult RunJob(const std::string& scenario) {
  // Open MPI refuses root without these (CI runs as root).
  const std::string cmd = std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ") +
                          RIPPLEKV_MPIEXEC + " -np 2 --oversubscribe " +
                          RIPPLEKV_MPI_PROBE + " " + scenario + " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, s, out};
}

TEST(MpiFaultTest, AHungRankMakesTheOtherTimeOutAndEndTheJob) {
  const JobResult r = RunJob("hang");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DEADLINE_EXCEEDED: Barrier: rank 0 of 2 waited more than 500 ms"),
            std::string::npos)
      << r.output;
  EXPECT_LT(r.seconds, 60.0) << r.output;  // not the hung rank's 120 s
}

TEST(MpiFaultTest, AKilledRankEndsTheJob) {
  const JobResult r = RunJob("die");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.seconds, 50.0) << r.output;  // mpirun ends the job, well before rank 0's 60 s timeout
}

}  // namespace
