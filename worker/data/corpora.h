#pragma once
// The built-in corpora: public-domain books that a Debian package installs (docs/DATA.md), read
// with Project Gutenberg's boilerplate stripped. Calibration uses kSherlockHolmes by default
// (worker/data/calibration_data.h); evaluation haystacks use both (worker/eval/haystack.h).
//
// Thread-safety: the functions keep no state and may be called concurrently.

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/base/status.h"

namespace ripplekv::worker {

// A public-domain text that a Debian package installs (scripts/deps installs the package).
struct BuiltinCorpus {
  std::string_view name;     // short id: "sherlock-holmes"
  std::string_view title;    // "The Adventures of Sherlock Holmes (Arthur Conan Doyle, 1892)"
  std::string_view package;  // Debian package that installs `path`
  std::string_view path;     // installed path of the plain-text file
};

// Default calibration text: Project Gutenberg #1661, ~147k SmolLM2 tokens after stripping.
inline constexpr BuiltinCorpus kSherlockHolmes{
    .name = "sherlock-holmes",
    .title =
        "The Adventures of Sherlock Holmes (Arthur Conan Doyle, 1892; Project Gutenberg #1661)",
    .package = "golang-github-pierrec-lz4-dev",
    .path = "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/pg1661.txt",
};
// A second, different text from the same package (for evaluation data distinct from the
// calibration data): Project Gutenberg's Tom Sawyer, ~104k SmolLM2 tokens.
inline constexpr BuiltinCorpus kTomSawyer{
    .name = "tom-sawyer",
    .title = "The Adventures of Tom Sawyer (Mark Twain, 1876; Project Gutenberg)",
    .package = "golang-github-pierrec-lz4-dev",
    .path = "/usr/share/gocode/src/github.com/pierrec/lz4/testdata/Mark.Twain-Tom.Sawyer.txt",
};

// The largest corpus file read (whole): the installed books are under 1 MiB each.
inline constexpr uint64_t kMaxCorpusFileBytes = uint64_t{256} << 20;  // bytes (256 MiB)

// The corpus text (at most kMaxCorpusFileBytes) with Project Gutenberg boilerplate stripped
// (StripGutenbergBoilerplate). Errors: FailedPrecondition naming the Debian package to install
// when the file is missing or unreadable (the cause quoted); InvalidArgument when nothing is left
// after stripping.
[[nodiscard]] StatusOr<std::string> ReadBuiltinCorpus(const BuiltinCorpus& corpus);

// Deterministic clean-up of a Project Gutenberg plain-text book: drops a UTF-8 byte-order mark,
// turns CRLF into LF, drops everything up to and including a line starting "*** START OF" and
// everything from the first line starting "*** END OF", "End of the Project Gutenberg" or "End of
// Project Gutenberg" (case-insensitive), drops a leading "Produced by ..." credit paragraph, and
// trims blank lines at both ends. Text without these markers only gets the BOM, CRLF and trim
// steps.
[[nodiscard]] std::string StripGutenbergBoilerplate(std::string_view text);

}  // namespace ripplekv::worker
