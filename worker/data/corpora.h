#pragma once
// The built-in corpora (docs/DATA.md), all installed by Debian packages that scripts/deps
// installs, in three domains:
//   * prose: public-domain books, read with Project Gutenberg's boilerplate stripped
//     (kSherlockHolmes, kTomSawyer; BuiltinCorpus);
//   * code: a fixed list of Python standard library modules (kPythonStdlib; BuiltinFileSet);
//   * docs: a fixed list of CMake's reStructuredText reference manuals (kCmakeManuals).
// Calibration uses prose, code and docs together by default (the built-in set "mixed" of
// worker/data/calibration_data.h); evaluation haystacks use the books (eval/haystack.h).
//
// Thread-safety: the functions keep no state and may be called concurrently.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "method/calibration_sets.h"

namespace ripplekv::worker {

// What kind of text a calibration set holds (CalibrationSet::domain in calibration_data.h).
// The names are method/calibration_sets.h's, the one list the scheduler shares.
inline constexpr std::string_view kDomainProse = method::kDomainProse;  // books
inline constexpr std::string_view kDomainCode = method::kDomainCode;    // source code
inline constexpr std::string_view kDomainDocs = method::kDomainDocs;    // technical documentation
inline constexpr std::string_view kDomainMixed =
    method::kDomainMixed;                                             // prose, code, docs together
inline constexpr std::string_view kDomainUser = method::kDomainUser;  // the user's file or data

// A public-domain text that a Debian package installs (scripts/deps installs the package).
struct BuiltinCorpus {
  std::string_view name;     // short id: "sherlock-holmes"
  std::string_view title;    // "The Adventures of Sherlock Holmes (Arthur Conan Doyle, 1892)"
  std::string_view package;  // Debian package that installs `path`
  std::string_view path;     // installed path of the plain-text file
  std::string_view domain = kDomainProse;
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

// A fixed list of files under a versioned directory that a Debian package installs, read in list
// order: source code or documentation, whose installed path carries the package's version
// ("/usr/lib/python3.11"). The directory read is `dir_prefix` followed by a version of
// dot-separated decimal numbers ("3.11"): of those that hold every listed file as a regular file,
// the one with the highest version (compared number by number, so 3.11 > 3.9).
struct BuiltinFileSet {
  std::string_view name;        // short id: "code"
  std::string_view domain;      // kDomainCode or kDomainDocs
  std::string_view title;       // "Python standard library, 14 modules (PSF License)"
  std::string_view package;     // Debian package to install when no directory qualifies
  std::string_view dir_prefix;  // "/usr/lib/python": candidates "/usr/lib/python3.11", ...
  std::span<const std::string_view> files;  // paths relative to the directory, in reading order
};

// Pure-Python modules present with these paths in every Python 3 from 3.7 on (pathlib, a package
// from 3.13, is left out for that reason); about 167k SmolLM2 tokens with Python 3.11.
inline constexpr std::string_view kPythonStdlibFiles[] = {
    "argparse.py",     "collections/__init__.py",
    "configparser.py", "dataclasses.py",
    "difflib.py",      "enum.py",
    "fractions.py",    "functools.py",
    "heapq.py",        "json/decoder.py",
    "json/encoder.py", "shutil.py",
    "statistics.py",   "textwrap.py",
};
// Source code: the modules above, from the `python3` package's standard library.
inline constexpr BuiltinFileSet kPythonStdlib{
    .name = "code",
    .domain = kDomainCode,
    .title = "Python standard library, 14 modules (PSF License)",
    .package = "python3",
    .dir_prefix = "/usr/lib/python",
    .files = kPythonStdlibFiles,
};

// CMake's reference manuals that are running text (the manuals that only list commands,
// variables, properties, modules or policies are left out); about 120k SmolLM2 tokens with
// CMake 3.25.
inline constexpr std::string_view kCmakeManualFiles[] = {
    "Help/manual/cmake-buildsystem.7.rst",
    "Help/manual/cmake-compile-features.7.rst",
    "Help/manual/cmake-developer.7.rst",
    "Help/manual/cmake-file-api.7.rst",
    "Help/manual/cmake-generator-expressions.7.rst",
    "Help/manual/cmake-language.7.rst",
    "Help/manual/cmake-packages.7.rst",
    "Help/manual/cmake-presets.7.rst",
    "Help/manual/cmake-qt.7.rst",
    "Help/manual/cmake-toolchains.7.rst",
    "Help/manual/cmake.1.rst",
    "Help/manual/ctest.1.rst",
};
// Technical documentation: the manuals above, from the `cmake-data` package.
inline constexpr BuiltinFileSet kCmakeManuals{
    .name = "docs",
    .domain = kDomainDocs,
    .title = "CMake reference manuals, 12 pages of reStructuredText (BSD-3-Clause)",
    .package = "cmake-data",
    .dir_prefix = "/usr/share/cmake-",
    .files = kCmakeManualFiles,
};

// One file of a BuiltinFileSet as read.
struct CorpusFile {
  std::string path;  // absolute: the directory chosen, then the listed path
  std::string text;  // the file's bytes, a leading UTF-8 byte-order mark dropped
};

// The largest corpus file read (whole): the installed books are under 1 MiB each.
inline constexpr uint64_t kMaxCorpusFileBytes = uint64_t{256} << 20;  // bytes (256 MiB)

// The corpus text (at most kMaxCorpusFileBytes) with Project Gutenberg boilerplate stripped
// (StripGutenbergBoilerplate). Errors: FailedPrecondition naming the Debian package to install
// when the file is missing or unreadable (the cause quoted); InvalidArgument when nothing is left
// after stripping.
[[nodiscard]] StatusOr<std::string> ReadBuiltinCorpus(const BuiltinCorpus& corpus);

// The directory of `files` (see BuiltinFileSet): the highest version that holds every listed
// file. Errors: FailedPrecondition naming the Debian package to install when no candidate holds
// them all (the message names the first listed file missing from the highest candidate, if any).
[[nodiscard]] StatusOr<std::string> FindBuiltinFileSetDir(const BuiltinFileSet& files);

// Every listed file of `files` (each at most kMaxCorpusFileBytes), in list order, from the
// directory FindBuiltinFileSetDir picks. Errors: those of FindBuiltinFileSetDir; FailedPrecondition
// naming the package when a file cannot be read (the cause quoted); InvalidArgument when a file is
// empty or blank.
[[nodiscard]] StatusOr<std::vector<CorpusFile>> ReadBuiltinFileSet(const BuiltinFileSet& files);

// Deterministic clean-up of a Project Gutenberg plain-text book: drops a UTF-8 byte-order mark,
// turns CRLF into LF, drops everything up to and including a line starting "*** START OF" and
// everything from the first line starting "*** END OF", "End of the Project Gutenberg" or "End of
// Project Gutenberg" (case-insensitive), drops a leading "Produced by ..." credit paragraph, and
// trims blank lines at both ends. Text without these markers only gets the BOM, CRLF and trim
// steps.
[[nodiscard]] std::string StripGutenbergBoilerplate(std::string_view text);

}  // namespace ripplekv::worker
