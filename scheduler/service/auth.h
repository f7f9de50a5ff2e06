#pragma once
// Bearer-token roles on the scheduler's port (docs/SECURITY.md): the token file, the one table of
// which role may call which RPC, and the check every call passes before any handler runs
// (TokenAuthProcessor, attached to the server credentials by server_security.h).
//
// Secrets: a token is hashed (SHA-256) as soon as it is read and only the hash is kept; lookups
// compare every stored hash in constant time. No function here logs, returns or formats a token.
//
// Thread-safety: a TokenTable is immutable after Load/Parse and may be used from any thread.

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ripplekv::scheduler::service {

enum class Role : uint32_t {
  kReader = 1u << 0,     // query jobs, profiles, budget maps
  kSubmitter = 1u << 1,  // reader + submit and cancel jobs
  kOperator = 1u << 2,   // reader + budget-map versions and rollouts
  kWorker = 1u << 3,     // WorkerService: Register, Connect, GetJobData
  kAgent = 1u << 4,      // a serving node's agent: WatchBudgets, ReportBudget for its node id
  kAdmin = 1u << 5,      // every RPC, including ones missing from the table
};

// "reader", "submitter", ...
std::string_view RoleName(Role role);

// Who made a call: the role of its token and, for agents, the node id the token is bound to.
struct Caller {
  Role role = Role::kReader;
  std::string node_id;  // set for kAgent only
  std::string name;     // the token's label from the file ("line 7" when none); never the token
};

using TokenHash = std::array<uint8_t, 32>;  // SHA-256

// SHA-256 of `token` (OpenSSL EVP).
TokenHash HashToken(std::string_view token);

// The tokens a server accepts. File format (docs/SECURITY.md), one token per line:
//   ROLE TOKEN [NAME]
// ROLE is reader, submitter, operator, worker, admin or agent:NODE_ID; TOKEN is 16..4096
// printable ASCII characters without spaces, or sha256:<64 hex digits> (the hash of the token,
// so the file need not hold the secret); NAME is an optional label used in logs. Blank lines and
// lines starting with '#' are ignored. A token may appear once.
class TokenTable {
 public:
  // Parses `text`; errors are InvalidArgument "<source>:<line>: <what>" and never quote a token.
  [[nodiscard]] static StatusOr<TokenTable> Parse(std::string_view text, std::string_view source);
  // Reads and parses the file at `path` (at most 1 MiB). Errors: those of reading (naming the
  // path), then Parse's with the path as source. An empty table is InvalidArgument.
  [[nodiscard]] static StatusOr<TokenTable> Load(const std::string& path);

  // The caller holding `token`, or nullptr. Compares against every entry in constant time.
  const Caller* Find(std::string_view token) const;

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    TokenHash hash;
    Caller caller;
  };
  std::vector<Entry> entries_;
};

// The roles allowed to call `method` (full name "/package.Service/Method"): a bit set of Role,
// or kPublicMethod for calls that need no token (the health service). A method not in the table
// (`known` false) is admin's only.
inline constexpr uint32_t kPublicMethod = 1u << 31;
struct MethodRule {
  bool known = false;
  uint32_t roles = 0;  // Role bits, or kPublicMethod
};
MethodRule RuleFor(std::string_view method);
// Every method named in the table (for tests that check the table covers the services).
std::vector<std::string_view> TableMethods();

// The decision for one call: OK with the caller (or with no caller for a public method),
// UNAUTHENTICATED (no, malformed or unknown bearer token), PERMISSION_DENIED (the token's role
// may not call `method`). `authorization` holds every "authorization" metadata value of the call.
// Messages name the method and the role, never the token.
struct Decision {
  Status status;
  const Caller* caller = nullptr;
};
Decision Authorize(const TokenTable& tokens, std::string_view method,
                   const std::vector<std::string_view>& authorization);

// The caller of a call that passed the processor, re-derived from the call's own metadata, for
// handlers that need it (an agent's node id). The auth context gRPC hands the processor belongs
// to the connection, not the call, so per-call identity is never stored there. Errors as
// Authorize's UNAUTHENTICATED.
StatusOr<Caller> CallerOf(const TokenTable& tokens, const grpc::ServerContextBase& context);

// Enforces the table on every call of a server: rejects with UNAUTHENTICATED or
// PERMISSION_DENIED before the handler runs (so a rejected call changes nothing) and logs the
// method, the reason and the token's label, never the token.
class TokenAuthProcessor : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenAuthProcessor(std::shared_ptr<const TokenTable> tokens)
      : tokens_(std::move(tokens)) {}
  bool IsBlocking() const override { return false; }  // hashing only, no I/O
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  std::shared_ptr<const TokenTable> tokens_;
};

}  // namespace ripplekv::scheduler::service
