// cuda_host_rewrite IN OUT: writes a copy of the CUDA source IN that g++ compiles against the
// emulation's headers (tests/cuda_host/shim/), changing only the two constructs that are not C++:
//
//   kernel<<<grid, block, shared, stream>>>(args)
//     -> kernel | ::ripplekv::cuda_host::LaunchConfig(grid, block, shared, stream)(args)
//   extern __shared__ T name[];
//     -> T* const name = ::ripplekv::cuda_host::DynamicShared<T>();
//   __shared__ T name[N]...;
//     -> T (&name)[N]... = ::ripplekv::cuda_host::StaticShared<T[N]...>(site);
//
// Why this form: the launch rewrite touches only the `<<<` and `>>>` tokens, so it never has to
// find where the kernel expression starts (a template-id, a function pointer, a qualified name):
// `LaunchConfig(...)(args)` binds first (postfix operators), and operator| then launches the
// kernel on the bound arguments (tests/cuda_host/emulator.h). Shared variables become references
// into the running block's shared memory, allocated per block and poisoned (the `site` numbers
// the declarations of the file). Comments, string and character literals are copied untouched,
// and the output starts with a #line directive and keeps every line break, so compiler messages
// name IN's own lines. Anything else (a launch without its `>>>`, a shared declaration with an
// initializer or several declarators) fails with "IN:line: ..." on stderr and exit status 1.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

class Rewriter {
 public:
  Rewriter(std::string path, std::string text) : path_(std::move(path)), in_(std::move(text)) {}

  // The rewritten text; false (with the reason on stderr) when IN cannot be rewritten.
  bool Run(std::string* out) {
    out_ = "#line 1 \"" + path_ + "\"\n";
    while (pos_ < in_.size()) {
      if (!Step()) return false;
    }
    if (launch_open_) return Fail(launch_line_, "a launch's <<< has no >>>");
    *out = std::move(out_);
    return true;
  }

 private:
  static bool IsIdent(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

  bool At(const char* token) const {
    return in_.compare(pos_, std::string(token).size(), token) == 0;
  }

  int LineAt(size_t pos) const {
    int line = 1;
    for (size_t i = 0; i < pos && i < in_.size(); ++i) line += in_[i] == '\n';
    return line;
  }

  bool Fail(int line, const std::string& why) {
    std::cerr << path_ << ":" << line << ": cuda_host_rewrite: " << why << "\n";
    return false;
  }

  // Copies from pos_ up to and including the first `close` (a comment or literal's end).
  void CopyThrough(const std::string& close, size_t skip) {
    size_t end = in_.find(close, pos_ + skip);
    end = end == std::string::npos ? in_.size() : end + close.size();
    out_.append(in_, pos_, end - pos_);
    pos_ = end;
  }

  // Copies a "..." or '...' literal, escapes included.
  void CopyQuoted(char quote) {
    size_t i = pos_ + 1;
    while (i < in_.size() && in_[i] != quote && in_[i] != '\n') i += in_[i] == '\\' ? 2 : 1;
    i = std::min(i + 1, in_.size());
    out_.append(in_, pos_, i - pos_);
    pos_ = i;
  }

  // The identifier at pos_ (empty when pos_ does not start one).
  std::string IdentAt(size_t pos) const {
    if (pos >= in_.size() || !IsIdent(in_[pos]) ||
        std::isdigit(static_cast<unsigned char>(in_[pos])) || (pos > 0 && IsIdent(in_[pos - 1]))) {
      return "";
    }
    size_t end = pos;
    while (end < in_.size() && IsIdent(in_[end])) ++end;
    return in_.substr(pos, end - pos);
  }

  size_t SkipSpace(size_t pos) const {
    while (pos < in_.size() && std::isspace(static_cast<unsigned char>(in_[pos]))) ++pos;
    return pos;
  }

  static std::string Trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    const size_t e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
  }

  bool Step() {
    if (At("//")) {
      CopyThrough("\n", 2);
    } else if (At("/*")) {
      CopyThrough("*/", 2);
    } else if (in_[pos_] == '"' || in_[pos_] == '\'') {
      // A digit separator (1'000) is not a literal.
      if (in_[pos_] == '\'' && pos_ > 0 &&
          std::isxdigit(static_cast<unsigned char>(in_[pos_ - 1]))) {
        out_ += in_[pos_++];
      } else {
        CopyQuoted(in_[pos_]);
      }
    } else if (At("<<<")) {
      if (launch_open_) return Fail(LineAt(pos_), "a launch inside a launch's configuration");
      launch_open_ = true;
      launch_line_ = LineAt(pos_);
      out_ += " | ::ripplekv::cuda_host::LaunchConfig(";
      pos_ += 3;
    } else if (launch_open_ && At(">>>")) {
      launch_open_ = false;
      out_ += ")";
      pos_ += 3;
    } else if (const std::string ident = IdentAt(pos_); !ident.empty()) {
      if (ident == "extern" && IdentAt(SkipSpace(pos_ + ident.size())) == "__shared__") {
        const size_t shared = SkipSpace(pos_ + ident.size());
        return Shared(shared + std::string("__shared__").size(), /*dynamic=*/true);
      }
      if (ident == "__shared__") return Shared(pos_ + ident.size(), /*dynamic=*/false);
      out_ += ident;
      pos_ += ident.size();
    } else {
      out_ += in_[pos_++];
    }
    return true;
  }

  // Rewrites the declaration whose text after `__shared__` starts at `from` (pos_ is at its
  // first token). Keeps its line breaks after the replacement.
  bool Shared(size_t from, bool dynamic) {
    const int line = LineAt(pos_);
    const size_t semi = in_.find(';', from);
    if (semi == std::string::npos) return Fail(line, "a __shared__ declaration without ';'");
    std::string decl = in_.substr(from, semi - from);
    const int breaks = static_cast<int>(std::count(in_.begin() + pos_, in_.begin() + semi, '\n'));
    for (char& c : decl) c = c == '\n' || c == '\r' || c == '\t' ? ' ' : c;
    if (decl.find_first_of("=,{") != std::string::npos) {
      return Fail(line, "a __shared__ declaration with an initializer or several declarators");
    }
    // __align__(n) is implied: every shared variable is aligned to its type and to 16 bytes.
    if (const size_t a = decl.find("__align__"); a != std::string::npos) {
      const size_t close = decl.find(')', a);
      if (close == std::string::npos) return Fail(line, "__align__ without ')'");
      decl.erase(a, close + 1 - a);
    }
    const size_t bracket = decl.find('[');
    const std::string head = Trim(decl.substr(0, bracket));
    const std::string dims = bracket == std::string::npos ? "" : Trim(decl.substr(bracket));
    size_t name_begin = head.size();
    while (name_begin > 0 && IsIdent(head[name_begin - 1])) --name_begin;
    const std::string name = head.substr(name_begin);
    const std::string type = Trim(head.substr(0, name_begin));
    if (name.empty() || type.empty()) return Fail(line, "cannot read the __shared__ declaration");
    if (dynamic) {
      if (dims != "[]") return Fail(line, "extern __shared__ must be an array of unknown bound");
      out_ += type + "* const " + name + " = ::ripplekv::cuda_host::DynamicShared<" + type + ">();";
    } else {
      const std::string ref = dims.empty() ? type + "& " + name : type + " (&" + name + ")" + dims;
      out_ += ref + " = ::ripplekv::cuda_host::StaticShared<" + type + dims + ">(" +
              std::to_string(++site_) + ");";
    }
    out_.append(static_cast<size_t>(breaks), '\n');
    pos_ = semi + 1;
    return true;
  }

  std::string path_;
  std::string in_;
  std::string out_;
  size_t pos_ = 0;
  bool launch_open_ = false;
  int launch_line_ = 0;
  int site_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cuda_host_rewrite IN OUT\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << argv[1] << ": cannot read\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string out;
  if (!Rewriter(argv[1], text.str()).Run(&out)) return 1;
  std::ofstream file(argv[2], std::ios::binary | std::ios::trunc);
  file << out;
  if (!file.flush()) {
    std::cerr << argv[2] << ": cannot write\n";
    return 1;
  }
  return 0;
}
