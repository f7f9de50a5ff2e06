#include "scheduler/service/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "base/strings.h"
#include "spdlog/spdlog.h"

namespace ripplekv::scheduler::service {
namespace {

constexpr uint32_t Bits(Role r) { return static_cast<uint32_t>(r); }
constexpr uint32_t kAdmin = Bits(Role::kAdmin);
// Reader calls: reader, submitter, operator (and admin) (docs/SECURITY.md).
constexpr uint32_t kReaders =
    Bits(Role::kReader) | Bits(Role::kSubmitter) | Bits(Role::kOperator) | kAdmin;
constexpr uint32_t kOperators = Bits(Role::kOperator) | kAdmin;
// Agents act for the node id their token is bound to (rollout_service.cc checks the binding).
constexpr uint32_t kAgents = Bits(Role::kAgent) | kAdmin;
constexpr uint32_t kSubmitters = Bits(Role::kSubmitter) | kAdmin;
constexpr uint32_t kWorkers = Bits(Role::kWorker) | kAdmin;
constexpr uint32_t kAnyRole = Bits(Role::kReader) | Bits(Role::kSubmitter) | Bits(Role::kOperator) |
                              Bits(Role::kWorker) | Bits(Role::kAgent) | kAdmin;

struct TableRow {
  std::string_view method;
  uint32_t roles;
};

// THE table: every RPC the scheduler serves and who may call it. A method missing here is
// admin's only.
constexpr TableRow kTable[] = {
    {"/ripplekv.v1.CalibrationService/GetJob", kReaders},
    {"/ripplekv.v1.CalibrationService/ListJobs", kReaders},
    {"/ripplekv.v1.CalibrationService/ListJobTasks", kReaders},
    {"/ripplekv.v1.CalibrationService/ListWorkers", kReaders},
    {"/ripplekv.v1.CalibrationService/WatchJob", kReaders},
    {"/ripplekv.v1.CalibrationService/GetProfile", kReaders},
    {"/ripplekv.v1.CalibrationService/ListProfiles", kReaders},
    {"/ripplekv.v1.CalibrationService/GetBudgetMap", kReaders},
    {"/ripplekv.v1.CalibrationService/SubmitJob", kSubmitters},
    {"/ripplekv.v1.CalibrationService/CancelJob", kSubmitters},
    {"/ripplekv.v1.RolloutService/GetBudgetMap", kReaders},
    {"/ripplekv.v1.RolloutService/ListBudgetMaps", kReaders},
    {"/ripplekv.v1.RolloutService/GetRollout", kReaders},
    {"/ripplekv.v1.RolloutService/ListRollouts", kReaders},
    {"/ripplekv.v1.RolloutService/CreateBudgetMap", kOperators},
    {"/ripplekv.v1.RolloutService/CreateRollout", kOperators},
    {"/ripplekv.v1.RolloutService/PauseRollout", kOperators},
    {"/ripplekv.v1.RolloutService/ResumeRollout", kOperators},
    {"/ripplekv.v1.RolloutService/RollbackRollout", kOperators},
    {"/ripplekv.v1.RolloutService/WatchBudgets", kAgents},
    {"/ripplekv.v1.RolloutService/ReportBudget", kAgents},
    {"/ripplekv.v1.WorkerService/Register", kWorkers},
    {"/ripplekv.v1.WorkerService/Connect", kWorkers},
    {"/ripplekv.v1.WorkerService/GetJobData", kWorkers},
    // Writes a copy of the whole database to a path on the scheduler's machine.
    {"/ripplekv.v1.AdminService/CreateCheckpoint", kAdmin},
    {"/ripplekv.v1.AdminService/LiftQuarantine", kAdmin},
    // Probes need no token.
    {"/grpc.health.v1.Health/Check", kPublicMethod},
    {"/grpc.health.v1.Health/Watch", kPublicMethod},
    // Reflection (only served with --reflection) shows the public schema: any valid token.
    {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", kAnyRole},
    {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", kAnyRole},
};

constexpr std::string_view kRoleChoices =
    "reader, submitter, operator, worker, admin or agent:NODE_ID";
constexpr size_t kMinTokenChars = 16;
constexpr size_t kMaxTokenChars = 4096;

bool ParseRole(std::string_view text, Caller& caller) {
  static constexpr std::pair<std::string_view, Role> kNames[] = {{"reader", Role::kReader},
                                                                 {"submitter", Role::kSubmitter},
                                                                 {"operator", Role::kOperator},
                                                                 {"worker", Role::kWorker},
                                                                 {"admin", Role::kAdmin}};
  for (const auto& [name, role] : kNames) {
    if (text == name) {
      caller.role = role;
      return true;
    }
  }
  constexpr std::string_view kAgentPrefix = "agent:";
  if (text.starts_with(kAgentPrefix) && text.size() > kAgentPrefix.size() &&
      text.size() - kAgentPrefix.size() <= 128) {
    caller.role = Role::kAgent;
    caller.node_id = std::string(text.substr(kAgentPrefix.size()));
    return true;
  }
  return false;
}

bool PrintableNoSpace(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The token of an "authorization: Bearer TOKEN" value; empty when malformed.
std::string_view BearerToken(std::string_view value) {
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(Sv(value.substr(0, kScheme.size())), Sv(kScheme))) {
    return {};
  }
  return value.substr(kScheme.size());
}

std::string_view ToView(grpc::string_ref s) { return {s.data(), s.size()}; }

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kReader:
      return "reader";
    case Role::kSubmitter:
      return "submitter";
    case Role::kOperator:
      return "operator";
    case Role::kWorker:
      return "worker";
    case Role::kAgent:
      return "agent";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

TokenHash HashToken(std::string_view token) {
  TokenHash hash{};
  unsigned int size = 0;
  // EVP_Digest with SHA-256 cannot fail on valid input; a failure leaves the hash all zero,
  // which matches no stored token (Parse refuses a zero hash).
  if (EVP_Digest(token.data(), token.size(), hash.data(), &size, EVP_sha256(), nullptr) != 1) {
    hash.fill(0);
  }
  return hash;
}

StatusOr<TokenTable> TokenTable::Parse(std::string_view text, std::string_view source) {
  TokenTable table;
  int line_number = 0;
  std::vector<int> lines;  // the line of each entry, for duplicate messages
  for (absl::string_view raw : absl::StrSplit(Sv(text), '\n')) {
    const std::string_view line(raw.data(), raw.size());
    ++line_number;
    auto fail = [&](std::string_view what) {
      return absl::InvalidArgumentError(Cat(source, ":", line_number, ": ", what));
    };
    const absl::string_view trimmed = absl::StripAsciiWhitespace(Sv(line));
    if (trimmed.empty() || trimmed.front() == '#') continue;
    std::vector<std::string_view> fields;
    for (absl::string_view field :
         absl::StrSplit(trimmed, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      fields.emplace_back(field.data(), field.size());
    }
    if (fields.size() < 2 || fields.size() > 3) {
      return fail("expected ROLE TOKEN [NAME]");
    }
    Entry entry;
    // The role field is never quoted: a line with its columns swapped would print the token.
    if (!ParseRole(fields[0], entry.caller))
      return fail(Cat("unknown role (expected ", kRoleChoices, ")"));
    const std::string_view token = fields[1];
    constexpr std::string_view kHashPrefix = "sha256:";
    if (token.starts_with(kHashPrefix)) {
      const std::string_view hex = token.substr(kHashPrefix.size());
      if (hex.size() != 64) return fail("sha256: needs 64 hex digits");
      for (size_t i = 0; i < 32; ++i) {
        const int hi = HexDigit(hex[2 * i]), lo = HexDigit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return fail("sha256: needs 64 hex digits");
        entry.hash[i] = static_cast<uint8_t>(hi * 16 + lo);
      }
    } else {
      if (token.size() < kMinTokenChars || token.size() > kMaxTokenChars) {
        return fail(Cat("a token needs ", kMinTokenChars, "..", kMaxTokenChars, " characters"));
      }
      if (!PrintableNoSpace(token)) return fail("a token must be printable ASCII");
      entry.hash = HashToken(token);
    }
    if (entry.hash == TokenHash{}) return fail("the all-zero hash is not a token");
    entry.caller.name = fields.size() == 3
                            ? std::string(fields[2])
                            : Cat(RoleName(entry.caller.role), "@line ", line_number);
    for (size_t i = 0; i < table.entries_.size(); ++i) {
      if (table.entries_[i].hash == entry.hash) {
        return fail(Cat("the same token as line ", lines[i]));
      }
    }
    table.entries_.push_back(std::move(entry));
    lines.push_back(line_number);
  }
  return table;
}

StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, uint64_t{1} << 20));
  ASSIGN_OR_RETURN(TokenTable table, Parse(text, path));
  if (table.size() == 0) return absl::InvalidArgumentError(Cat(path, ": no tokens"));
  return table;
}

const Caller* TokenTable::Find(std::string_view token) const {
  const TokenHash hash = HashToken(token);
  const Caller* found = nullptr;
  for (const Entry& entry : entries_) {
    // Every entry is compared in full (CRYPTO_memcmp is constant time), so the time taken does
    // not tell how close a guess came.
    const bool match = CRYPTO_memcmp(hash.data(), entry.hash.data(), hash.size()) == 0;
    found = match ? &entry.caller : found;
  }
  return found;
}

MethodRule RuleFor(std::string_view method) {
  for (const TableRow& row : kTable) {
    if (row.method == method) return {.known = true, .roles = row.roles};
  }
  return {};
}

std::vector<std::string_view> TableMethods() {
  std::vector<std::string_view> methods;
  for (const TableRow& row : kTable) methods.push_back(row.method);
  return methods;
}

namespace {

// The caller of the one bearer token among `authorization`, or UNAUTHENTICATED.
Decision Authenticate(const TokenTable& tokens,
                      const std::vector<std::string_view>& authorization) {
  if (authorization.empty()) {
    return {absl::UnauthenticatedError("missing bearer token (authorization metadata)")};
  }
  if (authorization.size() > 1) {
    return {absl::UnauthenticatedError("more than one authorization value")};
  }
  const std::string_view token = BearerToken(authorization.front());
  if (token.empty()) {
    return {absl::UnauthenticatedError("authorization is not \"Bearer <token>\"")};
  }
  const Caller* caller = tokens.Find(token);
  if (caller == nullptr) return {absl::UnauthenticatedError("unknown bearer token")};
  return {absl::OkStatus(), caller};
}

}  // namespace

Decision Authorize(const TokenTable& tokens, std::string_view method,
                   const std::vector<std::string_view>& authorization) {
  const MethodRule rule = RuleFor(method);
  if (rule.known && rule.roles == kPublicMethod) return {absl::OkStatus()};
  Decision decision = Authenticate(tokens, authorization);
  if (!decision.status.ok()) return decision;
  const uint32_t role = Bits(decision.caller->role);
  const uint32_t allowed = rule.known ? rule.roles : kAdmin;
  if ((allowed & role) == 0) {
    decision.status = absl::PermissionDeniedError(
        Cat("role ", RoleName(decision.caller->role), " may not call ", method));
  }
  return decision;
}

StatusOr<Caller> CallerOf(const TokenTable& tokens, const grpc::ServerContextBase& context) {
  std::vector<std::string_view> authorization;
  const auto range = context.client_metadata().equal_range("authorization");
  for (auto it = range.first; it != range.second; ++it) {
    authorization.push_back(ToView(it->second));
  }
  Decision decision = Authenticate(tokens, authorization);
  RETURN_IF_ERROR(decision.status);
  return *decision.caller;
}

grpc::Status TokenAuthProcessor::Process(const InputMetadata& auth_metadata,
                                         grpc::AuthContext* /*context*/,
                                         OutputMetadata* /*consumed_auth_metadata*/,
                                         OutputMetadata* /*response_metadata*/) {
  std::string_view method;
  std::vector<std::string_view> authorization;
  for (const auto& [key, value] : auth_metadata) {
    const std::string_view k = ToView(key);
    if (k == ":path") method = ToView(value);
    if (k == "authorization") authorization.push_back(ToView(value));
  }
  const Decision decision = Authorize(*tokens_, method, authorization);
  if (decision.status.ok()) return grpc::Status::OK;
  // The method, the reason and (for PERMISSION_DENIED) the token's label; never the token.
  spdlog::warn("rejected call to {}: {}{}", method, std::string(decision.status.message()),
               decision.caller != nullptr ? Cat(" (token ", decision.caller->name, ")") : "");
  return grpc::Status(static_cast<grpc::StatusCode>(decision.status.code()),
                      std::string(decision.status.message()));
}

}  // namespace ripplekv::scheduler::service
